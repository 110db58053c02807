"""A server that applies a call and dies before answering: the runner's call is retried once more.

What a crash between COMMIT and the response looks like to a runner: the call
was applied, the answer never came (a transport error, exactly as when the
process is SIGKILLed). The transport here forwards the call to a real server,
then drops the answer of the first call of one kind. `start` must be retried
(it is idempotent; before the fix the runner dropped the task and the server
held it `running` until the deadline, 11 minutes later), and `complete` must
be retried and applied exactly once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import httpx

from codefleet.api.client import FleetClient
from codefleet.fleet.runner import Runner, RunnerOptions
from codefleet.fleet.scripted import ScriptedExecutor, parse_script
from codefleet.server.thread import ServerThread

FAST = {"heartbeat_interval": 0.2, "tick_interval": 0.05, "backoff_base": 0.0}
BOUND_S = 20.0  # far below the 660 s a lost `start` used to cost


class DropsOneAnswer(httpx.AsyncBaseTransport):
    """Forwards every call; of the first call whose path ends with `suffix`, loses the answer."""

    def __init__(self, suffix: str) -> None:
        self.inner = httpx.AsyncHTTPTransport(verify=False)
        self.suffix = suffix
        self.dropped = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        if request.method == "POST" and request.url.path.endswith(self.suffix) and not self.dropped:
            await response.aread()
            await response.aclose()
            self.dropped += 1
            raise httpx.ReadError("the server died before it answered", request=request)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


async def drain_through(server: ServerThread, workdir: Path, transport: DropsOneAnswer) -> None:
    script = parse_script({"T1": [{"write": {"path": "made.txt", "content": "once\n"}}]})
    options = RunnerOptions(
        "runner-1", workdir, workdir.parent / "runs", poll_wait=0.2, exit_when_drained=True
    )
    async with FleetClient(server.url, transport=transport) as client:
        await asyncio.wait_for(Runner(client, ScriptedExecutor(script), options).run(), BOUND_S)


async def kinds(server: ServerThread) -> list[str]:
    async with FleetClient(server.url) as client:
        return [e["type"] for e in await client.all_events() if e["task_id"] == "T1"]


async def test_a_start_whose_answer_was_lost_is_retried_and_the_task_finishes_at_once(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    server = make_server(**FAST)
    async with FleetClient(server.url) as client:
        await client.create_tasks([{"id": "T1", "title": "t", "description": "do it"}])
    transport = DropsOneAnswer("/start")

    await drain_through(server, workdir, transport)

    assert transport.dropped == 1
    assert await kinds(server) == [
        "task_created",
        "task_assigned",
        "task_started",
        "lease_acquired",
        "file_changed",
        "landing_queued",  # nothing to check: it lands in the same transaction
        "lease_released",
        "landed",
        "task_succeeded",
    ]
    assert (workdir / "made.txt").read_text() == "once\n"


async def test_a_completion_whose_answer_was_lost_is_retried_and_applied_exactly_once(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    server = make_server(**FAST)
    async with FleetClient(server.url) as client:
        await client.create_tasks([{"id": "T1", "title": "t", "description": "do it"}])
    transport = DropsOneAnswer("/complete")

    await drain_through(server, workdir, transport)

    async with FleetClient(server.url) as client:
        task, agents = await client.task("T1"), await client.agents()
    assert transport.dropped == 1
    assert (await kinds(server)).count("task_succeeded") == 1
    assert (task["status"], task["attempts"]) == ("succeeded", 1)
    assert [a["tasks_succeeded"] for a in agents] == [1]
