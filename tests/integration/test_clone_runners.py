"""Runners in their own clones of the landed line: one lock over many clones, no shared disk.

Real runners (each in its own empty directory, which it clones the server's
landed line into over git's smart HTTP), real server and SQLite, the real
`git` binary; only the agents' brains are scripted. The landing worker runs in
the server's tree, as `runner --landing-only` runs it beside a server whose
runners are all in clones.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from fleet_support import drain, events_of
from git_support import codefleet, git, make_repository, tree_files

from codefleet.api.client import FleetClient
from codefleet.fleet.clone import Clone, CloneError
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


async def served(
    make_server: Callable[..., ServerThread], tmp_path: Path, *ids: str
) -> tuple[Path, ServerThread]:
    """The repository's tree, its server, and tasks `ids` loaded on it."""
    tree = repo_tree(tmp_path)
    server = make_server(**FAST, workdir=tree)
    async with FleetClient(server.url) as client:
        await client.create_tasks(tasks(*ids))
    return tree, server


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
    tree, server = await served(make_server, tmp_path, "T1", "T2")
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
    result, _ = await drain(server, tree, script, clones=tmp_path / "clones")
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
    tree, server = await served(make_server, tmp_path, "T1", "T2")
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
    result, executor = await drain(server, tree, script, clones=tmp_path / "clones")
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
    tree, server = await served(make_server, tmp_path, "T1", "T2")
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
    result, _ = await drain(server, tree, script, clones=tmp_path / "clones")
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
        result, _ = await drain(server, tree, script, clones=clones, runners=3)
        assert result.ok, result
        reader = await line_reader(server, tmp_path / mode / "reader")
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


async def line_reader(server: ServerThread, root: Path) -> Clone:
    """A clone of the server's line in `root`, as a person would read it."""
    reader = Clone(root, server.url)
    reader.open((await _health(server.url))["tree_id"])
    return reader


async def _health(url: str) -> dict[str, Any]:
    async with FleetClient(url) as client:
        return await client.health()


async def test_an_integration_break_between_two_clones_tasks_is_blamed_and_reworked(
    make_server: Callable[..., ServerThread], tmp_path: Path
) -> None:
    """T1 renames a function T2 calls, each in its own clone; the landing check (in the
    server's tree) runs both together, blames the one that lands second, which is told
    why and lands on its second attempt. Not repaired first: a clone's change is out of its
    session's reach once delivered (decision 0161), so repair turns on or not, it is reworked."""
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
    result, _ = await drain(server, tree, script, clones=tmp_path / "clones")
    assert result.ok, result
    assert (tree / "use.py").read_text() == "from lib import new\n"
    assert (tree / "lib.py").read_text() == "def new():\n    return 1\n"
    [broke] = await events_of(server.url, "integration_failed")
    assert broke["task_id"] == "T2" and broke["payload"]["conflicts_with"] == ["T1"]
    assert "ImportError" in broke["payload"]["output_tail"]
    assert await events_of(server.url, "repair_started") == []


async def test_a_runner_killed_mid_task_leaves_nothing_on_the_line_and_its_task_runs_again(
    make_server: Callable[..., ServerThread], tmp_path: Path, wait_until: Wait
) -> None:
    tree, server = await served(make_server, tmp_path, "T1")
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
    result, _ = await drain(server_after, tree, script, clones=tmp_path / "clones")
    assert result.ok, result
    assert (tree / "a.py").read_text() == "A = 5\n"
    reader = await line_reader(server, tmp_path / "reader")
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


async def test_a_mixed_fleet_shares_one_lock_and_one_line_and_runners_says_who_works_where(
    make_server: Callable[..., ServerThread], tmp_path: Path, wait_until: Wait
) -> None:
    """One runner in a clone and one in the tree, at once: whatever runs where, the two
    tasks of each pair run on different kinds, and the second is vetoed on the file the
    first holds; all four land on one line, and `codefleet runners` shows each runner's
    workspace and the clone's landed head."""
    tree = repo_tree(tmp_path)
    server = make_server(**FAST, workdir=tree)
    async with FleetClient(server.url) as client:
        await client.create_tasks(tasks("T1", "T2") + tasks("T3", "T4", depends_on=["T1", "T2"]))

    def pair(path: str, old: str, new: str, more: str) -> tuple[list[Any], list[Any]]:
        holder = [{"edit": {"path": path, "old": old, "new": new}}, {"wait_denied": path}]
        second = [
            {"wait_leased": path, "attempt": 1},
            {"append": {"path": path, "text": more}},
        ]
        return holder, second

    t1, t2 = pair("a.py", "A = 1", "A = 10", "A2 = 2\n")
    t3, t4 = pair("pkg/b.py", "B = 2", "B = 20", "B4 = 4\n")
    script = {"T1": t1, "T2": t2, "T3": t3, "T4": t4}
    result, _ = await drain(
        server, tree, script, clones=tmp_path / "clones", runners=2, in_clones=1
    )
    assert result.ok, result
    agents = {a["name"]: a for a in await _agents(server.url)}
    kind = {a["id"]: a["workspace"] for a in agents.values()}
    assert sorted(kind.values()) == ["clone", "tree"]
    denied = await events_of(server.url, "lease_denied")
    assert [(e["task_id"], e["payload"]["path"]) for e in denied] == [
        ("T2", "a.py"),
        ("T4", "pkg/b.py"),
    ]
    for e in denied:  # the requester and the holder work in different places
        assert kind[e["agent_id"]] != kind[e["payload"]["holder_agent_id"]]
    assert (tree / "a.py").read_text() == "A = 10\nA2 = 2\n"
    assert (tree / "pkg" / "b.py").read_text() == "B = 20\nB4 = 4\n"
    reader = await line_reader(server, tmp_path / "reader")
    await wait_line_has(server.url, reader.root, 4, wait_until)
    assert sorted(line_log(reader.root)) == ["T1", "T2", "T3", "T4"]
    assert line_files(reader.root) == tree_files_of(tree)
    in_clone = agents["runner-1"]
    assert in_clone["workspace"] == "clone" and agents["runner-2"]["head"] is None
    assert git(reader.root, "cat-file", "-t", str(in_clone["head"])).strip() == "commit"

    shown = codefleet("runners", "--all", "--server", server.url)
    assert shown.returncode == 0, shown.stderr
    lines = {
        line.split()[0]: line for line in shown.stdout.splitlines() if line.startswith("runner-")
    }
    assert "clone " + str(tmp_path / "clones" / "runner-1") in lines["runner-1"]
    assert str(in_clone["head"])[:12] in lines["runner-1"]
    assert "tree " + str(tree) in lines["runner-2"]


@pytest.mark.parametrize("case", ["a wrong token", "a directory not its own"])
async def test_runner_clone_refuses_bad_input_in_one_line_and_clones_nothing(
    make_server: Callable[..., ServerThread], tmp_path: Path, case: str
) -> None:
    tree = repo_tree(tmp_path)
    server = make_server(**FAST, workdir=tree, token="right-token-0123456789")
    root = tmp_path / "pod"
    token = "wrong-token-0123456789" if case == "a wrong token" else "right-token-0123456789"
    if case == "a directory not its own":
        root.mkdir()
        (root / "notes.txt").write_text("mine\n")
    script = tmp_path / "script.yaml"
    script.write_text("{}\n")
    done = codefleet(
        "runner", "--name", "pod-1", "--server", server.url, "--token", token,
        "--clone", str(root), "--dry-run", "--script", str(script), "--exit-when-drained",
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    said = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(said) == 1, done.stderr
    if case == "a wrong token":
        assert "refused" in said[0] and "--token" in said[0]
    else:
        assert "give an absent or empty directory" in said[0]
        assert (root / "notes.txt").read_text() == "mine\n"
    assert not (root / ".git").exists()


async def test_a_fetch_that_fails_mid_way_refuses_the_write_and_puts_nothing_on_the_line(
    make_server: Callable[..., ServerThread], tmp_path: Path
) -> None:
    """A clone behind on a granted file whose fetch fails (the server went away mid-way):
    the write is denied with the reason, not vetoed, and the file is left as it was."""
    tree = repo_tree(tmp_path)
    server = make_server(**FAST, workdir=tree)
    clone = Clone(tmp_path / "pod", server.url, level_wait_s=0.5)
    clone.open((await _health(server.url))["tree_id"])
    clone.url = "http://127.0.0.1:9"  # nothing listens: every fetch fails
    with pytest.raises(CloneError) as failed:
        clone.level("a.py", "0" * 64)
    assert "cannot fetch the landed line" in str(failed.value)
    assert "\n" not in str(failed.value)
    assert (clone.root / "a.py").read_text() == "A = 1\n"

    from codefleet.fleet.clone import AsyncClone
    from codefleet.fleet.gate.prewrite import WriteGate
    from codefleet.paths import TreeRoot

    class Granting:  # the server's answer to the lease request: granted, at a newer version
        async def acquire(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
            return {"decision": "allow", "granted": ["a.py"], "versions": {"a.py": "0" * 64}}

    gate = WriteGate(
        Granting(),  # type: ignore[arg-type]
        TreeRoot(clone.root),
        "agent",
        1,
        "T1",
        clone=AsyncClone(clone),
    )
    verdict = await gate.check("Edit", {"file_path": str(clone.root / "a.py")})
    assert not verdict.allowed and verdict.blocked_on is None  # refused, not a veto
    assert "could not fetch the landed version" in verdict.reason
    async with FleetClient(server.url) as client:
        state = await client.landed()
    assert state["tip"] == state["base"]  # nothing reached the line


async def test_a_read_the_line_changed_while_the_clone_worked_is_stale_and_reconciled(
    make_server: Callable[..., ServerThread], tmp_path: Path
) -> None:
    """T1 reads api.py in its clone, then T2 (in another clone) changes it and lands. The
    clone takes what landed before the reads are validated: T1's read is stale, naming
    T2, and its reconcile turn sees T2's text in its own clone."""
    tree = repo_tree(tmp_path)
    (tree / "api.py").write_text("def f(a):\n    return a\n")
    git(tree, "add", "-A")
    git(tree, "commit", "-qm", "api")
    server = make_server(**FAST, workdir=tree)
    async with FleetClient(server.url) as client:
        await client.create_tasks(tasks("T1", "T2"))
    script = {
        "T1": [
            {"read": "api.py", "attempt": 1},
            {"write": {"path": "use.py", "content": "f(1)\n"}, "attempt": 1},
            {"wait_succeeded": "T2", "attempt": 1},
            {"expect_followup": "api.py: changed by T2", "turn": 2},
            {"edit": {"path": "use.py", "old": "f(1)", "new": "f(1, 2)"}, "turn": 2},
        ],
        "T2": [
            {"wait_leased": "use.py"},
            {"edit": {"path": "api.py", "old": "def f(a):", "new": "def f(a, b):"}},
        ],
    }
    result, executor = await drain(server, tree, script, clones=tmp_path / "clones")
    assert result.ok, result
    stale = await events_of(server.url, "stale_read")
    assert [(e["task_id"], e["payload"]["paths"][0]["changed_by"]) for e in stale] == [
        ("T1", ["T2"])
    ]
    assert [e["payload"]["outcome"] for e in await events_of(server.url, "reconciled")] == ["clean"]
    assert (tree / "use.py").read_text() == "f(1, 2)\n"
    [(_, _, message)] = [f for f in executor.followups if f[0] == "T1"]
    assert "def f(a, b):" in message  # the clone had taken T2's landed change


async def test_a_command_in_a_clone_applies_under_the_leases_and_its_files_are_delivered(
    make_server: Callable[..., ServerThread], tmp_path: Path
) -> None:
    """`run_command` in a clone: its layer is over the clone, its changes reach the clone
    through the leases, and the success delivers them to the server's tree."""
    from codefleet.fleet.tools.commandtool import host_shell
    from codefleet.fleet.views.layerapply import ShellLimits

    shell = host_shell(ShellLimits(), unsandboxed=True)
    assert shell is not None, "this host cannot build a command layer (user namespaces?)"
    tree, server = await served(make_server, tmp_path, "T1")
    script = {"T1": [{"command": "echo 'A = 2' > a.py && mkdir -p gen && echo made > gen/out.txt"}]}
    result, _ = await drain(
        server,
        tree,
        script,
        clones=tmp_path / "clones",
        runners=1,
        shell_default=True,
        shell_config=shell,
    )
    assert result.ok, result
    assert (tree / "a.py").read_text() == "A = 2\n"
    assert (tree / "gen" / "out.txt").read_text() == "made\n"
    acquired = await events_of(server.url, "lease_acquired")
    assert sorted(e["payload"]["path"] for e in acquired) == ["a.py", "gen/out.txt"]
    assert {e["payload"]["tool"] for e in acquired} == {"run_command"}


async def test_a_delivery_writes_only_files_held_whole_and_nothing_a_pod_should_not_set(
    make_server: Callable[..., ServerThread], tmp_path: Path
) -> None:
    """The server's side of a delivery, over the wire: a file the attempt does not hold is
    refused (nothing written), a set-id bit never reaches the server's host, and a symbolic
    link out of the tree is refused."""
    import base64
    import os
    import stat

    from codefleet.errors import InvalidState

    tree = repo_tree(tmp_path)
    server = make_server(**FAST, workdir=tree)
    b64 = lambda data: base64.b64encode(data).decode()  # noqa: E731

    async with FleetClient(server.url) as client:
        health = await client.health()
        me = await client.register(
            "pod-1", "/work/clone", os.getpid(), tree_id=health["tree_id"], workspace="clone"
        )
        agent, epoch = me["agent_id"], me["epoch"]
        await client.create_tasks(tasks("T1"))
        task = await client.assignment(agent, epoch, wait=5.0)
        assert task is not None
        await client.start("T1", agent, epoch)
        granted = await client.acquire(agent, epoch, "T1", ["a.py", "link.py"], "Write")
        assert granted["decision"] == "allow"
        assert set(granted["versions"]) == {"a.py", "link.py"}  # a clone's grant names them
        assert granted["versions"]["link.py"] is None  # absent in the server's tree

        with pytest.raises(InvalidState) as not_held:
            await client.deliver("T1", agent, epoch, 1, [
                {"path": "a.py", "existed": True, "content": b64(b"A = 2\n"), "mode": 0o644},
                {"path": "pkg/b.py", "existed": True, "content": b64(b"B = 9\n"), "mode": 0o644},
            ])  # fmt: skip
        assert "pkg/b.py" in not_held.value.message and "no lease" in not_held.value.message
        assert (tree / "a.py").read_text() == "A = 1\n"  # all or nothing

        with pytest.raises(InvalidState) as outward:
            await client.deliver("T1", agent, epoch, 1, [
                {"path": "link.py", "existed": True, "content": b64(b"../../etc/passwd"),
                 "mode": stat.S_IFLNK | 0o777},
            ])  # fmt: skip
        assert "out of the tree" in outward.value.message
        assert not (tree / "link.py").is_symlink()

        answer = await client.deliver("T1", agent, epoch, 1, [
            {"path": "a.py", "existed": True, "content": b64(b"A = 2\n"), "mode": 0o4755},
        ])  # fmt: skip
        assert answer["written"] == ["a.py"]
    assert (tree / "a.py").read_text() == "A = 2\n"
    assert stat.S_IMODE((tree / "a.py").stat().st_mode) == 0o755  # no set-uid bit


async def test_a_line_pushed_to_the_operators_remote_is_where_clones_fetch_it(
    make_server: Callable[..., ServerThread], tmp_path: Path, wait_until: Wait
) -> None:
    """`serve --line-remote`: the server pushes its line to a remote the operator names as
    it moves, and runners started with `--line` clone and fetch it there."""
    tree = repo_tree(tmp_path)
    remote = tmp_path / "mirror.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    server = make_server(**FAST, workdir=tree, line_remote=str(remote))
    async with FleetClient(server.url) as client:
        await client.create_tasks(tasks("T1", "T2"))
    script = {
        "T1": [{"edit": {"path": "a.py", "old": "A = 1", "new": "A = 10"}}],
        "T2": [
            {"wait_succeeded": "T1"},
            {"edit": {"path": "a.py", "old": "A = 10", "new": "A = 11"}},
        ],
    }
    result, _ = await drain(server, tree, script, clones=tmp_path / "clones", line=str(remote))
    assert result.ok, result

    async def pushed_both() -> bool:
        async with FleetClient(server.url) as client:
            state = await client.landed()
        return bool(state["pushed"] == state["tip"] != state["base"]) and state["current"]

    await wait_until(pushed_both, timeout=30)
    log = git(remote, "log", "--format=%(trailers:key=CodeFleet-Task,valueonly)", "landed")
    assert [line for line in log.split() if line] == ["T2", "T1"]
    assert git(remote, "show", "landed:a.py") == "A = 11\n"
    for name in ("runner-1", "runner-2"):  # each clone fetched from the mirror, not the server
        assert git(tmp_path / "clones" / name, "remote", "get-url", "codefleet").strip() == str(
            remote
        )


async def test_a_push_the_remote_refuses_is_said_and_its_credentials_never_shown(
    make_server: Callable[..., ServerThread], tmp_path: Path, wait_until: Wait
) -> None:
    tree = repo_tree(tmp_path)
    nowhere = "http://someone:s3cret@127.0.0.1:9/mirror.git"  # nothing listens on port 9
    server = make_server(**FAST, workdir=tree, line_remote=nowhere)
    async with FleetClient(server.url) as client:
        await client.create_tasks(tasks("T1"))
    script = {"T1": [{"edit": {"path": "a.py", "old": "A = 1", "new": "A = 10"}}]}
    result, _ = await drain(server, tree, script, clones=None, runners=1)
    assert result.ok, result

    async def refused() -> dict[str, Any] | None:
        async with FleetClient(server.url) as client:
            state = await client.landed()
        return state if state["push_problem"] else None

    state = await wait_until(refused, timeout=30)
    assert state["remote"] == "http://127.0.0.1:9/mirror.git"
    assert state["pushed"] is None
    assert "s3cret" not in json.dumps(state)


async def test_a_first_fetch_the_server_cut_short_leaves_a_clone_the_next_start_reuses(
    make_server: Callable[..., ServerThread], tmp_path: Path
) -> None:
    """Found by the chaos run: a runner whose first fetch failed as the server died exited
    for good (and a half-made `.git` made every restart refuse the directory). A fetch that
    fails is a `CloneError` to retry, never a refusal; the repository is made aside and
    moved into place whole, so a restart reuses it."""
    from codefleet.fleet.clone import CloneRefused, dir_problem

    tree = repo_tree(tmp_path)
    server = make_server(**FAST, workdir=tree)
    tree_id = (await _health(server.url))["tree_id"]
    root = tmp_path / "pod"
    (root / ".codefleet" / "clone-new-999" / ".git").mkdir(parents=True)  # a killed start's

    with pytest.raises(CloneError) as cut:
        Clone(root, "http://127.0.0.1:9").open(tree_id)  # the server is away
    assert not isinstance(cut.value, CloneRefused)
    assert (root / ".git").is_dir() and dir_problem(root, tree_id) is None

    tip = Clone(root, server.url).open(tree_id)  # the next start: the same directory, reused
    assert (root / "a.py").read_text() == "A = 1\n"
    assert git(root, "rev-parse", "HEAD").strip() == tip
