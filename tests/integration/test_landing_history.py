"""History that bisects: task commits follow the landing order, and each commit passes.

Landing order is the order of the `task_succeeded` events. The real
`codefleet run --dry-run --script --commit` process and the real `codefleet
commit` against a real server and a real git repository; the scripts fix the
order tasks land in (`wait_succeeded`), so it differs from their ids.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from git_support import commit_json, commits_on, make_repository
from history_support import (
    CALLER_STEPS,
    RENAME_STEPS,
    SUITE,
    check_each_commit,
    failing,
    run_scripted,
    write_lib,
)

from codefleet.api.client import FleetClient
from codefleet.server.thread import ServerThread

# The same tests as SUITE without pytest's start-up (a landing check runs at every landing,
# and the caller's first attempt waits for the rename to land within the script's timeout).
RUN_TESTS = """import glob, importlib, sys
sys.path.insert(0, ".")
for name in sorted(glob.glob("test_*.py")):
    module = importlib.import_module(name[:-3])
    for test in [getattr(module, n) for n in dir(module) if n.startswith("test_")]:
        test()
"""
QUICK_SUITE = f'"{sys.executable}" run_tests.py'
# These tests are about the rollback and rework: no repair turn first (test_repair.py has those).
FAST = {
    "heartbeat_interval": 0.1,
    "stale_after": 5.0,
    "tick_interval": 0.05,
    "backoff_base": 0.0,
    "repair_turns": 0,
}


def module(name: str, value: int) -> list[dict[str, Any]]:
    """A task's steps: a module and its passing test, in files no other task touches."""
    test = f"from {name} import VALUE\n\n\ndef test_{name}():\n    assert VALUE == {value}\n"
    return [
        {"write": {"path": f"{name}.py", "content": f"VALUE = {value}\n"}},
        {"write": {"path": f"test_{name}.py", "content": test}},
    ]


async def landing_order(url: str) -> list[str]:
    async with FleetClient(url) as client:
        events = await client.all_events()
    return [e["task_id"] for e in events if e["type"] == "task_succeeded"]


def graph(tmp_path: Path, ids: list[str], verify: str | None) -> Path:
    """A graph file of `ids`, each verifying with the check `test` (the suite) if `verify`."""
    lines = ["checks:", f"  test: '{SUITE}'", "tasks:"] if verify else ["tasks:"]
    for task_id in ids:
        check = ", verify: test" if verify else ""
        lines.append(f"  - {{id: {task_id}, title: Make {task_id}, description: d{check}}}")
    path = tmp_path / "graph.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


async def test_commits_follow_the_landing_order_live_and_after_the_run_not_the_ids(
    make_server: Callable[..., ServerThread], tmp_path: Path
) -> None:
    tree = tmp_path / "repo"
    tree.mkdir()
    write_lib(tree)
    make_repository(tree)
    server = make_server(**FAST, workdir=tree)
    script = {
        "T1": [{"wait_succeeded": "T3"}, *module("one", 1)],
        "T2": [{"wait_succeeded": "T1"}, *module("two", 2)],
        "T3": module("three", 3),
    }

    done = run_scripted(
        server.url, tree, script, "--graph", str(graph(tmp_path, ["T1", "T2", "T3"], None)),
        "--commit", "--branch", "live", runners=3,
    )  # fmt: skip
    after = commit_json(server.url, "--branch", "after")

    assert done.returncode == 0, done.stdout + done.stderr
    order = await landing_order(server.url)
    assert order == ["T3", "T1", "T2"]
    assert [c["trailers"]["CodeFleet-Task"] for c in commits_on(tree, "live")] == order
    assert [c["trailers"]["CodeFleet-Task"] for c in commits_on(tree, "after")] == order
    assert [c["task_id"] for c in after["commits"]] == order


async def test_every_commit_of_a_run_whose_tasks_verify_with_the_suite_passes_the_suite(
    make_server: Callable[..., ServerThread], tmp_path: Path
) -> None:
    tree = tmp_path / "repo"
    tree.mkdir()
    write_lib(tree)
    make_repository(tree)
    server = make_server(**FAST, workdir=tree)
    script = {"T1": module("one", 1), "T2": module("two", 2), "T3": module("three", 3)}
    ids = ["T1", "T2", "T3"]

    done = run_scripted(
        server.url, tree, script, "--graph", str(graph(tmp_path, ids, "test")),
        "--commit", "--branch", "live",
    )  # fmt: skip
    checked = check_each_commit(tree, "live", SUITE, tmp_path / "commits")

    assert done.returncode == 0, done.stdout + done.stderr
    assert [c.task for c in checked] == await landing_order(server.url)
    assert sorted(c.task for c in checked) == ids
    assert failing(checked) == [], [c.output for c in checked if not c.passed]


async def test_the_commit_check_names_the_commit_of_a_pair_that_breaks_the_suite_together(
    make_server: Callable[..., ServerThread], tmp_path: Path
) -> None:
    tree = tmp_path / "repo"
    tree.mkdir()
    write_lib(tree)
    make_repository(tree)
    server = make_server(**FAST, workdir=tree)
    script = {"rename": RENAME_STEPS, "caller": [{"wait_succeeded": "rename"}, *CALLER_STEPS]}

    done = run_scripted(
        server.url, tree, script, "--graph", str(graph(tmp_path, ["rename", "caller"], None)),
        "--commit", "--branch", "live",
    )  # fmt: skip
    checked = check_each_commit(tree, "live", SUITE, tmp_path / "commits")

    assert done.returncode == 0, done.stdout + done.stderr  # no check: the break lands green
    assert [c.task for c in checked] == ["rename", "caller"]
    assert failing(checked) == ["caller"]
    assert "NameError" in checked[1].output or "ImportError" in checked[1].output


async def test_with_an_integration_check_every_commit_of_the_breaking_pair_passes_the_suite(
    make_server: Callable[..., ServerThread], tmp_path: Path
) -> None:
    """The pair above, with `--integration test`: the caller landed second, its landing check
    failed, it was reworked onto `salute`, and every commit of the branch passes the suite."""
    tree = tmp_path / "repo"
    tree.mkdir()
    write_lib(tree)
    (tree / "run_tests.py").write_text(RUN_TESTS)
    make_repository(tree)
    server = make_server(**FAST, workdir=tree)
    adapted = [
        {"write": {"path": p["write"]["path"], "content": p["write"]["content"].replace("greet", "salute")}, "attempt": 2}
        for p in CALLER_STEPS
    ]  # fmt: skip
    first = [{**step, "attempt": 1} for step in CALLER_STEPS]
    script = {
        "rename": RENAME_STEPS,
        "caller": [{"wait_succeeded": "rename", "attempt": 1}, *first, *adapted],
    }
    path = graph(tmp_path, ["rename", "caller"], None)
    path.write_text(f"checks:\n  test: '{QUICK_SUITE}'\n" + path.read_text())  # no ' in it

    done = run_scripted(
        server.url, tree, script, "--graph", str(path), "--integration", "test",
        "--commit", "--branch", "live",
    )  # fmt: skip
    checked = check_each_commit(tree, "live", QUICK_SUITE, tmp_path / "commits")
    async with FleetClient(server.url) as client:
        broke = [
            e["task_id"] for e in await client.all_events() if e["type"] == "integration_failed"
        ]

    assert done.returncode == 0, done.stdout + done.stderr
    assert broke == ["caller"], done.stdout
    assert [c.task for c in checked] == ["rename", "caller"]
    assert failing(checked) == [], [c.output for c in checked if not c.passed]
