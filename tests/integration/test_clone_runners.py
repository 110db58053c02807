"""Runners in their own clones of the landed line: one lock over many clones, no shared disk.

Real runners (each in its own empty directory, which it clones the server's
landed line into over git's smart HTTP), real server and SQLite, the real
`git` binary; only the agents' brains are scripted. The landing worker runs in
the server's tree, as `runner --landing-only` runs it beside a server whose
runners are all in clones.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from git_support import git, make_repository, tree_files

from codefleet.api.client import FleetClient
from codefleet.fleet.clone import Clone, CloneError
from codefleet.fleet.local import FleetOptions, FleetResult, run_fleet
from codefleet.fleet.runner import CannotContinue, Runner, RunnerOptions
from codefleet.fleet.scripted import ScriptedExecutor, parse_script
from codefleet.review.commit import Made
from codefleet.review.history import TaskChange
from codefleet.review.landedline import LandedLine
from codefleet.server.thread import ServerThread

FAST = {"heartbeat_interval": 0.1, "stale_after": 5.0, "tick_interval": 0.05, "backoff_base": 0.0}
LINE_LAG_S = 1.0  # how long after `task_succeeded` a lagging line commits the landing
Wait = Callable[..., Awaitable[Any]]


def repo_tree(tmp_path: Path) -> Path:
    tree = tmp_path / "repo"
    (tree / "pkg").mkdir(parents=True)
    (tree / "a.py").write_text("A = 1\n")
    (tree / "pkg" / "b.py").write_text("B = 2\n")
    make_repository(tree)
    return tree


def tasks(*ids: str, **fields: Any) -> list[dict[str, Any]]:
    return [{"id": i, "title": f"Task {i}", "description": f"do {i}", **fields} for i in ids]


async def drain(
    server: ServerThread,
    tree: Path,
    script: dict[str, Any],
    clones: Path | None,
    *,
    runners: int = 2,
    in_clones: int | None = None,
    token: str | None = None,
) -> tuple[FleetResult, ScriptedExecutor]:
    """The graph drained by `runners` runners in clones under `clones` (None: in the tree)."""
    executor = ScriptedExecutor(parse_script(script))
    options = FleetOptions(
        RunnerOptions("runner", tree, tree.parent / "runs"),
        runners=runners,
        clones=clones,
        in_clones=in_clones,
    )
    result = await run_fleet(server.url, lambda _: executor, options, token=token)
    return result, executor


async def events_of(url: str, kind: str) -> list[dict[str, Any]]:
    async with FleetClient(url) as client:
        return [e for e in await client.all_events() if e["type"] == kind]


async def line_tip(url: str) -> tuple[str, str]:
    async with FleetClient(url) as client:
        state = await client.landed()
    return str(state["base"]), str(state["tip"])


def line_files(clone_dir: Path) -> dict[str, bytes]:
    """The landed line's tip, as a fresh clone checks it out."""
    git(clone_dir, "fetch", "-q", "codefleet")
    git(clone_dir, "checkout", "-q", "--force", "-B", "check", "codefleet/landed")
    git(clone_dir, "clean", "-ffdq")
    return {k: v for k, v in tree_files(clone_dir).items() if not k.startswith(".codefleet/")}


def line_log(clone_dir: Path) -> list[str]:
    out = git(clone_dir, "log", "--reverse", "--format=%(trailers:key=CodeFleet-Task,valueonly)")
    return [line.strip() for line in out.splitlines() if line.strip()]


async def wait_line_has(url: str, clone_dir: Path, n: int, wait_until: Wait) -> None:
    """Until the line holds `n` landed tasks (the follower commits just after each lands)."""

    def enough() -> bool:
        git(clone_dir, "fetch", "-q", "codefleet")
        out = git(clone_dir, "rev-list", "--count", "codefleet/landed")
        base = git(clone_dir, "rev-list", "--count", _base(clone_dir))
        return int(out) - int(base) >= n

    await wait_until(enough, timeout=30)


def _base(clone_dir: Path) -> str:
    out = git(clone_dir, "rev-list", "--max-parents=0", "codefleet/landed").split()
    return out[0]


async def test_a_write_another_clone_holds_is_vetoed_and_runs_again_once_the_holder_landed(
    make_server: Callable[..., ServerThread], tmp_path: Path
) -> None:
    tree = repo_tree(tmp_path)
    server = make_server(**FAST, workdir=tree)
    async with FleetClient(server.url) as client:
        await client.create_tasks(tasks("T1", "T2"))
    script = {
        "T1": [
            {"edit": {"path": "a.py", "old": "A = 1", "new": "A = 10"}},
            {"wait_denied": "a.py"},  # T2, in the other clone, is refused before it writes
        ],
        "T2": [
            {"wait_leased": "a.py", "attempt": 1},
            {"edit": {"path": "a.py", "old": "A = 1", "new": "A = 2"}, "attempt": 1},
            {"edit": {"path": "a.py", "old": "A = 10", "new": "A = 20"}, "attempt": 2},
        ],
    }
    result, _ = await drain(server, tree, script, tmp_path / "clones")
    assert result.ok, result
    denied = await events_of(server.url, "lease_denied")
    assert [(e["task_id"], e["payload"]["path"]) for e in denied] == [("T2", "a.py")]
    assert (tree / "a.py").read_text() == "A = 20\n"  # the server's tree: both, in order
    workdirs = {a["name"]: a for a in await _agents(server.url)}
    assert {a["workspace"] for a in workdirs.values()} == {"clone"}
    assert all(str(tmp_path / "clones") in a["workdir"] for a in workdirs.values())


async def _agents(url: str) -> list[dict[str, Any]]:
    async with FleetClient(url) as client:
        return await client.agents()


async def test_the_next_holder_of_a_file_edits_it_as_its_previous_holder_landed_it(
    make_server: Callable[..., ServerThread], tmp_path: Path
) -> None:
    """T2's clone was reset before T1 landed; its grant names T1's version, so the clone
    takes it from the line before the edit (which only applies to T1's text)."""
    tree = repo_tree(tmp_path)
    server = make_server(**FAST, workdir=tree)
    async with FleetClient(server.url) as client:
        await client.create_tasks(tasks("T1", "T2"))
    script = {
        "T1": [
            {"wait_leased": "pkg/b.py"},
            {"edit": {"path": "a.py", "old": "A = 1", "new": "A = 10"}},
        ],
        "T2": [
            {"write": {"path": "pkg/b.py", "content": "B = 3\n"}},
            {"wait_succeeded": "T1"},
            {"edit": {"path": "a.py", "old": "A = 10", "new": "A = 11"}},
        ],
    }
    result, executor = await drain(server, tree, script, tmp_path / "clones")
    assert result.ok, result
    assert (tree / "a.py").read_text() == "A = 11\n"
    assert ("T2", "a.py") in executor.rereads  # told the file changed, it read it again
    assert not await events_of(server.url, "lease_denied")


async def test_a_read_of_a_file_that_landed_meanwhile_is_stale_even_while_the_line_lags(
    make_server: Callable[..., ServerThread], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T2 reads a.py, T1 changes it and lands, T2 ends at once: the line commits T1 only
    LINE_LAG_S after `task_succeeded` here, and T2's reads are validated once it has (its
    read is stale, and the reconcile turn is told by whom), not against the line before."""
    append = LandedLine.append

    def lagging(line: LandedLine, change: TaskChange) -> Made | None:
        time.sleep(LINE_LAG_S)  # the follower's thread, not the server's loop
        return append(line, change)

    monkeypatch.setattr(LandedLine, "append", lagging)
    tree = repo_tree(tmp_path)
    server = make_server(**FAST, workdir=tree)
    async with FleetClient(server.url) as client:
        await client.create_tasks(tasks("T1", "T2"))
    script = {
        "T1": [
            {"wait_leased": "pkg/b.py"},  # T2 has read a.py
            {"edit": {"path": "a.py", "old": "A = 1", "new": "A = 10"}},
        ],
        "T2": [
            {"read": "a.py"},
            {"write": {"path": "pkg/b.py", "content": "B = 3\n"}},
            {"wait_succeeded": "T1"},
            {"expect_followup": "a.py: changed by T1", "turn": 2},
        ],
    }
    result, _ = await drain(server, tree, script, tmp_path / "clones")
    assert result.ok, result
    stale = await events_of(server.url, "stale_read")
    assert [(e["task_id"], e["payload"]["paths"][0]["path"]) for e in stale] == [("T2", "a.py")]
    assert stale[0]["payload"]["paths"][0]["changed_by"] == ["T1"]


async def test_the_landed_line_is_the_shared_tree_runs_result_for_the_same_graph_and_script(
    make_server: Callable[..., ServerThread], tmp_path: Path, wait_until: Wait
) -> None:
    script = {
        "T1": [{"edit": {"path": "a.py", "old": "A = 1", "new": "A = 10"}}],
        "T2": [{"write": {"path": "pkg/c.py", "content": "C = 3\n"}}],
        "T3": [
            {"wait_succeeded": "T1"},
            {"append": {"path": "a.py", "text": "A2 = A + 1\n"}},
        ],
        "T4": [{"edit": {"path": "pkg/b.py", "old": "B = 2", "new": "B = 4"}}],
    }
    finals = []
    for mode in ("tree", "clones"):
        tree = repo_tree(tmp_path / mode)
        server = make_server(**FAST, workdir=tree, db=tmp_path / f"{mode}.db")
        async with FleetClient(server.url) as client:
            await client.create_tasks(tasks("T1", "T2", "T3", "T4"))
        clones = tmp_path / mode / "clones" if mode == "clones" else None
        result, _ = await drain(server, tree, script, clones, runners=3)
        assert result.ok, result
        reader = Clone(tmp_path / mode / "reader", server.url)
        reader.open((await _health(server.url))["tree_id"])
        await wait_line_has(server.url, reader.root, 4, wait_until)
        finals.append((line_files(reader.root), tree_files_of(tree)))
    (tree_line, tree_tree), (clone_line, clone_tree) = finals
    assert clone_line == tree_line == tree_tree == clone_tree
    assert clone_line["a.py"] == b"A = 10\nA2 = A + 1\n"


def tree_files_of(tree: Path) -> dict[str, bytes]:
    return {
        k: v
        for k, v in tree_files(tree).items()
        if not k.startswith(".codefleet/") and not k.startswith("clones/")
    }


async def _health(url: str) -> dict[str, Any]:
    async with FleetClient(url) as client:
        return await client.health()


async def test_an_integration_break_between_two_clones_tasks_is_blamed_and_reworked(
    make_server: Callable[..., ServerThread], tmp_path: Path
) -> None:
    """T1 renames a function T2 calls, each in its own clone; the landing check (in the
    server's tree) runs both together, blames the one that lands second, which is told
    why and lands on its second attempt."""
    tree = repo_tree(tmp_path)
    (tree / "lib.py").write_text("def old():\n    return 1\n")
    (tree / "use.py").write_text("")
    git(tree, "add", "-A")
    git(tree, "commit", "-qm", "lib")
    server = make_server(**FAST, workdir=tree)
    check = f"{sys.executable} -c 'import use'"
    async with FleetClient(server.url) as client:
        await client.create_tasks(tasks("T1", "T2"), {"imports": check})
        await client.set_integration("imports")
    script = {
        "T1": [{"write": {"path": "lib.py", "content": "def new():\n    return 1\n"}}],
        "T2": [
            {"write": {"path": "use.py", "content": "from lib import old\n"}, "attempt": 1},
            {"wait_succeeded": "T1", "attempt": 1},
            {"expect_error": "Integration failed", "attempt": 2},
            {"write": {"path": "use.py", "content": "from lib import new\n"}, "attempt": 2},
        ],
    }
    result, _ = await drain(server, tree, script, tmp_path / "clones")
    assert result.ok, result
    assert (tree / "use.py").read_text() == "from lib import new\n"
    assert (tree / "lib.py").read_text() == "def new():\n    return 1\n"
    [broke] = await events_of(server.url, "integration_failed")
    assert broke["task_id"] == "T2" and broke["payload"]["conflicts_with"] == ["T1"]
    assert "ImportError" in broke["payload"]["output_tail"]


async def test_a_runner_killed_mid_task_leaves_nothing_on_the_line_and_its_task_runs_again(
    make_server: Callable[..., ServerThread], tmp_path: Path, wait_until: Wait
) -> None:
    tree = repo_tree(tmp_path)
    server = make_server(**FAST, workdir=tree)
    async with FleetClient(server.url) as client:
        await client.create_tasks(tasks("T1"))
    blocked = {"T1": [{"edit": {"path": "a.py", "old": "A = 1", "new": "A = 9"}}, {"sleep": 60}]}
    root = tmp_path / "pod-1"
    options = RunnerOptions("pod-1", root, root / ".codefleet" / "runs", clone=True)
    stop = asyncio.Event()
    async with FleetClient(server.url) as client:
        runner = Runner(client, ScriptedExecutor(parse_script(blocked)), options)
        running = asyncio.create_task(runner.run(stop))

        async def wrote() -> bool:
            return bool(await events_of(server.url, "file_changed"))

        await wait_until(wrote, timeout=30)
        running.cancel()  # the pod dies: no leave, no report
        await asyncio.gather(running, return_exceptions=True)
    shutil.rmtree(root)  # and its clone with it
    assert (tree / "a.py").read_text() == "A = 1\n"  # nothing reached the server's tree
    script = {"T1": [{"edit": {"path": "a.py", "old": "A = 1", "new": "A = 5"}}]}
    server_after = server
    result, _ = await drain(server_after, tree, script, tmp_path / "clones")
    assert result.ok, result
    assert (tree / "a.py").read_text() == "A = 5\n"
    reader = Clone(tmp_path / "reader", server.url)
    reader.open((await _health(server.url))["tree_id"])
    await wait_line_has(server.url, reader.root, 1, wait_until)
    assert line_log(reader.root)[-1] == "T1"
    assert line_files(reader.root)["a.py"] == b"A = 5\n"
    assert git(reader.root, "log", "--format=%s", "-n", "5").count("\n") >= 1


@pytest.mark.parametrize("case", ["not empty", "another tree", "a file"])
async def test_a_clone_directory_that_is_not_ours_is_refused_with_what_to_do(
    make_server: Callable[..., ServerThread], tmp_path: Path, case: str
) -> None:
    tree = repo_tree(tmp_path)
    server = make_server(**FAST, workdir=tree)
    root = tmp_path / "pod"
    if case == "not empty":
        root.mkdir()
        (root / "notes.txt").write_text("mine\n")
    elif case == "another tree":
        Clone(root, server.url).open("tree_" + "0" * 32)
    else:
        root.write_text("a file\n")
    tree_id = (await _health(server.url))["tree_id"]
    with pytest.raises(CloneError) as refused:
        Clone(root, server.url).open(tree_id)
    said = str(refused.value)
    assert "give an absent or empty directory" in said
    assert "\n" not in said
    if case == "not empty":
        assert (root / "notes.txt").read_text() == "mine\n"  # nothing of it touched


async def test_a_server_without_a_landed_line_refuses_a_clone_runner_in_one_line(
    make_server: Callable[..., ServerThread], tmp_path: Path, workdir: Path
) -> None:
    server = make_server(**FAST, workdir=workdir)  # `.git` but no repository: no line
    root = tmp_path / "pod"
    options = RunnerOptions("pod-1", root, root / ".codefleet" / "runs", clone=True)
    async with FleetClient(server.url) as client:
        with pytest.raises(CannotContinue) as refused:
            await Runner(client, ScriptedExecutor({}), options).run()
    assert "no landed line" in str(refused.value)
    assert not (root / ".git").exists()
