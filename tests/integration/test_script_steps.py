"""Dry-run script steps: rework steps that end green whichever task lands first, waits
that follow what they wait for, and `patch` / `write_from` through the lease.

Real server, real runners, the real landing worker and SQLite; only the agents' brains
are scripted. A renames greet to salute, B adds a caller of greet: each passes the suite
alone, together they break it. Each task carries `rework: true` steps for the case where
it lands second; the run is played in both landing orders, with the repair turn (the
change fixed in place) and without it (rolled back and redone), and ends green each time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_landing import (
    CALLER_NEW,
    CALLER_OLD,
    FAST,
    LIB,
    RENAMED,
    SUITE,
    TASKS,
    TEST_CALLER,
    TEST_LIB,
    TEST_RENAMED,
    drain,
    of_type,
    suite_passes,
    write,
)

from codefleet.api.client import FleetClient
from codefleet.fleet.local import FleetOptions, run_fleet
from codefleet.fleet.runner import RunnerOptions
from codefleet.fleet.scripted import ScriptedExecutor, load_script
from codefleet.fleet.scriptwaits import LIVENESS_EVERY_S
from codefleet.server.thread import ServerThread


@pytest.fixture
def lib_tree(workdir: Path) -> Path:
    """`test_landing`'s tree: lib.py with greet, and its test."""
    (workdir / "lib.py").write_text(LIB)
    (workdir / "test_lib.py").write_text(TEST_LIB)
    return workdir


ALIAS = "\ngreet = salute  # B's caller still says greet\n"


def either_order(first: str) -> dict[str, Any]:
    """The same rework steps for both tasks; only who waits for whom differs (`first`
    lands first: the other finishes once it has succeeded)."""
    second = "B" if first == "A" else "A"
    script: dict[str, Any] = {
        "A": [
            write("lib.py", RENAMED),
            write("test_lib.py", TEST_RENAMED),
            {"rework": True, "append": {"path": "lib.py", "text": ALIAS}},
        ],
        "B": [
            write("caller.py", CALLER_OLD),
            write("test_caller.py", TEST_CALLER),
            {"rework": True, "write": {"path": "caller.py", "content": CALLER_NEW}},
        ],
    }
    script[second].insert(2, {"wait_succeeded": first, "attempt": 1})
    return script


@pytest.mark.parametrize("repair_turns", [1, 0], ids=["repaired in place", "rolled back"])
@pytest.mark.parametrize("first", ["A", "B"])
async def test_a_script_with_rework_steps_ends_green_whichever_task_lands_first(
    make_server: Callable[..., ServerThread], lib_tree: Path, first: str, repair_turns: int
) -> None:
    server = make_server(**(FAST | {"repair_turns": repair_turns}))
    async with FleetClient(server.url) as client:
        await client.create_tasks(TASKS, {"test": SUITE})
        await client.set_integration("test")
        result, _ = await drain(server, lib_tree, either_order(first))
        events = await client.all_events()

    assert result.ok, result.tasks
    assert suite_passes(lib_tree)
    second = "B" if first == "A" else "A"
    assert [e["task_id"] for e in of_type(events, "landed")] == [first, second]
    [broke] = of_type(events, "integration_failed") or of_type(events, "repair_started")
    assert broke["task_id"] == second
    reworked = (lib_tree / "lib.py").read_text().endswith(ALIAS)
    assert reworked == (second == "A")
    assert ((lib_tree / "caller.py").read_text() == CALLER_NEW) == (second == "B")


async def test_a_wait_on_a_task_that_failed_gives_up_at_once_naming_it(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    """B waits for A to succeed with a limit of ten minutes; A fails for good, so B stops
    waiting then, saying why, instead of at its limit."""
    server = make_server(**FAST)
    tasks = [
        {"id": "A", "title": "a", "description": "a", "max_attempts": 1},
        {"id": "B", "title": "b", "description": "b", "max_attempts": 1},
    ]
    script = {"A": [{"fail": "A cannot"}], "B": [{"wait_succeeded": "A", "timeout": 600}]}
    async with FleetClient(server.url) as client:
        await client.create_tasks(tasks)
        await drain(server, workdir, script)
        b = await client.task("B")

    assert b["status"] == "failed"
    assert "gave up waiting for A to succeed: it is failed and cannot any more" in b["error"]


async def test_a_wait_past_its_timeout_gives_up_naming_what_and_the_limit(
    make_server: Callable[..., ServerThread], workdir: Path, tmp_path: Path
) -> None:
    """A's lease wait has the script's limit, 0.3 s, while B, alive, waits for A (its own
    limit ten minutes); once A gave up, B's wait gives up too: A cannot succeed any more."""
    server = make_server(**FAST)
    tasks = [
        {"id": "A", "title": "a", "description": "a", "max_attempts": 1},
        {"id": "B", "title": "b", "description": "b", "max_attempts": 1},
    ]
    (tmp_path / "script.yaml").write_text(
        "wait_timeout: 0.3\nA:\n- wait_leased: nobody.txt\nB:\n- wait_succeeded: A\n  timeout: 600\n"
    )
    script = load_script(tmp_path / "script.yaml")
    async with FleetClient(server.url) as client:
        await client.create_tasks(tasks)
        await drain_steps(server, workdir, script)
        a, b = await client.task("A"), await client.task("B")

    assert (
        "gave up waiting for another task to hold the lease on nobody.txt after 0.3 s, its limit"
        in (a["error"])
    )
    assert "gave up waiting for A to succeed: it is failed" in b["error"]


async def test_a_lease_wait_alone_on_the_server_waits_for_a_task_added_later(
    make_server: Callable[..., ServerThread], workdir: Path, wait_until: Any
) -> None:
    """H waits for another task to hold x.txt while it is the only task: none has ended,
    so it keeps waiting; L, added once H has waited past a liveness poll, takes x.txt."""
    server = make_server(**FAST)
    script = {"H": [{"wait_leased": "x.txt"}], "L": [{"write": {"path": "x.txt", "content": "L\n"}}, {"wait_succeeded": "H"}]}  # fmt: skip
    async with FleetClient(server.url) as client:
        await client.create_tasks(
            [{"id": "H", "title": "h", "description": "h", "max_attempts": 1}]
        )
        fleet = asyncio.create_task(drain(server, workdir, script))
        await wait_until(lambda: _status(client, "H", "running"))
        await asyncio.sleep(2 * LIVENESS_EVERY_S)  # H's wait has asked who else is alive
        await client.create_tasks([{"id": "L", "title": "l", "description": "l"}])
        await fleet
        statuses = [(await client.task(t))["status"] for t in ("H", "L")]

    assert statuses == ["succeeded", "succeeded"]


async def test_a_lease_wait_gives_up_once_every_other_task_has_ended(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    server = make_server(**FAST)
    tasks = [
        {"id": "H", "title": "h", "description": "h", "max_attempts": 1},
        {"id": "O", "title": "o", "description": "o"},
    ]
    script = {"H": [{"wait_leased": "x.txt", "timeout": 600}], "O": []}
    async with FleetClient(server.url) as client:
        await client.create_tasks(tasks)
        await drain(server, workdir, script)
        h = await client.task("H")

    assert h["status"] == "failed"
    assert "lease on x.txt: every other task has ended" in h["error"]


async def _status(client: FleetClient, task_id: str, status: str) -> bool:
    return bool((await client.task(task_id))["status"] == status)


async def drain_steps(server: ServerThread, workdir: Path, script: Any) -> Any:
    """`drain` for a script already parsed (`load_script`)."""
    executor = ScriptedExecutor(script)
    options = FleetOptions(RunnerOptions("runner", workdir, workdir.parent / "runs"), runners=2)
    return await run_fleet(server.url, lambda _: executor, options)


async def test_a_patch_and_a_write_from_write_through_the_lease_like_a_write(
    make_server: Callable[..., ServerThread], lib_tree: Path, tmp_path: Path
) -> None:
    """A's diff (two files) and its `write_from` each ask the gate first, as a `write` does:
    each path is leased, then changed, and recorded as changed."""
    server = make_server(**FAST)
    (tmp_path / "rename.diff").write_text(
        "--- a/lib.py\n+++ b/lib.py\n@@ -1,2 +1,2 @@\n-def greet():\n+def salute():\n"
        "     return 'hi'\n--- /dev/null\n+++ b/notes.txt\n@@ -0,0 +1 @@\n+renamed\n"
    )
    (tmp_path / "test_lib.py").write_text(TEST_RENAMED)
    (tmp_path / "script.yaml").write_text(
        "A:\n- patch: rename.diff\n- write_from: {path: test_lib.py, from: test_lib.py}\n"
    )
    tasks = [{"id": "A", "title": "rename greet", "description": "rename greet to salute"}]
    async with FleetClient(server.url) as client:
        await client.create_tasks(tasks, {"test": SUITE})
        result = await drain_steps(server, lib_tree, load_script(tmp_path / "script.yaml"))
        events = await client.all_events()

    assert result.ok and suite_passes(lib_tree)
    assert (lib_tree / "lib.py").read_text() == RENAMED
    assert (lib_tree / "notes.txt").read_text() == "renamed\n"
    leased = [e["payload"]["path"].split("::")[0] for e in of_type(events, "lease_acquired")]
    assert set(leased) == {"lib.py", "notes.txt", "test_lib.py"}
    changed = [e["payload"]["path"] for e in of_type(events, "file_changed")]
    assert changed == ["lib.py", "notes.txt", "test_lib.py"]
