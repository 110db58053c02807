"""docs/graph.md's key lists name every key the graph loader accepts, and no other.

The loader's keys are `graphfile.TASK_KEYS` (a task: `wire.TaskSpec`'s fields) and
`graphfile.TOP_LEVEL_KEYS` (the file); the page lists each set once, as the
backticked words of its "Task keys:" and "Top-level keys:" lines.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from codefleet.api.graphfile import TASK_KEYS, TOP_LEVEL_KEYS

GRAPH_DOC = Path(__file__).resolve().parents[2] / "docs" / "graph.md"


def listed(label: str) -> set[str]:
    """The backticked keys of the paragraph starting with `label` (up to the blank line)."""
    text = GRAPH_DOC.read_text(encoding="utf-8")
    found = re.search(rf"^{re.escape(label)}(.*?)(?:\n\n|\Z)", text, re.M | re.S)
    assert found, f"docs/graph.md has no {label!r} paragraph"
    return set(re.findall(r"`([a-z_]+)`", found.group(1)))


@pytest.mark.parametrize(
    ("label", "keys"),
    [("Task keys:", TASK_KEYS), ("Top-level keys:", TOP_LEVEL_KEYS)],
    ids=["task", "top-level"],
)
def test_the_graph_page_lists_exactly_the_keys_the_loader_accepts(
    label: str, keys: frozenset[str]
) -> None:
    shown = listed(label)

    assert sorted(keys - shown) == [], f"docs/graph.md's {label} misses these keys"
    assert sorted(shown - keys) == [], f"docs/graph.md's {label} names keys the loader refuses"
