"""A landing run as its event log says it, for every display test (issue 39, the landing contract).

Three tasks, two runners, integration check `test`:

- T1 and T2 finish and wait to land; the batch [T1, T2] fails; the bisect lands T1 (#1),
  T2 alone on the new base fails, the base alone passes: T2 broke `test` with T1, is
  rolled back and reworked, and lands on attempt 2 (#2).
- T3 waits to land; its check fails and so does the base alone: landing halts (last
  landed T2) until the operator resumes; the recheck passes and T3 lands (#3).

`EVENTS[:HALTED]` is the log while the halt is in force, T3 waiting; `EVENTS[:CHECKING]`
the log while the first batch check runs. `OLD_EVENTS` is a run recorded before landing
existed (no `order`, no landing events).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from codefleet.models import to_iso

T0 = datetime(2026, 7, 31, 18, 0, tzinfo=UTC)
AGENTS = {"runner-1": "a_1", "runner-2": "a_2"}


def ev(
    n: int,
    kind: str,
    task_id: str | None = None,
    at: float = 0.0,
    runner: str | None = None,
    **payload: Any,
) -> dict[str, Any]:
    return {
        "id": n,
        "type": kind,
        "task_id": task_id,
        "agent_id": AGENTS.get(runner or ""),
        "at": to_iso(T0 + timedelta(seconds=at)),
        "payload": payload,
    }


def _check(
    n: int, kind: str, at: float, step: int, batch: list[str], purpose: str, base: int, **more: Any
) -> dict[str, Any]:
    return ev(
        n, kind, None, at, step=step, check="test", batch=batch, purpose=purpose, base=base, **more
    )


def _done(
    n: int,
    at: float,
    step: int,
    batch: list[str],
    purpose: str,
    base: int,
    verdict: str,
    tail: str = "",
) -> dict[str, Any]:
    return _check(
        n,
        "landing_check_finished",
        at,
        step,
        batch,
        purpose,
        base,
        verdict=verdict,
        exit_code=0 if verdict == "passed" else 1,
        duration_ms=1000,
        view_ms=12,
        output_tail=tail,
    )


BREAK_TAIL = "E   NameError: name 'greet' is not defined"
FLAKY_TAIL = "E   ConnectionRefusedError"

EVENTS: list[dict[str, Any]] = [
    ev(1, "fleet_started", at=0.0, runners=2),
    ev(2, "task_created", "T1", 0.0, title="Rename greet to salute"),
    ev(3, "task_created", "T2", 0.0, title="Add a caller of greet"),
    ev(4, "task_created", "T3", 0.0, title="Add welcome"),
    ev(5, "agent_registered", None, 0.0, "runner-1", name="runner-1"),
    ev(6, "agent_registered", None, 0.0, "runner-2", name="runner-2"),
    ev(7, "task_assigned", "T1", 1.0, "runner-1", agent_name="runner-1", attempt=1),
    ev(8, "task_assigned", "T2", 1.0, "runner-2", agent_name="runner-2", attempt=1),
    ev(9, "landing_queued", "T1", 3.0, "runner-1", attempt=1, checks=["test"], position=1),
    ev(10, "landing_queued", "T2", 3.5, "runner-2", attempt=1, checks=["test"], position=2),
    _check(11, "landing_check_started", 3.5, 1, ["T1", "T2"], "batch", 0),
    _done(12, 4.5, 1, ["T1", "T2"], "batch", 0, "failed", BREAK_TAIL),
    _check(13, "landing_check_started", 4.5, 2, ["T1"], "bisect", 0),
    _done(14, 5.5, 2, ["T1"], "bisect", 0, "passed"),
    ev(15, "landed", "T1", 5.5, order=1, checks=["test"], batch=["T1"], base=0),
    ev(16, "task_succeeded", "T1", 5.5, attempt=1, order=1, cost_usd=0.01),
    _check(17, "landing_check_started", 5.5, 3, ["T2"], "bisect", 1),
    _done(18, 6.5, 3, ["T2"], "bisect", 1, "failed", BREAK_TAIL),
    _check(19, "landing_check_started", 6.5, 4, [], "base", 1),
    _done(20, 7.0, 4, [], "base", 1, "passed"),
    ev(
        21,
        "integration_failed",
        "T2",
        7.0,
        check="test",
        attempt=1,
        blamed=["T2"],
        conflicts_with=["T1"],
        output_tail=BREAK_TAIL,
    ),
    ev(22, "file_restored", "T2", 7.0, path="app.py", existed=True),
    ev(
        23,
        "task_requeued",
        "T2",
        7.0,
        error_kind="integration_failed",
        attempt=1,
        reason="broke test",
    ),
    ev(24, "task_assigned", "T2", 7.5, "runner-1", agent_name="runner-1", attempt=2),
    ev(25, "task_assigned", "T3", 7.5, "runner-2", agent_name="runner-2", attempt=1),
    ev(26, "landing_queued", "T2", 9.0, "runner-1", attempt=2, checks=["test"], position=1),
    _check(27, "landing_check_started", 9.0, 5, ["T2"], "batch", 1),
    _done(28, 10.0, 5, ["T2"], "batch", 1, "passed"),
    ev(29, "landed", "T2", 10.0, order=2, checks=["test"], batch=["T2"], base=1),
    ev(30, "task_succeeded", "T2", 10.0, attempt=2, order=2, cost_usd=0.02),
    ev(31, "landing_queued", "T3", 10.5, "runner-2", attempt=1, checks=["test"], position=1),
    _check(32, "landing_check_started", 10.5, 6, ["T3"], "batch", 2),
    _done(33, 11.5, 6, ["T3"], "batch", 2, "failed", FLAKY_TAIL),
    _check(34, "landing_check_started", 11.5, 7, [], "base", 2),
    _done(35, 12.0, 7, [], "base", 2, "failed", FLAKY_TAIL),
    ev(36, "landing_halted", None, 12.0, check="test", last_landed="T2", output_tail=FLAKY_TAIL),
    ev(37, "landing_resumed", None, 14.0, reason="operator"),
    _check(38, "landing_check_started", 14.0, 8, ["T3"], "recheck", 2),
    _done(39, 15.0, 8, ["T3"], "recheck", 2, "passed"),
    ev(40, "landed", "T3", 15.0, order=3, checks=["test"], batch=["T3"], base=2),
    ev(41, "task_succeeded", "T3", 15.0, attempt=1, order=3, cost_usd=0.01),
    ev(42, "run_finished", at=16.0, ok=True),
]
HALTED = 36  # EVENTS[:HALTED] ends with the halt in force
CHECKING = 11  # EVENTS[:CHECKING] ends with the batch [T1, T2] being checked


def task(task_id: str, status: str = "succeeded", **fields: Any) -> dict[str, Any]:
    return {
        "id": task_id,
        "title": next(e["payload"]["title"] for e in EVENTS if e["task_id"] == task_id),
        "status": status,
        "attempts": 1,
        "max_attempts": 3,
        "cost_usd": 0.01,
        "depends_on": [],
        **fields,
    }


TASKS = (task("T1"), task("T2", attempts=2, cost_usd=0.02), task("T3"))

# A run before landing: success without `order`, no landing event.
OLD_EVENTS: list[dict[str, Any]] = [
    ev(1, "fleet_started", at=0.0, runners=1),
    ev(2, "task_assigned", "T1", 1.0, "runner-1", agent_name="runner-1", attempt=1),
    ev(3, "task_succeeded", "T1", 2.0, attempt=1, cost_usd=0.01),
    ev(4, "run_finished", at=3.0, ok=True),
]
