"""A change that failed its check is repaired in the same session, not redone (issue 53, item 4).

Real server, real runners and landing worker, SQLite; only the agents' brains are
scripted (`fleet.scripted`: a repair turn is the session's next turn, `turn: 2`).
A failed verify takes a repair turn while the session is open; a blamed landing
hands the task back to a repair attempt that resumes the session, its change
still on the tree and its leases kept. A repair that fails falls back to the
rollback and a new attempt, as before (decision 0161).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from fleet_support import drain as drain_fleet
from git_support import make_repository

from codefleet.api.client import FleetClient
from codefleet.fleet.scripted import ScriptedExecutor
from codefleet.server.thread import ServerThread
from codefleet.testing.invariants import check, collect
from codefleet.testing.invariants_landing import check_landing

FAST = {"heartbeat_interval": 0.1, "stale_after": 5.0, "tick_interval": 0.05, "backoff_base": 0.0}
PY = f'"{sys.executable}"'
drain = partial(drain_fleet, wait_timeout=20)  # each scripted wait here is bounded at 20 s
SUITE = (
    f"{PY} -c \"import glob, runpy, sys; sys.path.insert(0, '.'); "
    "[runpy.run_path(p) for p in sorted(glob.glob('test_*.py'))]\""
)
LIB = "def greet():\n    return 'hi'\n"
TEST_LIB = "from lib import greet\nassert greet() == 'hi'\n"
RENAMED = "def salute():\n    return 'hi'\n"
TEST_RENAMED = "from lib import salute\nassert salute() == 'hi'\n"
CALLER_OLD = "from lib import greet\n\ndef welcome():\n    return greet() + '!'\n"
CALLER_NEW = "from lib import salute\n\ndef welcome():\n    return salute() + '!'\n"
TEST_CALLER = "from caller import welcome\nassert welcome() == 'hi!'\n"
TASKS = [
    {"id": "A", "title": "rename greet", "description": "rename greet to salute"},
    {"id": "B", "title": "add welcome", "description": "a welcome() built on greet"},
]


def step(kind: str, arg: Any, attempt: int = 1, turn: int = 1) -> dict[str, Any]:
    return {kind: arg, "attempt": attempt, "turn": turn}


def write(path: str, content: str, attempt: int = 1, turn: int = 1) -> dict[str, Any]:
    return step("write", {"path": path, "content": content}, attempt, turn)


def suite_passes(tree: Path) -> bool:
    return subprocess.run(SUITE, shell=True, cwd=tree, capture_output=True).returncode == 0


def of(events: list[dict[str, Any]], kind: str, task: str | None = None) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == kind and task in (None, e["task_id"])]


async def record(client: FleetClient) -> tuple[list[dict[str, Any]], Any]:
    evidence = await collect(client)
    assert check(evidence) == [], check(evidence)
    assert check_landing(evidence.events, "test") == [], check_landing(evidence.events, "test")
    return evidence.events, evidence


# -- a landing that fails: the session that made the change resumes and repairs it ------------

# A renames greet (and its test); B adds a caller of greet while A holds lib.py and finishes
# after A landed: B's change breaks the landed tree. B's session is resumed (turn 2).
BREAKER = [
    step("wait_leased", "lib.py"),
    write("caller.py", CALLER_OLD),
    write("test_caller.py", TEST_CALLER),
    step("wait_succeeded", "A"),
    step("expect_followup", "did not land", turn=2),
    step("expect_followup", 'A "rename greet" changed: lib.py, test_lib.py', turn=2),
    step("expect_followup", "ImportError", turn=2),
]
RENAMER = [
    write("lib.py", RENAMED),
    write("test_lib.py", TEST_RENAMED),
    {"wait_leased": "caller.py"},
]


async def landing_repair(
    make_server: Callable[..., ServerThread], workdir: Path, repair: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], Any, ScriptedExecutor, Any]:
    (workdir / "lib.py").write_text(LIB)
    (workdir / "test_lib.py").write_text(TEST_LIB)
    server = make_server(**FAST)
    async with FleetClient(server.url) as client:
        await client.create_tasks(TASKS, {"test": SUITE})
        await client.set_integration("test")
        result, executor = await drain(server, workdir, {"A": RENAMER, "B": BREAKER + repair})
        events, evidence = await record(client)
        return events, result, executor, evidence


async def test_a_change_that_breaks_the_landed_tree_is_repaired_in_its_own_session(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    fix = [write("caller.py", CALLER_NEW, turn=2)]
    events, result, executor, evidence = await landing_repair(make_server, workdir, fix)

    assert result.ok, result.tasks
    assert suite_passes(workdir) and (workdir / "caller.py").read_text() == CALLER_NEW
    assert of(events, "integration_failed") == [] and of(events, "file_restored") == []
    [started] = of(events, "repair_started", "B")
    assert started["payload"]["cause"] == "integration" and started["payload"]["name"] == "test"
    assert started["payload"]["conflicts_with"] == ["A"]
    assert started["payload"]["session_id"] == "scripted-B-1"
    repair = [e for e in of(events, "task_assigned", "B") if e["payload"].get("repair")]
    assert [e["payload"]["session_id"] for e in repair] == ["scripted-B-1"]
    [finished] = of(events, "repair_finished", "B")
    assert finished["payload"]["outcome"] == "landing"
    assert [e["task_id"] for e in of(events, "landed")] == ["A", "B"]
    # the same session: its second turn, told what broke; not charged as an attempt
    assert [(t, a) for t, a, _ in executor.followups if t == "B"] == [("B", 2)]
    b = evidence.tasks["B"]
    assert b["session_id"] == "scripted-B-1" and b["attempts"] == 2
    assert b["uncharged_attempts"] == 1  # the repair attempt


async def test_a_landing_repair_that_fails_is_rolled_back_and_reworked(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    gives_up = [
        step("fail", "cannot repair this", turn=2),
        # the rework is the task's second session (attempt 3: the repair was attempt 2)
        step("expect_error", "repair in the same session failed too", attempt=2),
        write("caller.py", CALLER_NEW, attempt=2),
        write("test_caller.py", TEST_CALLER, attempt=2),
    ]
    events, result, _, evidence = await landing_repair(make_server, workdir, gives_up)

    assert result.ok, result.tasks
    assert suite_passes(workdir) and (workdir / "caller.py").read_text() == CALLER_NEW
    assert len(of(events, "repair_started", "B")) == 1
    [finished] = of(events, "repair_finished", "B")
    assert finished["payload"]["outcome"] == "failed"
    requeued = of(events, "task_requeued", "B")
    assert [e["payload"]["error_kind"] for e in requeued] == ["integration_failed"]
    assert {e["payload"]["path"] for e in of(events, "file_restored", "B")} >= {"caller.py"}
    assert evidence.tasks["B"]["attempts"] == 3


# -- a verify that fails: the open session takes a repair turn -----------------------------------

VERIFY = f'{PY} -c "import lib; assert lib.VALUE == 2, lib.VALUE"'


async def verify_repair(
    make_server: Callable[..., ServerThread],
    workdir: Path,
    script: list[dict[str, Any]],
    repository: bool = False,
) -> tuple[list[dict[str, Any]], Any, ScriptedExecutor, Any]:
    (workdir / "lib.py").write_text("VALUE = 1\n")
    if repository:  # a real git repository: a check's view has a content identity
        shutil.rmtree(workdir / ".git")
        make_repository(workdir)
    server = make_server(**FAST)
    async with FleetClient(server.url) as client:
        task = {"id": "T1", "title": "two", "description": "make it 2", "verify": "check"}
        await client.create_tasks([task], {"check": VERIFY})
        result, executor = await drain(server, workdir, {"T1": script}, runners=1)
        evidence = await collect(client)
        assert check(evidence) == [] and check_landing(evidence.events) == []
        return evidence.events, result, executor, evidence


async def test_a_failed_verify_is_repaired_in_a_turn_of_the_same_session(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    script = [
        write("lib.py", "VALUE = 3\n"),
        step("expect_followup", "failed its verification", turn=2),
        step("expect_followup", "AssertionError: 3", turn=2),
        write("lib.py", "VALUE = 2\n", turn=2),
    ]
    events, result, executor, evidence = await verify_repair(make_server, workdir, script)

    assert result.ok, result.tasks
    assert (workdir / "lib.py").read_text() == "VALUE = 2\n"
    assert of(events, "task_requeued") == [] and of(events, "file_restored") == []
    [started] = of(events, "repair_started", "T1")
    assert started["payload"]["cause"] == "verify" and started["payload"]["attempt"] == 1
    [finished] = of(events, "repair_finished", "T1")
    assert finished["payload"]["outcome"] == "fixed"
    verdicts = [e["payload"].get("passed") for e in of(events, "check_finished", "T1")]
    assert verdicts == [False, True]
    assert [(t, a) for t, a, _ in executor.followups] == [("T1", 1)]
    assert evidence.tasks["T1"]["attempts"] == 1
    assert evidence.tasks["T1"]["session_id"] == "scripted-T1-1"


async def test_a_verify_repair_that_fails_too_is_rolled_back_and_retried(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    script = [
        write("lib.py", "VALUE = 3\n", attempt=1),
        write("lib.py", "VALUE = 4\n", attempt=1, turn=2),
        step("expect_error", "AssertionError: 4", attempt=2),
        write("lib.py", "VALUE = 2\n", attempt=2),
    ]
    events, result, executor, evidence = await verify_repair(make_server, workdir, script)

    assert result.ok, result.tasks
    assert (workdir / "lib.py").read_text() == "VALUE = 2\n"
    [finished] = of(events, "repair_finished", "T1")
    assert finished["payload"]["outcome"] == "failed" and finished["payload"]["attempt"] == 1
    assert "kept_event" not in finished["payload"]  # the turn wrote: the verify ran again
    runs = [e for e in of(events, "check_finished", "T1") if e["payload"]["attempt"] == 1]
    assert [e["payload"]["passed"] for e in runs] == [False, False]
    requeued = of(events, "task_requeued", "T1")
    assert [e["payload"]["error_kind"] for e in requeued] == ["verify_failed"]
    assert [e["payload"]["path"] for e in of(events, "file_restored", "T1")] == ["lib.py"]
    assert evidence.tasks["T1"]["attempts"] == 2
    assert [(t, a) for t, a, _ in executor.followups] == [("T1", 1)]


# the repair turn (turn 2) writes nothing: the verify would see the same content
IDLE_REPAIR = [
    write("lib.py", "VALUE = 3\n", attempt=1),
    step("expect_error", "AssertionError: 3", attempt=2),
    write("lib.py", "VALUE = 2\n", attempt=2),
]


async def test_a_repair_turn_that_changes_nothing_keeps_its_failed_verify(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    events, result, executor, evidence = await verify_repair(
        make_server, workdir, IDLE_REPAIR, repository=True
    )

    assert result.ok, result.tasks
    assert (workdir / "lib.py").read_text() == "VALUE = 2\n"
    runs = [e for e in of(events, "check_finished", "T1") if e["payload"]["attempt"] == 1]
    [failed] = runs  # not run again after the repair turn: the same content, the same failure
    assert of(events, "check_reused", "T1") == []
    [finished] = of(events, "repair_finished", "T1")
    body = finished["payload"]
    assert body["outcome"] == "failed" and body["kept_event"] == failed["id"]
    assert body["identity"] == failed["payload"]["identity"]
    [requeued] = of(events, "task_requeued", "T1")
    assert requeued["payload"]["error_kind"] == "verify_failed"
    assert "AssertionError: 3" in requeued["payload"]["reason"]
    assert [e["payload"]["path"] for e in of(events, "file_restored", "T1")] == ["lib.py"]
    assert evidence.tasks["T1"]["attempts"] == 2
    assert [(t, a) for t, a, _ in executor.followups] == [("T1", 1)]


async def test_without_a_content_identity_a_repair_turn_that_changes_nothing_verifies_again(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    events, result, _, _ = await verify_repair(make_server, workdir, IDLE_REPAIR)  # no git

    assert result.ok, result.tasks
    runs = [e for e in of(events, "check_finished", "T1") if e["payload"]["attempt"] == 1]
    assert [e["payload"]["passed"] for e in runs] == [False, False]
    [finished] = of(events, "repair_finished", "T1")
    assert finished["payload"]["outcome"] == "failed" and "kept_event" not in finished["payload"]
