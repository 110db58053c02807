"""The agents' questions to the operator (`ask_operator`) and their answers.

An attempt's session asks (`POST /tasks/{id}/questions`, event `question_asked
{task_id, attempt, question_id, text}`); the operator answers the task's oldest
open question (`POST /tasks/{id}/answers`, or `codefleet answer`), or nobody
does within the question timeout and the server answers `NO_ANSWER` itself
(checked at the owner's heartbeat); either way the event `question_answered
{question_id, text, by: operator|timeout}` says so. The owner's heartbeat
answer carries the answers of its running attempt, which its waiting tool
takes. The time a question waited (open or answered) is not charged against
the attempt's wall clock: the scheduler's deadline moves by `waited` (and the
runner's by what it measured). The event log is the record; memory is
rebuilt from it at start and written only after the logging transaction.
Docs: docs/decisions/0124-a-question-waits-on-the-heartbeat.md, "A question waits on the heartbeat".
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Final

from codefleet.coord.storage.database import Row
from codefleet.coord.storage.store import Store
from codefleet.coord.tables.liveindex import LiveTask
from codefleet.coord.tables.restores import Transition
from codefleet.errors import InvalidState, NotOwner, TooLarge
from codefleet.models import MAX_MESSAGE_BYTES, NO_ANSWER, EventType, from_iso, to_iso

__all__ = ["NO_ANSWER", "Question", "Questions"]

MAX_QUESTIONS_PER_ATTEMPT: Final = 20
PAGE: Final = 1000


@dataclass(frozen=True, slots=True)
class Question:
    question_id: str
    task_id: str
    attempt: int
    text: str
    at: datetime
    answer: str | None = None
    answered_at: datetime | None = None
    by: str | None = None  # "operator" or "timeout"

    def waited(self, now: datetime) -> timedelta:
        return (self.answered_at or now) - self.at

    def to_json(self) -> dict[str, Any]:
        return {
            "question_id": self.question_id,
            "task_id": self.task_id,
            "attempt": self.attempt,
            "text": self.text,
            "at": to_iso(self.at),
            "answer": self.answer,
            "by": self.by,
        }


class Questions:
    """Every task's questions; the one writer of `question_*` events."""

    def __init__(
        self, store: Store, clock: Callable[[], datetime], transition: Transition, timeout: float
    ) -> None:
        self.store = store
        self.clock = clock
        self.transition = transition
        self.timeout = timeout  # seconds; 0: asking is off
        self._by_id: dict[str, Question] = {}

    def load(self) -> None:
        self._by_id = {}
        for event in self._events(EventType.QUESTION_ASKED):
            p = event["payload"]
            self._by_id[str(p["question_id"])] = Question(
                str(p["question_id"]),
                str(event["task_id"]),
                int(p["attempt"]),
                str(p["text"]),
                from_iso(str(event["at"])),
            )
        for event in self._events(EventType.QUESTION_ANSWERED):
            p = event["payload"]
            self._settle(
                str(p["question_id"]), str(p["text"]), str(p["by"]), from_iso(str(event["at"]))
            )

    def _events(self, kind: EventType) -> Iterator[Row]:
        since = 0
        while page := self.store.events(since, PAGE, kind.value):
            yield from page
            since = int(page[-1]["id"])

    def open(self) -> list[Question]:
        """The questions nobody has answered yet, oldest first."""
        return sorted((q for q in self._by_id.values() if q.answer is None), key=lambda q: q.at)

    def ask(self, task: LiveTask, text: str) -> Question:
        """The owner's session asks; event `question_asked`."""
        _check_size(text)
        if self.timeout <= 0:
            raise InvalidState("asking the operator is off (CODEFLEET_QUESTION_TIMEOUT=0)")
        mine = [q for q in self._by_id.values() if q.task_id == task.id]
        if sum(q.attempt == task.attempts for q in mine) >= MAX_QUESTIONS_PER_ATTEMPT:
            raise InvalidState(f"attempt {task.attempts} of {task.id} asked too many questions")
        question = Question(
            f"{task.id}-q{len(mine) + 1}", task.id, task.attempts, text, self.clock()
        )
        with self.transition():
            self.store.emit(
                EventType.QUESTION_ASKED,
                task_id=task.id,
                agent_id=task.agent_id,
                attempt=task.attempts,
                question_id=question.question_id,
                text=text,
            )
        self._by_id[question.question_id] = question
        return question

    def answer(self, waiting: list[Question], task_id: str, text: str) -> Question:
        """The operator answers the first of `waiting` (the task's open questions)."""
        _check_size(text)
        if not waiting:
            raise InvalidState(f"task {task_id} has no open question to answer")
        return self._answer(waiting[0], text, "operator")

    def expire(self, task_id: str) -> None:
        """Answer `NO_ANSWER` to the task's questions older than the timeout."""
        now = self.clock()
        for q in self.open():
            if q.task_id == task_id and q.waited(now) >= timedelta(seconds=self.timeout):
                self._answer(q, NO_ANSWER, "timeout")

    def answers(self, task_id: str, attempt: int) -> list[Question]:
        """The answered questions of one attempt (what its heartbeat carries)."""
        return [
            q
            for q in self._by_id.values()
            if q.task_id == task_id and q.attempt == attempt and q.answer is not None
        ]

    def waited(self, task_id: str, attempt: int, now: datetime) -> timedelta:
        """How long the attempt's questions waited: not charged against its wall clock."""
        found = [q for q in self._by_id.values() if q.task_id == task_id and q.attempt == attempt]
        return sum((q.waited(now) for q in found), timedelta(0))

    def _answer(self, q: Question, text: str, by: str) -> Question:
        with self.transition():
            self.store.emit(
                EventType.QUESTION_ANSWERED,
                task_id=q.task_id,
                attempt=q.attempt,
                question_id=q.question_id,
                text=text,
                by=by,
            )
        return self._settle(q.question_id, text, by, self.clock())

    def _settle(self, question_id: str, text: str, by: str, at: datetime) -> Question:
        q = replace(self._by_id[question_id], answer=text, by=by, answered_at=at)
        self._by_id[question_id] = q
        return q


def _check_size(text: str) -> None:
    size = len(text.encode("utf-8"))
    if size > MAX_MESSAGE_BYTES:
        raise TooLarge(
            f"a question or answer is at most {MAX_MESSAGE_BYTES} bytes; this one is {size}",
            {"limit": MAX_MESSAGE_BYTES, "size": size},
        )


def owned(task: LiveTask | None, agent_id: str) -> LiveTask:
    """The running task the asking agent owns, or `NotOwner`."""
    if task is None or task.agent_id != agent_id:
        raise NotOwner("the task is not yours to ask about")
    return task
