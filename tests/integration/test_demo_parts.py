"""The dry-run demo leased by part: two tasks in api.py side by side, and the staged veto.

The demo graph says `lease_granularity: part` (every task inherits it), so no server
setting is needed.

T3 holds its parts of api.py (its Counter import, the module docstring, its three
handlers, ROUTES) while T4 registers its middleware in `create_app` and adds its own
import (each import statement is a part, decision 0165): both are granted and T4's
edits land beside T3's. T4 then reaches the module docstring T3 holds and is vetoed
naming that part; it is requeued with `api.py::<header>` in its scope and runs again
after T3. The landing
story (T2 breaks with T3, is repaired in its session, lands) and the verdict stay as they were.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import pytest
from rich.console import Console

from codefleet.api.graphfile import load_graph
from codefleet.cli.start.demo_run import examples_dir, run_demo
from codefleet.coord.storage.store import Store


@pytest.fixture(scope="module")
def demo_events(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One dry-run demo (for this module's tests): its printed text and its event log."""
    runs = tmp_path_factory.mktemp("runs")
    out = io.StringIO()
    ok = run_demo("dry-run", runs, console=Console(file=out, width=200))
    [workspace] = runs.glob("demo-*")
    store = Store(workspace / "codefleet.db")
    try:
        yield {"ok": ok, "text": out.getvalue(), "events": store.events(0, 100_000)}
    finally:
        store.close()


def held(events: list[dict[str, Any]], task: str, attempt_end: int) -> dict[str, tuple[int, int]]:
    """The `api.py::` keys `task` held before event `attempt_end`: key -> (granted, released)."""
    spans: dict[str, tuple[int, int]] = {}
    for e in events:
        key = str(e["payload"].get("path", ""))
        if e["task_id"] != task or not key.startswith("api.py::") or e["id"] > attempt_end:
            continue
        if e["type"] == "lease_acquired":
            spans[key] = (e["id"], attempt_end)
        elif e["type"] == "lease_released" and key in spans:
            spans[key] = (spans[key][0], e["id"])
    return spans


def test_t3_and_t4_hold_and_write_different_parts_of_api_py_at_once(
    demo_events: dict[str, Any],
) -> None:
    events, text = demo_events["events"], demo_events["text"]
    assert demo_events["ok"], text
    [t4_vetoed] = [e for e in events if e["type"] == "task_requeued" and e["task_id"] == "T4"]
    [t3_done] = [e for e in events if e["type"] == "task_succeeded" and e["task_id"] == "T3"]
    t3 = held(events, "T3", t3_done["id"])
    t4 = held(events, "T4", t4_vetoed["id"])

    assert sorted(t3) == [
        "api.py::<from collections import Counter>",
        "api.py::<header>",
        "api.py::ROUTES",
        "api.py::delete_bookmark",
        "api.py::list_tags",
        "api.py::update_bookmark",
    ]
    import_key = "api.py::<from middleware import RequestIdMiddleware>"
    assert sorted(t4) == [import_key, "api.py::create_app"]  # granted, beside T3's parts
    (t4_from, t4_to) = t4["api.py::create_app"]
    assert all(start < t4_from and t4_to < end for start, end in t3.values())
    assert all(start < t4[import_key][0] and t4[import_key][1] < end for start, end in t3.values())
    t4_wrote = [
        e
        for e in events
        if e["type"] == "file_changed" and e["task_id"] == "T4" and t4_from < e["id"] < t4_to
    ]
    assert [e["payload"]["path"] for e in t4_wrote] == ["api.py", "api.py"]
    assert (
        "SIDE BY SIDE  api.py: T3 held <from collections import Counter>, <header>, ROUTES, "
        "delete_bookmark, list_tags, update_bookmark while T4 held "
        "<from middleware import RequestIdMiddleware>, create_app"
    ) in text


def test_the_staged_veto_names_the_module_docstring_and_t4_reruns_after_t3_with_it_in_scope(
    demo_events: dict[str, Any],
) -> None:
    events, text = demo_events["events"], demo_events["text"]
    [denied] = [e for e in events if e["type"] == "lease_denied"]
    [requeued] = [e for e in events if e["type"] == "task_requeued" and e["task_id"] == "T4"]
    order = [(e["type"], e["task_id"]) for e in events if e["type"] in ("task_succeeded", "landed")]
    t4_second = next(
        e
        for e in events
        if e["type"] == "task_assigned" and e["task_id"] == "T4" and e["id"] > requeued["id"]
    )

    assert (denied["task_id"], denied["payload"]["path"]) == ("T4", "api.py::<header>")
    assert denied["payload"]["holder_task_id"] == "T3"
    assert requeued["payload"]["error_kind"] == "veto"
    assert "api.py::<header>" in requeued["payload"]["file_scope"]
    assert order.index(("task_succeeded", "T3")) < order.index(("task_succeeded", "T4"))
    t3_done = next(e for e in events if e["type"] == "task_succeeded" and e["task_id"] == "T3")
    assert t3_done["id"] < t4_second["id"]
    assert "VETO  " in text and "was refused api.py::<header>: held by" in text
    assert "PASS" in text and "5/5 tasks succeeded · 1 veto(es)" in text


def test_the_landing_break_of_t2_is_repaired_in_its_session_by_part(
    demo_events: dict[str, Any],
) -> None:
    events = demo_events["events"]
    [broke] = [e for e in events if e["type"] == "repair_started" and e["task_id"] == "T2"]
    landed = [e["task_id"] for e in events if e["type"] == "landed"]

    assert broke["payload"]["cause"] == "integration"
    assert broke["payload"]["conflicts_with"] == ["T3"]
    assert [e for e in events if e["type"] == "integration_failed"] == []
    assert landed.index("T3") < landed.index("T2") and sorted(landed) == [
        "T1",
        "T2",
        "T3",
        "T4",
        "T5",
    ]


def test_every_task_of_the_demo_graph_leases_by_part() -> None:
    graph = load_graph(examples_dir() / "demo-tasks.yaml")

    assert {t["id"]: t.get("lease_granularity") for t in graph} == {
        f"T{n}": "part" for n in range(1, 6)
    }
