"""`side_by_side`: the tasks that held different parts of one file at once, from the log."""

from __future__ import annotations

from typing import Any

from codefleet.review.report.sidebyside import SideBySide, side_by_side


def lease(event_id: int, kind: str, task: str, key: str) -> dict[str, Any]:
    return {"id": event_id, "type": f"lease_{kind}", "task_id": task, "payload": {"path": key}}


def test_two_tasks_holding_different_parts_at_once_are_one_pair_with_what_each_held() -> None:
    events = [
        lease(1, "acquired", "T3", "api.py::<imports>"),
        lease(2, "acquired", "T3", "api.py::ROUTES"),
        lease(3, "acquired", "T4", "api.py::create_app"),
        {
            "id": 4,
            "type": "lease_denied",
            "task_id": "T4",
            "payload": {"path": "api.py::<imports>"},
        },
        lease(5, "released", "T4", "api.py::create_app"),
        lease(6, "released", "T3", "api.py::<imports>"),
        lease(7, "released", "T3", "api.py::ROUTES"),
        lease(8, "acquired", "T4", "api.py::<imports>"),  # after T3: not side by side
    ]

    pairs = side_by_side(reversed(events))  # replayed in id order, whatever order given

    assert pairs == [SideBySide("api.py", ("T3", "T4"), (("<imports>", "ROUTES"), ("create_app",)))]
    assert pairs[0].describe() == "api.py: T3 held <imports>, ROUTES while T4 held create_app"


def test_whole_file_leases_and_parts_held_one_after_the_other_are_not_side_by_side() -> None:
    events = [
        lease(1, "acquired", "T3", "api.py"),
        lease(2, "released", "T3", "api.py"),
        lease(3, "acquired", "T3", "models.py::normalize"),
        lease(4, "released", "T3", "models.py::normalize"),
        lease(5, "acquired", "T4", "models.py::MAX_TAGS"),
        lease(6, "acquired", "T4", "/resource:db"),
    ]

    assert side_by_side(events) == []


def test_parts_of_two_files_are_paired_per_file() -> None:
    events = [
        lease(1, "acquired", "A", "a.py::f"),
        lease(2, "acquired", "B", "b.py::g"),
        lease(3, "acquired", "B", "a.py::h"),
    ]

    assert side_by_side(events) == [SideBySide("a.py", ("A", "B"), (("f",), ("h",)))]
