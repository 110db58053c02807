"""The isolated view and the check command, on real files and real processes (no server)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from codefleet.fleet.views.copyview import copy_tree, overlay, settle
from codefleet.fleet.views.shell import check_env, run_command
from codefleet.rollback import PreImage, capture


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    (root / "pkg" / "__pycache__").mkdir(parents=True)
    (root / "node_modules" / "dep").mkdir(parents=True)
    (root / ".venv" / "bin").mkdir(parents=True)
    (root / "a.py").write_text("A = 1\n")
    (root / "pkg" / "b.py").write_text("B = 2\n")
    (root / "pkg" / "__pycache__" / "b.pyc").write_bytes(b"\0")
    (root / "node_modules" / "dep" / "index.js").write_text("x")
    (root / "run.sh").write_text("#!/bin/sh\n")
    (root / "run.sh").chmod(0o755)
    (root / "codefleet.db").write_bytes(b"db")
    (root / "codefleet.db-wal").write_bytes(b"wal")
    (root / "runs").mkdir()
    (root / "runs" / "log.txt").write_text("log")
    os.symlink("pkg/b.py", root / "inside-rel")
    os.symlink(root / "a.py", root / "inside-abs")
    os.symlink(tmp_path / "elsewhere.txt", root / "outside")
    return root


def files_under(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if not p.is_dir()}


def test_the_view_copies_sources_and_skips_caches_environments_and_protected_paths(
    tree: Path, tmp_path: Path
) -> None:
    view = tmp_path / "view" / "tree"
    view.parent.mkdir()

    stats = copy_tree(tree, view, exclude=(tree / "codefleet.db", tree / "runs"))

    assert files_under(view) == {
        "a.py",
        "pkg/b.py",
        "run.sh",
        "inside-rel",
        "inside-abs",
        "outside",
    }
    assert stats.files == 3 and not stats.git
    assert (view / "run.sh").stat().st_mode & 0o777 == 0o755


def test_a_directory_removed_while_the_tree_is_copied_is_left_out_of_the_view(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = tmp_path / "tree"
    (tree / "out" / "T1").mkdir(parents=True)
    (tree / "out" / "T1" / "notes.txt").write_text("child: todo\n")
    (tree / "out" / "T2").mkdir()
    (tree / "out" / "T2" / "notes.txt").write_text("kept\n")
    real_scandir = os.scandir

    def restore_meanwhile(path: object) -> object:  # a restore removes T1's directory now
        if isinstance(path, str) and path.endswith("/out/T1"):
            shutil.rmtree(path)
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", restore_meanwhile)

    copy_tree(tree, tmp_path / "view")  # the landing run's seed 503: FileNotFoundError

    assert not (tmp_path / "view" / "out" / "T1").exists()
    assert (tmp_path / "view" / "out" / "T2" / "notes.txt").read_text() == "kept\n"


def test_settle_brings_the_copy_level_with_a_tree_that_moved_while_it_was_copied(
    tmp_path: Path,
) -> None:
    tree = tmp_path / "tree"
    (tree / "out" / "T1").mkdir(parents=True)
    (tree / "out" / "T1" / "broken.txt").write_text("BROKEN\n")  # leased, written...
    (tree / "out" / "kept.txt").write_text("old\n")
    (tree / "out" / "masked.txt").write_text("in flight\n")
    stats = copy_tree(tree, tmp_path / "view")
    (tree / "out" / "T1" / "broken.txt").unlink()  # ...and put back before the second fetch
    time.sleep(0.01)
    (tree / "out" / "kept.txt").write_text("new\n")  # a task finished it meanwhile
    (tree / "out" / "masked.txt").write_text("moved on\n")

    moved = settle(tree, tmp_path / "view", stats.copied, ["out/masked.txt"])

    view = tmp_path / "view" / "out"
    assert moved == 2  # the seed 503 landing run: a BROKEN file in neither mask
    assert not (view / "T1" / "broken.txt").exists()
    assert (view / "kept.txt").read_text() == "new\n"
    assert (view / "masked.txt").read_text() == "in flight\n"  # the mask decides that one


def test_the_copies_are_independent_files_so_writes_never_reach_the_tree(
    tree: Path, tmp_path: Path
) -> None:
    view = tmp_path / "view" / "tree"
    view.parent.mkdir()
    copy_tree(tree, view)

    assert (view / "a.py").stat().st_ino != (tree / "a.py").stat().st_ino
    assert (tree / "a.py").stat().st_nlink == 1
    (view / "a.py").write_text("changed\n")
    (view / "inside-abs").write_text("through a link\n")  # re-pointed into the view
    (view / "inside-rel").write_text("relative link\n")
    (view / "pkg" / "b.py").unlink()

    assert (tree / "a.py").read_text() == "A = 1\n"
    assert (tree / "pkg" / "b.py").read_text() == "B = 2\n"
    assert os.readlink(view / "outside") == str(tmp_path / "elsewhere.txt")


def test_overlay_puts_foreign_pre_images_back_and_removes_files_that_did_not_exist(
    tree: Path, tmp_path: Path
) -> None:
    before_a = capture(tree, "a.py")
    before_new = capture(tree, "pkg/new/half.py")
    (tree / "a.py").write_text("A = 'half-done'\n")
    (tree / "pkg" / "new").mkdir()
    (tree / "pkg" / "new" / "half.py").write_text("HALF = 1\n")
    view = tmp_path / "view" / "tree"
    view.parent.mkdir()
    copy_tree(tree, view)

    changed = overlay(view, [before_a, before_new, PreImage("node_modules/x.js", False)])

    assert sorted(changed) == ["a.py", "pkg/new/half.py"]
    assert (view / "a.py").read_text() == "A = 1\n"
    assert not (view / "pkg" / "new").exists()
    assert (tree / "a.py").read_text() == "A = 'half-done'\n"  # the shared tree is untouched


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_the_view_is_a_git_repository_that_borrows_the_objects_read_only(
    tree: Path, tmp_path: Path
) -> None:
    git = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], cwd=tree, check=True)
    subprocess.run([*git, "add", "a.py", "pkg/b.py"], cwd=tree, check=True)
    subprocess.run([*git, "commit", "-qm", "base"], cwd=tree, check=True)
    objects = sorted(p.name for p in (tree / ".git" / "objects").rglob("*"))
    view = tmp_path / "view" / "tree"
    view.parent.mkdir()

    stats = copy_tree(tree, view)
    (view / "a.py").write_text("A = 2\n")
    diff = subprocess.run([*git, "diff", "--stat"], cwd=view, capture_output=True, text=True)
    subprocess.run([*git, "commit", "-qam", "in the view"], cwd=view, check=True)

    assert stats.git and "a.py" in diff.stdout
    assert not (view / ".git" / "hooks").exists()
    assert sorted(p.name for p in (tree / ".git" / "objects").rglob("*")) == objects
    log = subprocess.run([*git, "log", "--oneline"], cwd=tree, capture_output=True, text=True)
    assert log.stdout.count("\n") == 1  # the tree's history did not move


async def test_a_command_runs_in_the_view_with_a_scrubbed_environment(tmp_path: Path) -> None:
    base = {"PATH": os.environ["PATH"], "CODEFLEET_TOKEN": "secret", "ANTHROPIC_API_KEY": "k"}

    result = await run_command(
        "pwd; env | sort; exit 3", tmp_path, timeout=10, cap=10_000, env=check_env(tmp_path, base)
    )

    assert result.exit_code == 3 and not result.timed_out
    assert result.output.splitlines()[0] == str(tmp_path)
    assert "secret" not in result.output and "ANTHROPIC" not in result.output


async def test_the_time_limit_kills_the_whole_process_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    command = f"sh -c 'echo $$ > {pid_file}; exec sleep 60' & sleep 60"
    started = time.monotonic()

    result = await run_command(command, tmp_path, timeout=0.5, cap=1000, env=check_env(tmp_path))

    assert result.timed_out and result.exit_code is None
    assert time.monotonic() - started < 5
    grandchild = int(pid_file.read_text())
    for _ in range(100):  # SIGKILL is asynchronous: the zombie is reaped by its parent
        if not _alive(grandchild):
            break
        time.sleep(0.01)
    assert not _alive(grandchild)


async def test_a_background_child_does_not_outlive_a_finished_check(tmp_path: Path) -> None:
    pid_file = tmp_path / "bg.pid"
    command = f"sleep 60 & echo $! > {pid_file}; echo done"

    result = await run_command(command, tmp_path, timeout=10, cap=1000, env=check_env(tmp_path))

    assert (result.exit_code, result.output.strip()) == (0, "done")
    assert result.duration_s < 5
    child = int(pid_file.read_text())
    for _ in range(100):
        if not _alive(child):
            break
        time.sleep(0.01)
    assert not _alive(child)


async def test_the_output_cap_keeps_the_tail(tmp_path: Path) -> None:
    script = "import sys; sys.stdout.write('x' * 50_000 + 'THE END')"
    command = f'"{sys.executable}" -c "{script}"'

    result = await run_command(command, tmp_path, timeout=30, cap=1000, env=check_env(tmp_path))

    assert result.output_bytes == 50_007
    assert result.output.endswith("x" * 993 + "THE END")
    assert result.output.startswith("[... output cut: 50007 bytes")
    assert len(result.output.splitlines()[1]) == 1000


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"
