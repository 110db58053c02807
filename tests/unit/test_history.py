"""From a run's record to the commits to make: order, messages, trailers. Pure code."""

from __future__ import annotations

from typing import Any

import pytest

from codefleet.review.commit import Author
from codefleet.review.history import (
    TaskChange,
    commit_message,
    format_cost,
    planned_changes,
    success_order,
    unfinished_tasks,
)
from codefleet.review.runrecord import RunRecord


def event(kind: str, task_id: str, **payload: Any) -> dict[str, Any]:
    return {"type": kind, "task_id": task_id, "payload": payload}


def task(task_id: str, status: str = "succeeded", **fields: Any) -> dict[str, Any]:
    return {
        "id": task_id,
        "title": f"Title of {task_id}",
        "status": status,
        "attempts": 1,
        "cost_usd": 0.0,
        "result_summary": "",
        "completed_at": None,
        **fields,
    }


def change(**fields: Any) -> TaskChange:
    base: dict[str, Any] = {
        "task_id": "T3",
        "title": "Add routes",
        "summary": "",
        "attempts": 1,
        "cost_usd": 0.0,
        "vetoes": 0,
        "completed_at": None,
        "files": (),
    }
    return TaskChange(**{**base, **fields})


def test_the_commit_message_is_title_blank_line_summary_then_the_trailers() -> None:
    message = commit_message(
        change(summary="Three handlers and their tests.", attempts=2, cost_usd=0.12, vetoes=1)
    )

    assert message == (
        "Add routes\n\nThree handlers and their tests.\n\n"
        "CodeFleet-Task: T3\nCodeFleet-Attempts: 2\nCodeFleet-Cost-USD: 0.12\nCodeFleet-Vetoes: 1\n"
    )


def test_a_message_without_a_summary_has_no_empty_paragraph_and_one_subject_line() -> None:
    message = commit_message(change(title="Add\n  routes  ", summary="  "))

    assert message.split("\n\n") == [
        "Add routes",
        "CodeFleet-Task: T3\nCodeFleet-Attempts: 1\nCodeFleet-Cost-USD: 0.00\nCodeFleet-Vetoes: 0\n",
    ]


@pytest.mark.parametrize(
    ("usd", "text"),
    [(0.0, "0.00"), (0.12, "0.12"), (0.0042, "0.0042"), (1.5, "1.50"), (3.14159, "3.1416")],
)
def test_costs_keep_two_to_four_decimals(usd: float, text: str) -> None:
    assert format_cost(usd) == text


def test_success_order_follows_the_succeeded_events_not_the_task_list() -> None:
    events = [
        event("task_succeeded", "T3"),
        event("lease_denied", "T4"),
        event("task_succeeded", "T4"),
        event("task_succeeded", "T1"),
    ]

    assert success_order(events) == ["T3", "T4", "T1"]


def test_planned_changes_carry_the_vetoes_and_skip_tasks_that_did_not_succeed() -> None:
    patch = {"files": [{"path": "api.py", "diff": "d", "binary": False}]}
    record = RunRecord(
        tasks=(task("T1"), task("T4", attempts=2), task("T9", "failed")),
        events=(
            event("lease_denied", "T4"),
            event("task_succeeded", "T4"),
            event("task_succeeded", "T1"),
        ),
        workdir="/tree",
        patches={"T1": patch, "T4": patch},
        ledgers={"T9": [{"path": "x.py"}, {"path": "x.py"}, {"path": "a.py"}]},
    )

    planned = planned_changes(record)

    assert [(c.task_id, c.attempts, c.vetoes, c.paths) for c in planned] == [
        ("T4", 2, 1, ("api.py",)),
        ("T1", 1, 0, ("api.py",)),
    ]
    assert [(u.task_id, u.status, u.paths) for u in unfinished_tasks(record)] == [
        ("T9", "failed", ("a.py", "x.py"))
    ]


@pytest.mark.parametrize("text", ["Fleet Bot", "<bot@x>", "Fleet Bot <>", "Bot <a b@x>"])
def test_an_author_must_read_name_and_email_in_angle_brackets(text: str) -> None:
    with pytest.raises(ValueError, match="Name <email>"):
        Author.parse(text)


def test_an_author_is_parsed_like_git_takes_it() -> None:
    assert Author.parse("  Fleet Bot <bot@example.invalid> ") == Author(
        "Fleet Bot", "bot@example.invalid"
    )
