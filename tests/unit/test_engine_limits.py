"""The usage-limit pause in the engine: a real SQLite file, a scratch tree, an injected clock.

A `rate_limited` report pauses assignment for the whole fleet, is rolled back like any
failed attempt, and is not charged against `max_attempts` (docs/decisions/0054-a-usage-limit-pauses-the-fleet.md, "A usage
limit pauses the fleet"). Same harness as `test_engine.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import test_engine
from test_engine import T0, Fleet, assigned

from codefleet.coord.policy import scheduler as sched
from codefleet.models import ErrorKind, EventType, TaskStatus, to_iso

make_fleet = test_engine.make_fleet  # the engine harness's fixtures
fleet = test_engine.fleet

LIMITED = {"ok": False, "error_kind": ErrorKind.RATE_LIMITED, "error": "HTTP 429"}


def test_a_limited_last_attempt_is_requeued_uncharged_and_pauses_the_fleet(fleet: Fleet):
    fleet.add("T1", max_attempts=1)
    fleet.register("runner-1")

    answer = fleet.run("T1", **LIMITED, retry_after_s=12.5)

    assert (answer.status, answer.attempts) == (TaskStatus.PENDING, 1)
    row = fleet.task("T1")
    assert (row["error_kind"], row["uncharged_attempts"], row["backoff_until"]) == (
        "rate_limited",
        1,
        None,
    )
    [paused] = fleet.events(EventType.FLEET_PAUSED)
    assert paused["task_id"] == "T1"
    assert paused["payload"]["until"] == to_iso(T0 + timedelta(seconds=12.5))
    assert paused["payload"]["retry_after_s"] == 12.5 and "runner-1" in paused["payload"]["reason"]
    [requeued] = fleet.events(EventType.TASK_REQUEUED)
    assert requeued["payload"]["charged"] is False
    assert requeued["payload"]["paused_until"] == paused["payload"]["until"]
    assert fleet.events(EventType.TASK_FAILED) == []


def test_nothing_is_assigned_until_the_pause_runs_out_then_the_fleet_resumes_and_fills(
    fleet: Fleet,
):
    fleet.add("T1", max_attempts=1)
    fleet.add("T2")
    fleet.register("runner-1")
    fleet.run("T1", **LIMITED, retry_after_s=10)

    fleet.clock.advance(9.9)
    assert fleet.tick() == []

    fleet.clock.advance(0.1)
    decisions = fleet.tick()
    assert isinstance(decisions[0], sched.ResumeFleet)
    assert len(assigned(decisions)) == 1
    [resumed] = fleet.events(EventType.FLEET_RESUMED)
    assert resumed["payload"]["reason"] == "elapsed" and resumed["payload"]["paused_s"] == 10
    assert fleet.engine.limits.paused_until() is None


def test_the_uncharged_attempt_leaves_the_task_its_one_real_attempt(fleet: Fleet):
    fleet.add("T1", max_attempts=1)
    fleet.register("runner-1")
    fleet.run("T1", **LIMITED, retry_after_s=1)
    fleet.clock.advance(1)

    fleet.run("T1", ok=True)

    row = fleet.task("T1")
    assert (row["status"], row["attempts"], row["uncharged_attempts"]) == ("succeeded", 2, 1)


def test_a_second_limited_attempt_out_of_attempts_is_still_not_charged(fleet: Fleet):
    fleet.add("T1", max_attempts=2)
    fleet.register("runner-1")
    for _ in range(3):
        fleet.run("T1", **LIMITED, retry_after_s=1)
        fleet.clock.advance(1)

    assert fleet.task("T1")["status"] == TaskStatus.PENDING
    fleet.run("T1", ok=False, error_kind=ErrorKind.AGENT_ERROR)
    fleet.clock.advance(10)  # its backoff (2 s x 4 attempts so far)
    fleet.run("T1", ok=False, error_kind=ErrorKind.AGENT_ERROR)
    row = fleet.task("T1")
    assert (row["status"], row["error_kind"], row["attempts"]) == (
        "failed",
        "attempts_exhausted",
        5,
    )


def test_tasks_in_flight_carry_on_and_their_limits_join_the_same_pause(fleet: Fleet):
    fleet.add("T1", "one.py")
    fleet.add("T2", "two.py")
    fleet.add("T3", "three.py")
    for n in (1, 2):
        fleet.register(f"runner-{n}")
    assert len(assigned(fleet.tick())) == 2
    late = fleet.register("runner-3")
    fleet.start("T1")
    fleet.finish("T1", **LIMITED)  # no retry time: 30 s

    fleet.clock.advance(5)
    fleet.tick()
    assert fleet.engine.agents.by_id[late].current_task_id is None  # the idle runner waits
    fleet.start("T2")
    fleet.finish("T2", **LIMITED)  # the same limit, seen by the other session

    [paused] = fleet.events(EventType.FLEET_PAUSED)
    assert paused["payload"]["until"] == to_iso(T0 + timedelta(seconds=30))
    assert fleet.engine.limits.state.strikes == 1
    assert [e["task_id"] for e in fleet.events(EventType.TASK_REQUEUED)] == ["T1", "T2"]


def test_a_later_retry_time_moves_the_pause_on_with_a_second_fleet_paused(fleet: Fleet):
    fleet.add("T1", "one.py")
    fleet.add("T2", "two.py")
    fleet.register("runner-1")
    fleet.register("runner-2")
    fleet.tick()
    fleet.start("T1")
    fleet.finish("T1", **LIMITED, retry_after_s=10)
    fleet.start("T2")
    fleet.finish("T2", **LIMITED, retry_after_s=60)

    changes = [e["payload"]["change"] for e in fleet.events(EventType.FLEET_PAUSED)]
    assert changes == ["started", "extended"]
    assert fleet.engine.limits.paused_until() == T0 + timedelta(seconds=60)


def test_the_limited_attempts_edits_are_rolled_back(fleet: Fleet, workdir: Path):
    fleet.add("T1")
    fleet.register("runner-1")
    fleet.tick()
    fleet.start("T1")
    assert fleet.acquire("T1", "a.py").allowed
    (workdir / "a.py").write_text("half done\n")

    fleet.finish("T1", **LIMITED)

    assert (workdir / "a.py").read_text() == "A = 1\n"
    assert [e["payload"]["path"] for e in fleet.events(EventType.FILE_RESTORED)] == ["a.py"]


def test_resume_lifts_the_pause_at_once_and_says_so_only_when_paused(fleet: Fleet):
    fleet.add("T1")
    fleet.register("runner-1")
    assert fleet.engine.operator.resume()["resumed"] is False
    fleet.run("T1", **LIMITED)

    assert fleet.engine.operator.resume()["resumed"] is True

    [resumed] = fleet.events(EventType.FLEET_RESUMED)
    assert resumed["payload"]["reason"] == "operator"
    assert assigned(fleet.tick()) == [("T1", fleet.owner("T1"))]


def test_a_restarted_engine_keeps_a_pause_that_has_not_run_out(
    make_fleet: Callable[..., Fleet],
):
    first = make_fleet()
    first.add("T1")
    first.register("runner-1")
    first.run("T1", **LIMITED, retry_after_s=60)

    again = make_fleet()  # the same database file

    assert again.engine.limits.paused_until() == T0 + timedelta(seconds=60)
    assert again.engine.limits.state.pause is not None
    assert again.engine.limits.state.pause.task_id == "T1"


def test_retry_of_a_failed_task_sets_every_attempt_aside_uncharged(fleet: Fleet):
    fleet.add("T1", max_attempts=1)
    fleet.register("runner-1")
    fleet.run("T1", **LIMITED, retry_after_s=0)
    fleet.run("T1", ok=False, error_kind=ErrorKind.BUDGET)

    fleet.engine.operator.retry("T1")

    row = fleet.task("T1")
    assert (row["attempts"], row["uncharged_attempts"], row["retried_attempts"]) == (2, 2, 2)
