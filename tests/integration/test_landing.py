"""Landing: a run that ends green hands back a tree that passes its checks.

Real server, real runners, the real landing worker and SQLite; only the agents'
brains are scripted. Each case is a pair (or triple) of tasks that pass the
suite alone and break it together; the run must end green, with the task that
landed second reworked and told why.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from fleet_support import drain as drain_fleet

from codefleet.api.client import FleetClient
from codefleet.api.graphfile import GraphError, load_graph
from codefleet.api.landingrecords import CheckRun
from codefleet.attempt import AttemptReport
from codefleet.errors import InvalidGraph, NotOwner
from codefleet.fleet.landingworker import LandingOptions
from codefleet.fleet.local import start_landing
from codefleet.fleet.runner import RunnerOptions
from codefleet.models import CheckVerdict
from codefleet.paths import TreeRoot
from codefleet.server.thread import ServerThread

# These tests are about the rollback and rework: no repair turn first (test_repair.py has those).
FAST = {
    "heartbeat_interval": 0.1,
    "stale_after": 5.0,
    "tick_interval": 0.05,
    "backoff_base": 0.0,
    "repair_turns": 0,
}
PY = f'"{sys.executable}"'
drain = partial(drain_fleet, wait_timeout=20)  # each scripted wait here is bounded at 20 s
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
        agents = await client.agents()

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
    # B's first attempt ended well but did not land: its agent is not credited a success
    counted = [(a["tasks_succeeded"], a["tasks_failed"]) for a in agents]
    assert sum(s for s, _ in counted) == 2 and sum(f for _, f in counted) == 1


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


async def start_worker(server: ServerThread, workdir: Path, stop: asyncio.Event) -> Any:
    """A landing worker of its own, for a test that stages the queue first."""
    tree = TreeRoot(workdir)
    runner = RunnerOptions("runner", workdir, workdir.parent / "runs", protected_names=tree.names)
    return start_landing(lambda: FleetClient(server.url), runner, LandingOptions("lw"), stop)


async def queued(client: FleetClient, n: int) -> bool:
    return len((await client.landing())["queue"]) >= n


async def test_a_batch_with_one_breaker_is_bisected_to_it_and_the_rest_land(
    make_server: Callable[..., ServerThread], workdir: Path, wait_until: Any
) -> None:
    """Six tasks wait to land at once; T4 breaks the check. One batch check fails, the
    base alone passes, bisection finds T4: T1-T3 land, T4 is reworked, T5 and T6 land."""
    server = make_server(**FAST, landing_batch=8)
    script: dict[str, Any] = {f"T{n}": [write(f"f{n}.txt", "ok")] for n in range(1, 7)}
    script["T4"] = [write("f4.txt", "BROKEN", attempt=1), write("f4.txt", "ok", attempt=2)]
    ids = [f"T{n}" for n in range(1, 7)]
    tasks = [{"id": t, "title": t, "description": "do it"} for t in ids]
    async with FleetClient(server.url) as client:
        await client.create_tasks(tasks, {"clean": "! grep -l BROKEN f*.txt"})
        await client.set_integration("clean")
        stop = asyncio.Event()
        fleet = asyncio.create_task(drain(server, workdir, script, runners=6, landing_worker=False))
        await wait_until(lambda: queued(client, 6), timeout=20)
        worker = await start_worker(server, workdir, stop)
        result, _ = await fleet
        stop.set()
        await worker
        events = await client.all_events()

    assert result.ok, result.tasks
    steps = [
        (e["payload"]["purpose"], e["payload"]["batch"], e["payload"]["verdict"])
        for e in of_type(events, "landing_check_finished")
    ]
    batch = steps[0][1]  # the queue's order: the order they finished in
    assert sorted(batch) == ids
    assert steps[:2] == [("batch", batch, "failed"), ("base", [], "passed")]
    breaker = batch.index("T4")
    assert [e["task_id"] for e in of_type(events, "integration_failed")] == ["T4"]
    order = [e["task_id"] for e in of_type(events, "landed")]
    assert order[:breaker] == batch[:breaker] and sorted(order) == ids
    bisects = [s for s in steps[2:] if s[0] == "bisect"]
    assert len(bisects) <= 3  # log2(6): the breaker found in a few prefixes


async def test_a_conflict_free_graph_lands_in_far_fewer_checks_than_tasks(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    server = make_server(**FAST, landing_batch=8)
    ids = [f"T{n:02d}" for n in range(1, 21)]
    script = {t: [write(f"{t}.txt", t)] for t in ids}
    slow_check = f'{PY} -c "import time; time.sleep(0.3)"'
    async with FleetClient(server.url) as client:
        await client.create_tasks(
            [{"id": t, "title": t, "description": "do it"} for t in ids], {"slow": slow_check}
        )
        await client.set_integration("slow")
        result, _ = await drain(server, workdir, script)
        events = await client.all_events()

    assert result.ok
    checks = of_type(events, "landing_check_finished")
    assert len(checks) < len(ids) / 2, [e["payload"]["batch"] for e in checks]
    assert sorted(e["task_id"] for e in of_type(events, "landed")) == ids


async def test_a_landed_tree_that_fails_alone_blames_nobody_and_halts_until_resumed(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    """A check that fails without any candidate (flaky, or the tree broken by hand): the
    run stops with landing halted, no task reworked, its work kept; resume lands it."""
    server = make_server(**FAST)
    async with FleetClient(server.url) as client:
        await client.create_tasks(
            [{"id": "T", "title": "t", "description": "do it"}], {"clean": "test ! -e bad.txt"}
        )
        await client.set_integration("clean")
        (workdir / "bad.txt").write_text("broken by hand")
        result, _ = await drain(server, workdir, {"T": [write("t.txt", "work")]})
        events = await client.all_events()
        held = (await client.task("T"))["status"]
        (workdir / "bad.txt").unlink()
        await client.landing_resume()
        again, _ = await drain(server, workdir, {})
        after = await client.all_events()

    assert not result.ok and result.stopped and "landing halted" in result.stopped
    assert held == "landing" and (workdir / "t.txt").read_text() == "work"
    assert of_type(events, "integration_failed") == []
    [halt] = of_type(events, "landing_halted")
    assert halt["payload"]["check"] == "clean"
    assert again.ok and [e["task_id"] for e in of_type(after, "landed")] == ["T"]
    assert of_type(after, "landing_resumed")


async def test_a_verify_that_passed_on_a_base_that_moved_is_run_again_before_landing(
    make_server: Callable[..., ServerThread], lib_tree: Path
) -> None:
    """No integration check: each task verifies with the suite. B's verify passes before A
    lands; A lands; B's verify is run again on the landed base, fails, and B is reworked."""
    server = make_server(**FAST)
    script = {
        "A": [write("lib.py", RENAMED), write("test_lib.py", TEST_RENAMED), {"wait_leased": "caller.py"}],
        "B": [
            {"wait_leased": "lib.py", "attempt": 1},
            write("caller.py", CALLER_OLD, attempt=1),
            write("test_caller.py", TEST_CALLER, attempt=1),
            {"check": "test", "attempt": 1},
            {"expect_check": "pass", "attempt": 1},
            {"wait_succeeded": "A", "attempt": 1},
            write("caller.py", CALLER_NEW, attempt=2),
            write("test_caller.py", TEST_CALLER, attempt=2),
        ],
    }  # fmt: skip
    tasks = [{**t, "verify": "test"} for t in TASKS]
    async with FleetClient(server.url) as client:
        await client.create_tasks(tasks, {"test": SUITE})
        result, _ = await drain(server, lib_tree, script)
        events = await client.all_events()

    assert result.ok and suite_passes(lib_tree)
    kinds = [
        e["payload"]["error_kind"] for e in of_type(events, "task_requeued") if e["task_id"] == "B"
    ]
    assert kinds in (["integration_failed"], ["verify_failed"])  # which saw A first: timing
    assert [e["task_id"] for e in of_type(events, "landed")][-1] == "B"


async def test_cancelling_a_task_that_waits_to_land_rolls_it_back(
    make_server: Callable[..., ServerThread], workdir: Path, wait_until: Any
) -> None:
    server = make_server(**FAST)
    async with FleetClient(server.url) as client:
        await client.create_tasks(
            [{"id": "T", "title": "t", "description": "do it"}], {"ok": "true"}
        )
        await client.set_integration("ok")
        fleet = asyncio.create_task(
            drain(server, workdir, {"T": [write("t.txt", "work")]}, landing_worker=False)
        )
        await wait_until(lambda: queued(client, 1), timeout=20)
        assert (workdir / "t.txt").exists()
        await client.cancel("T")
        result, _ = await fleet
        task = await client.task("T")
        leases = await client.leases()

    assert task["status"] == "cancelled" and not (workdir / "t.txt").exists()
    assert leases == [] and not result.ok


async def test_integration_naming_an_unknown_check_or_given_twice_is_a_load_error(
    tmp_path: Path, make_server: Callable[..., ServerThread]
) -> None:
    graph = tmp_path / "g.yaml"
    graph.write_text(
        "checks: {test: 'true'}\nintegration: tset\ntasks: [{title: a, description: b}]\n"
    )
    with pytest.raises(
        GraphError, match="'tset' is not a check of this graph; the checks are: test"
    ):
        load_graph(graph)
    graph.write_text(
        "checks: {test: 'true', lint: 'true'}\nintegration: test\nintegration: lint\n"
        "tasks: [{title: a, description: b}]\n"
    )
    with pytest.raises(GraphError, match="the key 'integration' is given twice"):
        load_graph(graph)
    server = make_server(**FAST)
    async with FleetClient(server.url) as client:
        with pytest.raises(InvalidGraph, match="the known checks are: test"):
            await client.set_integration("nope") if await client.define_checks(
                {"test": "true"}
            ) else None


async def finish_by_hand(
    client: FleetClient, workdir: Path, task_id: str, path: str, content: str | None = None
) -> None:
    """A runner's whole attempt over the wire: it writes `path` (`content`, else the task's
    id), reports success, leaves."""
    agent = await client.register(f"r-{task_id}", str(workdir), None)
    who, epoch = agent["agent_id"], agent["epoch"]
    assert await client.assignment(who, epoch, wait=5)
    await client.start(task_id, who, epoch)
    assert (await client.acquire(who, epoch, task_id, [path], "Write"))["decision"] == "allow"
    (workdir / path).write_text(task_id if content is None else content)
    await client.complete(task_id, who, epoch, AttemptReport(attempt=1, ok=True))
    await client.leave(who, epoch)  # the runner is gone: its task still waits to land


async def test_a_restart_mid_check_runs_the_check_again_and_lands_the_task_once(
    make_server: Callable[..., ServerThread], workdir: Path, tmp_path: Path
) -> None:
    db = tmp_path / "landing.sqlite"
    first = make_server(**FAST, db=db)
    async with FleetClient(first.url) as client:
        await client.create_tasks(
            [{"id": "T", "title": "t", "description": "do it"}], {"ok": "true"}
        )
        await client.set_integration("ok")
        await finish_by_hand(client, workdir, "T", "t.txt")
        step = await client.landing_claim("w", 30.0)
        assert step is not None and step.batch == ("T",)
        await client.landing_started(step.step, "ok")
    first.stop()  # killed while its check ran
    second = make_server(**FAST, db=db, port=first.settings.port)
    async with FleetClient(second.url) as client:
        assert (await client.task("T"))["status"] == "landing"
        assert (await client.leases())[0]["path"] == "t.txt"  # nobody may change it meanwhile
        with pytest.raises(NotOwner):
            await client.landing_result(step.step, [CheckRun("ok", CheckVerdict.PASSED)])
        again = await client.landing_claim("w", 30.0)
        assert again is not None and again.step != step.step
        await client.landing_result(again.step, [CheckRun("ok", CheckVerdict.PASSED)])
        with pytest.raises(NotOwner):  # a duplicate of the result lands nothing twice
            await client.landing_result(again.step, [CheckRun("ok", CheckVerdict.PASSED)])
        task = await client.task("T")
        events = await client.all_events()
        leases = await client.leases()

    assert task["status"] == "succeeded"
    assert [e["task_id"] for e in of_type(events, "landed")] == ["T"]
    assert leases == [] and (workdir / "t.txt").read_text() == "T"


async def test_a_check_that_times_out_is_a_failed_landing_with_its_reason(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    server = make_server(**FAST, max_attempts=1)
    sleepy = f"{PY} -c \"import os, time; time.sleep(30 if os.path.exists('t.txt') else 0)\""
    async with FleetClient(server.url) as client:
        await client.create_tasks(
            [{"id": "T", "title": "t", "description": "do it"}], {"slow": sleepy}
        )
        await client.set_integration("slow")
        result, _ = await drain(server, workdir, {"T": [write("t.txt", "x")]}, check_timeout=1.0)
        events = await client.all_events()
        task = await client.task("T")

    verdicts = [e["payload"]["verdict"] for e in of_type(events, "landing_check_finished")]
    # the candidate's run, the base alone, the candidate's again (a blame is confirmed)
    assert verdicts == ["timed_out", "passed", "timed_out"]
    assert task["status"] == "failed" and "timed out after 1s" in task["error"]
    assert not (workdir / "t.txt").exists() and not result.ok


async def test_a_landing_check_whose_program_is_missing_halts_landing_and_keeps_the_work(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    server = make_server(**FAST)
    async with FleetClient(server.url) as client:
        await client.create_tasks(
            [{"id": "T", "title": "t", "description": "do it"}],
            {"gone": "no-such-program-codefleet --check"},
        )
        await client.set_integration("gone")
        result, _ = await drain(server, workdir, {"T": [write("t.txt", "x")]})
        events = await client.all_events()

    [halt] = of_type(events, "landing_halted")
    assert halt["payload"]["why"] == "could not start"
    assert of_type(events, "integration_failed") == []
    assert (workdir / "t.txt").read_text() == "x" and "landing halted" in (result.stopped or "")


# More shapes of "each passes alone, together they break": (base files, the task that
# lands first, the later one's first and reworked writes).
AREA = "def area(w, h):\n    return w * h\n"
SQUARE = "def area(size):\n    return size * size\n"
UNIQUE = (
    "import glob\nnames = [open(p).read().strip() for p in sorted(glob.glob('plugins/*.txt'))]\n"
    "assert len(names) == len(set(names)), names\n"
)
SHAPES = {
    "a signature change and a new caller": (
        {"geometry.py": AREA, "test_geometry.py": "from geometry import area\nassert area(2, 3) == 6\n"},
        [write("geometry.py", SQUARE), write("test_geometry.py", "from geometry import area\nassert area(3) == 9\n")],
        [write("test_room.py", "from geometry import area\nassert area(2, 3) == 6\n")],
        [write("test_room.py", "from geometry import area\nassert area(3) == 9\n")],
    ),
    "two plugins registered under one name": (
        {"plugins/base.txt": "base\n", "test_plugins.py": UNIQUE},
        [write("plugins/csv.txt", "csv\n")],
        [write("plugins/comma.txt", "csv\n")],
        [write("plugins/comma.txt", "comma\n")],
    ),
}  # fmt: skip


def seed(tree: Path, files: dict[str, str]) -> None:
    for path, content in files.items():
        (tree / path).parent.mkdir(parents=True, exist_ok=True)
        (tree / path).write_text(content)
    assert suite_passes(tree)


@pytest.mark.parametrize("shape", sorted(SHAPES))
async def test_other_pairs_that_break_together_end_green_with_the_later_one_reworked(
    make_server: Callable[..., ServerThread], workdir: Path, shape: str
) -> None:
    files, first, later, reworked = SHAPES[shape]
    seed(workdir, files)
    script = {
        "A": first,
        "B": [
            {"wait_succeeded": "A", "attempt": 1},
            *({**s, "attempt": 1} for s in later),
            *({**s, "attempt": 2} for s in reworked),
        ],
    }
    server = make_server(**FAST)
    async with FleetClient(server.url) as client:
        await client.create_tasks(TASKS, {"test": SUITE})
        await client.set_integration("test")
        result, _ = await drain(server, workdir, script)
        events = await client.all_events()

    assert result.ok and suite_passes(workdir)
    assert [e["task_id"] for e in of_type(events, "integration_failed")] == ["B"]
    assert [e["task_id"] for e in of_type(events, "landed")] == ["A", "B"]


async def test_a_triple_where_the_third_breaks_with_the_first_reworks_only_the_third(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    seed(workdir, {"plugins/base.txt": "base\n", "test_plugins.py": UNIQUE})
    script = {
        "A": [write("plugins/a.txt", "csv\n")],
        "B": [write("plugins/b.txt", "json\n")],
        "C": [
            {"wait_succeeded": "A", "attempt": 1},
            {"wait_succeeded": "B", "attempt": 1},
            write("plugins/c.txt", "csv\n", attempt=1),
            write("plugins/c.txt", "yaml\n", attempt=2),
        ],
    }
    tasks = [{"id": t, "title": t, "description": "add a plugin"} for t in "ABC"]
    server = make_server(**FAST)
    async with FleetClient(server.url) as client:
        await client.create_tasks(tasks, {"test": SUITE})
        await client.set_integration("test")
        result, _ = await drain(server, workdir, script, runners=3)
        events = await client.all_events()
        c = await client.task("C")

    assert result.ok and suite_passes(workdir)
    [broke] = of_type(events, "integration_failed")
    assert broke["task_id"] == "C" and set(broke["payload"]["conflicts_with"]) == {"A", "B"}
    assert [e["task_id"] for e in of_type(events, "landed")][-1] == "C"
    assert c["attempts"] == 2 and (workdir / "plugins" / "c.txt").read_text() == "yaml\n"
