"""`on_stale_read` in a graph file (graph-level, per-task override) and its bad values."""

from __future__ import annotations

import pytest

from codefleet.api.graphfile import GraphError, parse_graph
from codefleet.config import Settings


def graph(**top: object) -> dict[str, object]:
    tasks = [
        {"id": "T1", "title": "a", "description": "do a"},
        {"id": "T2", "title": "b", "description": "do b", "on_stale_read": "ignore"},
    ]
    return {"tasks": tasks, **top}


def test_the_graph_level_policy_applies_to_every_task_that_does_not_say_its_own() -> None:
    specs = parse_graph(graph(on_stale_read="retry"))
    assert [s.get("on_stale_read") for s in specs] == ["retry", "ignore"]


def test_without_a_graph_level_policy_a_task_leaves_it_to_the_default() -> None:
    specs = parse_graph(graph())
    assert [s.get("on_stale_read") for s in specs] == [None, "ignore"]


def test_an_unknown_graph_level_policy_is_a_load_error_naming_the_allowed_ones() -> None:
    with pytest.raises(GraphError) as err:
        parse_graph(graph(on_stale_read="FAKE"))
    assert "on_stale_read 'FAKE' is not one of reconcile, verify, retry, ignore" in str(err.value)


def test_an_unknown_task_policy_is_a_load_error_naming_the_allowed_ones() -> None:
    raw = {"tasks": [{"id": "T1", "title": "a", "description": "x", "on_stale_read": "FAKE"}]}
    with pytest.raises(GraphError) as err:
        parse_graph(raw)
    assert "task #1 (T1): on_stale_read:" in str(err.value)
    assert all(p in str(err.value) for p in ("'reconcile'", "'verify'", "'retry'", "'ignore'"))


def test_a_negative_reconcile_rounds_setting_is_refused() -> None:
    with pytest.raises(ValueError, match="reconcile_rounds"):
        Settings(reconcile_rounds=-1)
