"""The landed line's oracle catches what it claims to: the line as a clone sees it, broken.

A clean run landed A, B, C in that order (each with a patch); the line a fresh
clone checks out names them in that order and its tip holds the server's final
tree. Each test breaks one of the two and expects that rule, and only that rule.
The chaos run (`bench/chaos.py --clones`) is where a real line is cloned.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from codefleet.testing.invariants import Evidence
from codefleet.testing.invariants_line import Line, check_line

FILES = {"a.txt": "A\n", "out/b.txt": "B\n", "README.md": "tree\n"}


def landed(*tasks: str) -> Evidence:
    """Each task assigned, then succeeded, in order, each with a patch."""
    events: list[dict[str, Any]] = []
    for task_id in tasks:
        for kind in ("task_assigned", "task_succeeded"):
            row = {"type": kind, "task_id": task_id, "payload": {"attempt": 1}}
            events.append({"id": len(events) + 1, **row})
    patches = {task_id: f"diff of {task_id}\n" for task_id in tasks}
    return Evidence(events, {}, patches=patches)


def tree_of(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


@pytest.fixture
def trees(tmp_path: Path) -> tuple[Path, Path]:
    """The line's checkout and the server's tree, holding the same files."""
    return tree_of(tmp_path / "line", FILES), tree_of(tmp_path / "tree", FILES)


def test_a_line_of_the_landings_in_order_whose_tip_is_the_tree_proves_both_rules(
    trees: tuple[Path, Path],
) -> None:
    checkout, tree = trees
    (checkout / ".git").mkdir()  # git's own, and the server's state directory: not content
    (tree / ".codefleet").mkdir()
    (tree / ".codefleet" / "tree-id").write_text("tree_0\n")

    assert check_line(Line(checkout, ["A", "B", "C"]), landed("A", "B", "C"), tree) == []


def test_a_task_on_the_line_twice_is_caught(trees: tuple[Path, Path]) -> None:
    checkout, tree = trees

    found = check_line(Line(checkout, ["A", "B", "B", "C"]), landed("A", "B", "C"), tree)

    assert [(v.rule, v.task_id) for v in found] == [("line_order", "B")]


@pytest.mark.parametrize(
    "on_line", [["B", "A", "C"], ["A", "C"], ["A", "B", "C", "D"]], ids=["swapped", "lost", "extra"]
)
def test_a_line_that_parts_from_the_landing_order_is_caught(
    trees: tuple[Path, Path], on_line: list[str]
) -> None:
    checkout, tree = trees

    found = check_line(Line(checkout, on_line), landed("A", "B", "C"), tree)

    assert [v.rule for v in found] == ["line_order"]


def test_a_landed_task_with_an_empty_patch_is_expected_off_the_line(
    trees: tuple[Path, Path],
) -> None:
    checkout, tree = trees
    evidence = landed("A", "B", "C")
    evidence.patches["B"] = ""  # it wrote nothing: no commit

    assert check_line(Line(checkout, ["A", "C"]), evidence, tree) == []


def test_a_tip_that_differs_from_the_final_tree_is_caught(trees: tuple[Path, Path]) -> None:
    checkout, tree = trees
    (tree / "a.txt").write_text("A\nwritten around the line\n")
    (checkout / "out" / "b.txt").unlink()

    found = check_line(Line(checkout, ["A", "B", "C"]), landed("A", "B", "C"), tree)

    assert sorted((v.rule, v.message) for v in found) == [
        ("line_tree", "a.txt differs between the line's tip and the tree"),
        ("line_tree", "out/b.txt is in the server's tree but not on the line"),
    ]
