"""Read projections of the wire API: tasks, graph, agents, leases, conflicts, state, health.

Nothing here changes state. Derived fields (a task's `runnable` and
`unmet_dependencies`, an agent's `stale`, a lease's `age_s`, a conflict's
`resolved`) are computed at read time from the store and the engine's live
index, never stored.
"""

from __future__ import annotations

from typing import Any

from codefleet import __version__
from codefleet.config import Settings
from codefleet.coord.engine import Engine
from codefleet.coord.store import Row
from codefleet.errors import NotFound
from codefleet.models import EventType, TaskStatus, from_iso, to_iso, utcnow
from codefleet.planning.analysis import PlannedTask
from codefleet.review.record import RunRecord

__all__ = ["Reads"]


class Reads:
    def __init__(self, engine: Engine, settings: Settings) -> None:
        self.engine = engine
        self.settings = settings

    def _decorate(self, task: Row) -> Row:
        idx = self.engine.index
        unmet = [
            p
            for p in idx.parents.get(task["id"], ())
            if idx.status.get(p) is not TaskStatus.SUCCEEDED
        ]
        backoff = task["backoff_until"]
        task["unmet_dependencies"] = unmet
        task["depends_on"] = list(idx.parents.get(task["id"], ()))
        task["runnable"] = (
            task["status"] == TaskStatus.PENDING
            and not unmet
            and task["attempts"] < task["max_attempts"]
            and (backoff is None or from_iso(backoff) <= utcnow())
        )
        return task

    def tasks(self, status: str | None, limit: int, offset: int) -> list[Row]:
        return [self._decorate(t) for t in self.engine.store.tasks(status, limit, offset)]

    def task(self, task_id: str) -> Row:
        store = self.engine.store
        row = store.task(task_id)
        if row is None:
            raise NotFound(f"no task {task_id}", {"task_id": task_id})
        task = self._decorate(row)
        task["dependents"] = list(self.engine.index.children.get(task_id, ()))
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
            for t in self.tasks(None, 1_000_000, 0)
        ]

    def agents(self) -> list[Row]:
        """Runners (`kind: runner`) then people's interactive sessions (`kind: interactive`)."""
        now = utcnow()
        rows = self.engine.store.agents()
        for row in rows:
            row["kind"] = "runner"
            live = self.engine.agents.get(row["id"])
            seen = live.last_heartbeat_at if live else from_iso(row["last_heartbeat_at"])
            row["last_heartbeat_at"] = to_iso(seen)
            if live:  # stale means unheard while the server was listening (LoopWatch)
                seen = live.heard_at(self.engine.deaf_seconds())
            row["stale"] = (
                row["status"] != "offline"
                and (now - seen).total_seconds() > self.settings.stale_after
            )
        return rows + self.engine.interactive.agent_rows()

    def leases(self) -> list[Row]:
        now = utcnow()
        rows = self.engine.store.leases()
        for row in rows:
            row["holder_agent_name"] = self.engine.holder_name(row["agent_id"])
            row["kind"] = self.engine.holder_kind(row["agent_id"])
            restoring = self.engine.restoring.get(row["task_id"], {})
            row["restoring"] = row["path"] in restoring  # its attempt ended; the file is not back
            row["restore_error"] = restoring.get(row["path"])
            row["age_s"] = round((now - from_iso(row["acquired_at"])).total_seconds(), 3)
        return rows

    def conflicts(self, resolved: bool | None) -> list[Row]:
        status = self.engine.index.status
        found = []
        for event in self.engine.store.events(0, 1_000_000, EventType.LEASE_DENIED):
            body = event["payload"]
            done = status.get(event["task_id"] or "") is TaskStatus.SUCCEEDED
            if resolved is not None and done != resolved:
                continue
            found.append(
                {
                    "event_id": event["id"], "at": event["at"], "path": body.get("path"),
                    "task_id": event["task_id"], "agent_id": event["agent_id"],
                    "agent_name": body.get("requester_name"),
                    "holder_task_id": body.get("holder_task_id"),
                    "holder_agent_id": body.get("holder_agent_id"),
                    "holder_agent_name": body.get("holder_agent_name"), "resolved": done,
                }
            )  # fmt: skip
        return found

    def state(self) -> Row:
        store, now = self.engine.store, utcnow()
        tokens_in, tokens_out, cost = store.usage_totals()
        return {
            "tasks": self.tasks(None, 1_000_000, 0),
            "agents": self.agents(),
            "leases": self.leases(),
            "counters": {
                "tasks": store.task_counts(),
                "input_tokens": tokens_in,
                "output_tokens": tokens_out,
                "cost_usd": round(cost, 6),
            },
            "last_event_id": store.last_event_id(),
            "server_time": to_iso(now),
            **self.engine.limits.view(now),
        }

    def record(self) -> RunRecord:
        """The run as `codefleet report` and `stats` read it through the wire, in one value."""
        store = self.engine.store
        return RunRecord(
            tasks=tuple(self.tasks(None, 1_000_000, 0)),
            events=tuple(store.events(0, 100_000_000)),
            workdir=str(self.engine.tree.root),
            agents=tuple(self.agents()),
        )

    def health(self) -> dict[str, Any]:
        now = utcnow()
        return {
            "status": "ok",
            "version": __version__,
            "workdir": str(self.engine.tree.root),
            "last_event_id": self.engine.store.last_event_id(),
            "live_tasks": len(self.engine.index.live),
            "loop_stalled_s": round(self.engine.deaf_seconds(), 3),
            "server_time": to_iso(now),
            "paused_until": self.engine.limits.view(now)["paused_until"],
            "in_flight": len(self.engine.index.in_flight),
            "budget": self.engine.limits.budget_json(),
        }
