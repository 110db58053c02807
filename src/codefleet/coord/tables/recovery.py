"""Recovery: memory is never ahead of the database, and a restart loses nothing.

Every transition runs in the engine's `transition()`: one store transaction,
then (after the outermost COMMIT) the file restores it asked for (`preimages`).
When the transaction fails, whatever the reason (a COMMIT refused by a full
disk, a statement that fails, a bug), SQLite rolls it back and the store
hands over the keys it had touched; the engine's `reload_touched` has each
part re-read exactly those (`reload_tasks` here for the live index), so
memory again matches what is stored, and everything else is left alone.
It does not reload the world: an agent's liveness (memory only between
heartbeats) and its fence survive, so a rollback can neither un-fence a
runner nor hand every agent a fresh stale window. A SQLite error leaves as `StoreUnavailable` (503 on the wire): nothing
was granted that is not stored, and the next call works once the disk does.

Restarts: the fence is a column (`agents.fenced`), and the running server
records `alive_at` every heartbeat interval (`Recovery`, which owns when
it last did), so a restarted server credits each agent with its own downtime
(it could not hear heartbeats meanwhile) instead of restarting every stale
clock from zero. The database's own identity (`database_id`, made at its first
start and never rewritten) tells a client that follows the server when the one
answering now keeps another record (`codefleet runs new`, a fresh `serve`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from datetime import datetime, timedelta

from codefleet.coord.storage.store import Store
from codefleet.coord.tables.liveindex import LiveIndex, live_task
from codefleet.errors import StoreUnavailable
from codefleet.models import TaskStatus, from_iso, to_iso

__all__ = ["Recovery", "database_id", "reload_tasks"]

log = logging.getLogger(__name__)
ALIVE_KEY = "alive_at"
DATABASE_KEY = "database_id"
LIVE = frozenset({TaskStatus.PENDING, TaskStatus.ASSIGNED, TaskStatus.RUNNING})


def reload_tasks(idx: LiveIndex, store: Store, task_ids: set[str]) -> None:
    """Re-read the tasks a rolled-back transaction touched into the live index."""
    rows = {task_id: store.task(task_id) for task_id in task_ids}
    for task_id, row in rows.items():
        idx.forget(task_id)
        if row is None:
            idx.drop(task_id)  # its insert was rolled back
        else:
            idx.status[task_id] = TaskStatus(row["status"])
            idx.replace_parents(task_id, store.parents(task_id))  # a redefinition's edges
    relive = [live_task(row) for row in rows.values() if row and row["status"] in LIVE]
    for task in relive:
        task.unmet = idx.unmet_of(task.id)
        idx.add_live(task)
        if task.status is TaskStatus.PENDING:
            idx.place_pending(task)
        else:
            idx.set_status(task, task.status)
    for child_id in {c for t in task_ids for c in idx.children.get(t, ())} - task_ids:
        child = idx.live.get(child_id)  # a parent's success may have been rolled back
        if child is not None and child.status is TaskStatus.PENDING:
            child.unmet = idx.unmet_of(child_id)
            idx.place_pending(child)
    idx.compute_chains([t.id for t in relive] + [p for t in task_ids for p in idx.parents_of(t)])


def database_id(store: Store) -> str:
    """This database's identity: read, or made and recorded at its first start."""
    known = store.meta(DATABASE_KEY)
    if known:
        return known
    made = f"db_{os.urandom(16).hex()}"
    with store.transaction():
        store.set_meta(DATABASE_KEY, made)
    return made


class Recovery:
    """What a restart reads of the last run: the `alive_at` mark it wrote while it ran."""

    def __init__(self, store: Store, clock: Callable[[], datetime], interval: float) -> None:
        self.store = store
        self.clock = clock
        self.interval = interval
        self._marked: datetime | None = None

    def mark(self) -> None:
        """Record that the server is up (at most once per `interval`); never blocks a tick."""
        now = self.clock()
        last = self._marked
        if last is not None and (now - last).total_seconds() < self.interval:
            return
        try:
            with self.store.transaction():
                self.store.set_meta(ALIVE_KEY, to_iso(now))
        except StoreUnavailable:
            log.warning("could not record that the server is up (the database refused)")
            return
        self._marked = now

    def downtime(self, now: datetime) -> timedelta | None:
        """How long the server was down before this start; None when it never said."""
        alive = self.store.meta(ALIVE_KEY)
        return max(now - from_iso(alive), timedelta(0)) if alive else None
