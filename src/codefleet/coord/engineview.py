"""The engine as the read model sees it: a typed, read-only interface over its parts.

`readmodel` shapes the wire answers; this module is the only reader of the
engine's inner attributes (its store, live index, agent registry, lease
mirror, restores, limits), so the engine's layout can change behind it and a
rebase touches this file alone. Nothing here changes state, and no store
object crosses it: each record read is a method returning plain rows.

Two kinds of read:

- live reads run on the event loop beside the single writer and see its
  memory or its connection; each is bounded by the live fleet or by one task;
- `open_reader` and `feed` serve the projection: a read-only connection of
  its own (a snapshot reader that cannot write) and the commits' changed task
  ids (docs/decisions/0068-reads-are-projections.md and docs/decisions/0097-the-read-models-room.md, "Reads are projections", "The read model's room").
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Set
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from codefleet.coord.storage.database import Row, Touched
from codefleet.coord.storage.store import Store
from codefleet.coord.tables.checkregistry import source_key
from codefleet.models import TaskStatus

if TYPE_CHECKING:
    from codefleet.coord.engine import Engine

__all__ = ["EngineReads", "Liveness", "SessionView", "SnapshotReader"]


class SnapshotReader(Protocol):
    """The projection's own read-only connection: one snapshot per read transaction."""

    def read_transaction(self) -> AbstractContextManager[None]: ...
    def last_event_id(self) -> int: ...
    def tasks(self, status: str | None = None, limit: int = 1000, offset: int = 0) -> list[Row]: ...
    def tasks_of(self, task_ids: Set[str]) -> list[Row]: ...
    def task_counts(self) -> dict[str, int]: ...
    def usage_totals(self) -> tuple[int, int, float]: ...
    def events(self, since: int = 0, limit: int = 1000, type_: str | None = None) -> list[Row]: ...
    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Liveness:
    """When a live runner was last heard: as it said, and as the server could listen."""

    last_heartbeat_at: datetime
    heard_at: datetime  # moved later by the time the server could not listen
    head: str | None = None  # a clone's landed commit, as its last heartbeat said


@dataclass(frozen=True, slots=True)
class SessionView:
    """A person's session, as the read model shows it."""

    session_id: str
    agent_id: str
    name: str
    task_id: str
    title: str
    active: bool
    started_at: datetime
    last_write_at: datetime
    ended_at: datetime | None
    end_reason: str | None
    leases: int  # paths it holds now


class EngineReads:
    """Read-only access to one engine's record and memory."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    # -- the record, for the projection ------------------------------------------------------

    def open_reader(self) -> SnapshotReader:
        """A read-only connection of its own (SQLite refuses it any write)."""
        return Store(self._engine.store.path, read_only=True)

    def feed(self, changed: Callable[[Set[str], bool], None]) -> None:
        """Call `changed(task ids, reset)` after each COMMIT from now on (one reader only)."""
        store = self._engine.store
        if store.on_committed is not None:
            raise RuntimeError("the store already feeds a projection")

        def committed(touched: Touched) -> None:
            changed(touched.tasks, touched.reset)

        store.on_committed = committed

    # -- the record, on the loop ---------------------------------------------------------

    def tasks(self, status: str | None, limit: int, offset: int) -> list[Row]:
        return self._engine.store.tasks(status, limit, offset)

    def task(self, task_id: str) -> Row | None:
        return self._engine.store.task(task_id)

    def changes_of_task(self, task_id: str) -> list[Row]:
        return self._engine.store.changes_of_task(task_id)

    def leases_of_task(self, task_id: str) -> list[Row]:
        return self._engine.store.leases_of_task(task_id)

    def patches_of_task(self, task_id: str) -> list[Row]:
        return self._engine.store.patches_of_task(task_id)

    def agent_rows(self) -> list[Row]:
        return self._engine.store.agents()

    def lease_rows(self) -> list[Row]:
        return self._engine.store.leases()

    def sequence_rows(self) -> list[Row]:
        return self._engine.store.sequences()

    def resource_claims(self) -> dict[str, list[str]]:
        """Pending tasks by each resource key they declare (who waits for a held one)."""
        claims: dict[str, list[str]] = {}
        for task in self._engine.tasks.index.live.values():
            if task.status is TaskStatus.PENDING:
                for key in task.resources:
                    claims.setdefault(key, []).append(task.id)
        return {key: sorted(ids) for key, ids in claims.items()}

    def events(self, since: int, limit: int, type_: str | None = None) -> list[Row]:
        return self._engine.store.events(since, limit, type_)

    @property
    def commits(self) -> int:
        """Outer COMMITs so far: between two, every read of the record gives the same."""
        return self._engine.store.commits

    def checks(self) -> list[Row]:
        return self._engine.store.checks()

    def check_written_by(self, source: str) -> str | None:
        """The task whose write left the checks' file `source` as it is now, if one did."""
        return self._engine.checks.written_by(source_key(source))

    def last_event_id(self) -> int:
        return self._engine.store.last_event_id()

    def require_task(self, task_id: str) -> None:
        self._engine.tasks.require(task_id)

    def now(self) -> datetime:
        """The engine's time: what every read derives at (the wall clock, but in tests)."""
        return self._engine.clock()

    @property
    def workdir(self) -> str:
        return str(self._engine.tree.root)

    @property
    def tree_id(self) -> str | None:
        return self._engine.tree_id

    def last_run_started(self) -> datetime | None:
        """When the last fleet run began (its `fleet_started`); None before any."""
        return self._engine.limits.last_start

    @property
    def database_id(self) -> str:
        """Which record the server keeps: another one after `runs new` and a fresh `serve`."""
        return self._engine.database_id

    # -- the live index ----------------------------------------------------------------

    def parents(self, task_id: str) -> list[str]:
        return list(self._engine.tasks.index.parents.get(task_id, ()))

    def children(self, task_id: str) -> list[str]:
        return list(self._engine.tasks.index.children.get(task_id, ()))

    def status(self, task_id: str) -> TaskStatus | None:
        return self._engine.tasks.index.status.get(task_id)

    def live_count(self) -> int:
        return len(self._engine.tasks.index.live)

    def in_flight_count(self) -> int:
        return len(self._engine.tasks.index.in_flight)

    def landing(self) -> dict[str, Any]:
        """The landing queue as `GET /landing` shows it (`coord.calls.landingqueue`)."""
        return self._engine.landing_queue.state()

    def ready_count(self) -> int:
        return len(self._engine.tasks.index.ready)

    def task_counts(self) -> dict[str, int]:
        """Tasks by status (`GET /metrics`)."""
        return self._engine.store.task_counts()

    # -- agents, holders, restores, limits ------------------------------------------------

    def liveness(self, agent_id: str) -> Liveness | None:
        """A registered runner's last beat, or None when the registry does not hold it."""
        agent = self._engine.agents.get(agent_id)
        if agent is None:
            return None
        return Liveness(agent.last_heartbeat_at, agent.heard_at(self.deaf_seconds()), agent.head)

    def deaf_seconds(self) -> float:
        return self._engine.agents.deaf_seconds()

    def sessions(self) -> Iterator[SessionView]:
        """People's sessions, by name."""
        persons = self._engine.person
        for session in sorted(persons.by_session.values(), key=lambda s: s.name):
            yield SessionView(
                session.session_id,
                session.agent_id,
                session.name,
                session.task_id,
                session.title,
                session.active,
                session.started_at,
                session.last_write_at,
                session.ended_at,
                session.end_reason,
                len(persons.leases.paths_of(session.task_id)),
            )

    def holder(self, agent_id: str) -> tuple[str | None, str]:
        """(name, kind) of a lease holder: a runner's task, or a person's session."""
        return self._engine.holder(agent_id)

    def restoring(self, task_id: str) -> dict[str, str | None]:
        """Paths of the task whose ended attempt is not yet put back, with any restore error."""
        return dict(self._engine.preimages.restoring.get(task_id, {}))

    def limits_view(self, now: datetime) -> dict[str, Any]:
        return self._engine.limits.view(now)

    def budget(self) -> dict[str, Any]:
        return self._engine.limits.budget_json()
