"""A view's content identity: the same bytes at the same paths, the same digest; any
change, a different one; a masked file counts as its pre-image; no identity where it
cannot be said for certain; and nothing written to the repository to say it."""

from __future__ import annotations

import subprocess
from pathlib import Path

from codefleet.fleet.views.identity import view_identity
from codefleet.rollback import PreImage


def git(tree: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(tree), *args], capture_output=True, text=True, check=True
    )
    return done.stdout


def repository(tmp_path: Path) -> Path:
    tree = tmp_path / "repo"
    (tree / "pkg").mkdir(parents=True)
    (tree / "a.py").write_text("A = 1\n")
    (tree / "pkg" / "b.py").write_text("B = 2\n")
    git(tree, "init", "-q")
    git(tree, "add", "-A")
    git(tree, "-c", "user.name=x", "-c", "user.email=x@example.invalid", "commit", "-qm", "s")
    return tree


def test_the_same_content_has_one_identity_and_a_change_another(tmp_path: Path) -> None:
    tree = repository(tmp_path)
    clean = view_identity(tree, {})
    assert clean is not None and clean == view_identity(tree, {})

    (tree / "a.py").write_text("A = 2\n")
    changed = view_identity(tree, {})
    (tree / "notes.txt").write_text("new\n")  # untracked
    added = view_identity(tree, {})
    (tree / "notes.txt").unlink()
    (tree / "a.py").write_text("A = 1\n")  # back as the index has it
    assert len({clean, changed, added}) == 3
    assert view_identity(tree, {}) == clean

    (tree / ".codefleet").mkdir()
    (tree / ".codefleet" / "state.json").write_text("{}")  # CodeFleet's own: not the view's
    (tree / ".gitignore").write_text("build/\n")
    ignored = view_identity(tree, {})
    (tree / "build").mkdir()
    (tree / "build" / "out.o").write_text("x")  # ignored: left out, as git leaves it out
    assert view_identity(tree, {}) == ignored != clean


def test_a_masked_file_counts_as_its_pre_image(tmp_path: Path) -> None:
    tree = repository(tmp_path)
    clean = view_identity(tree, {})
    (tree / "a.py").write_text("A = 99\n")  # another task's edit, in flight
    masked = {"a.py": PreImage("a.py", True, b"A = 1\n", 0o644)}
    assert view_identity(tree, masked) == view_identity(tree, masked)
    assert view_identity(tree, masked) != view_identity(tree, {})
    gone = {"a.py": PreImage("a.py", False)}  # it did not exist before that task
    assert view_identity(tree, gone) not in (clean, view_identity(tree, masked))


def test_no_identity_where_it_cannot_be_said_for_certain(tmp_path: Path) -> None:
    tree = repository(tmp_path)
    assert view_identity(tree, {}, unrestorable=("pkg/b.py",)) is None  # not isolated
    assert view_identity(tree / "pkg", {}) is None  # not the repository's top level
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "a.py").write_text("A = 1\n")
    assert view_identity(plain, {}) is None  # no repository


def test_saying_it_writes_nothing_to_the_repository(tmp_path: Path) -> None:
    tree = repository(tmp_path)
    (tree / "a.py").write_text("A = 3\n")
    (tree / "new.py").write_text("N = 1\n")
    index = (tree / ".git" / "index").read_bytes()
    objects = git(tree, "count-objects", "-v")
    view_identity(tree, {})
    assert (tree / ".git" / "index").read_bytes() == index
    assert git(tree, "count-objects", "-v") == objects


def test_one_content_has_one_identity_masked_or_not(tmp_path: Path) -> None:
    """A file masked back to what the index holds counts as the index's file, and one
    masked to bytes a changed file has counts as that file: the base alone, checked after
    a batch landed it, is the content that batch passed on."""
    tree = repository(tmp_path)
    clean = view_identity(tree, {})
    (tree / "a.py").write_text("A = 99\n")  # another task's edit, in flight
    assert view_identity(tree, {"a.py": PreImage("a.py", True, b"A = 1\n", 0o644)}) == clean
    changed = view_identity(tree, {})
    (tree / "a.py").write_text("A = 100\n")
    assert view_identity(tree, {"a.py": PreImage("a.py", True, b"A = 99\n", 0o644)}) == changed
    assert view_identity(tree, {"a.py": PreImage("a.py", True, b"A = 99\n", 0o755)}) != changed
