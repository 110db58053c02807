"""The event log: events appended inside a transaction, published after its COMMIT.

`emit` appends one event of a known `EventType`, stamped with the engine's
clock (`Database.clock`), and queues it; `emit_many` appends a batch of one
type in one statement, sharing one `at` and taking consecutive ids. The
queued events reach the `on_commit` listener only after the outer COMMIT
(`database`), so no subscriber sees a rolled-back event. Event ids strictly
increase (the schema's `AUTOINCREMENT`) and survive a reset, so a reader's
cursor (`events(since=...)`) never goes back. Payloads are stored as JSON and
decoded on the way out.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

from codefleet.coord.storage.database import Database, Row
from codefleet.coord.storage.jsontext import payload_json, plain_json
from codefleet.coord.storage.queries import (
    INSERT_EVENT,
    LAST_ROWID,
    SELECT_EVENTS,
    SELECT_EVENTS_OF_TYPE,
    SELECT_LAST_EVENT_ID,
    SELECT_LAST_EVENT_OF_TYPES,
)
from codefleet.models import EventType, to_iso

__all__ = ["EventLog"]


def _decode_event(row: sqlite3.Row) -> Row:
    event = dict(row)
    event["payload"] = json.loads(event["payload"])
    return event


class EventLog(Database):
    """The database with its event log."""

    def emit(
        self,
        type_: EventType | str,
        *,
        task_id: str | None = None,
        agent_id: str | None = None,
        **payload: Any,
    ) -> Row:
        """Append one event; the type must be a known `EventType`."""
        kind = EventType(type_)
        at = to_iso(self.clock())
        body = payload_json(payload)
        cur = self._write(INSERT_EVENT, (at, kind.value, task_id, agent_id, body))
        event: Row = {
            "id": cur.lastrowid,
            "at": at,
            "type": kind.value,
            "task_id": task_id,
            "agent_id": agent_id,
            "payload": payload,
        }
        self._pending.append(event)
        return event

    def emit_many(self, type_: EventType, items: Sequence[tuple[str, dict[str, Any]]]) -> None:
        """`emit` of one type for each (task id, payload of plain values), in one `executemany`.

        The events share one `at` (one batch, one transaction) and take consecutive
        ids: nothing else writes between the statement and `last_insert_rowid()`.
        """
        at = to_iso(self.clock())
        kind = type_.value
        params = [(at, kind, task_id, None, plain_json(payload)) for task_id, payload in items]
        if not self._depth:
            raise RuntimeError("store writes must run inside transaction()")
        self._flush()
        self._db.executemany(INSERT_EVENT, params)
        last = int(self._db.execute(LAST_ROWID).fetchone()[0])
        for n, (task_id, payload) in enumerate(items, start=last - len(items) + 1):
            self._pending.append(
                {
                    "id": n,
                    "at": at,
                    "type": kind,
                    "task_id": task_id,
                    "agent_id": None,
                    "payload": payload,
                }
            )

    def events(self, since: int = 0, limit: int = 1000, type_: str | None = None) -> list[Row]:
        if type_:
            rows = self._read(SELECT_EVENTS_OF_TYPE, (since, type_, limit))
        else:
            rows = self._read(SELECT_EVENTS, (since, limit))
        return [_decode_event(r) for r in rows]

    def last_event_id(self) -> int:
        row = self._one(SELECT_LAST_EVENT_ID)
        return int(row[0]) if row else 0

    def last_event_of(self, types: Iterable[EventType]) -> Row | None:
        """The most recent event of any of `types`, or None."""
        row = self._one(SELECT_LAST_EVENT_OF_TYPES, (json.dumps([t.value for t in types]),))
        return _decode_event(row) if row else None
