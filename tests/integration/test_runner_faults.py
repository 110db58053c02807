"""A runner against a server that sometimes answers badly: it logs, backs off, keeps going.

The runner, its client, the server and SQLite are the real ones; only some
answers are replaced on their way back, by a transport that wraps the real
one (`Faults`): a 5xx, or a 200 whose body is not what the contract says. A
runner that cannot go on (its credentials or its registration refused) stops
and `run_fleet` says so at once instead of waiting for a drain that no runner
is left to bring.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from fleet_support import loopback_transport

from codefleet.api.client import FleetClient
from codefleet.fleet.local import FleetOptions, run_fleet
from codefleet.fleet.runner import Runner, RunnerOptions
from codefleet.fleet.scripted import ScriptedExecutor, parse_script
from codefleet.server.thread import ServerThread

FAST = {"heartbeat_interval": 0.1, "stale_after": 30.0, "tick_interval": 0.05, "backoff_base": 0.0}
Answer = Callable[[httpx.Request], httpx.Response | None]


def server_error(_: httpx.Request) -> httpx.Response:
    body = {"error": {"code": "internal", "message": "OperationalError", "detail": {}}}
    return httpx.Response(500, json=body)


def bad_gateway(_: httpx.Request) -> httpx.Response:
    return httpx.Response(502, text="<html>bad gateway</html>")


def not_the_contract(_: httpx.Request) -> httpx.Response:
    return httpx.Response(200, json={"surprise": True})


def refused(_: httpx.Request) -> httpx.Response:
    body = {"error": {"code": "unauthorized", "message": "a valid token is required", "detail": {}}}
    return httpx.Response(401, json=body)


@dataclass
class Faults(httpx.AsyncBaseTransport):
    """The real transport, except that matching requests get the next scripted answer."""

    rules: list[tuple[str, str, list[Answer]]]  # (method, path regex, answers in order)
    real: httpx.AsyncBaseTransport = field(default_factory=loopback_transport)
    served: list[str] = field(default_factory=list)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        for method, pattern, answers in self.rules:
            if answers and request.method == method and re.search(pattern, request.url.path):
                answer = answers.pop(0)(request)
                if answer is not None:
                    self.served.append(f"{method} {request.url.path} -> {answer.status_code}")
                    return answer
        return await self.real.handle_async_request(request)

    async def aclose(self) -> None:
        await self.real.aclose()


def _name_is(name: str, answer: Answer) -> Answer:
    def pick(request: httpx.Request) -> httpx.Response | None:
        return answer(request) if json.loads(request.content)["name"] == name else None

    return pick


async def test_a_runner_keeps_working_through_5xx_and_answers_that_break_the_contract(
    make_server: Callable[..., ServerThread],
    workdir: Path,
    tmp_path: Path,
    wait_until: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = make_server(**FAST)
    faults = Faults(
        [
            ("GET", r"/assignment$", [server_error, bad_gateway, not_the_contract]),
            ("POST", r"/heartbeat$", [server_error]),
            ("GET", r"^/checks$", [server_error]),
            ("POST", r"/complete$", [server_error]),
        ]
    )
    script = parse_script({"T": [{"write": {"path": "t.txt", "content": "done"}}]})
    runner = Runner(
        FleetClient(server.url, transport=faults),
        ScriptedExecutor(script),
        RunnerOptions("runner-1", workdir, tmp_path / "runs", poll_wait=0.2),
    )
    stop = asyncio.Event()
    async with FleetClient(server.url, transport=loopback_transport()) as client:
        await client.create_tasks([{"id": "T", "title": "t", "description": "write t.txt"}])
        running = asyncio.create_task(runner.run(stop))
        with caplog.at_level(logging.WARNING, logger="codefleet.fleet.runner"):
            await wait_until(lambda: _status(client, "T", "succeeded"))
            await wait_until(lambda: all(not answers for _, _, answers in faults.rules))
        assert not running.done(), running  # still at work, not dead
        stop.set()
        await asyncio.wait_for(running, 10)
        task = await client.task("T")
    assert (workdir / "t.txt").read_text() == "done"
    assert task["attempts"] == 1  # the faults cost no attempt
    assert len(faults.served) == 6
    said = [r.getMessage() for r in caplog.records]
    assert any("HTTP 500 internal: OperationalError" in m for m in said), said
    assert any("HTTP 502" in m for m in said), said
    assert any(r.exc_info for r in caplog.records)  # the contract breach, with its traceback


async def test_a_runner_that_cannot_go_on_is_reported_at_once_and_the_others_carry_on(
    make_server: Callable[..., ServerThread], workdir: Path, tmp_path: Path
) -> None:
    server = make_server(**FAST)
    faults = Faults([("POST", r"/agents/register$", [_name_is("runner-1", refused)] * 3)])
    reports: list[str] = []
    async with FleetClient(server.url, transport=loopback_transport()) as client:
        await client.create_tasks([{"id": "T", "title": "t", "description": "do it"}])
        result = await asyncio.wait_for(
            run_fleet(
                server.url,
                lambda _: ScriptedExecutor({}),
                FleetOptions(RunnerOptions("runner", workdir, tmp_path / "runs"), runners=2),
                on_runner_down=reports.append,
                connect=lambda: FleetClient(server.url, transport=faults),
            ),
            timeout=60,
        )
    assert result.all_succeeded
    assert len(reports) == 1 and reports[0].startswith("runner-1")
    assert "a valid token is required" in reports[0]
    assert result.runner_errors == reports


async def test_a_fleet_whose_every_runner_stopped_ends_instead_of_waiting_for_ever(
    make_server: Callable[..., ServerThread], workdir: Path, tmp_path: Path
) -> None:
    server = make_server(**FAST)
    faults = Faults([("POST", r"/agents/register$", [refused, refused])])
    reports: list[str] = []
    async with FleetClient(server.url, transport=loopback_transport()) as client:
        await client.create_tasks([{"id": "T", "title": "t", "description": "do it"}])
        result = await asyncio.wait_for(  # a liveness bound: without the fix this never returns
            run_fleet(
                server.url,
                lambda _: ScriptedExecutor({}),
                FleetOptions(RunnerOptions("runner", workdir, tmp_path / "runs"), runners=2),
                on_runner_down=reports.append,
                connect=lambda: FleetClient(server.url, transport=faults),
            ),
            timeout=60,
        )
    assert not result.ok
    assert [t["status"] for t in result.tasks] == ["pending"]
    assert sorted(r.split(":")[0] for r in reports) == ["runner-1", "runner-2"]
    assert result.runner_errors == reports


async def _status(client: FleetClient, task_id: str, status: str) -> bool:
    return (await client.task(task_id))["status"] == status
