"""The read guard of the planning session: reads inside the tree pass, the rest is refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from codefleet.fleet.gate.readguard import read_refusal


@pytest.fixture
def root(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    (tree / "pkg").mkdir(parents=True)
    (tree / "pkg" / "a.py").write_text("A = 1\n")
    (tmp_path / "secret.txt").write_text("no\n")
    (tree / "link").symlink_to(tmp_path)  # a door out of the tree
    return tree


@pytest.mark.parametrize(
    ("tool", "tool_input"),
    [
        ("Read", {"file_path": "pkg/a.py"}),
        ("Read", {"file_path": "./pkg/../pkg/a.py"}),
        ("Glob", {"pattern": "**/*.py"}),
        ("Glob", {"pattern": "*.py", "path": "pkg"}),
        ("Glob", {"pattern": "../*.py", "path": "pkg"}),  # back up to the root: still inside
        ("Grep", {"pattern": "../etc"}),  # a regular expression, not a path
        ("Grep", {"pattern": "A", "path": "pkg", "glob": "*.py"}),
    ],
)
def test_reads_inside_the_tree_pass(root: Path, tool: str, tool_input: dict[str, Any]) -> None:
    assert read_refusal(str(root), tool, tool_input) is None


@pytest.mark.parametrize(
    ("tool", "tool_input", "named"),
    [
        ("Read", {"file_path": "../secret.txt"}, "../secret.txt"),
        ("Read", {"file_path": "/etc/passwd"}, "/etc/passwd"),
        ("Read", {"file_path": "~/.ssh/id_rsa"}, "~/.ssh/id_rsa"),
        ("Read", {"file_path": "link/secret.txt"}, "link/secret.txt"),
        ("Glob", {"pattern": "/etc/*"}, "/etc/*"),
        ("Glob", {"pattern": "../*"}, "../*"),
        ("Glob", {"pattern": "*/../../*"}, "*/../../*"),
        ("Glob", {"pattern": "*", "path": "/tmp"}, "/tmp"),
        ("Glob", {"pattern": "link/*"}, "link/*"),
        ("Grep", {"pattern": "x", "path": "/"}, "/"),
        ("Grep", {"pattern": "x", "glob": "/etc/*"}, "/etc/*"),
    ],
)
def test_reads_outside_the_tree_are_refused_naming_the_path(
    root: Path, tool: str, tool_input: dict[str, Any], named: str
) -> None:
    refusal = read_refusal(str(root), tool, tool_input)

    assert refusal is not None and refusal.startswith(f"{named} is outside the working tree")


def test_any_other_tool_or_an_unreadable_input_is_refused(root: Path) -> None:
    assert read_refusal(str(root), "Bash", {"command": "cat /etc/passwd"}) is not None
    assert read_refusal(str(root), "Read", "pkg/a.py") is not None
