"""`codefleet land`: after `codefleet commit`, the checked-out branch moves to the fleet's tip.

The real `git` binary and the real command line. The first test runs the demo
with the scripted fleet, commits it with `codefleet commit`, shows that
`git merge --ff-only` refuses (the changes are already in the tree) and that
`land` moves main to the tip with the working tree untouched and `git status`
clean. The others build the fleet branch with git plumbing, as `commit`
does (the tree holds the change, the index and HEAD do not), and check what
`land` refuses, naming what differs, and what it keeps.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from fleet_support import drain
from git_support import codefleet, git, make_repository, person_state, tree_files
from test_commit import FAST

from codefleet.api.client import FleetClient
from codefleet.api.graphfile import load_graph, parse_graph
from codefleet.cli.start.demo_run import examples_dir
from codefleet.fleet.scripted import load_script
from codefleet.server.thread import ServerThread


async def test_after_commit_land_moves_main_to_the_fleet_branch_and_git_status_is_clean(
    make_server: Callable[..., ServerThread], tmp_path: Path
) -> None:
    examples = examples_dir()
    tree = tmp_path / "demo"
    shutil.copytree(examples / "demo-repo", tree)
    make_repository(tree)
    server = make_server(**FAST, workdir=tree, db=tmp_path / "fleet.db")
    async with FleetClient(server.url) as client:
        await client.create_tasks(load_graph(examples / "demo-tasks.yaml"))
    assert (
        await drain(server, tree, load_script(examples / "demo-script.yaml"), runners=3)
    ).result.ok
    committed = codefleet("commit", "--server", server.url)
    assert committed.returncode == 0, committed.stderr
    branch = git(tree, "for-each-ref", "--format=%(refname:short)", "refs/heads/codefleet/")
    branch = branch.strip()
    assert f"next: codefleet land {branch}" in committed.stdout
    files = tree_files(tree)
    merge = subprocess.run(
        ["git", "merge", "--ff-only", branch], cwd=tree, capture_output=True, text=True
    )
    assert merge.returncode != 0  # what the issue saw: the changes are already in the tree

    landed = codefleet("land", cwd=tree)

    assert landed.returncode == 0, landed.stderr
    assert f"landed {branch} on main" in landed.stdout
    assert git(tree, "rev-parse", "main") == git(tree, "rev-parse", branch)
    assert git(tree, "symbolic-ref", "HEAD").strip() == "refs/heads/main"
    assert git(tree, "status", "--porcelain", "--untracked-files=all") == ""
    assert tree_files(tree) == files
    again = codefleet("land", branch, cwd=tree)
    assert again.returncode == 0 and "already landed" in again.stdout


def fleet_branch(
    tree: Path, name: str, edits: dict[str, str | None], parent: str = "HEAD", **env: str
) -> str:
    """Write `edits` into the tree (None deletes) and commit them on `name` from `parent`, as
    `codefleet commit` does: a private index, `commit-tree`, `update-ref`. The tip's sha."""
    for path, text in edits.items():
        if text is None:
            (tree / path).unlink()
        else:
            (tree / path).parent.mkdir(parents=True, exist_ok=True)
            (tree / path).write_text(text)
    index = tree.parent / "fleet-index"
    full = {**os.environ, **env, "GIT_INDEX_FILE": str(index)}

    def plumbing(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=tree, env=full, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    plumbing("read-tree", parent)
    plumbing("update-index", "--add", "--remove", "--", *edits)
    tip = plumbing("commit-tree", plumbing("write-tree"), "-p", parent, "-m", f"fleet {name}")
    plumbing("update-ref", f"refs/heads/{name}", tip)
    index.unlink()
    return tip


def small_repository(tmp_path: Path) -> Path:
    tree = tmp_path / "repo"
    (tree / "pkg").mkdir(parents=True)
    (tree / "a.py").write_text("A = 1\n")
    (tree / "pkg" / "b.py").write_text("B = 2\n")
    (tree / "old.txt").write_text("old\n")
    (tree / "notes.md").write_text("notes\n")
    make_repository(tree)
    return tree


def test_land_keeps_the_persons_own_staged_and_unstaged_work_and_takes_adds_and_deletes(
    tmp_path: Path,
) -> None:
    tree = small_repository(tmp_path)
    tip = fleet_branch(
        tree, "codefleet/one", {"a.py": "A = 10\n", "pkg/new.py": "N = 1\n", "old.txt": None}
    )
    (tree / "notes.md").write_text("notes, staged by the person\n")
    git(tree, "add", "notes.md")
    (tree / "pkg" / "b.py").write_text("B = 'the person, unstaged'\n")
    files = tree_files(tree)

    landed = codefleet("land", "codefleet/one", cwd=tree)

    assert landed.returncode == 0, landed.stderr
    assert git(tree, "rev-parse", "HEAD").strip() == tip
    assert tree_files(tree) == files
    status = git(tree, "status", "--porcelain", "--untracked-files=all").splitlines()
    assert sorted(status) == [" M pkg/b.py", "M  notes.md"]


def test_land_refuses_naming_each_file_that_differs_from_the_branch_and_changes_nothing(
    tmp_path: Path,
) -> None:
    tree = small_repository(tmp_path)
    fleet_branch(tree, "codefleet/one", {"a.py": "A = 10\n", "pkg/new.py": "N = 1\n"})
    (tree / "a.py").write_text("A = 11  # edited after the commit\n")
    (tree / "pkg" / "new.py").unlink()
    before, files = person_state(tree), tree_files(tree)

    refused = codefleet("land", cwd=tree)

    assert refused.returncode == 1
    assert "cannot land codefleet/one on main" in refused.stderr
    assert "a.py: the working tree's content differs from the branch's" in refused.stderr
    assert "pkg/new.py: missing from the working tree" in refused.stderr
    assert "shown by: git diff codefleet/one -- ':/a.py' ':/pkg/new.py'" in refused.stderr
    shown = git(tree, "diff", "codefleet/one", "--", ":/a.py", ":/pkg/new.py")
    assert "-A = 10" in shown and "+A = 11" in shown and "pkg/new.py" in shown  # it shows why
    assert person_state(tree) == before and tree_files(tree) == files


def test_land_refuses_when_head_moved_since_the_branch_was_made(tmp_path: Path) -> None:
    tree = small_repository(tmp_path)
    fleet_branch(tree, "codefleet/one", {"a.py": "A = 10\n"})
    git(tree, "commit", "--quiet", "--allow-empty", "-m", "the person moved on")
    before = person_state(tree)

    refused = codefleet("land", "codefleet/one", cwd=tree)

    assert refused.returncode == 1
    assert "HEAD moved" in refused.stderr
    assert person_state(tree) == before


def test_land_refuses_a_file_staged_with_other_content(tmp_path: Path) -> None:
    tree = small_repository(tmp_path)
    fleet_branch(tree, "codefleet/one", {"a.py": "A = 10\n"})
    (tree / "a.py").write_text("A = 'staged'\n")
    git(tree, "add", "a.py")
    (tree / "a.py").write_text("A = 10\n")
    before = person_state(tree)

    refused = codefleet("land", cwd=tree)

    assert refused.returncode == 1
    assert "a.py: staged with content that is neither HEAD's nor the branch's" in refused.stderr
    assert person_state(tree) == before


def test_without_a_branch_land_takes_the_newest_codefleet_branch(tmp_path: Path) -> None:
    tree = small_repository(tmp_path)
    first = fleet_branch(tree, "codefleet/one", {"a.py": "A = 10\n"})
    later = {"GIT_COMMITTER_DATE": "@2000000000 +0000"}  # newer, though its name sorts first
    second = fleet_branch(tree, "codefleet/a-second", {"notes.md": "two\n"}, first, **later)

    landed = codefleet("land", cwd=tree)

    assert landed.returncode == 0, landed.stderr
    assert "landed codefleet/a-second on main" in landed.stdout
    assert git(tree, "rev-parse", "HEAD").strip() == second
    assert git(tree, "status", "--porcelain", "--untracked-files=all") == ""


def test_land_without_any_fleet_branch_says_to_commit_first(tmp_path: Path) -> None:
    tree = small_repository(tmp_path)
    refused = codefleet("land", cwd=tree)
    assert refused.returncode == 1
    assert "run `codefleet commit` first" in refused.stderr


async def test_a_second_commit_after_land_commits_only_the_new_tasks_and_names_the_landed_ones(
    make_server: Callable[..., ServerThread], tmp_path: Path
) -> None:
    tree = small_repository(tmp_path)
    server = make_server(**FAST, workdir=tree, db=tmp_path / "fleet.db")
    first = {
        "tasks": [{"id": "T1", "title": "Touch a", "description": "a", "file_scope": ["a.py"]}]
    }
    later = {"id": "T2", "title": "Touch b", "description": "b", "file_scope": ["pkg/b.py"]}
    async with FleetClient(server.url) as client:
        await client.create_tasks(parse_graph(first))
    assert (
        await drain(server, tree, {"T1": [{"write": {"path": "a.py", "content": "A = 10\n"}}]})
    ).result.ok
    assert codefleet("commit", "--server", server.url, cwd=tree).returncode == 0
    assert codefleet("land", cwd=tree).returncode == 0
    landed = git(tree, "rev-parse", "HEAD").strip()
    async with FleetClient(server.url) as client:
        await client.create_tasks(parse_graph({"tasks": [later]}, standalone=False))
    assert (
        await drain(server, tree, {"T2": [{"write": {"path": "pkg/b.py", "content": "B = 20\n"}}]})
    ).result.ok

    again = codefleet("commit", "--server", server.url, cwd=tree)

    assert again.returncode == 0, again.stdout + again.stderr
    assert "skipped" not in again.stdout
    assert "already in HEAD: T1" in again.stdout
    branch = git(
        tree,
        "for-each-ref",
        "--sort=-committerdate",
        "--format=%(refname:short)",
        "refs/heads/codefleet/",
    ).split()[0]
    assert git(tree, "rev-list", "--count", f"{landed}..{branch}").strip() == "1"
    assert codefleet("land", branch, cwd=tree).returncode == 0
    assert git(tree, "status", "--porcelain") == ""
    third = codefleet("commit", "--server", server.url, cwd=tree)
    assert third.returncode == 0 and "nothing new to commit: T1, T2" in third.stdout
