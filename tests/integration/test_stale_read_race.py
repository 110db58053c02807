"""Read-set validation over the wire: the real runner, scripted brains, the real server.

T1 reads api.py, then takes a lease of its own (which T2 waits for, so the read
happened first), then waits until T2 changed api.py and succeeded. When T1's
session ends, its read is stale: the `stale_read` event names T2 and api.py,
and by policy T1 reconciles in the same session, retries, or only records.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console

from codefleet.api.client import FleetClient
from codefleet.cli.start.demo_run import run_demo
from codefleet.fleet.local import FleetOptions, run_fleet
from codefleet.fleet.runner import RunnerOptions
from codefleet.fleet.scripted import ScriptedExecutor, parse_script
from codefleet.server.thread import ServerThread

FAST = {"heartbeat_interval": 0.1, "stale_after": 5.0, "tick_interval": 0.05, "backoff_base": 0.0}
OLD, NEW = "def f(a):\n    return a\n", "def f(a, b):\n    return a + b\n"

RACE: dict[str, Any] = {
    "T1": [
        {"read": "api.py", "attempt": 1},
        {"write": {"path": "use.py", "content": "f(1)\n"}, "attempt": 1},
        {"wait_succeeded": "T2", "attempt": 1},
        {"expect_followup": "api.py: changed by T2", "turn": 2},
        {"write": {"path": "use.py", "content": "f(1, 2)\n"}, "turn": 2},
        {"read": "api.py", "attempt": 2},
        {"write": {"path": "use.py", "content": "f(1, 2)\n"}, "attempt": 2},
    ],
    "T2": [
        {"wait_leased": "use.py"},
        {"edit": {"path": "api.py", "old": "def f(a):", "new": "def f(a, b):"}},
        {"edit": {"path": "api.py", "old": "return a\n", "new": "return a + b\n"}},
    ],
}


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


async def race(
    server: ServerThread, workdir: Path, policy: str | None = None
) -> tuple[Any, list[dict[str, Any]], ScriptedExecutor]:
    (workdir / "api.py").write_text(OLD)
    executor = ScriptedExecutor(parse_script(RACE), wait_timeout=10)
    extra = {} if policy is None else {"on_stale_read": policy}
    async with FleetClient(server.url) as client:
        await client.create_tasks(
            [
                {"id": "T1", "title": "use f", "description": "call f", **extra},
                {"id": "T2", "title": "widen f", "description": "add b"},
            ]
        )
        result = await run_fleet(
            server.url,
            lambda _: executor,
            FleetOptions(RunnerOptions("runner", workdir, workdir.parent / "runs"), runners=2),
        )
        events = await client.all_events()
    return result, events, executor


def of(events: list[dict[str, Any]], *kinds: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] in kinds]


async def test_a_read_another_task_changed_is_a_stale_read_naming_that_task_and_path(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    server = make_server(**FAST)
    result, events, _ = await race(server, workdir, "ignore")
    [stale] = of(events, "stale_read")
    assert result.all_succeeded
    assert (stale["task_id"], stale["payload"]["attempt"]) == ("T1", 1)
    assert stale["payload"]["paths"] == [
        {"path": "api.py", "changed_by": ["T2"], "read_sha256": sha(OLD), "now_sha256": sha(NEW)}
    ]
    assert of(events, "reconciled") == []


async def test_with_reconcile_the_same_session_gets_the_diff_and_the_fix_lands(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    server = make_server(**FAST)
    result, events, executor = await race(server, workdir)
    [(task, attempt, message)] = executor.followups
    order = [
        (e["type"], e["task_id"]) for e in of(events, "stale_read", "reconciled", "task_succeeded")
    ]
    assert result.all_succeeded
    assert (task, attempt) == ("T1", 1)
    assert "\n-def f(a):\n-    return a\n+def f(a, b):\n+    return a + b\n" in message
    assert order == [
        ("task_succeeded", "T2"),
        ("stale_read", "T1"),
        ("reconciled", "T1"),
        ("task_succeeded", "T1"),
    ]
    [done] = of(events, "reconciled")
    assert {k: done["payload"][k] for k in ("attempt", "rounds", "outcome")} == {
        "attempt": 1,
        "rounds": 1,
        "outcome": "clean",
    }
    assert (workdir / "use.py").read_text() == "f(1, 2)\n"


async def test_with_retry_the_attempt_is_rolled_back_and_the_next_is_told_which_file(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    server = make_server(**FAST)
    result, events, executor = await race(server, workdir, "retry")
    requeued = of(events, "task_requeued")
    assert result.all_succeeded
    assert [(e["task_id"], e["payload"]["error_kind"]) for e in requeued] == [("T1", "stale_read")]
    assert of(events, "file_restored")[0]["payload"]["path"] == "use.py"
    second = [t for t in executor.assignments if t.id == "T1"][-1]
    assert second.attempts == 2 and "api.py (changed by T2)" in (second.error or "")
    assert executor.followups == []
    assert (workdir / "use.py").read_text() == "f(1, 2)\n"


def test_the_dry_run_demo_shows_one_stale_read_reconciled_and_stays_green(tmp_path: Path) -> None:
    out = io.StringIO()

    ok = run_demo("dry-run", tmp_path, console=Console(file=out, width=200))

    text = out.getvalue()
    assert ok, text
    stale = [line for line in text.splitlines() if "STALE READ" in line]
    done = [line for line in text.splitlines() if "reconciled after" in line]
    assert len(stale) == 1 and "T3 · " in stale[0]
    assert stale[0].endswith("STALE READ models.py (T1): changed since attempt 1 read them")
    assert len(done) == 1 and done[0].endswith(
        "reconciled after 1 turn(s): nothing stale now · $0.0000"
    )
    assert text.index("STALE READ") < text.index("reconciled after") < text.index("PASS")


async def test_a_fenced_runners_reconcile_turn_is_cut_and_nothing_it_writes_lands(
    make_server: Callable[..., ServerThread], workdir: Path, wait_until: Any
) -> None:
    server = make_server(**FAST)
    (workdir / "api.py").write_text(OLD)
    script = {
        "T1": [
            {"read": "api.py", "attempt": 1},
            {"write": {"path": "use.py", "content": "f(1)\n"}, "attempt": 1},
            {"wait_succeeded": "T2", "attempt": 1},
            {"wait_leased": "never.txt", "turn": 2},  # held here until the fence cuts the turn
            {"write": {"path": "fenced.txt", "content": "must not land\n"}, "turn": 2},
            {"write": {"path": "use.py", "content": "f(1, 2)\n"}, "attempt": 2},
        ],
        "T2": RACE["T2"],
    }
    executor = ScriptedExecutor(parse_script(script), wait_timeout=10)
    async with FleetClient(server.url) as client:
        await client.create_tasks(
            [
                {"id": "T1", "title": "use f", "description": "call f"},
                {"id": "T2", "title": "widen f", "description": "add b"},
            ]
        )
        fleet = asyncio.create_task(
            run_fleet(
                server.url,
                lambda _: executor,
                FleetOptions(RunnerOptions("runner", workdir, workdir.parent / "runs"), runners=2),
            )
        )
        await wait_until(lambda: executor.followups, timeout=20)
        holder = next(a for a in await client.agents() if a.get("current_task_id") == "T1")
        await client.register(holder["name"], str(workdir), None, replace=True)  # the fence
        result = await asyncio.wait_for(fleet, 60)
        events = await client.all_events()
    assert result.all_succeeded
    assert [e["payload"]["attempt"] for e in of(events, "stale_read")] == [1]
    assert of(events, "reconciled") == []  # the turn was cut: it never ended
    assert not (workdir / "fenced.txt").exists()
    assert (await client_task(server, "T1"))["attempts"] == 2
    assert (workdir / "use.py").read_text() == "f(1, 2)\n"


async def client_task(server: ServerThread, task_id: str) -> dict[str, Any]:
    async with FleetClient(server.url) as client:
        return await client.task(task_id)


async def test_with_verify_a_stale_attempt_runs_its_verify_check_and_a_failure_is_verify_failed(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    server = make_server(**FAST)
    (workdir / "api.py").write_text(OLD)
    executor = ScriptedExecutor(parse_script(RACE), wait_timeout=10)
    async with FleetClient(server.url) as client:
        await client.create_tasks(
            [
                {
                    "id": "T1",
                    "title": "use f",
                    "description": "call f",
                    "on_stale_read": "verify",
                    "verify": "uses",
                },
                {"id": "T2", "title": "widen f", "description": "add b"},
            ],
            checks={"uses": "grep -q 'f(1, 2)' use.py"},
        )
        result = await run_fleet(
            server.url,
            lambda _: executor,
            FleetOptions(  # the verify's failure as such: no repair turn (test_repair.py)
                RunnerOptions("runner", workdir, workdir.parent / "runs", repair_turns=0),
                runners=2,
            ),
        )
        events = await client.all_events()
    assert result.all_succeeded
    assert [e["payload"]["attempt"] for e in of(events, "stale_read")] == [1]
    assert of(events, "reconciled") == [] and executor.followups == []
    requeued = [(e["task_id"], e["payload"]["error_kind"]) for e in of(events, "task_requeued")]
    assert requeued == [("T1", "verify_failed")]
