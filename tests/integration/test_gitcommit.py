"""The commit builder against the real `git` on the shapes a patch can take.

No server: each "task" is captured the way the engine does it (pre-image at
the first write, `make_patch` against the content at success) and handed to
`write_history`. Every commit must hold exactly its task's state of the files
and the tip must equal the tree.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from git_support import git, make_repository, person_state

from codefleet.review.commit import Refused, write_history
from codefleet.review.git import Repo
from codefleet.review.history import FileChange, TaskChange
from codefleet.rollback import capture, current_state, make_patch


def task(root: Path, task_id: str, paths: list[str], edit: Callable[[], None]) -> TaskChange:
    """Run `edit` on the tree and record it like the engine records a succeeded task."""
    before = [capture(root, p) for p in paths]
    edit()
    files = []
    for image in before:
        patch = make_patch(image, current_state(root, image.path))
        if patch is not None:
            files.append(FileChange(patch.path, patch.diff, patch.binary))
    return TaskChange(task_id, f"Task {task_id}", "", 1, 0.0, 0, None, tuple(files))


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / "a.py").write_text("A = 1\n")
    (root / "gone.txt").write_text("bye\n")
    (root / "run.sh").write_text("echo hi\n")
    (root / "pkg" / "b.py").write_text("B = 2\n")
    (root / "logo.bin").write_bytes(b"\x00\x01old")
    make_repository(root)
    return root


def test_every_shape_of_change_becomes_its_own_commit_and_the_tip_equals_the_tree(
    tree: Path,
) -> None:
    changes = [
        task(tree, "new", ["deep/new/c.py", "empty.txt"], lambda: (
            (tree / "deep" / "new").mkdir(parents=True), (tree / "deep/new/c.py").write_text("C = 3"),
            (tree / "empty.txt").write_text(""))),
        task(tree, "delete", ["gone.txt"], lambda: (tree / "gone.txt").unlink()),
        task(tree, "chmod", ["run.sh"], lambda: os.chmod(tree / "run.sh", 0o755)),
        task(tree, "binary", ["logo.bin"], lambda: (tree / "logo.bin").write_bytes(b"\x00\x02new")),
        task(tree, "again", ["a.py", "deep/new/c.py"], lambda: (
            (tree / "a.py").write_text("A = 2\n"), (tree / "deep/new/c.py").write_text("C = 4\n"))),
    ]  # fmt: skip
    repo = Repo.open(tree)
    before = person_state(tree)

    result = write_history(repo, changes, "review", repo.resolve_commit("HEAD"), None)

    assert person_state(tree) == before
    first, delete, chmod, binary, again = (c.sha for c in result.commits)
    assert git(tree, "show", f"{first}:deep/new/c.py") == "C = 3"  # no newline at the end, kept
    assert git(tree, "show", f"{first}:empty.txt") == ""
    assert "gone.txt" not in git(tree, "ls-tree", "-r", "--name-only", delete)
    assert git(tree, "ls-tree", chmod, "run.sh").startswith("100755 ")
    assert git(tree, "diff-tree", "--no-commit-id", "--name-only", "-r", binary) == "logo.bin\n"
    assert git(tree, "show", f"{again}:deep/new/c.py") == "C = 4\n"
    assert (result.left_out, result.empty) == ((), ())


def test_a_binary_file_two_tasks_changed_is_refused_by_name(tree: Path) -> None:
    changes = [
        task(tree, "one", ["logo.bin"], lambda: (tree / "logo.bin").write_bytes(b"\x00one")),
        task(tree, "two", ["logo.bin"], lambda: (tree / "logo.bin").write_bytes(b"\x00two")),
    ]
    repo = Repo.open(tree)

    with pytest.raises(Refused) as refused:
        write_history(repo, changes, "review", repo.resolve_commit("HEAD"), None)

    assert refused.value.paths == ("logo.bin",)
    assert git(tree, "branch", "--list", "review") == ""


def test_a_tree_inside_a_larger_repository_commits_its_paths_and_lists_only_its_own_leftovers(
    tmp_path: Path,
) -> None:
    top = tmp_path / "mono"
    tree = top / "services" / "api"
    tree.mkdir(parents=True)
    (tree / "a.py").write_text("A = 1\n")
    (top / "other.txt").write_text("other\n")
    make_repository(top)
    (top / "other.txt").write_text("edited elsewhere\n")  # outside the shared tree: not ours
    (tree / "notes.md").write_text("by hand\n")  # inside it, touched by no task: left out
    change = task(tree, "t", ["a.py"], lambda: (tree / "a.py").write_text("A = 2\n"))
    repo = Repo.open(tree)

    result = write_history(repo, [change], "review", repo.resolve_commit("HEAD"), None)

    assert repo.prefix == "services/api/"
    assert git(top, "show", "review:services/api/a.py") == "A = 2\n"
    assert result.left_out == ("notes.md",)
