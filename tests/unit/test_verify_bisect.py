"""The `--verify` bisection's pure parts, and undoing recorded patches on real files.

The search is played against a literal list of verdicts; undoing is checked on
files in `tmp_path`: patches made by `rollback.make_patch` (as the server records
them), undone with `undo_changes`, must give back exactly the files before.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from codefleet.fleet.verifybisect import LandedChange, VerifyBlame, first_failing, undo_changes
from codefleet.review.history import FileChange
from codefleet.rollback import PreImage, capture, make_patch
from codefleet.wording import ordinal, verify_blame_text


def verdicts(failing: list[bool]) -> tuple[list[int], Callable[[int], Awaitable[bool]]]:
    """A probe over states 0..n-1 (True: fails) that notes which states it ran."""
    probed: list[int] = []

    async def fails(state: int) -> bool:
        probed.append(state)
        return failing[state]

    return probed, fails


@pytest.mark.parametrize("first", range(1, 10))
async def test_the_search_finds_the_first_failing_state_in_log2_probes(first: int) -> None:
    probed, fails = verdicts([i >= first for i in range(10)])

    found = await first_failing(0, 9, fails)

    assert found == first
    assert len(probed) <= 4 + (first == 1)  # ceil(log2 9), and state 0 only when reached
    assert 9 not in probed  # the known failing end is never run again


async def test_state_zero_is_probed_only_when_the_search_reaches_it() -> None:
    probed, fails = verdicts([False, False, False, False, True])
    assert await first_failing(0, 4, fails) == 4
    assert 0 not in probed


async def test_a_search_whose_every_state_fails_says_so_with_none() -> None:
    probed, fails = verdicts([True] * 5)
    assert await first_failing(0, 4, fails) is None
    assert probed == [2, 1, 0]


def test_ordinals_read_as_english_does() -> None:
    words = [ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 101, 111)]
    assert words == ["1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st", "111th"]  # fmt: skip


def test_the_blame_reads_as_one_line_naming_the_task_its_title_and_its_landing() -> None:
    blame = VerifyBlame(9, "T7", "Add welcome", 4)
    payload = {"command": "make test", "exit_code": 1, "ok": False, **blame.payload()}
    before = {"ok": False, **VerifyBlame(3, before_run_fails=True).payload()}
    unbisected = {"ok": False, **VerifyBlame(3, not_bisected="it is flaky").payload()}

    assert verify_blame_text(payload) == (
        'verify failed: first failing with T7 "Add welcome" (landed 4th of 9)'
    )
    assert verify_blame_text(before) == (
        "verify failed with every one of the 3 landing(s) undone too: the tree before the run "
        "fails it, no task is to blame"
    )
    assert verify_blame_text(unbisected) == "verify failed: no landing named: it is flaky"
    assert verify_blame_text({"command": "x", "exit_code": 0, "ok": True}) is None
    assert verify_blame_text({"command": "x", "exit_code": 1, "ok": False}) is None


def _landing(root: Path, task_id: str, order: int, change: dict[str, bytes | None]) -> LandedChange:
    """Apply `change` (path -> new bytes, None deletes) to `root`; its recorded patch."""
    before = {p: capture(root, p) for p in change}
    for path, content in change.items():
        target = root / path
        if content is None:
            target.unlink()
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
    files = []
    for path, image in before.items():
        made = make_patch(image, capture(root, path))
        assert made is not None
        files.append(FileChange(path, made.diff, made.binary))
    return LandedChange(task_id, task_id, order, tuple(files))


def _snapshot(root: Path) -> dict[str, PreImage]:
    return {
        p.relative_to(root).as_posix(): capture(root, p.relative_to(root).as_posix())
        for p in root.rglob("*")
        if (p.is_file() or p.is_symlink()) and ".git" not in p.relative_to(root).parts
    }


@pytest.mark.parametrize("repository", [False, True], ids=["plain-tree", "git-repository"])
def test_undoing_landings_gives_back_new_deleted_typed_and_twice_edited_files_exactly(
    tmp_path: Path, repository: bool
) -> None:
    root = tmp_path / "tree"
    root.mkdir()
    if repository:  # git apply inside a repository reads its config: still exact
        subprocess.run(["git", "init", "-q", str(root)], check=True)
        subprocess.run(["git", "-C", str(root), "config", "core.autocrlf", "true"], check=True)
    (root / "m.txt").write_text("a\nb\nc\n")
    (root / "gone.txt").write_text("last line without newline")
    (root / "was_file").write_text("a file\n")
    (root / "run.sh").write_text("echo hi\n")
    start = _snapshot(root)
    one = _landing(
        root, "T1", 1,
        {"m.txt": b"a\nB\nc\n", "gone.txt": None, "new/empty.txt": b"", "logo.png": b"\x89PNG\x00"},
    )  # fmt: skip
    os.chmod(root / "run.sh", 0o755)
    run_sh = make_patch(start["run.sh"], capture(root, "run.sh"))
    assert run_sh is not None
    os.unlink(root / "was_file")
    os.symlink("m.txt", root / "was_file")
    link = make_patch(start["was_file"], capture(root, "was_file"))
    assert link is not None
    two = LandedChange(
        "T2",
        "T2",
        2,
        (FileChange("run.sh", run_sh.diff, False), FileChange("was_file", link.diff, False)),
    )
    after_two = _snapshot(root)
    three = _landing(root, "T3", 3, {"m.txt": b"a\nB\nc\nd\n", "new/n.py": b"X = 1"})

    undo_changes(root, [three])
    assert _snapshot(root) == after_two
    undo_changes(root, [one, two])
    assert _snapshot(root) == start
    assert not (root / "new").exists()
    assert one.stuck_on is None  # a new binary file is undone by removing it


def test_a_changed_binary_file_cannot_be_undone_and_says_which(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    root.mkdir()
    (root / "logo.png").write_bytes(b"\x89PNG\x00old")
    landing = _landing(root, "T1", 1, {"logo.png": b"\x89PNG\x00new"})
    assert landing.stuck_on == "logo.png"


def test_a_patch_that_no_longer_fits_the_tree_names_its_task(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    root.mkdir()
    (root / "a.txt").write_text("one\n")
    landing = _landing(root, "T4", 1, {"a.txt": b"two\n"})
    (root / "a.txt").write_text("edited behind the fleet's back\n")

    with pytest.raises(OSError, match="git apply -R of T4's patch failed"):
        undo_changes(root, [landing])
