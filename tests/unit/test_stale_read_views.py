"""Stale reads where a person looks: `codefleet tasks ID`, `stats`, the log's words."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from codefleet.review.collisionstats import StaleReadStats, stale_read_stats
from codefleet.ui.task_view import task_detail
from codefleet.wording import phrase


def stale(event_id: int, reader: str, *paths: tuple[str, list[str], str | None]) -> dict[str, Any]:
    items = [
        {"path": p, "changed_by": by, "read_sha256": "a", "now_sha256": now} for p, by, now in paths
    ]
    return {
        "id": event_id,
        "type": "stale_read",
        "task_id": reader,
        "payload": {"attempt": 1, "paths": items},
    }


def test_stats_count_stale_reads_per_file_and_task_pair_most_frequent_first() -> None:
    events = [
        stale(1, "T3", ("models.py", ["T1"], "b")),
        stale(2, "T3", ("models.py", ["T1"], "c"), ("api.py", ["T4", "a person"], None)),
        stale(3, "T5", ("models.py", ["T1"], "d")),
        {"id": 4, "type": "task_succeeded", "task_id": "T3", "payload": {}},
    ]
    assert stale_read_stats(events) == [
        StaleReadStats("models.py", "T3", "T1", 2),
        StaleReadStats("api.py", "T3", "T4", 1),
        StaleReadStats("api.py", "T3", "a person", 1),
        StaleReadStats("models.py", "T5", "T1", 1),
    ]


def test_the_log_names_each_stale_file_and_who_changed_or_deleted_it() -> None:
    event = stale(1, "T3", ("models.py", ["T1"], "b"), ("old.py", ["T2"], None))
    assert phrase("stale_read", event["payload"]) == (
        "STALE READ models.py (T1), old.py (deleted by T2): changed since attempt 1 read them"
    )
    assert phrase("reconciled", {"rounds": 1, "outcome": "clean", "cost_usd": 0.02}) == (
        "reconciled after 1 turn(s): nothing stale now · $0.0200"
    )


def test_a_tasks_detail_lists_its_stale_reads_and_reconcile_turns() -> None:
    task = {
        "id": "T3",
        "title": "routes",
        "status": "succeeded",
        "attempts": 1,
        "max_attempts": 3,
        "description": "d",
    }
    reads = [
        stale(7, "T3", ("models.py", ["T1"], "b")),
        {
            "id": 9,
            "type": "reconciled",
            "task_id": "T3",
            "payload": {"attempt": 1, "rounds": 1, "outcome": "clean", "cost_usd": 0},
        },
    ]
    console = Console(width=200, record=True)
    console.print(task_detail(task, reads))
    text = console.export_text()
    assert "stale reads  STALE READ models.py (T1): changed since attempt 1 read them" in text
    assert "reconciled after 1 turn(s): nothing stale now" in text
