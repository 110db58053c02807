"""Failure semantics of the engine: the cascade, exhaustion, long polls, event time.

Same harness as `test_engine.py` (a real SQLite file, a scratch tree, an
injected clock, no event loop unless a test needs one for a long poll).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
import test_engine
from test_engine import T0, Fleet

from codefleet.coord.policy import scheduler as sched
from codefleet.coord.tables.validation import NewTask
from codefleet.errors import InvalidGraph, StaleEpoch, TooLarge
from codefleet.models import ErrorKind, EventType, TaskStatus, to_iso

make_fleet = test_engine.make_fleet  # the engine harness's fixtures
fleet = test_engine.fleet

# -- the cascade is a transitive closure, whatever the listing order ---------------------


def _fail_root(fleet: Fleet, task_id: str = "X") -> None:
    fleet.add(task_id, max_attempts=1)
    fleet.register("runner-1")
    fleet.run(task_id, ok=False, error_kind=ErrorKind.BUDGET)
    assert fleet.task(task_id)["status"] == TaskStatus.FAILED


def test_a_child_listed_before_its_parent_is_born_blocked_when_the_grandparent_failed(
    fleet: Fleet,
):
    _fail_root(fleet)

    fleet.engine.operator.create_tasks(
        [
            NewTask(title="child", id="child", depends_on=("parent",)),
            NewTask(title="parent", id="parent", depends_on=("X",)),
        ]
    )

    assert fleet.task("parent")["status"] == TaskStatus.BLOCKED_UPSTREAM
    assert fleet.task("child")["status"] == TaskStatus.BLOCKED_UPSTREAM
    assert "X" in fleet.task("child")["error"]
    blocked = {
        e["task_id"]: e["payload"]["upstream"]
        for e in fleet.events(EventType.TASK_BLOCKED_UPSTREAM)
    }
    assert blocked == {"parent": "X", "child": "X"}
    assert fleet.engine.tasks.index.live == {}
    assert [type(d) for d in fleet.tick()] == [sched.FleetIdle]


def test_a_deep_chain_listed_leaf_first_is_blocked_whole(fleet: Fleet):
    _fail_root(fleet)
    chain = [f"c{n}" for n in range(6)]
    specs = [
        NewTask(title=t, id=t, depends_on=(chain[n - 1] if n else "X",))
        for n, t in enumerate(chain)
    ]

    fleet.engine.operator.create_tasks(list(reversed(specs)))

    assert {fleet.task(t)["status"] for t in chain} == {TaskStatus.BLOCKED_UPSTREAM}


def test_a_restart_blocks_pending_tasks_left_below_a_dead_ancestor(
    make_fleet: Callable[..., Fleet],
):
    """A database written before the closure fix is repaired when the engine loads it."""
    fleet = make_fleet()
    fleet.add("X")
    fleet.add("parent", deps=("X",))
    fleet.add("child", deps=("parent",))
    with fleet.engine.store.transaction():  # the state the listing-order bug left behind
        fleet.engine.store.update_task("X", status=TaskStatus.FAILED)
        fleet.engine.store.update_task("parent", status=TaskStatus.BLOCKED_UPSTREAM)

    again = make_fleet()

    assert again.task("child")["status"] == TaskStatus.BLOCKED_UPSTREAM
    assert again.engine.tasks.index.live == {}
    [event] = again.events(EventType.TASK_BLOCKED_UPSTREAM)
    assert (event["task_id"], event["payload"]["upstream"]) == ("child", "parent")


# -- the report that uses up the last attempt ----------------------------------------------


@pytest.mark.parametrize("kind", [ErrorKind.AGENT_ERROR, ErrorKind.TIMEOUT, ErrorKind.VETO])
def test_the_report_that_uses_up_the_last_attempt_answers_failed_and_cascades_at_once(
    make_fleet: Callable[..., Fleet], kind: ErrorKind
):
    fleet = make_fleet(backoff_base=2, backoff_cap=30)
    fleet.add("T", max_attempts=1)
    fleet.add("D", deps=("T",))
    fleet.add("E", deps=("D",))
    fleet.register("runner-1")

    answer = fleet.run("T", ok=False, error_kind=kind, error="it broke")

    assert (answer.status, answer.attempts, answer.backoff_until) == ("failed", 1, None)
    row = fleet.task("T")
    assert (row["status"], row["error_kind"]) == (TaskStatus.FAILED, ErrorKind.ATTEMPTS_EXHAUSTED)
    assert "it broke" in row["error"]
    assert fleet.task("D")["status"] == TaskStatus.BLOCKED_UPSTREAM
    assert fleet.task("E")["status"] == TaskStatus.BLOCKED_UPSTREAM
    [failed] = fleet.events(EventType.TASK_FAILED)
    assert failed["payload"]["error_kind"] == ErrorKind.ATTEMPTS_EXHAUSTED
    assert failed["payload"]["last_error_kind"] == kind
    assert fleet.events(EventType.TASK_REQUEUED) == []
    assert [type(d) for d in fleet.tick()] == [sched.FleetIdle]  # nothing left to decide


def test_a_retryable_failure_with_attempts_left_still_requeues(fleet: Fleet):
    fleet.add("T", max_attempts=2)
    fleet.register("runner-1")

    answer = fleet.run("T", ok=False, error_kind=ErrorKind.AGENT_ERROR)

    assert (answer.status, answer.attempts) == ("pending", 1)


# -- event time is the engine's clock --------------------------------------------------------


def test_events_are_stamped_with_the_engines_clock_not_the_wall_clock(fleet: Fleet):
    fleet.add("T")
    fleet.clock.advance(90)
    fleet.register("runner-1")

    stamps = [(e["type"], e["at"]) for e in fleet.events()]

    assert stamps[0] == (EventType.TASK_CREATED, to_iso(T0))
    assert (EventType.AGENT_REGISTERED, to_iso(fleet.clock())) in stamps
    assert all(at in (to_iso(T0), to_iso(fleet.clock())) for _, at in stamps)


# -- two long polls from one agent -------------------------------------------------------------


async def test_a_second_long_poll_of_one_agent_still_wakes_after_the_first_one_ended(
    fleet: Fleet,
):
    fleet.engine.attach(asyncio.get_running_loop())
    agent = fleet.register("runner-1")
    epoch = fleet.epoch(agent)
    first = asyncio.create_task(fleet.engine.runner.wait_assignment(agent, epoch, 30))
    second = asyncio.create_task(fleet.engine.runner.wait_assignment(agent, epoch, 30))
    await asyncio.sleep(0)  # both are parked
    first.cancel()  # the first poll goes away (its client hung up, or its wait ran out)
    with pytest.raises(asyncio.CancelledError):
        await first

    fleet.add("T")
    fleet.tick()

    task = await asyncio.wait_for(second, timeout=5)  # a liveness bound, not a measurement
    assert task is not None and task.id == "T"


async def test_two_concurrent_long_polls_of_one_agent_both_wake_with_the_same_assignment(
    fleet: Fleet,
):
    fleet.engine.attach(asyncio.get_running_loop())
    agent = fleet.register("runner-1")
    epoch = fleet.epoch(agent)
    polls = [
        asyncio.create_task(fleet.engine.runner.wait_assignment(agent, epoch, 30)) for _ in range(2)
    ]
    await asyncio.sleep(0)

    fleet.add("T")
    fleet.tick()

    answers = await asyncio.wait_for(asyncio.gather(*polls), timeout=5)
    assert [a and a.id for a in answers] == ["T", "T"]


async def test_a_long_poll_of_an_agent_that_leaves_ends_at_once_with_a_stale_epoch(
    fleet: Fleet,
):
    """Not after its `wait`: a server stopping after the fleet drained waits on no parked poll."""
    fleet.engine.attach(asyncio.get_running_loop())
    agent = fleet.register("runner-1")
    epoch = fleet.epoch(agent)
    poll = asyncio.create_task(fleet.engine.runner.wait_assignment(agent, epoch, 30))
    await asyncio.sleep(0)  # parked

    fleet.engine.arrivals.leave(agent, epoch)

    with pytest.raises(StaleEpoch):
        await asyncio.wait_for(poll, timeout=5)  # a liveness bound, not a measurement


# -- a big load: bounded, prepared off the loop, and no runner goes stale while it lasts --------


def test_a_batch_over_the_scope_path_cap_is_refused_whole_with_a_413(
    fleet: Fleet, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr("codefleet.coord.tables.validation.MAX_BATCH_SCOPE_PATHS", 5)
    specs = [
        NewTask(title="a", id="a", description="d", file_scope=["a.py", "x.py", "y.py"]),
        NewTask(title="b", id="b", description="d", file_scope=["pkg/b.py", "z.py", "w.py"]),
    ]

    with pytest.raises(TooLarge) as refused:
        fleet.engine.operator.create_tasks(specs)

    assert refused.value.status == 413
    assert refused.value.detail == {"problem": "too_many_scope_paths", "paths": 6, "limit": 5}
    assert "split the graph" in refused.value.message
    assert fleet.engine.store.tasks() == [] and fleet.events() == []


def test_preparing_a_batch_changes_nothing_and_committing_it_rechecks_the_stored_ids(
    fleet: Fleet,
):
    prepared = fleet.engine.operator.prepare_tasks(
        [NewTask(title="a", id="a", description="d", file_scope=["./a.py"])]
    )
    assert fleet.engine.store.tasks() == [] and fleet.events() == []
    assert prepared.scopes == {"a": ["a.py"]}
    fleet.add("a")  # another load took the id in between

    with pytest.raises(InvalidGraph, match="task a is already loaded on the server"):
        fleet.engine.operator.commit_tasks(prepared)

    assert [t["id"] for t in fleet.engine.store.tasks()] == ["a"]


def test_time_the_server_could_not_listen_does_not_count_against_a_heartbeat(
    make_fleet: Callable[..., Fleet],
):
    fleet = make_fleet(stale_after=20)
    deaf = [0.0]
    fleet.engine.agents.deaf_seconds = lambda: deaf[0]
    agent = fleet.register("runner-1")
    fleet.clock.advance(5)

    fleet.clock.advance(36)  # the loop was blocked for 36 s: the heartbeats could not be read
    deaf[0] = 36.0
    assert not any(isinstance(d, sched.MarkOffline) for d in fleet.tick())

    fleet.clock.advance(14)  # listening again: 5 + 14 s without a heartbeat is still fresh
    assert not any(isinstance(d, sched.MarkOffline) for d in fleet.tick())
    fleet.clock.advance(2)  # 21 s of listening without a heartbeat: stale
    assert sched.MarkOffline(agent) in fleet.tick()


def test_a_heartbeat_after_a_stall_starts_the_window_afresh(make_fleet: Callable[..., Fleet]):
    fleet = make_fleet(stale_after=20)
    deaf = [0.0]
    fleet.engine.agents.deaf_seconds = lambda: deaf[0]
    agent = fleet.register("runner-1")
    fleet.clock.advance(30)
    deaf[0] = 30.0
    fleet.engine.runner.heartbeat(agent, fleet.epoch(agent))  # credit already spent by this beat

    fleet.clock.advance(21)

    assert sched.MarkOffline(agent) in fleet.tick()
