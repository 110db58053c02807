"""The operator's messages to tasks (`codefleet say`): kept in order, delivered once.

A message is the event `operator_message {task_id, attempt, seq, text, delivered}`
(`seq` counts from 1 within the task; `delivered` says how it will arrive:
`running`, to the session at its next turn boundary, or `next_attempt`, in the
prompt under "Notes from the operator"). The event log is the record; this
part keeps each task's messages in memory, rebuilt from the log at start, and
writes memory only after the transaction that logged it commits, so memory is
never ahead of the database.

A message reaches only its own task: the running attempt's owner learns of
it in its heartbeat's answer (`pending`), and says in a later heartbeat which
ones its session has received (`delivered`, event `operator_message_delivered`
once per message). Every later attempt's prompt carries all of the task's
messages (`notes`). Limits: `MAX_MESSAGE_BYTES` each (413), `MAX_MESSAGES_PER_TASK`
per task (409). Docs: docs/decisions/0123-operator-messages-ride-the-heartbeat.md, "Operator messages ride the heartbeat".
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Final

from codefleet.attempt import OperatorNote
from codefleet.coord.storage.database import Row
from codefleet.coord.storage.store import Store
from codefleet.coord.tables.liveindex import LiveTask
from codefleet.coord.tables.restores import Transition
from codefleet.errors import InvalidState, TooLarge
from codefleet.models import (
    MAX_MESSAGE_BYTES,
    MAX_MESSAGES_PER_TASK,
    EventType,
    TaskStatus,
    to_iso,
)

__all__ = ["NEXT_ATTEMPT", "RUNNING", "Message", "Messages"]

RUNNING: Final = "running"
NEXT_ATTEMPT: Final = "next_attempt"
PAGE: Final = 1000


@dataclass(frozen=True, slots=True)
class Message:
    """One kept message: where it was headed when sent, and whether it has arrived."""

    seq: int
    text: str
    at: str
    attempt: int
    delivered: str  # RUNNING or NEXT_ATTEMPT
    arrived: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "text": self.text,
            "at": self.at,
            "attempt": self.attempt,
            "delivered": self.delivered,
            "arrived": self.arrived,
        }


class Messages:
    """Each task's operator messages; the one writer of `operator_message*` events."""

    def __init__(self, store: Store, clock: Callable[[], datetime], transition: Transition) -> None:
        self.store = store
        self.clock = clock
        self.transition = transition
        self._by_task: dict[str, list[Message]] = {}

    def load(self) -> None:
        """Rebuild from the event log (messages, then which of them arrived)."""
        self._by_task = {}
        for event in self._events(EventType.OPERATOR_MESSAGE):
            p = event["payload"]
            message = Message(
                int(p["seq"]),
                str(p["text"]),
                str(event["at"]),
                int(p["attempt"]),
                str(p["delivered"]),
            )
            self._by_task.setdefault(str(event["task_id"]), []).append(message)
        for event in self._events(EventType.OPERATOR_MESSAGE_DELIVERED):
            self._mark(str(event["task_id"]), int(event["payload"]["seq"]))

    def _events(self, kind: EventType) -> Iterator[Row]:
        since = 0
        while page := self.store.events(since, PAGE, kind.value):
            yield from page
            since = int(page[-1]["id"])

    def of(self, task_id: str) -> list[Message]:
        """The task's messages, oldest first."""
        return list(self._by_task.get(task_id, ()))

    def notes(self, task_id: str) -> tuple[OperatorNote, ...]:
        """What an attempt's prompt carries: every message of the task so far."""
        return tuple(OperatorNote(m.seq, m.text) for m in self._by_task.get(task_id, ()))

    def pending(self, task_id: str) -> tuple[OperatorNote, ...]:
        """The messages of the task that no session has received yet."""
        found = self._by_task.get(task_id, ())
        return tuple(OperatorNote(m.seq, m.text) for m in found if not m.arrived)

    def say(self, task: LiveTask, text: str) -> dict[str, Any]:
        """Keep one message for a live task (event `operator_message`); its seq and route."""
        size = len(text.encode("utf-8"))
        if size > MAX_MESSAGE_BYTES:
            raise TooLarge(
                f"a message is at most {MAX_MESSAGE_BYTES} bytes; this one is {size}",
                {"limit": MAX_MESSAGE_BYTES, "size": size},
            )
        kept = self._by_task.get(task.id, [])
        if len(kept) >= MAX_MESSAGES_PER_TASK:
            raise InvalidState(
                f"task {task.id} already has {len(kept)} messages, the most one task keeps",
                {"limit": MAX_MESSAGES_PER_TASK},
            )
        running = task.status in (TaskStatus.ASSIGNED, TaskStatus.RUNNING)
        message = Message(
            seq=len(kept) + 1,
            text=text,
            at=to_iso(self.clock()),
            attempt=task.attempts if running else task.attempts + 1,
            delivered=RUNNING if running else NEXT_ATTEMPT,
        )
        with self.transition():
            self.store.emit(
                EventType.OPERATOR_MESSAGE,
                task_id=task.id,
                agent_id=task.agent_id,
                seq=message.seq,
                attempt=message.attempt,
                text=text,
                delivered=message.delivered,
            )
        self._by_task.setdefault(task.id, []).append(message)
        return {"task_id": task.id, **message.to_json()}

    def arrived(self, task_id: str, upto: int, attempt: int, agent_id: str) -> None:
        """The session of `attempt` has every message up to `upto`: log each one once."""
        new = [m for m in self._by_task.get(task_id, ()) if m.seq <= upto and not m.arrived]
        if not new:
            return
        with self.transition():
            for m in new:
                self.store.emit(
                    EventType.OPERATOR_MESSAGE_DELIVERED,
                    task_id=task_id,
                    agent_id=agent_id,
                    seq=m.seq,
                    attempt=attempt,
                )
        for m in new:
            self._mark(task_id, m.seq)

    def _mark(self, task_id: str, seq: int) -> None:
        kept = self._by_task.get(task_id, [])
        self._by_task[task_id] = [replace(m, arrived=True) if m.seq == seq else m for m in kept]

    def reset(self) -> None:
        self._by_task = {}
