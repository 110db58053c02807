"""What reuse and stacking spared, from hand-built event logs (`review.report.sparedwork`)."""

from __future__ import annotations

from typing import Any

from codefleet.review.report.sparedwork import not_waited_seconds, reused_seconds, stacks_text


def event(
    kind: str, task: str, at: str = "2026-12-07T10:00:00+00:00", **body: Any
) -> dict[str, Any]:
    return {"type": kind, "task_id": task, "at": at, "payload": body}


def finished(task: str, attempt: int, ms: int, passed: bool = True) -> dict[str, Any]:
    return event(
        "check_finished", task, attempt=attempt, name="test", passed=passed, duration_ms=ms
    )


def reused(task: str, attempt: int) -> dict[str, Any]:
    return event("check_reused", task, attempt=attempt, name="test")


def test_a_reuse_spares_the_last_passing_run_of_its_check_in_its_own_attempt() -> None:
    log = [finished("T1", 1, 900), finished("T1", 1, 1500), reused("T1", 1)]
    assert reused_seconds(log) == 1.5


def test_a_reuse_that_names_its_run_spares_that_runs_seconds() -> None:
    first, second = finished("T1", 1, 900), finished("T1", 1, 1500)
    first["id"], second["id"] = 7, 9
    named = reused("T1", 1)
    named["payload"]["reused_event"] = 7
    assert reused_seconds([first, second, named]) == 0.9


def test_a_failed_run_or_another_attempts_run_spares_nothing() -> None:
    assert reused_seconds([finished("T1", 1, 900, passed=False), reused("T1", 1)]) == 0.0
    assert reused_seconds([finished("T1", 1, 900), reused("T1", 2)]) == 0.0
    assert reused_seconds([finished("T2", 1, 900), reused("T1", 1)]) == 0.0


def at(second: int) -> str:
    return f"2026-12-07T10:00:{second:02d}+00:00"


def test_a_take_over_spares_the_wait_until_the_task_under_it_landed() -> None:
    log = [
        event("lease_acquired", "T2", at(1), path="hub.py", stacked_on="T1"),
        event("lease_acquired", "T2", at(2), path="b.py", stacked_on="T1"),  # counted once
        event("landed", "T1", at(5)),
    ]
    assert not_waited_seconds(log) == 4.0


def test_a_take_over_undone_with_the_task_under_it_spares_nothing() -> None:
    log = [
        event("lease_acquired", "T2", at(1), path="hub.py", stacked_on="T1"),
        event("stack_unwound", "T2", at(3), under_task_id="T1"),
        event("landed", "T1", at(9)),  # its rework landed later: T2 waited for that anyway
    ]
    assert not_waited_seconds(log) == 0.0


def test_the_summary_line_says_the_seconds_only_when_there_are_some() -> None:
    said = stacks_text({"stacked": 2, "undone": 1, "not_waited_s": 4.0})
    assert said == (
        "2 file(s) taken over from tasks waiting to land (no wait for their landing: "
        "4.0 s not waited) · 1 attempt(s) undone with a task that did not land"
    )
    assert stacks_text({"stacked": 0, "undone": 0, "not_waited_s": 0.0}) is None
    assert "not waited" not in str(stacks_text({"stacked": 1, "undone": 1, "not_waited_s": 0.0}))


def test_a_landing_check_that_names_a_tasks_pass_spares_that_runs_seconds() -> None:
    verify = finished("T1", 1, 1200)
    verify["id"] = 7
    landing = event("landing_check_finished", "", check="test", view="reused", reused_event=7)
    landing["task_id"] = None
    assert reused_seconds([verify, landing]) == 1.2
    assert reused_seconds([verify, {**landing, "payload": {"check": "test"}}]) == 0.0
