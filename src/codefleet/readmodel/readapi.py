"""The wire API's reads: tasks, graph, agents, leases, conflicts, state, health, the record.

Nothing here changes state, and nothing here reads the engine but through
`coord.engineview.EngineReads`. Derived fields (a task's `runnable` and
`unmet_dependencies`, an agent's `stale`, a lease's `age_s`, a conflict's
`resolved`) are computed at read time (`rows`), never stored. The reads that
grow with the run (`/state`'s task list, `/conflicts`) come from the
projection (`projection`), kept encoded and refreshed off the event loop on a
read snapshot (docs/decisions/0068-reads-are-projections.md, "Reads are projections").
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, TypeVar

from codefleet import __version__
from codefleet.coord.engineview import EngineReads
from codefleet.errors import NotFound
from codefleet.models import MAX_INT, TaskStatus, from_iso, to_iso
from codefleet.readmodel.projection import Cut, Projection
from codefleet.readmodel.wirerows import Row, decorate, encode, session_row
from codefleet.resources import is_resource_key, resource_keys, resource_name
from codefleet.review.runrecord import RunRecord

if TYPE_CHECKING:
    from codefleet.analysis.graphanalysis import PlannedTask

__all__ = ["Reads"]

ALL: Final = 1_000_000  # "every row" for the reads that list a whole table
ALL_EVENTS: Final = 100_000_000
T = TypeVar("T")


class Reads:
    """One engine's reads; `stale_after` is when an unheard runner reads as stale."""

    def __init__(self, engine: EngineReads, stale_after: float) -> None:
        self.engine = engine
        self.stale_after = stale_after
        self.projection = Projection(engine.open_reader, engine.parents)
        engine.feed(self.projection.committed)  # every commit from now on: one projection
        self._reading = asyncio.Lock()  # one projection read at a time

    def _decorate(self, task: Row) -> Row:
        status = self.engine.status
        done = lambda p: status(p) is TaskStatus.SUCCEEDED  # noqa: E731
        return decorate(task, self.engine.parents(task["id"]), done, self.engine.now())

    def tasks(self, status: str | None, limit: int, offset: int) -> list[Row]:
        return [self._decorate(t) for t in self.engine.tasks(status, limit, offset)]

    def task(self, task_id: str) -> Row:
        row = self.engine.task(task_id)
        if row is None:
            raise NotFound(f"no task {task_id}", {"task_id": task_id})
        task = self._decorate(row)
        task["dependents"] = self.engine.children(task_id)
        task["file_changes"] = self.engine.changes_of_task(task_id)
        task["leases"] = self.engine.leases_of_task(task_id)
        files = self.engine.patches_of_task(task_id)
        task["patch"] = {
            "files": len(files),
            "added": sum(f["added"] for f in files),
            "removed": sum(f["removed"] for f in files),
        }
        return task

    def patch(self, task_id: str) -> Row:
        """The task's recorded change: per-file git-style diffs with stats."""
        self.engine.require_task(task_id)
        files = self.engine.patches_of_task(task_id)
        return {
            "task_id": task_id,
            "files": files,
            "added": sum(f["added"] for f in files),
            "removed": sum(f["removed"] for f in files),
        }

    def planned(self) -> list[PlannedTask]:
        """The stored graph as `graph check` sees it (scopes as they stand, widened by vetoes)."""
        from codefleet.analysis.graphanalysis import PlannedTask  # on use: only `/graph` asks

        return [
            PlannedTask(
                t["id"],
                t["priority"],
                (*t["file_scope"], *resource_keys(t["resources"])),
                tuple(t["depends_on"]),
            )
            for t in self.tasks(None, ALL, 0)
        ]

    def agents(self) -> list[Row]:
        """Runners (`kind: runner`) then people's sessions (`kind: interactive`).

        `earlier`: a runner of an earlier run, offline and not heard since the last run
        began (the dashboards fold these into one line)."""
        now = self.engine.now()
        run_started = self.engine.last_run_started()
        rows = self.engine.agent_rows()
        for row in rows:
            row["kind"] = "runner"
            live = self.engine.liveness(row["id"])
            row["head"] = live.head if live else None  # a clone's landed commit
            seen = live.last_heartbeat_at if live else from_iso(row["last_heartbeat_at"])
            row["last_heartbeat_at"] = to_iso(seen)
            row["earlier"] = (
                run_started is not None and row["status"] == "offline" and seen < run_started
            )
            if live:  # stale means unheard while the server was listening (LoopWatch)
                seen = live.heard_at
            row["stale"] = (
                row["status"] != "offline" and (now - seen).total_seconds() > self.stale_after
            )
        workdir = self.engine.workdir
        return rows + [session_row(session, workdir) for session in self.engine.sessions()]

    def leases(self) -> list[Row]:
        now = self.engine.now()
        rows = self.engine.lease_rows()
        for row in rows:
            row["holder_agent_name"], row["kind"] = self.engine.holder(row["agent_id"])
            restoring = self.engine.restoring(row["task_id"])
            row["restoring"] = row["path"] in restoring  # its attempt ended; the file is not back
            row["restore_error"] = restoring.get(row["path"])
            row["age_s"] = round((now - from_iso(row["acquired_at"])).total_seconds(), 3)
        return rows

    def resources(self) -> Row:
        """`GET /resources`: who holds each resource, who waits for a held one, the sequences."""
        held = [row for row in self.leases() if is_resource_key(row["path"])]
        claims = self.engine.resource_claims()
        holders = [
            {
                "name": resource_name(row["path"]),
                "task_id": row["task_id"],
                "agent_id": row["agent_id"],
                "holder_agent_name": row["holder_agent_name"],
                "kind": row["kind"],
                "acquired_at": row["acquired_at"],
                "age_s": row["age_s"],
                "waiters": claims.get(row["path"], []),
            }
            for row in held
        ]
        sequences = [
            {"name": row["name"], "last_value": row["last_value"], "next": _next(row["last_value"])}
            for row in self.engine.sequence_rows()
        ]
        return {"resources": holders, "sequences": sequences}

    async def conflicts_json(self, resolved: bool | None) -> bytes:
        """`GET /conflicts`, from the projection refreshed off the event loop."""
        return await self._recorded(
            lambda cut: self.projection.conflicts(cut, self.engine.now(), resolved)
        )

    async def state_json(self) -> tuple[bytes, ...]:
        """`GET /state`'s JSON in parts: the record's from the projection, then the live part.

        The projection's cut comes first, so every event after its `last_event_id`
        is also in the live part or still to come on the stream: a client that
        replays from there misses nothing.
        """
        recorded = await self._recorded(lambda cut: self.projection.state(cut, self.engine.now()))
        now = self.engine.now()
        rest = encode(
            {
                "agents": self.agents(),
                "leases": self.leases(),
                "counters": recorded.counters,
                "last_event_id": recorded.last_event_id,
                "database_id": self.engine.database_id,
                "server_time": to_iso(now),
                **self.engine.limits_view(now),
            }
        )
        return (b'{"tasks":[', recorded.tasks, b"],", rest[1:])

    async def _recorded(self, read: Callable[[Cut], T]) -> T:
        """`read` on a fresh cut, off the loop; one at a time, each to its end (shielded)."""
        return await asyncio.shield(asyncio.ensure_future(self._serialized(read)))

    async def _serialized(self, read: Callable[[Cut], T]) -> T:
        async with self._reading:
            cut = self.projection.cut()
            try:
                return await asyncio.to_thread(read, cut)
            except BaseException:
                self.projection.lost(cut)
                raise

    def close(self) -> None:
        self.projection.close()

    def record(self) -> RunRecord:
        """The run as `codefleet report` and `stats` read it through the wire, in one value."""
        return RunRecord(
            tasks=tuple(self.tasks(None, ALL, 0)),
            events=tuple(self.engine.events(0, ALL_EVENTS)),
            workdir=self.engine.workdir,
            agents=tuple(self.agents()),
        )

    def health(self) -> dict[str, Any]:
        now = self.engine.now()
        return {
            "status": "ok",
            "version": __version__,
            "workdir": self.engine.workdir,
            "tree_id": self.engine.tree_id,
            "database_id": self.engine.database_id,
            "last_event_id": self.engine.last_event_id(),
            "live_tasks": self.engine.live_count(),
            "loop_stalled_s": round(self.engine.deaf_seconds(), 3),
            "server_time": to_iso(now),
            "paused_until": self.engine.limits_view(now)["paused_until"],
            "in_flight": self.engine.in_flight_count(),
            "budget": self.engine.budget(),
            "landing": self._landing_health(),
        }

    def _landing_health(self) -> dict[str, Any]:
        """How many tasks wait to land, and whether landing is halted (and nothing else runs)."""
        state = self.engine.landing()
        halted = state["halted"] is not None
        stuck = halted and self.engine.in_flight_count() == 0 and self.engine.ready_count() == 0
        return {"queued": len(state["queue"]), "halted": halted, "stuck": stuck}


def _next(last_value: int) -> int | None:
    """The value a sequence hands out next (None: it is exhausted, at `MAX_INT`)."""
    return None if last_value >= MAX_INT else int(last_value) + 1
