"""The commit builder against the real `git` on the shapes a patch can take.

No server: each "task" is captured the way the engine does it (pre-image at
the first write, `make_patch` against the content at success) and handed to
`write_history`. Every commit must hold exactly its task's state of the files
and the tip must equal the tree.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from git_support import git, make_repository, person_state

from codefleet.review.commit import mismatched_paths, write_history
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
        task(
            tree,
            "new",
            ["deep/new/c.py", "empty.txt"],
            lambda: (
                (tree / "deep" / "new").mkdir(parents=True),
                (tree / "deep/new/c.py").write_text("C = 3"),
                (tree / "empty.txt").write_text(""),
            ),
        ),
        task(tree, "delete", ["gone.txt"], lambda: (tree / "gone.txt").unlink()),
        task(tree, "chmod", ["run.sh"], lambda: os.chmod(tree / "run.sh", 0o755)),
        task(tree, "binary", ["logo.bin"], lambda: (tree / "logo.bin").write_bytes(b"\x00\x02new")),
        task(
            tree,
            "again",
            ["a.py", "deep/new/c.py"],
            lambda: (
                (tree / "a.py").write_text("A = 2\n"),
                (tree / "deep/new/c.py").write_text("C = 4\n"),
            ),
        ),
    ]
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


def test_a_binary_file_two_tasks_changed_skips_both_by_name_and_the_others_commit(
    tree: Path,
) -> None:
    changes = [
        task(tree, "one", ["logo.bin"], lambda: (tree / "logo.bin").write_bytes(b"\x00one")),
        task(tree, "text", ["a.py"], lambda: (tree / "a.py").write_text("A = 2\n")),
        task(tree, "two", ["logo.bin"], lambda: (tree / "logo.bin").write_bytes(b"\x00two")),
    ]
    repo = Repo.open(tree)

    result = write_history(repo, changes, "review", repo.resolve_commit("HEAD"), None)

    assert [c.task_id for c in result.commits] == ["text"]
    assert [(s.task_id, s.paths) for s in result.skipped] == [
        ("one", ("logo.bin",)),
        ("two", ("logo.bin",)),
    ]
    assert "logo.bin was changed by 2 tasks" in result.skipped[0].reason
    assert (
        git(tree, "ls-tree", "review", "logo.bin").split()[2]
        == git(tree, "rev-parse", "HEAD:logo.bin").strip()
    )


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


def blob_of(tree: Path, commit: str, path: str) -> tuple[str, bytes]:
    """The mode and bytes `commit` stores at `path` (read through `ls-tree -z`: any name)."""
    for line in git(tree, "ls-tree", "-r", "-z", "--full-tree", commit).split("\0"):
        meta, _, name = line.partition("\t")
        if name == path:
            mode, _, sha = meta.split(" ")
            shown = subprocess.run(
                ["git", "cat-file", "blob", sha], cwd=tree, capture_output=True, check=True
            )
            return mode, shown.stdout
    raise AssertionError(f"{path!r} is not in {commit}")


def test_a_binary_file_whose_name_starts_with_a_quote_is_committed_with_its_own_bytes(
    tree: Path,
) -> None:
    (tree / "bin.dat").write_bytes(b"\x00the other file")
    git(tree, "add", "bin.dat")
    git(tree, "commit", "--quiet", "-m", "bin.dat")
    quoted = '"bin.dat"'  # the quotes are part of the name
    change = task(tree, "q", [quoted], lambda: (tree / quoted).write_bytes(b"\x00its own bytes"))
    repo = Repo.open(tree)

    result = write_history(repo, [change], "review", repo.resolve_commit("HEAD"), None)

    assert blob_of(tree, result.tip, quoted) == ("100644", b"\x00its own bytes")


def test_the_tree_check_reads_the_files_bytes_itself_so_a_wrong_blob_is_named(tree: Path) -> None:
    (tree / "bin.dat").write_bytes(b"\x00the other file")
    quoted = '"bin.dat"'
    (tree / quoted).write_bytes(b"\x00its own bytes")
    repo = Repo.open(tree)
    wrong = git(tree, "hash-object", "-w", "bin.dat").strip()  # the bytes of the other file
    index = tree.parent / "crafted-index"
    env = {**os.environ, "GIT_INDEX_FILE": str(index)}
    subprocess.run(["git", "read-tree", "HEAD"], cwd=tree, env=env, check=True)
    subprocess.run(
        ["git", "update-index", "--add", "--cacheinfo", f"100644,{wrong},{quoted}"],
        cwd=tree,
        env=env,
        check=True,
    )
    crafted = subprocess.run(
        ["git", "write-tree"], cwd=tree, env=env, capture_output=True, text=True, check=True
    ).stdout.strip()
    commit = git(tree, "commit-tree", crafted, "-p", "HEAD", "-m", "wrong bytes").strip()

    assert mismatched_paths(repo, commit, [quoted]) == [quoted]


UNUSUAL = [
    "new\nline.txt",
    "tab\there.txt",
    '"quoted.txt',
    "back\\slash.txt",
    "sp ace.txt",
    "caf\u00e9.txt",
    'deep/"dir"/x.txt',
]


@pytest.mark.parametrize("name", UNUSUAL, ids=repr)
def test_a_text_file_with_an_unusual_name_is_created_then_edited_in_two_commits(
    tree: Path, name: str
) -> None:
    def create() -> None:
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).write_text("one\ntwo\n")

    changes = [
        task(tree, "create", [name], create),
        task(
            tree,
            "edit",
            [name, "a.py"],
            lambda: ((tree / name).write_text("one\nTWO\n"), (tree / "a.py").write_text("A = 2\n")),
        ),
    ]
    repo = Repo.open(tree)

    result = write_history(repo, changes, "review", repo.resolve_commit("HEAD"), None)

    created, edited = (c.sha for c in result.commits)
    assert blob_of(tree, created, name) == ("100644", b"one\ntwo\n")
    assert blob_of(tree, edited, name) == ("100644", b"one\nTWO\n")
    assert result.skipped == ()


def test_a_symlink_a_task_created_is_committed_as_a_symlink(tree: Path) -> None:
    link = tree / "latest"
    change = task(tree, "link", ["latest"], lambda: link.symlink_to("a.py"))
    dangling = task(tree, "dangling", ["nowhere"], lambda: (tree / "nowhere").symlink_to("gone/x"))
    repo = Repo.open(tree)

    result = write_history(repo, [change, dangling], "review", repo.resolve_commit("HEAD"), None)

    assert [c.task_id for c in result.commits] == ["link", "dangling"]
    assert blob_of(tree, result.tip, "latest") == ("120000", b"a.py")
    assert blob_of(tree, result.tip, "nowhere") == ("120000", b"gone/x")


def test_an_uncommittable_task_is_skipped_with_its_reason_and_the_others_commit(
    tree: Path,
) -> None:
    def sneaky() -> None:
        (tree / "git~1").mkdir()
        (tree / "git~1" / "config").write_text("[core]\n")
        (tree / "a.py").write_text("A = 2\n")

    changes = [
        task(tree, "first", ["pkg/b.py"], lambda: (tree / "pkg/b.py").write_text("B = 3\n")),
        task(tree, "odd", ["git~1/config", "a.py"], sneaky),
        task(tree, "after", ["a.py"], lambda: (tree / "a.py").write_text("A = 3\n")),
        task(tree, "last", ["run.sh"], lambda: (tree / "run.sh").write_text("echo bye\n")),
    ]
    repo = Repo.open(tree)

    result = write_history(repo, changes, "review", repo.resolve_commit("HEAD"), None)

    assert [c.task_id for c in result.commits] == ["first", "last"]
    skipped = {s.task_id: s.reason for s in result.skipped}
    assert list(skipped) == ["odd", "after"]
    assert "invalid path 'git~1/config'" in skipped["odd"]
    assert "odd" in skipped["after"] and "a.py" in skipped["after"]
    assert git(tree, "show", "review:a.py") == "A = 1\n"
    assert git(tree, "show", "review:run.sh") == "echo bye\n"
