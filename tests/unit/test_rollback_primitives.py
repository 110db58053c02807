"""Pre-image capture, restore and patches, on real files in a temp tree."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from codefleet.rollback import (
    TooLarge,
    _missing_dirs,
    capture,
    current_state,
    make_patch,
    restore,
)


def test_restoring_an_absent_file_deletes_it_and_the_directories_the_attempt_made(
    tmp_path: Path,
) -> None:
    (tmp_path / "kept").mkdir()
    image = capture(tmp_path, "kept/new/deeper/file.py")
    (tmp_path / "kept/new/deeper").mkdir(parents=True)
    (tmp_path / "kept/new/deeper/file.py").write_text("x = 1\n")
    assert restore(tmp_path, image) is True
    assert not (tmp_path / "kept/new").exists()
    assert (tmp_path / "kept").is_dir()


def test_a_binary_file_and_its_mode_survive_a_round_trip(tmp_path: Path) -> None:
    blob = bytes(range(256)) * 4
    target = tmp_path / "tool.bin"
    target.write_bytes(blob)
    os.chmod(target, 0o751)
    image = capture(tmp_path, "tool.bin")
    target.write_bytes(b"overwritten")
    os.chmod(target, 0o600)
    restore(tmp_path, image)
    assert target.read_bytes() == blob
    assert stat.S_IMODE(target.stat().st_mode) == 0o751


def test_restore_is_idempotent(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("one\n")
    image = capture(tmp_path, "a.txt")
    (tmp_path / "a.txt").write_text("two\n")
    assert restore(tmp_path, image) is True
    assert restore(tmp_path, image) is False
    assert (tmp_path / "a.txt").read_text() == "one\n"


def test_a_file_over_the_size_cap_is_refused(tmp_path: Path) -> None:
    (tmp_path / "big").write_bytes(b"x" * 2048)
    with pytest.raises(TooLarge, match="2048 bytes"):
        capture(tmp_path, "big", max_bytes=1024)


def test_an_unchanged_file_has_no_patch(tmp_path: Path) -> None:
    (tmp_path / "same.txt").write_text("same\n")
    image = capture(tmp_path, "same.txt")
    assert make_patch(image, current_state(tmp_path, "same.txt")) is None


def test_git_apply_of_the_patches_reproduces_the_change(tmp_path: Path) -> None:
    before, after = tmp_path / "before", tmp_path / "after"
    before.mkdir()
    (before / "edit.txt").write_text("a\nb\nc")  # no trailing newline
    (before / "gone.txt").write_text("bye\n")
    (before / "run.sh").write_text("echo hi\n")
    shutil.copytree(before, after)
    keys = ["edit.txt", "gone.txt", "run.sh", "new/file.txt"]
    images = [capture(after, k) for k in keys]
    (after / "edit.txt").write_text("a\nB\nc\nd\n")
    (after / "gone.txt").unlink()
    os.chmod(after / "run.sh", 0o755)
    (after / "new").mkdir()
    (after / "new/file.txt").write_text("hello\n")
    patches = [make_patch(i, current_state(after, i.path)) for i in images]
    text = "".join(p.diff for p in patches if p)
    subprocess.run(["git", "apply", "-"], cwd=before, input=text, text=True, check=True)
    for key in ("edit.txt", "run.sh", "new/file.txt"):
        assert (before / key).read_bytes() == (after / key).read_bytes()
    assert not (before / "gone.txt").exists()
    assert os.access(before / "run.sh", os.X_OK)


def _missing_dirs_by_pathlib(root: Path, key: str) -> tuple[str, ...]:
    """The capture's former formulation, the reference for the string one."""
    missing: list[str] = []
    parent = Path(key).parent
    while parent != Path(".") and not (root / parent).exists():
        missing.append(parent.as_posix())
        parent = parent.parent
    return tuple(missing)


def test_the_missing_directories_of_a_capture_are_what_pathlib_finds(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "file").write_text("x")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    keys = [
        "top.py",
        "a/x.py",
        "a/b/x.py",
        "a/b/c/x.py",
        "a/b/c/d/e/x.py",
        "n/x.py",
        "n/m/o/x.py",
        "file/x.py",
        "file/d/x.py",
        "loop/x.py",
        "a/loop/x.py",
        "é/ü/x.py",
    ]
    for key in keys:
        assert _missing_dirs(tmp_path, key) == _missing_dirs_by_pathlib(tmp_path, key), key
    assert capture(tmp_path, "n/m/x.py").created_dirs == ("n/m", "n")


ODD_NAMES = [
    "new\nline.txt",
    "tab\there.txt",
    '"quoted.txt',
    "back\\slash.txt",
    "bell\a.txt",
    "sp ace.txt",
    "caf\u00e9.txt",
    "undecodable-\udcff.txt",
]


def test_git_apply_of_patches_for_unusual_names_makes_exactly_those_files(tmp_path: Path) -> None:
    before, after = tmp_path / "before", tmp_path / "after"
    before.mkdir()
    for name in ODD_NAMES[:4]:
        (before / name).write_text("old\n")
    shutil.copytree(before, after)
    images = [capture(after, name) for name in ODD_NAMES]
    for name in ODD_NAMES:
        (after / name).write_text(f"new {name!r}\n")
    patches = [make_patch(i, current_state(after, i.path)) for i in images]
    text = "".join(p.diff for p in patches if p)

    subprocess.run(["git", "apply", "-"], cwd=before, input=text.encode(), check=True)

    assert sorted(os.listdir(before)) == sorted(os.listdir(after))
    for name in ODD_NAMES:
        assert (before / name).read_bytes() == (after / name).read_bytes(), name


def test_a_name_git_would_quote_is_quoted_in_every_header_line(tmp_path: Path) -> None:
    image = capture(tmp_path, 'say "hi"\t.txt')
    (tmp_path / 'say "hi"\t.txt').write_text("hi\n")

    patch = make_patch(image, current_state(tmp_path, 'say "hi"\t.txt'))

    assert patch is not None
    assert patch.diff.splitlines()[:4] == [
        'diff --git "a/say \\"hi\\"\\t.txt" "b/say \\"hi\\"\\t.txt"',
        "new file mode 100644",
        "--- /dev/null",
        '+++ "b/say \\"hi\\"\\t.txt"',
    ]


def test_a_symlink_a_task_created_is_a_symlink_in_its_patch_and_git_apply_makes_one(
    tmp_path: Path,
) -> None:
    before, after = tmp_path / "before", tmp_path / "after"
    (before / "docs").mkdir(parents=True)
    (before / "docs" / "a.md").write_text("A\n")
    (before / "was-file").write_text("a file\n")
    shutil.copytree(before, after)
    keys = ["latest", "dangling", "was-file"]
    images = [capture(after, k) for k in keys]
    (after / "latest").symlink_to("docs/a.md")
    (after / "dangling").symlink_to("nowhere/x")
    (after / "was-file").unlink()
    (after / "was-file").symlink_to("docs")
    patches = [make_patch(i, current_state(after, i.path)) for i in images]

    assert all(p is not None and "120000" in p.diff for p in patches)
    text = "".join(p.diff for p in patches if p)
    subprocess.run(["git", "apply", "-"], cwd=before, input=text, text=True, check=True)
    for key in keys:
        assert (before / key).is_symlink(), key
        assert os.readlink(before / key) == os.readlink(after / key)


def test_a_symlink_pre_image_is_restored_as_a_symlink_not_a_copy_of_its_target(
    tmp_path: Path,
) -> None:
    (tmp_path / "target.txt").write_text("the target\n")
    (tmp_path / "link").symlink_to("target.txt")
    image = capture(tmp_path, "link")
    (tmp_path / "link").unlink()
    (tmp_path / "link").write_text("a task replaced the link with a file\n")

    assert restore(tmp_path, image) is True

    assert (tmp_path / "link").is_symlink() and os.readlink(tmp_path / "link") == "target.txt"
    assert (tmp_path / "target.txt").read_text() == "the target\n"
    assert restore(tmp_path, image) is False  # idempotent


def test_a_file_pre_image_replaces_a_symlink_even_to_the_same_bytes(tmp_path: Path) -> None:
    (tmp_path / "copy.txt").write_text("same\n")
    image = capture(tmp_path, "copy.txt")
    (tmp_path / "other.txt").write_text("same\n")
    (tmp_path / "copy.txt").unlink()
    (tmp_path / "copy.txt").symlink_to("other.txt")

    assert restore(tmp_path, image) is True

    assert not (tmp_path / "copy.txt").is_symlink()
    assert (tmp_path / "copy.txt").read_text() == "same\n"
