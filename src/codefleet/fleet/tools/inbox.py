"""The operator's messages on their way to one running attempt (`codefleet say`).

The runner's heartbeat brings the messages its running task has not received
(`Inbox.offer`, deduplicated by `seq`); the executor hands them to the session
at its next turn boundary (`hear_operator`: when a turn ends well, the new
messages are one more user message in the same conversation, through the
executor's follow-up turn), and the next heartbeat tells the server which ones
the session has (`Inbox.acknowledged`, event `operator_message_delivered`).
The messages the assignment's prompt already carried count as received.
The heartbeat also brings the answers to the attempt's questions
(`ask_operator`, `fleet.tools.ask`): `expect` / `answer` / `settled`, and `waited`
is the time they took, not charged against the attempt's wall clock.

What "the next turn boundary" means, and why not mid-turn: docs/decisions/0123-operator-messages-ride-the-heartbeat.md,
"Operator messages ride the heartbeat".
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Final

from codefleet.attempt import AssignedTask, AttemptReport, OperatorNote, merged_report

__all__ = ["MAX_OPERATOR_TURNS", "Inbox", "hear_operator", "operator_message"]

Turn = Callable[[str], Awaitable[AttemptReport]]  # one more user message, as in `reconcile`
MAX_OPERATOR_TURNS: Final = 5  # operator turns one attempt takes; later messages wait
LIVE_MESSAGE: Final = (
    "A message from the operator who runs this fleet (follow it where it applies, then finish "
    "the task and reply with a short summary of what you changed):"
)


def operator_message(notes: Iterable[OperatorNote]) -> str:
    """The user message that hands a running session the operator's new messages."""
    return LIVE_MESSAGE + "\n\n" + "\n\n".join(note.text.strip() for note in notes) + "\n"


class Inbox:
    """One attempt's operator messages: filled by the heartbeat, emptied by the session."""

    def __init__(self, task: AssignedTask | None = None) -> None:
        self.task_id = task.id if task else ""
        seen = max((n.seq for n in task.notes), default=0) if task else 0
        self._seen = seen  # the highest seq known (the prompt's notes, then the heartbeat's)
        self._received = seen  # the highest seq the session has
        self._told = 0  # the highest seq a heartbeat told the server about
        self._waiting: list[OperatorNote] = []
        self._questions: dict[str, asyncio.Future[str]] = {}  # asked, not answered yet
        self._since = 0.0  # when the first open question was asked (monotonic)
        self._waited = 0.0  # seconds spent waiting on answers before that

    def offer(self, notes: Iterable[OperatorNote]) -> None:
        """Keep the messages not seen yet, in order."""
        for note in sorted(notes, key=lambda n: n.seq):
            if note.seq > self._seen:
                self._waiting.append(note)
                self._seen = note.seq

    def expect(self, question_id: str) -> asyncio.Future[str]:
        """A question is asked: its answer's future (set by `answer`); the wait clock runs."""
        if not self._questions:
            self._since = time.monotonic()
        found = self._questions[question_id] = asyncio.get_running_loop().create_future()
        return found

    def answer(self, answers: Iterable[tuple[str, str]]) -> None:
        """A heartbeat brought answers: hand each to its waiting question."""
        for question_id, text in answers:
            waiting = self._questions.get(question_id)
            if waiting is not None and not waiting.done():
                waiting.set_result(text)

    def settled(self, question_id: str) -> None:
        """The question is over (answered or given up): stop its wait clock."""
        self._questions.pop(question_id, None)
        if not self._questions:
            self._waited += time.monotonic() - self._since

    @property
    def asking(self) -> bool:
        return bool(self._questions)

    def waited(self) -> float:
        """Seconds this attempt has waited on the operator's answers (not charged)."""
        open_for = time.monotonic() - self._since if self._questions else 0.0
        return self._waited + open_for

    @property
    def waiting(self) -> tuple[OperatorNote, ...]:
        """The messages waiting for the session's next turn boundary."""
        return tuple(self._waiting)

    def take(self) -> tuple[OperatorNote, ...]:
        """The messages waiting for the session (and forget them)."""
        taken, self._waiting = tuple(self._waiting), []
        return taken

    def received(self, notes: Iterable[OperatorNote]) -> None:
        self._received = max([self._received, *(n.seq for n in notes)])

    def acknowledged(self) -> tuple[str, int] | None:
        """What the next heartbeat says the session has: (task, highest seq)."""
        return (self.task_id, self._received) if self.task_id else None

    def told(self, acknowledged: tuple[str, int] | None) -> None:
        """A heartbeat carried `acknowledged` to the server."""
        if acknowledged is not None:
            self._told = max(self._told, acknowledged[1])

    @property
    def owed(self) -> bool:
        """The session has messages the server has not heard about yet."""
        return self._received > self._told


async def hear_operator(inbox: Inbox, report: AttemptReport, turn: Turn | None) -> AttemptReport:
    """After a turn that ended well, one more turn per batch of new operator messages."""
    for _ in range(MAX_OPERATOR_TURNS):
        if turn is None or not report.ok:
            return report
        notes = inbox.take()
        if not notes:
            return report
        after = await turn(operator_message(notes))
        inbox.received(notes)
        report = merged_report(report, after)
    return report
