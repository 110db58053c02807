"""Landing: a run that ends green hands back a tree that passes its checks.

Real server, real runners, the real landing worker and SQLite; only the agents'
brains are scripted. Each case is a pair (or triple) of tasks that pass the
suite alone and break it together; the run must end green, with the task that
landed second reworked and told why.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from codefleet.api.client import FleetClient
from codefleet.fleet.local import run_fleet
from codefleet.fleet.scripted import ScriptedExecutor, parse_script
from codefleet.server.thread import ServerThread

FAST = {"heartbeat_interval": 0.1, "stale_after": 5.0, "tick_interval": 0.05, "backoff_base": 0.0}
PY = f'"{sys.executable}"'
# The suite: every test_*.py file, run in order; an exception fails it.
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


def suite_passes(tree: Path) -> bool:
    return subprocess.run(SUITE, shell=True, cwd=tree, capture_output=True).returncode == 0


@pytest.fixture
def lib_tree(workdir: Path) -> Path:
    (workdir / "lib.py").write_text(LIB)
    (workdir / "test_lib.py").write_text(TEST_LIB)
    assert suite_passes(workdir)
    return workdir


def write(path: str, content: str, attempt: int | None = None) -> dict[str, Any]:
    step: dict[str, Any] = {"write": {"path": path, "content": content}}
    if attempt is not None:
        step["attempt"] = attempt
    return step


async def drain(
    server: ServerThread, workdir: Path, script: dict[str, Any], runners: int = 2, **options: Any
) -> tuple[Any, ScriptedExecutor]:
    executor = ScriptedExecutor(parse_script(script), wait_timeout=20)
    result = await run_fleet(
        server.url, runners, lambda _: executor, workdir, workdir.parent / "runs", **options
    )
    return result, executor


def of_type(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == kind]


# A renames greet to salute (and its test); B adds a caller of greet, written while A
# holds lib.py, and finishes after A landed: each passes alone, together they break.
RENAME_AND_CALLER = {
    "A": [write("lib.py", RENAMED), write("test_lib.py", TEST_RENAMED), {"wait_leased": "caller.py"}],
    "B": [
        {"wait_leased": "lib.py", "attempt": 1},
        write("caller.py", CALLER_OLD, attempt=1),
        write("test_caller.py", TEST_CALLER, attempt=1),
        {"wait_succeeded": "A", "attempt": 1},
        {"expect_error": "Integration failed", "attempt": 2},
        {"expect_error": 'A "rename greet" changed: lib.py, test_lib.py', "attempt": 2},
        write("caller.py", CALLER_NEW, attempt=2),
        write("test_caller.py", TEST_CALLER, attempt=2),
    ],
}  # fmt: skip
TASKS = [
    {"id": "A", "title": "rename greet", "description": "rename greet to salute"},
    {"id": "B", "title": "add welcome", "description": "a welcome() built on greet"},
]


async def test_a_rename_and_a_new_caller_end_green_with_the_later_task_reworked(
    make_server: Callable[..., ServerThread], lib_tree: Path
) -> None:
    server = make_server(**FAST)
    async with FleetClient(server.url) as client:
        await client.create_tasks(TASKS, {"test": SUITE})
        await client.set_integration("test")
        result, executor = await drain(server, lib_tree, RENAME_AND_CALLER)
        events = await client.all_events()
        b = await client.task("B")

    assert result.ok, result.tasks
    assert suite_passes(lib_tree)
    assert (lib_tree / "caller.py").read_text() == CALLER_NEW
    landed = [(e["task_id"], e["payload"]["order"]) for e in of_type(events, "landed")]
    assert landed == [("A", 1), ("B", 2)]
    [broke] = of_type(events, "integration_failed")
    assert broke["task_id"] == "B" and broke["payload"]["conflicts_with"] == ["A"]
    assert "ImportError" in broke["payload"]["output_tail"]
    assert b["attempts"] == 2
    requeued = [e for e in of_type(events, "task_requeued") if e["task_id"] == "B"]
    assert [e["payload"]["error_kind"] for e in requeued] == ["integration_failed"]
    retry = executor.assignments[-1]
    assert retry.id == "B" and "salute" not in (retry.error or "").split("Output")[0]


async def test_without_an_integration_check_the_same_pair_lands_a_red_tree(
    make_server: Callable[..., ServerThread], lib_tree: Path
) -> None:
    """The case landing exists for: with nothing to check, both land and the tree is red."""
    server = make_server(**FAST)
    script = {"A": RENAME_AND_CALLER["A"], "B": [s for s in RENAME_AND_CALLER["B"][:4]]}
    async with FleetClient(server.url) as client:
        await client.create_tasks(TASKS, {"test": SUITE})
        result, _ = await drain(server, lib_tree, script)
        events = await client.all_events()

    assert result.all_succeeded
    assert [e["payload"]["order"] for e in of_type(events, "landed")] == [1, 2]
    assert not suite_passes(lib_tree)
