"""The operator's messages to a task (`codefleet say`, issue 31): kept in order, routed, capped.

Same harness as `test_engine.py`: a real engine over a real SQLite file.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest
import test_engine
from test_engine import Fleet

from codefleet.attempt import AssignedTask, OperatorNote
from codefleet.errors import InvalidState, NotFound, TooLarge
from codefleet.fleet.tools.inbox import operator_message
from codefleet.models import (
    MAX_MESSAGE_BYTES,
    MAX_MESSAGES_PER_TASK,
    NO_ANSWER,
    ErrorKind,
    EventType,
)
from codefleet.session.taskprompt import NOTES_HEADING, build_prompt

make_fleet = test_engine.make_fleet
fleet = test_engine.fleet


def test_messages_to_a_pending_task_are_kept_in_order_and_reach_its_first_attempt(fleet: Fleet):
    agent = fleet.register("runner-1")
    fleet.add("T1", "a.py")
    fleet.engine.operator.say("T1", "use httpx, not requests")
    fleet.engine.operator.say("T1", "the tests live in tests/unit")
    fleet.tick()
    task = fleet.engine.runner.assignment(agent, fleet.epoch(agent))
    assert task is not None
    assert task.notes == (
        OperatorNote(1, "use httpx, not requests"),
        OperatorNote(2, "the tests live in tests/unit"),
    )
    said = fleet.events(EventType.OPERATOR_MESSAGE)
    assert [
        (e["payload"]["seq"], e["payload"]["delivered"], e["payload"]["attempt"]) for e in said
    ] == [(1, "next_attempt", 1), (2, "next_attempt", 1)]


def test_the_next_attempts_prompt_lists_the_notes_under_their_heading_in_order():
    task = AssignedTask(
        id="T1",
        title="t",
        attempts=2,
        deadline=datetime(2026, 1, 1, tzinfo=UTC),
        notes=(OperatorNote(1, "first"), OperatorNote(2, "second")),
    )
    prompt = build_prompt(task)
    notes = prompt[prompt.index(NOTES_HEADING) :]
    assert notes.index("1. first") < notes.index("2. second")
    assert NOTES_HEADING not in build_prompt(
        AssignedTask(id="T1", title="t", attempts=1, deadline=task.deadline)
    )


def test_a_running_tasks_message_rides_its_owners_heartbeat_until_the_session_has_it(
    fleet: Fleet,
):
    agent = fleet.register("runner-1")
    fleet.add("T1", "a.py")
    fleet.tick()
    fleet.start("T1")
    said = fleet.engine.operator.say("T1", "stop after the first file")
    assert said["delivered"] == "running"
    epoch = fleet.epoch(agent)
    assert fleet.engine.runner.heartbeat(agent, epoch).messages == (
        OperatorNote(1, "stop after the first file"),
    )
    assert fleet.engine.runner.heartbeat(agent, epoch, ("T1", 1)).messages == ()
    delivered = fleet.events(EventType.OPERATOR_MESSAGE_DELIVERED)
    assert [(e["task_id"], e["payload"]["seq"]) for e in delivered] == [("T1", 1)]
    fleet.engine.runner.heartbeat(agent, epoch, ("T1", 1))
    assert len(fleet.events(EventType.OPERATOR_MESSAGE_DELIVERED)) == 1  # once per message


def test_a_message_never_reaches_another_tasks_runner(fleet: Fleet):
    one, two = fleet.register("runner-1"), fleet.register("runner-2")
    fleet.add("T1", "a.py")
    fleet.add("T2", "b.py")
    fleet.tick()
    fleet.start("T1")
    fleet.start("T2")
    fleet.engine.operator.say(fleet.engine.agents.by_id[one].current_task_id or "", "for you")
    other = two if fleet.owner("T1") == one else one
    assert fleet.engine.runner.heartbeat(other, fleet.epoch(other), ("T1", 1)).messages == ()
    assert fleet.events(EventType.OPERATOR_MESSAGE_DELIVERED) == []


def test_messages_survive_a_restart(make_fleet: Callable[..., Fleet]):
    first = make_fleet()
    first.add("T1", "a.py")
    first.engine.operator.say("T1", "one")
    first.engine.operator.say("T1", "two")
    again = make_fleet()
    assert again.engine.messages.notes("T1") == (OperatorNote(1, "one"), OperatorNote(2, "two"))


def test_a_finished_task_refuses_a_message_with_a_409(fleet: Fleet):
    fleet.register("runner-1")
    fleet.add("T1", "a.py")
    fleet.run("T1")
    with pytest.raises(InvalidState, match="already succeeded"):
        fleet.engine.operator.say("T1", "too late")
    with pytest.raises(NotFound):
        fleet.engine.operator.say("T9", "nobody")


def test_a_message_is_capped_in_size_and_a_task_in_count(fleet: Fleet):
    fleet.add("T1", "a.py")
    with pytest.raises(TooLarge):
        fleet.engine.operator.say("T1", "é" * (MAX_MESSAGE_BYTES // 2 + 1))
    for n in range(MAX_MESSAGES_PER_TASK):
        fleet.engine.operator.say("T1", f"m{n}")
    with pytest.raises(InvalidState, match="messages"):
        fleet.engine.operator.say("T1", "one more")


def test_the_live_message_quotes_each_note_once():
    text = operator_message([OperatorNote(3, "use httpx"), OperatorNote(4, "not requests")])
    assert text.count("use httpx") == 1 and text.index("use httpx") < text.index("not requests")


# -- questions ------------------------------------------------------------------------------


def test_an_unanswered_question_gets_no_answer_after_the_timeout_and_the_log_says_so(
    make_fleet: Callable[..., Fleet],
):
    fleet = make_fleet(question_timeout=600.0)
    agent = fleet.register("runner-1")
    fleet.add("T1", "a.py")
    fleet.tick()
    fleet.start("T1")
    epoch = fleet.epoch(agent)
    asked = fleet.engine.runner.ask(agent, epoch, "T1", "which tests?")
    fleet.clock.advance(599)
    assert fleet.engine.runner.heartbeat(agent, epoch).answers == ()
    fleet.clock.advance(1)
    beat = fleet.engine.runner.heartbeat(agent, epoch)
    assert beat.answers == ((asked.question_id, NO_ANSWER),)
    [answered] = fleet.events(EventType.QUESTION_ANSWERED)
    assert answered["payload"]["by"] == "timeout"
    assert fleet.engine.questions.open() == []


def test_a_questions_wait_moves_the_servers_deadline(make_fleet: Callable[..., Fleet]):
    fleet = make_fleet(question_timeout=600.0, task_timeout=100.0)
    agent = fleet.register("runner-1")
    fleet.add("T1", "a.py")
    fleet.tick()
    fleet.start("T1")
    fleet.engine.runner.ask(agent, fleet.epoch(agent), "T1", "which tests?")
    fleet.clock.advance(400)  # past the wall clock and its grace, all of it spent asking
    fleet.engine.runner.heartbeat(agent, fleet.epoch(agent))
    fleet.tick()
    assert fleet.engine.tasks.index.live["T1"].status == "running"


def test_with_a_zero_timeout_a_session_cannot_ask(make_fleet: Callable[..., Fleet]):
    fleet = make_fleet(question_timeout=0.0)
    agent = fleet.register("runner-1")
    fleet.add("T1", "a.py")
    fleet.tick()
    fleet.start("T1")
    with pytest.raises(InvalidState, match="off"):
        fleet.engine.runner.ask(agent, fleet.epoch(agent), "T1", "which tests?")


def test_a_task_the_graph_says_ask_false_for_is_assigned_without_asking_before_and_after_a_restart(
    make_fleet: Callable[..., Fleet],
):
    fleet = make_fleet()
    agent = fleet.register("runner-1")
    fleet.add("T1", "a.py", ask=False)
    fleet.add("T2", "b.py")
    assert fleet.engine.tasks.index.live["T1"].ask is False
    assert fleet.engine.tasks.index.live["T2"].ask is True
    again = make_fleet()
    assert again.engine.tasks.index.live["T1"].ask is False
    fleet.tick()
    task = fleet.engine.runner.assignment(agent, fleet.epoch(agent))
    assert task is not None and task.ask is (task.id != "T1")
    assert type(task).from_wire(task.to_wire()).ask is task.ask


def test_an_ended_attempts_question_is_no_longer_open(make_fleet: Callable[..., Fleet]):
    fleet = make_fleet(question_timeout=600.0)
    agent = fleet.register("runner-1")
    fleet.add("T1", "a.py")
    fleet.tick()
    fleet.start("T1")
    fleet.engine.runner.ask(agent, fleet.epoch(agent), "T1", "which tests?")
    assert [q.task_id for q in fleet.engine.operator.open_questions()] == ["T1"]
    fleet.finish("T1", ok=False, error="gave up", error_kind=ErrorKind.AGENT_ERROR)
    assert fleet.engine.operator.open_questions() == []
    with pytest.raises(InvalidState, match="no open question"):
        fleet.engine.operator.answer("T1", "too late")
