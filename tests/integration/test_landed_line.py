"""The landed line: one commit per landed task on a line the server owns, fetched with plain git.

Real runner with a scripted brain, real server and SQLite, the real `git`
binary (its own `http-backend` on the server's port, and `git clone` / `fetch`
as a runner or a person would run them). A new line's repository is what the
server serves: bare, read-only, on its branch, by the tree's identity; the tree
read while the app is built starts the line only if the log stood still since.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from fleet_support import drain, server_settings
from git_support import codefleet, git, make_repository, person_state, tree_files

from codefleet.api.client import FleetClient
from codefleet.coord.engineview import EngineReads
from codefleet.coord.opening import close_engine
from codefleet.coord.tables.validation import NewTask
from codefleet.readmodel.readapi import Reads
from codefleet.review.landedline import FALLBACK_AUTHOR, LandedLine, line_dir
from codefleet.server.httpapp import build_engine
from codefleet.server.linefollower import LineFollower
from codefleet.server.sse import EventHub
from codefleet.server.thread import ServerThread

FAST = {"heartbeat_interval": 0.1, "stale_after": 5.0, "tick_interval": 0.05, "backoff_base": 0.0}
TOKEN = "line-token-0123456789abcdef"
Wait = Callable[..., Awaitable[Any]]


def repo_tree(tmp_path: Path) -> Path:
    tree = tmp_path / "repo"
    (tree / "pkg").mkdir(parents=True)
    (tree / "a.py").write_text("A = 1\n")
    (tree / "pkg" / "b.py").write_text("B = 2\n")
    make_repository(tree)
    return tree


def tasks(*ids: str) -> list[dict[str, Any]]:
    return [{"id": i, "title": f"Task {i}", "description": f"do {i}"} for i in ids]


def git_run(cwd: Path, *args: str, token: str | None = None) -> subprocess.CompletedProcess[str]:
    """Plain git as a person runs it (the token, when given, as an extra header)."""
    header = ["-c", f"http.extraHeader=Authorization: Bearer {token}"] if token else []
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    return subprocess.run(
        ["git", *header, *args], cwd=cwd, capture_output=True, text=True, env=env, check=False
    )


def clone(server: ServerThread, dest: Path, token: str | None = None) -> Path:
    done = git_run(
        dest.parent, "clone", "-q", f"{server.url}/git/landed.git", dest.name, token=token
    )
    assert done.returncode == 0, done.stderr
    return dest


def line_tasks(clone_dir: Path) -> list[str]:
    out = git(clone_dir, "log", "--reverse", "--format=%(trailers:key=CodeFleet-Task,valueonly)")
    return [line.strip() for line in out.splitlines() if line.strip()]


async def landed_order(url: str, token: str | None = None) -> list[str]:
    async with FleetClient(url, token=token) as client:
        events = await client.all_events()
    return [e["task_id"] for e in events if e["type"] == "task_succeeded"]


async def line_state(url: str, token: str | None = None) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(base_url=url, headers=headers) as http:
        answer = await http.get("/landed")
    answer.raise_for_status()
    return dict(answer.json())


EDIT_A = [{"edit": {"path": "a.py", "old": "A = 1", "new": "A = 10"}}]
EDIT_B = [{"edit": {"path": "pkg/b.py", "old": "B = 2", "new": "B = 20"}}]


async def line_moved(url: str, token: str | None = None) -> bool:
    state = await line_state(url, token)
    return bool(state["started"]) and state["tip"] != state["base"]


def fetched_tasks(clone_dir: Path, token: str | None = None) -> list[str]:
    """Fetch the line again and say which tasks it holds, oldest first."""
    assert git_run(clone_dir, "fetch", "-q", "origin", token=token).returncode == 0
    git(clone_dir, "reset", "-q", "--hard", "origin/landed")
    return line_tasks(clone_dir)


async def test_each_landed_task_is_one_commit_on_the_line_in_landing_order_and_a_clone_is_the_tree(
    make_server: Callable[..., ServerThread], tmp_path: Path, wait_until: Wait
) -> None:
    tree = repo_tree(tmp_path)
    before = person_state(tree)
    server = make_server(**FAST, workdir=tree)
    async with FleetClient(server.url) as client:
        await client.create_tasks(tasks("T1", "T2"))
    assert (await drain(server, tree, {"T1": EDIT_A, "T2": EDIT_B})).result.ok
    order = await landed_order(server.url)
    assert sorted(order) == ["T1", "T2"]

    await wait_until(lambda: line_moved(server.url), timeout=30)
    here = clone(server, tmp_path / "runner-clone")
    await wait_until(lambda: fetched_tasks(here) == order, timeout=30)

    assert tree_files(here) == tree_files(tree)
    assert git(here, "rev-parse", "HEAD~2").strip() == before["head"]  # on top of the tree's HEAD
    after = person_state(tree)
    assert (after["head"], after["branch"], after["index"]) == (  # the person's repo: untouched
        before["head"],
        before["branch"],
        before["index"],
    )
    assert git(tree, "for-each-ref", "--format=%(refname)").split() == ["refs/heads/main"]


async def test_the_line_needs_the_token_and_refuses_a_push(
    make_server: Callable[..., ServerThread], tmp_path: Path, wait_until: Wait
) -> None:
    tree = repo_tree(tmp_path)
    server = make_server(**FAST, workdir=tree, token=TOKEN)
    await wait_until(lambda: _started(server.url, TOKEN), timeout=30)
    url = f"{server.url}/git/landed.git"

    refused = git_run(tmp_path, "clone", "-q", url, "no-token")
    assert refused.returncode != 0 and "could not read Username" in refused.stderr  # a 401
    assert not (tmp_path / "no-token").exists()
    async with httpx.AsyncClient(base_url=server.url) as http:
        answer = await http.get("/git/landed.git/info/refs", params={"service": "git-upload-pack"})
    assert answer.status_code == 401

    here = clone(server, tmp_path / "with-token", token=TOKEN)
    (here / "a.py").write_text("A = 'pushed'\n")
    git(here, "-c", "user.name=x", "-c", "user.email=x@example.invalid", "commit", "-qam", "push")
    pushed = git_run(here, "push", "origin", "HEAD:landed", token=TOKEN)
    assert pushed.returncode != 0 and "403" in pushed.stderr
    state = await line_state(server.url, TOKEN)
    assert state["tip"] == state["base"] == git(tree, "rev-parse", "HEAD").strip()


async def _started(url: str, token: str | None = None) -> bool:
    return bool((await line_state(url, token))["started"])


async def test_a_restarted_server_goes_on_with_the_line_and_commits_no_task_twice(
    make_server: Callable[..., ServerThread], tmp_path: Path, wait_until: Wait
) -> None:
    tree = repo_tree(tmp_path)
    db = tmp_path / "fleet.sqlite"
    first = make_server(**FAST, workdir=tree, db=db)
    async with FleetClient(first.url) as client:
        await client.create_tasks(tasks("T1"))
    assert (await drain(first, tree, {"T1": EDIT_A})).result.ok
    await wait_until(lambda: line_moved(first.url), timeout=30)
    first.stop()

    second = make_server(**FAST, workdir=tree, db=db)
    async with FleetClient(second.url) as client:
        await client.create_tasks(tasks("T2"))
    assert (await drain(second, tree, {"T2": EDIT_B})).result.ok
    here = clone(second, tmp_path / "clone")
    await wait_until(lambda: fetched_tasks(here) == ["T1", "T2"], timeout=30)
    assert tree_files(here) == tree_files(tree)


async def test_a_line_started_on_a_dirty_tree_holds_its_uncommitted_untracked_and_deleted_files(
    make_server: Callable[..., ServerThread], tmp_path: Path, wait_until: Wait
) -> None:
    tree = repo_tree(tmp_path)
    (tree / "a.py").write_text("A = 1\nDRAFT = True\n")  # uncommitted
    (tree / "notes.txt").write_text("untracked\n")
    (tree / "pkg" / "b.py").unlink()  # deleted, not committed
    server = make_server(**FAST, workdir=tree)
    async with FleetClient(server.url) as client:
        await client.create_tasks(tasks("T1"))
    assert (await drain(server, tree, {"T1": EDIT_A})).result.ok
    await wait_until(lambda: line_moved(server.url), timeout=30)

    here = clone(server, tmp_path / "clone")
    assert line_tasks(here) == ["T1"]
    assert (here / "a.py").read_text() == "A = 10\nDRAFT = True\n"
    assert (here / "notes.txt").read_text() == "untracked\n"
    assert not (here / "pkg" / "b.py").exists()
    assert tree_files(here) == tree_files(tree)
    assert git(here, "log", "-1", "--format=%s", "HEAD~1").startswith("CodeFleet: the tree as")


async def test_a_tree_that_is_not_a_git_repository_has_no_line_and_says_why(
    server: ServerThread, tmp_path: Path, wait_until: Wait
) -> None:
    async def said() -> dict[str, Any] | None:
        state = await line_state(server.url)
        return state if state["off"] else None

    state = await wait_until(said)
    assert "not in a git repository" in state["off"] and not state["started"]
    async with httpx.AsyncClient(base_url=server.url) as http:
        answer = await http.get("/git/landed.git/info/refs", params={"service": "git-upload-pack"})
    assert answer.status_code == 503
    assert "not in a git repository" in answer.json()["error"]["message"]


async def test_land_line_moves_the_checked_out_branch_to_the_landed_line_and_the_tree_stays(
    make_server: Callable[..., ServerThread], tmp_path: Path, wait_until: Wait
) -> None:
    tree = repo_tree(tmp_path)
    server = make_server(**FAST, workdir=tree)
    async with FleetClient(server.url) as client:
        await client.create_tasks(tasks("T1", "T2"))
    assert (await drain(server, tree, {"T1": EDIT_A, "T2": EDIT_B})).result.ok
    order = await landed_order(server.url)
    await wait_until(lambda: line_tasks(tree / ".codefleet" / "landed.git") == order, timeout=30)
    files = tree_files(tree)

    landed = codefleet("land", "--line", cwd=tree / "pkg")  # from a subdirectory, too
    again = codefleet("land", "--line", cwd=tree)

    assert landed.returncode == 0, landed.stderr
    assert "landed codefleet/landed on main" in landed.stdout
    assert line_tasks(tree) == order  # main now holds one commit per landed task
    assert git(tree, "status", "--porcelain") == ""  # the tree already had it: nothing to do
    assert tree_files(tree) == files
    assert again.returncode == 0 and "already landed" in again.stdout


def test_land_line_without_a_line_says_so_and_changes_nothing(tmp_path: Path) -> None:
    tree = repo_tree(tmp_path)
    before = person_state(tree)

    refused = codefleet("land", "--line", cwd=tree)

    assert refused.returncode == 1
    assert "no landed line at" in refused.stderr and "landed.git" in refused.stderr
    assert person_state(tree) == before


def test_a_new_line_is_a_read_only_bare_repository_on_its_branch_by_the_trees_identity(
    tmp_path: Path,
) -> None:
    tree = repo_tree(tmp_path)
    git(tree, "config", "--add", "user.name", "Second Name")  # two values: the last wins
    line = LandedLine.open(tree)
    place = line_dir(tree)
    assert (line.tip, line.base, line.cursor) == (None, "", 0)  # nothing started, nothing kept
    assert git(place, "symbolic-ref", "HEAD").strip() == "refs/heads/landed"
    assert git(place, "config", "http.receivepack").strip() == "false"
    assert git(place, "config", "http.uploadpack").strip() == "true"
    name = git(tree, "config", "user.name").strip()
    assert name == "Second Name" and line.author.name == name
    assert line.author.email == git(tree, "config", "user.email").strip()
    again = LandedLine.open(tree)  # opened again: read from the repository
    assert (again.tip, again.base, again.cursor, again.author) == (None, "", 0, line.author)


def test_a_tree_without_a_whole_identity_lines_up_as_codefleet(tmp_path: Path) -> None:
    tree = repo_tree(tmp_path)
    git(tree, "config", "user.email", "")  # the tree's own, last: no email, whatever else says
    assert git(tree, "config", "user.email").strip() == ""
    assert LandedLine.open(tree).author == FALLBACK_AUTHOR


@pytest.mark.parametrize("log_moved", [False, True], ids=["kept", "taken-again"])
async def test_a_snapshot_taken_while_the_app_is_built_starts_the_line_if_the_log_stood_still(
    tmp_path: Path, log_moved: bool
) -> None:
    tree = repo_tree(tmp_path)
    settings = server_settings(tmp_path, tree)
    engine = build_engine(settings, EventHub())
    try:
        follower = LineFollower(Reads(EngineReads(engine), 60.0), EventHub(), tree)
        follower.open_early()
        assert follower._early is not None
        await asyncio.wrap_future(follower._early)  # the snapshot is taken: the tree as it was
        (tree / "a.py").write_text("A = 2\n")  # then the tree changes
        if log_moved:  # and an event says something may have (here: a task, in one commit)
            engine.operator.create_tasks([NewTask("t", id="T1")])
        await follower.open()
        assert follower.line is not None and follower.line.base
        based_on = follower.line.repo.run("show", f"{follower.line.base}:a.py")  # the line's
        assert based_on == ("A = 2\n" if log_moved else "A = 1\n")
    finally:
        close_engine(engine)
