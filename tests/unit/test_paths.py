"""`TreeRoot.canonical`: one lease key per file, and a named refusal for everything else."""

from __future__ import annotations

from pathlib import Path

import pytest

from codefleet.models import DenyReason
from codefleet.paths import MAX_PATH_CHARS, PathRejected, TreeRoot


@pytest.fixture
def tree(workdir: Path) -> TreeRoot:
    (workdir / "runs").mkdir()
    (workdir / "fleet.sqlite").write_text("")
    return TreeRoot(workdir, protected=[workdir / "fleet.sqlite", workdir / "runs"])


@pytest.mark.parametrize(
    "spelling", ["a.py", "./a.py", "x/../a.py", ".//a.py", "pkg/../a.py", "./pkg/.././a.py"]
)
def test_every_relative_spelling_of_one_file_gives_the_same_key(tree: TreeRoot, spelling: str):
    assert tree.canonical(spelling) == "a.py"


def test_doubled_slashes_collapse_to_one_key(tree: TreeRoot):
    assert tree.canonical("pkg//b.py") == "pkg/b.py"
    assert tree.canonical("pkg/b.py") == "pkg/b.py"


def test_the_absolute_path_inside_the_tree_gives_the_relative_key(tree: TreeRoot, workdir: Path):
    assert tree.canonical(str(workdir / "pkg" / "b.py")) == "pkg/b.py"


def test_a_file_that_does_not_exist_yet_still_has_a_key(tree: TreeRoot):
    assert tree.canonical("new/dir/c.py") == "new/dir/c.py"


def test_the_root_is_resolved_so_a_symlinked_root_gives_the_same_keys(
    tmp_path: Path, workdir: Path
):
    alias = tmp_path / "alias"
    alias.symlink_to(workdir)
    via_alias = TreeRoot(alias)

    assert via_alias.canonical(str(workdir / "a.py")) == "a.py"
    assert via_alias.canonical(str(alias / "a.py")) == "a.py"


def test_a_symlink_inside_the_tree_resolves_to_its_target_key(tree: TreeRoot, workdir: Path):
    (workdir / "link.py").symlink_to(workdir / "a.py")

    assert tree.canonical("link.py") == "a.py"


def reason_for(tree: TreeRoot, raw: str) -> DenyReason:
    with pytest.raises(PathRejected) as caught:
        tree.canonical(raw)
    return caught.value.reason


@pytest.mark.parametrize("raw", ["../outside.py", "pkg/../../outside.py", "/etc/passwd", "/"])
def test_paths_resolving_outside_the_tree_are_refused(tree: TreeRoot, raw: str):
    assert reason_for(tree, raw) is DenyReason.OUTSIDE_WORKDIR


def test_a_sibling_directory_sharing_the_trees_name_prefix_is_outside(
    tree: TreeRoot, workdir: Path
):
    sibling = workdir.parent / (workdir.name + "-evil")
    sibling.mkdir()

    assert reason_for(tree, str(sibling / "x.py")) is DenyReason.OUTSIDE_WORKDIR


def test_a_symlink_escaping_the_tree_is_refused(tree: TreeRoot, workdir: Path, tmp_path: Path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (workdir / "escape").symlink_to(outside)
    (workdir / "escape.py").symlink_to(outside / "target.py")

    assert reason_for(tree, "escape/x.py") is DenyReason.OUTSIDE_WORKDIR
    assert reason_for(tree, "escape.py") is DenyReason.OUTSIDE_WORKDIR


def test_a_symlink_into_git_is_refused(tree: TreeRoot, workdir: Path):
    (workdir / "innocent").symlink_to(workdir / ".git")

    assert reason_for(tree, "innocent/config") is DenyReason.PROTECTED_PATH


@pytest.mark.parametrize("raw", [".git/config", ".git/hooks/pre-commit", "pkg/../.git/HEAD"])
def test_anything_under_git_is_protected(tree: TreeRoot, raw: str):
    assert reason_for(tree, raw) is DenyReason.PROTECTED_PATH


def test_a_file_merely_named_like_git_is_not_protected(tree: TreeRoot):
    assert tree.canonical(".gitignore") == ".gitignore"
    assert tree.canonical("pkg/.git-notes") == "pkg/.git-notes"


@pytest.mark.parametrize("raw", ["fleet.sqlite", "./fleet.sqlite", "runs/r1.log", "runs"])
def test_the_database_and_the_run_directory_are_protected(tree: TreeRoot, raw: str):
    assert reason_for(tree, raw) is DenyReason.PROTECTED_PATH


@pytest.mark.parametrize("raw", ["", "   ", "a\x00.py", "a" * (MAX_PATH_CHARS + 1)])
def test_unusable_spellings_are_invalid(tree: TreeRoot, raw: str):
    assert reason_for(tree, raw) is DenyReason.INVALID_PATH


@pytest.mark.parametrize("raw", ["pkg", "pkg/", ".", "./pkg/.."])
def test_a_directory_or_the_tree_itself_is_invalid(tree: TreeRoot, raw: str):
    assert reason_for(tree, raw) is DenyReason.INVALID_PATH


def test_a_refusal_carries_the_raw_spelling_and_a_message(tree: TreeRoot):
    with pytest.raises(PathRejected) as caught:
        tree.canonical("../x.py")

    assert caught.value.raw == "../x.py"
    assert "outside" in caught.value.message


def test_a_non_string_is_invalid(tree: TreeRoot):
    assert reason_for(tree, None) is DenyReason.INVALID_PATH  # type: ignore[arg-type]


def test_a_very_long_path_is_refused_without_echoing_it_whole(tree: TreeRoot):
    raw = "d/" * (MAX_PATH_CHARS // 2 + 10)
    with pytest.raises(PathRejected) as caught:
        tree.canonical(raw)

    assert caught.value.reason is DenyReason.INVALID_PATH
    assert len(caught.value.raw) <= 200
    assert len(caught.value.message) < 1000
