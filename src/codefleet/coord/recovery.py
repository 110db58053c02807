"""Failures of the engine's own record: memory is never ahead of the database.

Every transition runs in `transition()`: one store transaction, then (after
the outermost COMMIT) the file restores it asked for (`engine_files`). When
the transaction fails, whatever the reason (a COMMIT refused by a full disk,
a statement that fails, a bug), SQLite rolls it back and the store hands over
the keys it had touched; `reload_touched` re-reads exactly those tasks,
agents and leases, so the engine's memory again matches what is stored, and
leaves everything else alone. In particular it does not reload the world: an
agent's liveness (memory only between heartbeats) and its fence survive, so a
rollback can neither un-fence a runner nor hand every agent a fresh stale
window. A SQLite error leaves as `StoreUnavailable` (503 on the wire): nothing
was granted that is not stored, and the next call works once the disk does.

Restarts: the fence is a column (`agents.fenced`), and the running server
records `alive_at` every heartbeat interval, so a restarted server credits
each agent with its own downtime (it could not hear heartbeats meanwhile)
instead of restarting every stale clock from zero.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from codefleet.coord.index import live_task
from codefleet.errors import StoreUnavailable
from codefleet.models import TaskStatus, from_iso, to_iso

if TYPE_CHECKING:
    from codefleet.coord.agents import AgentState
    from codefleet.coord.index import LiveIndex
    from codefleet.coord.interactive import InteractiveHolders
    from codefleet.coord.limits import FleetLimits
    from codefleet.coord.store import Row, Store, Touched

__all__ = ["RecoveryMixin"]

log = logging.getLogger(__name__)
ALIVE_KEY = "alive_at"
LIVE = frozenset({TaskStatus.PENDING, TaskStatus.ASSIGNED, TaskStatus.RUNNING})


class RecoveryMixin:
    store: Store
    index: LiveIndex
    clock: Callable[[], datetime]
    agents: dict[str, AgentState]
    agent_ids: dict[str, str]
    leases: dict[str, tuple[str, str]]
    task_leases: dict[str, set[str]]
    restoring: dict[str, dict[str, str | None]]
    idle_announced: bool
    interactive: InteractiveHolders
    limits: FleetLimits
    _finishing: bool
    _alive_marked: datetime | None

    if TYPE_CHECKING:

        def restores_due(self) -> list[str]: ...
        def finish_restores(self, task_ids: Iterable[str] | None = None) -> None: ...
        def _mirror_lease(self, path: str, agent_id: str, task_id: str) -> None: ...
        def agent_from_row(
            self, row: Row, heard_at: datetime, deaf_at_beat: float | None = None
        ) -> AgentState: ...
        @property
        def heartbeat_interval(self) -> float: ...

    @contextmanager
    def transition(self) -> Iterator[None]:
        """One store transaction; after the outermost COMMIT, the file restores it asked for.

        File I/O never runs inside a transaction it could not be rolled back with
        (STYLE §19, `engine_files`): the intent commits first, then the files are
        put back, then a transaction of its own releases them.
        """
        outermost = not self.store.in_transaction
        idle = self.idle_announced
        try:
            with self.store.transaction():
                yield
        except BaseException:
            if outermost:
                self.idle_announced = idle  # a memory-only flag the rolled-back tick may have set
            raise
        if outermost:
            self.finish_due_restores()

    def finish_due_restores(self) -> None:
        """Steps 2 and 3 of every restore not yet tried; a failure leaves them due.

        Called after a transition committed: whatever goes wrong here is not that
        transition's failure (it is stored), so it is logged and the next tick
        tries again.
        """
        due = self.restores_due()
        if not due or self._finishing:
            return
        self._finishing = True
        try:
            self.finish_restores(due)
        except Exception:  # a loop boundary: the restores stay due, the next tick retries
            log.exception("could not finish the restores of %s; retrying at the next tick", due)
        finally:
            self._finishing = False

    # -- after a rolled-back transaction -----------------------------------------------------

    def reload_touched(self, touched: Touched) -> None:
        """Re-read what a rolled-back transaction touched; nothing else (the store calls this)."""
        self._reload_tasks(touched.tasks)
        self._reload_agents(touched.agents)
        self._reload_leases(touched.lease_tasks)
        if touched.interactive:
            self.interactive.load()
        self.limits.load(self.clock())  # a pause is its events: re-read the last one

    def _reload_tasks(self, task_ids: set[str]) -> None:
        idx = self.index
        rows = {task_id: self.store.task(task_id) for task_id in task_ids}
        for task_id, row in rows.items():
            idx.forget(task_id)
            if row is None:
                idx.drop(task_id)  # its insert was rolled back
            else:
                idx.status[task_id] = TaskStatus(row["status"])
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
        idx.compute_chains(
            [t.id for t in relive] + [p for t in task_ids for p in idx.parents_of(t)]
        )

    def _reload_agents(self, agent_ids: set[str]) -> None:
        for agent_id in agent_ids:
            known = self.agents.get(agent_id)
            row = self.store.agent(agent_id)
            if row is None:  # its registration was rolled back
                if known is not None:
                    self.agents.pop(agent_id)
                    self.agent_ids.pop(known.name, None)
                continue
            # liveness is observed, never rolled back: a known agent keeps what was heard
            heard = known.last_heartbeat_at if known else from_iso(row["last_heartbeat_at"])
            agent = self.agent_from_row(row, heard, known.deaf_at_beat if known else None)
            self.agents[agent_id] = agent
            self.agent_ids[agent.name] = agent_id

    def _reload_leases(self, task_ids: set[str]) -> None:
        for task_id in task_ids:
            for path in self.task_leases.pop(task_id, set()):
                if self.leases.get(path, ("", ""))[1] == task_id:
                    del self.leases[path]
            for lease in self.store.leases_of_task(task_id):
                self._mirror_lease(lease["path"], lease["agent_id"], task_id)
            self.restoring.pop(task_id, None)
            for row in self.store.restores_of_task(task_id):
                self.restoring.setdefault(task_id, {})[row["path"]] = row["error"]

    # -- across restarts ----------------------------------------------------------------------

    def mark_alive(self) -> None:
        """Record that the server is up (at most once per heartbeat interval); never blocks a tick."""
        now = self.clock()
        last = self._alive_marked
        if last is not None and (now - last).total_seconds() < self.heartbeat_interval:
            return
        try:
            with self.store.transaction():
                self.store.set_meta(ALIVE_KEY, to_iso(now))
        except StoreUnavailable:
            log.warning("could not record that the server is up (the database refused)")
            return
        self._alive_marked = now

    def downtime(self, now: datetime) -> timedelta | None:
        """How long the server was down before this start; None when it never said."""
        alive = self.store.meta(ALIVE_KEY)
        return max(now - from_iso(alive), timedelta(0)) if alive else None
