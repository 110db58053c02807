"""Attempts that did not fail on their own are not charged against `max_attempts`.

One rule (docs/decisions/0082-an-attempt-is-charged-only-for-its-own-failure.md, "An attempt is charged only for its own failure"):
an attempt ended by a usage limit, a hard budget stop, the operator's interrupt
(a runner leaving with `interrupted`), or taken back before its runner started
it, is requeued uncharged, and its `task_requeued` event says `charged: false`.
Same harness as `test_engine.py`.
"""

from __future__ import annotations

from collections.abc import Callable

import test_engine
from test_engine import Fleet, assigned

from codefleet.coord.policy import scheduler as sched
from codefleet.coord.tables.tasktable import INTERRUPT_HOLD_S
from codefleet.models import AgentStatus, ErrorKind, EventType, TaskStatus

make_fleet = test_engine.make_fleet  # the engine harness's fixtures
fleet = test_engine.fleet


def _assigned_not_started(fleet: Fleet) -> str:
    agent = fleet.register("runner-1")
    fleet.add("T1", "a.py", max_attempts=1)
    assert assigned(fleet.tick()) == [("T1", agent)]
    return agent


def test_a_task_whose_agent_went_stale_before_starting_it_is_requeued_uncharged(
    make_fleet: Callable[..., Fleet],
):
    fleet = make_fleet(stale_after=20)
    agent = _assigned_not_started(fleet)

    fleet.clock.advance(20.001)
    decisions = fleet.tick()

    assert decisions == [
        sched.MarkOffline(agent),
        sched.Requeue("T1", ErrorKind.INFRA, "agent_stale", charged=False),
    ]
    row = fleet.task("T1")
    assert (row["status"], row["attempts"], row["uncharged_attempts"]) == ("pending", 1, 1)
    [requeued] = fleet.events(EventType.TASK_REQUEUED)
    assert requeued["payload"]["charged"] is False
    fresh = fleet.register("runner-2")
    assert assigned(fleet.tick()) == [("T1", fresh)]  # its one attempt is still to come


def test_a_runner_leaving_before_starting_its_task_hands_it_back_uncharged(fleet: Fleet):
    agent = _assigned_not_started(fleet)

    fleet.engine.arrivals.leave(agent, fleet.epoch(agent))
    fleet.tick()

    row = fleet.task("T1")
    assert (row["status"], row["uncharged_attempts"]) == ("pending", 1)
    assert fleet.events(EventType.TASK_FAILED) == []


def test_an_interrupted_runner_leaving_mid_attempt_requeues_it_uncharged_and_says_why(
    fleet: Fleet,
):
    agent = fleet.register("runner-1")
    fleet.add("T1", "a.py", max_attempts=1)
    fleet.tick()
    fleet.start("T1")
    assert fleet.acquire("T1", "a.py").allowed

    fleet.engine.arrivals.leave(agent, fleet.epoch(agent), interrupted=True)
    fleet.tick()

    row = fleet.task("T1")
    assert (row["status"], row["uncharged_attempts"], row["error"]) == ("pending", 1, "interrupted")
    assert row["backoff_until"] is not None  # a short hold, not a failure's backoff (below)
    [requeued] = fleet.events(EventType.TASK_REQUEUED)
    assert requeued["payload"]["reason"] == "interrupted"
    assert requeued["payload"]["charged"] is False
    [released] = fleet.events(EventType.LEASE_RELEASED)
    assert released["payload"]["reason"] == "interrupted"
    assert fleet.events(EventType.TASK_FAILED) == []
    fresh = fleet.register("runner-2")
    assert assigned(fleet.tick()) == []  # the interrupted run's other runners leave meanwhile
    fleet.clock.advance(INTERRUPT_HOLD_S)
    assert assigned(fleet.tick()) == [("T1", fresh)]


def test_an_interrupted_task_is_not_handed_to_a_runner_of_the_same_run_that_is_leaving_too(
    fleet: Fleet,
):
    busy, idle = fleet.register("runner-1"), fleet.register("runner-2")
    fleet.add("T1", "a.py", max_attempts=1)
    assert assigned(fleet.tick()) == [("T1", busy)]
    fleet.start("T1")

    fleet.engine.arrivals.leave(busy, fleet.epoch(busy), interrupted=True)
    assert assigned(fleet.tick()) == []  # before: assigned to runner-2, leaving a moment later
    fleet.engine.arrivals.leave(idle, fleet.epoch(idle), interrupted=True)
    fleet.clock.advance(INTERRUPT_HOLD_S)
    fleet.tick()

    row = fleet.task("T1")
    assert (row["status"], row["attempts"], row["uncharged_attempts"]) == ("pending", 1, 1)


def test_a_runner_leaving_mid_attempt_without_a_reason_is_still_charged(fleet: Fleet):
    agent = fleet.register("runner-1")
    fleet.add("T1", max_attempts=1)
    fleet.tick()
    fleet.start("T1")

    fleet.engine.arrivals.leave(agent, fleet.epoch(agent))
    fleet.tick()

    row = fleet.task("T1")
    assert (row["status"], row["uncharged_attempts"]) == ("failed", 0)


def test_an_agent_that_left_is_never_assigned(fleet: Fleet):
    gone = fleet.register("runner-1")
    fleet.engine.arrivals.leave(gone, fleet.epoch(gone))

    fleet.add("T1")

    assert fleet.agent(gone)["status"] == AgentStatus.OFFLINE
    assert assigned(fleet.tick()) == []
    assert fleet.task("T1")["status"] == TaskStatus.PENDING
