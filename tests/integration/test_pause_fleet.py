"""The usage-limit pause over HTTP and through the real runner (scripted brains).

A runner's `rate_limited` report, with or without `retry_after_s`, pauses assignment for
the whole fleet; `/health` and `/state` show until when; `POST /fleet/resume` lifts it;
the limited attempt is not charged. Nothing sleeps: tests wait on events and conditions.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

from codefleet.api.client import FleetClient
from codefleet.attempt import AttemptReport
from codefleet.fleet.local import FleetOptions, run_fleet
from codefleet.fleet.runner import RunnerOptions
from codefleet.fleet.scripted import ScriptedExecutor, parse_script
from codefleet.models import ErrorKind, EventType, from_iso
from codefleet.server.thread import ServerThread

FAST = {"heartbeat_interval": 0.1, "stale_after": 5.0, "tick_interval": 0.05, "backoff_base": 0.0}
WaitUntil = Callable[..., Awaitable[Any]]


async def _limited_run(client: FleetClient, tree: Path, retry_after_s: float) -> dict[str, Any]:
    """One runner takes T1 and reports it rate-limited; returns the complete answer."""
    runner = await client.register("runner-1", str(tree), None)
    agent, epoch = runner["agent_id"], runner["epoch"]
    task = await client.assignment(agent, epoch, wait=5)
    assert task is not None
    await client.start(task.id, agent, epoch)
    report = AttemptReport(
        attempt=task.attempts,
        ok=False,
        error_kind=ErrorKind.RATE_LIMITED,
        error="HTTP 429",
        retry_after_s=retry_after_s,
    )
    return await client.complete(task.id, agent, epoch, report)


async def test_health_and_state_show_the_pause_and_resume_lifts_it(
    client: FleetClient, workdir: Path, http: httpx.AsyncClient
) -> None:
    await client.create_tasks(
        [{"id": "T1", "title": "t", "description": "do it", "max_attempts": 1}]
    )

    answer = await _limited_run(client, workdir, retry_after_s=600)

    assert (answer["status"], answer["attempts"]) == ("pending", 1)
    health, state = await client.health(), await client.state()
    assert health["paused_until"] == state["paused_until"] == state["pause"]["until"]
    assert (
        590
        < (from_iso(health["paused_until"]) - from_iso(health["server_time"])).total_seconds()
        <= 600
    )
    assert state["pause"]["task_id"] == "T1" and "runner-1" in state["pause"]["reason"]
    assert (await client.resume())["resumed"] is True
    assert (await client.health())["paused_until"] is None
    assert (await http.post("/fleet/resume")).json()["resumed"] is False
    kinds = [e["type"] for e in await client.all_events()]
    assert kinds.count("fleet_paused") == kinds.count("fleet_resumed") == 1


async def test_a_negative_or_absurd_retry_after_is_a_422_and_the_task_stays_running(
    client: FleetClient, workdir: Path, http: httpx.AsyncClient
) -> None:
    await client.create_tasks([{"id": "T1", "title": "t", "description": "do it"}])
    runner = await client.register("runner-1", str(workdir), None)
    agent, epoch = runner["agent_id"], runner["epoch"]
    assert await client.assignment(agent, epoch, wait=5) is not None
    await client.start("T1", agent, epoch)

    for bad in (-1, 10**9, "soon"):
        body = {
            "agent_id": agent,
            "attempt": 1,
            "ok": False,
            "error_kind": "rate_limited",
            "retry_after_s": bad,
        }
        answer = await http.post(
            "/tasks/T1/complete", json=body, headers={"X-Agent-Epoch": str(epoch)}
        )
        assert answer.status_code == 422, bad
        assert answer.json()["error"]["message"].startswith("body.retry_after_s")
    assert (await client.task("T1"))["status"] == "running"


async def test_a_scripted_fleet_pauses_on_one_limited_session_and_everything_succeeds(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    """One session of three hits a limit: the fleet waits it out; nothing is charged."""
    server = make_server(**FAST, max_attempts=1)
    script = {
        "T1": [{"write": {"path": "one.py", "content": "ONE = 1\n"}}],
        "T2": [
            {"write": {"path": "two.py", "content": "half\n"}},
            {"rate_limit": 0.3, "attempt": 1},
            {"write": {"path": "two.py", "content": "TWO = 2\n"}},
        ],
        "T3": [{"write": {"path": "three.py", "content": "THREE = 3\n"}}],
    }
    async with FleetClient(server.url) as client:
        await client.create_tasks(
            [{"id": t, "title": t, "description": "do it"} for t in ("T1", "T2", "T3")]
        )
        executor = ScriptedExecutor(parse_script(script))
        result = await run_fleet(
            server.url,
            lambda _: executor,
            FleetOptions(RunnerOptions("runner", workdir, workdir.parent / "runs"), runners=3),
        )
        events = await client.all_events()
        t2 = await client.task("T2")
    assert result.all_succeeded
    kinds = [e["type"] for e in events]
    paused, resumed = kinds.index("fleet_paused"), kinds.index("fleet_resumed")
    assert paused < resumed and "task_assigned" not in kinds[paused:resumed]
    assert (t2["attempts"], t2["uncharged_attempts"]) == (2, 1)
    assert (workdir / "two.py").read_text() == "TWO = 2\n"
    restored = [e["payload"]["path"] for e in events if e["type"] == EventType.FILE_RESTORED]
    assert restored == ["two.py"]  # the limited attempt's edit was rolled back


async def test_codefleet_resume_says_what_it_lifted_and_when_nothing_was_paused(
    client: FleetClient, workdir: Path, server: ServerThread
) -> None:
    await client.create_tasks([{"id": "T1", "title": "t", "description": "do it"}])
    await _limited_run(client, workdir, retry_after_s=600)

    lifted = _codefleet("resume", "--server", server.url)
    again = _codefleet("resume", "--server", server.url)

    assert lifted.returncode == 0, lifted.stderr
    assert "resumed: the fleet assigns work again (it was paused until " in lifted.stdout
    assert "runner-1: HTTP 429" in " ".join(lifted.stdout.split())
    assert (again.returncode, again.stdout.strip()) == (
        0,
        "the fleet was not paused; nothing to resume",
    )


def _codefleet(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "codefleet.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
