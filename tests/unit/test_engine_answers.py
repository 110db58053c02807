"""Answers built from memory equal what was stored: `complete`'s, an assignment, a graph's events."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest
import test_engine
from test_engine import Fleet

from codefleet.attempt import AssignedTask
from codefleet.coord.policy.answers import TaskAnswer
from codefleet.coord.tables.validation import NewTask
from codefleet.models import ErrorKind, EventType, TaskStatus

OUTCOMES: list[tuple[bool, dict[str, Any], TaskStatus]] = [
    (True, {}, TaskStatus.SUCCEEDED),
    (False, {"error_kind": ErrorKind.AGENT_ERROR, "error": "boom"}, TaskStatus.PENDING),
    (False, {"error_kind": ErrorKind.VETO, "blocked_on_path": "b.py"}, TaskStatus.PENDING),
    (False, {"error_kind": ErrorKind.RATE_LIMITED, "retry_after_s": 30}, TaskStatus.PENDING),
    (False, {"error_kind": ErrorKind.TIMEOUT}, TaskStatus.PENDING),
    (False, {"error_kind": ErrorKind.CANCELLED, "error": "no"}, TaskStatus.FAILED),
]

make_fleet = test_engine.make_fleet  # the engine harness's fixtures
fleet = test_engine.fleet


def stored_answer(fleet: Fleet, task_id: str) -> TaskAnswer:
    row = fleet.task(task_id)
    return TaskAnswer(TaskStatus(row["status"]), row["attempts"], row["backoff_until"], False)


@pytest.mark.parametrize(("ok", "report", "status"), OUTCOMES)
def test_a_completion_answers_what_it_stored(
    fleet: Fleet, ok: bool, report: dict[str, Any], status: TaskStatus
):
    fleet.add("T", "a.py")
    fleet.add("C", "c.py", deps=("T",))
    fleet.register("runner-1")

    answer = fleet.run("T", ok, **report)

    assert answer == stored_answer(fleet, "T")
    assert answer.status is status


def test_the_last_attempt_failing_answers_what_it_stored(fleet: Fleet):
    fleet.add("T", "a.py", max_attempts=2)
    runner = fleet.register("runner-1")
    first = fleet.run("T", False, error_kind=ErrorKind.AGENT_ERROR)
    assert first.backoff_until is not None and first == stored_answer(fleet, "T")
    fleet.clock.advance(3600)
    fleet.engine.runner.heartbeat(runner, fleet.epoch(runner))

    last = fleet.run("T", False, error_kind=ErrorKind.AGENT_ERROR)

    assert last == stored_answer(fleet, "T")
    assert (last.status, last.attempts, last.backoff_until) == (TaskStatus.FAILED, 2, None)


def test_a_graphs_task_created_events_are_published_as_stored_in_order(fleet: Fleet):
    fleet.add("A", "a.py")  # events before the batch: its ids do not start at 1
    before = fleet.engine.store.last_event_id()
    specs = [
        NewTask(
            f"T{n}",
            id=f"T{n}",
            file_scope=[f"t{n}.py"],
            priority=1 + n % 3,
            depends_on=[f"T{n - 1}"] if n else [],
        )
        for n in range(5)
    ]

    fleet.engine.operator.create_tasks(specs)

    stored = fleet.events(EventType.TASK_CREATED, since=before)
    published = [e for e in fleet.commits[-1] if e["type"] == EventType.TASK_CREATED]
    assert published == stored
    assert [e["id"] for e in stored] == list(range(before + 1, before + 6))
    assert [e["task_id"] for e in stored] == [s.id for s in specs]
    assert stored[3]["payload"] == {
        "title": "T3",
        "priority": 1,
        "file_scope": ["t3.py"],
        "depends_on": ["T2"],
    }


def stored_assignment(fleet: Fleet, agent_id: str) -> AssignedTask | None:
    """The assignment as it was built from the stored row (`SELECT *`) before."""
    agent = fleet.engine.agents.by_id[agent_id]
    task = fleet.engine.tasks.index.in_flight.get(agent.current_task_id or "")
    if task is None or task.status is not TaskStatus.ASSIGNED or task.assigned_at is None:
        return None
    row = fleet.task(task.id)
    deadline = task.assigned_at.timestamp() + fleet.engine.config.task_timeout
    return AssignedTask(
        id=task.id,
        title=row["title"],
        description=row["description"],
        priority=row["priority"],
        file_scope=tuple(sorted(row["file_scope"])),
        attempts=row["attempts"],
        deadline=datetime.fromtimestamp(deadline, UTC),
        blocked_on_path=row["blocked_on_path"],
        error=row["error"],
        error_kind=None if row["error_kind"] is None else ErrorKind(row["error_kind"]),
        verify=row["verify"],
        lease_granularity=fleet.engine.runner.lease_granularity(row["lease_granularity"]),
    )


@pytest.mark.parametrize(("ok", "report", "status"), OUTCOMES)
@pytest.mark.parametrize("restart", [False, True])
def test_an_assignment_answers_what_is_stored(
    fleet: Fleet, ok: bool, report: dict[str, Any], status: TaskStatus, restart: bool
):
    fleet.engine.operator.define_checks({"unit": "true"})
    fleet.engine.operator.create_tasks(
        [NewTask("Title", id="T", description="Do it.", file_scope=["a.py"], verify="unit")]
    )
    runner = fleet.register("runner-1")
    fleet.tick()
    assert fleet.engine.runner.assignment(runner, fleet.epoch(runner)) == stored_assignment(
        fleet, runner
    )
    fleet.start("T")
    fleet.finish("T", ok, **report)
    if status is TaskStatus.SUCCEEDED:
        return  # nothing to assign again
    if status is TaskStatus.FAILED:
        fleet.engine.operator.retry("T")
    if restart:
        fleet.engine.load()
    fleet.clock.advance(3600)
    fleet.engine.operator.resume()
    fleet.engine.runner.heartbeat(runner, fleet.epoch(runner))
    fleet.tick()

    again = fleet.engine.runner.assignment(runner, fleet.epoch(runner))

    assert again is not None and again == stored_assignment(fleet, runner)


def test_a_handoff_is_the_callers_assignment_and_never_a_refusal(fleet: Fleet):
    fleet.add("T", "a.py")
    runner = fleet.register("runner-1")
    fleet.tick()
    epoch = fleet.epoch(runner)
    handed = asyncio.run(fleet.engine.runner.handoff(runner, epoch))
    assert handed is not None and handed == fleet.engine.runner.assignment(runner, epoch)

    fleet.engine.arrivals.register(
        "runner-1", str(fleet.engine.tree.root), 4242
    )  # fenced: epoch + 1

    assert asyncio.run(fleet.engine.runner.handoff(runner, epoch)) is None
    assert asyncio.run(fleet.engine.runner.handoff("no-such-agent", 1)) is None
