"""`codefleet tasks ID` shows the task's landing: queued, its checks' verdicts, #order or the break."""

from __future__ import annotations

import asyncio
from typing import Any

from landing_log import EVENTS, HALTED, OLD_EVENTS, task
from rich.console import Console

from codefleet.cli.operate.taskcmds import _read_events
from codefleet.ui.task_view import task_detail

AT = "2026-01-01T00:00:00.000Z"


class LoggedEvents:
    """`FleetClient.events(type_=...)` over a literal event log: what `/events?type=` answers."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        self.log = events

    async def events(self, type_: str | None = None, **_: Any) -> list[dict[str, Any]]:
        return [e for e in self.log if type_ is None or e["type"] == type_]


def shown(task_id: str, events: list[dict[str, Any]], **fields: Any) -> str:
    reads = asyncio.run(_read_events(LoggedEvents(events), task_id))  # type: ignore[arg-type]
    console = Console(width=200, record=True)
    console.print(task_detail({**task(task_id), "description": "d", **fields}, reads))
    return " ".join(console.export_text().split())


def test_a_landed_task_shows_its_order_its_waits_its_checks_and_the_break_it_was_reworked_for() -> (
    None
):
    text = shown("T2", EVENTS, attempts=2)

    assert "landing landed #2 at" in text and "test passed · waited 1.00 s to land" in text
    assert "(attempt 1)" in text and "(attempt 2)" in text  # queued twice
    assert "landing checks test on T1, T2 (batch) over 0 landed: failed" in text
    assert "test on T2 (bisect) over 1 landed: failed" in text
    assert "test on T2 (batch) over 1 landed: passed" in text
    assert "integration attempt 1 broke test with T1 · reworked and landed" in text
    assert "NameError: name 'greet' is not defined" in text


def test_a_task_waiting_to_land_says_since_when_and_where_in_the_queue() -> None:
    text = shown("T3", EVENTS[:HALTED], status="landing")

    assert "landing waiting to land since" in text and "#1 in the queue" in text
    assert "test on T3 (batch) over 2 landed: failed" in text


def test_the_tasks_own_reads_still_exclude_other_tasks_landing_checks() -> None:
    reads = asyncio.run(_read_events(LoggedEvents(EVENTS), "T1"))  # type: ignore[arg-type]

    assert all(e["task_id"] == "T1" or "T1" in e["payload"]["batch"] for e in reads)
    assert [e["id"] for e in reads] == sorted(e["id"] for e in reads)


def test_a_task_of_a_run_before_landing_shows_no_landing_rows() -> None:
    text = shown("T1", OLD_EVENTS, title="t")

    assert "landing" not in text and "integration" not in text


def test_a_rolled_back_task_s_files_read_as_written_and_rolled_back_not_changed() -> None:
    wrote = {"file_changes": [{"path": "a.py"}], "patch": {"files": 0}}
    restored = [
        {"id": 9, "type": "file_restored", "task_id": "T1", "payload": {"path": "a.py"}, "at": ""}
    ]

    undone = shown("T1", restored, status="pending", **wrote)
    kept = shown("T1", [], status="pending", **wrote)  # --keep-failed-edits: nothing put back
    landed = shown("T1", restored, status="succeeded", **wrote)

    assert "wrote, rolled back a.py" in undone and "changed a.py" not in undone
    assert "changed a.py" in kept and "changed a.py" in landed


def test_a_check_not_run_again_or_left_to_the_landing_is_shown_as_spared() -> None:
    def event(n: int, kind: str, task_id: str, **payload: Any) -> dict[str, Any]:
        return {"id": n, "type": kind, "task_id": task_id, "payload": payload, "at": ""}

    spared = [
        event(1, "check_reused", "T1", name="test", purpose="verify", reused_from="tool"),
        event(2, "check_deferred", "T1", name="suite", purpose="verify"),
        event(3, "check_reused", "T2", name="test", purpose="verify", reused_from="tool"),
    ]

    text = shown("T1", spared)

    assert "checks spared check test (verify): passed, not run again" in text
    assert "check suite (verify): not run here: the landing check runs it" in text
    assert text.count("not run again") == 1  # T2's is T2's


def test_a_file_taken_over_from_a_task_waiting_to_land_and_its_undoing_are_shown() -> None:
    def event(n: int, kind: str, task_id: str, **payload: Any) -> dict[str, Any]:
        return {"id": n, "type": kind, "task_id": task_id, "payload": payload, "at": ""}

    stacks = [
        event(1, "lease_acquired", "T2", path="other.py", tool="Write"),  # an ordinary lease
        event(2, "lease_acquired", "T2", path="hub.py", tool="Edit", stacked_on="T1"),
        event(3, "stack_unwound", "T2", under_task_id="T1", attempt=1),
    ]

    text = shown("T2", stacks)

    assert "stacks leased hub.py (Edit) · on top of T1, waiting to land" in text
    assert "UNDONE: built on T1, which did not land; runs again" in text
    assert "other.py" not in text


def test_repair_turns_and_reworks_are_counted_with_what_the_turns_cost() -> None:
    def event(n: int, kind: str, **payload: Any) -> dict[str, Any]:
        return {"id": n, "type": kind, "task_id": "T1", "payload": payload, "at": AT}

    log = [
        event(1, "repair_started", name="test", cause="verify", turn=1),
        event(2, "repair_finished", cause="verify", turn=1, outcome="failed", cost_usd=0.01),
        event(3, "task_requeued", error_kind="verify_failed", reason="x", attempt=1),
        event(4, "repair_started", name="test", cause="integration", turn=1),
        event(5, "repair_finished", cause="integration", turn=1, outcome="landing", cost_usd=0.02),
    ]

    text = shown("T1", log)

    assert "repairs 1 of 2 repaired in the same session · $0.0300 · 1 rework(s)" in text
    assert "repair turns REPAIR test: its verify failed" in text
    assert "repair turn 1: done: its change lands again" in text
