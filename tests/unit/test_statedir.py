"""The state directory: every `.codefleet` made gets its ignore-everything `.gitignore`.

A `.codefleet` inside another (a demo's tree sits in `.codefleet/runs/…/tree`) is the
inner tree's own state directory: git there must ignore it as it ignores the outer one,
or a run's commit lists the landed line's objects as changes no task made.
"""

from __future__ import annotations

from pathlib import Path

from codefleet.statedir import IGNORE_ALL, STATE_DIR, prepare_dirs


def test_a_new_state_dir_gets_its_gitignore(tmp_path: Path) -> None:
    prepare_dirs(tmp_path / STATE_DIR / "runs")
    assert (tmp_path / STATE_DIR / ".gitignore").read_text() == IGNORE_ALL


def test_a_state_dir_inside_another_gets_its_own_gitignore(tmp_path: Path) -> None:
    inner = tmp_path / STATE_DIR / "runs" / "demo" / "tree" / STATE_DIR
    prepare_dirs(inner / "landed.git")
    assert (tmp_path / STATE_DIR / ".gitignore").read_text() == IGNORE_ALL
    assert (inner / ".gitignore").read_text() == IGNORE_ALL


def test_an_existing_state_dirs_gitignore_is_left_as_it_is(tmp_path: Path) -> None:
    inner = tmp_path / STATE_DIR / "tree" / STATE_DIR
    inner.mkdir(parents=True)
    (inner / ".gitignore").write_text("mine\n")
    prepare_dirs(inner / "x")
    assert (inner / ".gitignore").read_text() == "mine\n"
