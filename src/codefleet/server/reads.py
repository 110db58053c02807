"""Read projections of the wire API: tasks, graph, agents, leases, conflicts, state, health.

Nothing here changes state, and nothing here reads the engine but through
`coord.reads.EngineReads`. Derived fields (a task's `runnable` and
`unmet_dependencies`, an agent's `stale`, a lease's `age_s`, a conflict's
`resolved`) are computed at read time, never stored. The reads that grow with
the run (`/state`'s task list, `/conflicts`) come from the projection
(`coord.projection`), kept encoded and refreshed off the event loop on a read
snapshot (docs/decisions.md, "Reads are projections").
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime
from typing import Any, Final, TypeVar

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from codefleet import __version__
from codefleet.config import Settings
from codefleet.coord.engine import Engine
from codefleet.coord.projection import Cut, encode
from codefleet.coord.readiness import charged, runnable
from codefleet.coord.reads import EngineReads
from codefleet.coord.store import Row
from codefleet.errors import NotFound
from codefleet.models import TaskStatus, from_iso, to_iso
from codefleet.planning.analysis import PlannedTask
from codefleet.review.record import RunRecord

__all__ = ["PartsResponse", "Reads", "encode"]

ALL: Final = 1_000_000  # "every row" for the reads that list a whole table
ALL_EVENTS: Final = 100_000_000
T = TypeVar("T")


def decorate(task: Row, parents: list[str], done: Callable[[str], bool], now: datetime) -> Row:
    """Add a task's derived fields, given its parents and which tasks have succeeded."""
    unmet = [p for p in parents if not done(p)]
    backoff = task["backoff_until"]
    task["unmet_dependencies"] = unmet
    task["depends_on"] = parents
    task["runnable"] = runnable(
        task["status"], unmet=len(unmet),
        charged=charged(task["attempts"], task.get("uncharged_attempts") or 0),
        max_attempts=task["max_attempts"], backoff_until=from_iso(backoff) if backoff else None,
        now=now,
    )  # fmt: skip
    return task


class PartsResponse(Response):
    """A JSON body sent in its parts, in order: the cached 6 MB is never copied into one."""

    media_type = "application/json"

    def __init__(self, parts: tuple[bytes, ...]) -> None:
        self.parts = parts
        super().__init__(headers={"content-length": str(sum(len(p) for p in parts))})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        last = len(self.parts) - 1
        for n, part in enumerate(self.parts):
            await send({"type": "http.response.body", "body": part, "more_body": n < last})


class Reads:
    def __init__(self, engine: Engine, settings: Settings) -> None:
        self.engine = EngineReads(engine)
        self.settings = settings
        self.projection = self.engine.projection()
        self._reading = asyncio.Lock()  # one projection read at a time

    def _decorate(self, task: Row) -> Row:
        status = self.engine.status
        done = lambda p: status(p) is TaskStatus.SUCCEEDED  # noqa: E731
        return decorate(task, self.engine.parents(task["id"]), done, self.engine.now())

    def tasks(self, status: str | None, limit: int, offset: int) -> list[Row]:
        return [self._decorate(t) for t in self.engine.store.tasks(status, limit, offset)]

    def task(self, task_id: str) -> Row:
        store = self.engine.store
        row = store.task(task_id)
        if row is None:
            raise NotFound(f"no task {task_id}", {"task_id": task_id})
        task = self._decorate(row)
        task["dependents"] = self.engine.children(task_id)
        task["file_changes"] = store.changes_of_task(task_id)
        task["leases"] = store.leases_of_task(task_id)
        files = store.patches_of_task(task_id)
        task["patch"] = {
            "files": len(files),
            "added": sum(f["added"] for f in files),
            "removed": sum(f["removed"] for f in files),
        }
        return task

    def patch(self, task_id: str) -> Row:
        """The task's recorded change: per-file git-style diffs with stats."""
        self.engine.require_task(task_id)
        files = self.engine.store.patches_of_task(task_id)
        return {
            "task_id": task_id,
            "files": files,
            "added": sum(f["added"] for f in files),
            "removed": sum(f["removed"] for f in files),
        }

    def planned(self) -> list[PlannedTask]:
        """The stored graph as `graph check` sees it (scopes as they stand, widened by vetoes)."""
        return [
            PlannedTask(t["id"], t["priority"], tuple(t["file_scope"]), tuple(t["depends_on"]))
            for t in self.tasks(None, ALL, 0)
        ]

    def agents(self) -> list[Row]:
        """Runners (`kind: runner`) then people's interactive sessions (`kind: interactive`)."""
        now = self.engine.now()
        rows = self.engine.store.agents()
        for row in rows:
            row["kind"] = "runner"
            live = self.engine.live_agent(row["id"])
            seen = live.last_heartbeat_at if live else from_iso(row["last_heartbeat_at"])
            row["last_heartbeat_at"] = to_iso(seen)
            if live:  # stale means unheard while the server was listening (LoopWatch)
                seen = live.heard_at(self.engine.deaf_seconds())
            row["stale"] = (
                row["status"] != "offline"
                and (now - seen).total_seconds() > self.settings.stale_after
            )
        return rows + self.engine.interactive_agents()

    def leases(self) -> list[Row]:
        now = self.engine.now()
        rows = self.engine.store.leases()
        for row in rows:
            row["holder_agent_name"], row["kind"] = self.engine.holder(row["agent_id"])
            restoring = self.engine.restoring(row["task_id"])
            row["restoring"] = row["path"] in restoring  # its attempt ended; the file is not back
            row["restore_error"] = restoring.get(row["path"])
            row["age_s"] = round((now - from_iso(row["acquired_at"])).total_seconds(), 3)
        return rows

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
        rest = encode({
            "agents": self.agents(),
            "leases": self.leases(),
            "counters": recorded.counters,
            "last_event_id": recorded.last_event_id,
            "server_time": to_iso(now),
            **self.engine.limits_view(now),
        })  # fmt: skip
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
            events=tuple(self.engine.store.events(0, ALL_EVENTS)),
            workdir=self.engine.workdir,
            agents=tuple(self.agents()),
        )

    def health(self) -> dict[str, Any]:
        now = self.engine.now()
        return {
            "status": "ok",
            "version": __version__,
            "workdir": self.engine.workdir,
            "last_event_id": self.engine.store.last_event_id(),
            "live_tasks": self.engine.live_count(),
            "loop_stalled_s": round(self.engine.deaf_seconds(), 3),
            "server_time": to_iso(now),
            "paused_until": self.engine.limits_view(now)["paused_until"],
            "in_flight": self.engine.in_flight_count(),
            "budget": self.engine.budget(),
        }
