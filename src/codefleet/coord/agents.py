"""Agent and lease transitions of the engine: registration, liveness, fencing, leases.

Fencing: an agent's `epoch` is bumped on every registration and every forced
take-back (stale, deadline, cancel, re-registration). Every runner call but
register carries the epoch it was given; a mismatch is `StaleEpoch`, after
which the runner drops what it was doing and registers again. Until it does,
a fenced agent is not handed new work: its runner is still busy aborting, and
the re-registration would take that work straight back.

Leases: acquisition is all-or-nothing over the canonical paths of one
request, inside one transaction; the decision is whether the primary-key row
is ours. A denial is an answer (with the holder), never a wait.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from codefleet.coord.registration import Holder, check_name, check_tree
from codefleet.coord.scheduler import AgentView
from codefleet.errors import NotFound, StaleEpoch
from codefleet.models import (
    AgentStatus,
    DenyReason,
    ErrorKind,
    EventType,
    ReleaseReason,
    TaskStatus,
    from_iso,
    new_agent_id,
    to_iso,
)
from codefleet.paths import PathRejected

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from codefleet.coord.index import LiveIndex, LiveTask
    from codefleet.coord.store import Row, Store
    from codefleet.paths import TreeRoot

__all__ = ["AgentState", "AgentsMixin"]


@dataclass(slots=True)
class AgentState:
    id: str
    name: str
    status: AgentStatus
    epoch: int
    last_heartbeat_at: datetime
    idle_since: datetime
    current_task_id: str | None = None
    fenced: bool = False  # its runner must register again before it is handed new work
    deaf_at_beat: float = 0.0  # the server's deaf seconds (LoopWatch) when it was last heard
    host: str | None = None  # the process holding the name: (host, pid)
    pid: int | None = None

    def holder(self, deaf: float) -> Holder:
        heard = self.heard_at(deaf)
        return Holder(self.id, self.name, self.status, self.host, self.pid, heard)

    def view(self, deaf: float = 0.0) -> AgentView:
        status = (
            AgentStatus.BUSY if self.fenced and self.status is AgentStatus.IDLE else self.status
        )
        return AgentView(self.id, self.name, status, self.heard_at(deaf), self.idle_since)

    def heard_at(self, deaf: float) -> datetime:
        """The last heartbeat, moved later by the time the server could not listen since."""
        return self.last_heartbeat_at + timedelta(seconds=max(0.0, deaf - self.deaf_at_beat))

    def heard(self, now: datetime, deaf: float) -> None:
        self.last_heartbeat_at = max(self.last_heartbeat_at, now)
        self.deaf_at_beat = deaf


class AgentsMixin:
    store: Store
    tree: TreeRoot
    index: LiveIndex
    clock: Callable[[], datetime]
    agents: dict[str, AgentState]
    agent_ids: dict[str, str]
    leases: dict[str, tuple[str, str]]
    task_leases: dict[str, set[str]]
    _waiters: dict[str, set[asyncio.Event]]
    deaf_seconds: Callable[[], float]  # how long the server could not listen (LoopWatch)

    if TYPE_CHECKING:

        def transition(self) -> AbstractContextManager[None]: ...
        def kick(self) -> None: ...
        def release(self, task_id: str, reason: ReleaseReason, succeeded: bool = False) -> None: ...
        def capture_preimages(self, task_id: str, keys: list[str]) -> list[dict[str, Any]]: ...
        def _take_back(
            self, task: LiveTask, kind: ErrorKind, reason: str, now: datetime
        ) -> None: ...
        def _mirror_lease(self, path: str, agent_id: str, task_id: str) -> None: ...
        def require_task(self, task_id: str) -> TaskStatus: ...
        def holder_name(self, agent_id: str) -> str | None: ...
        def holder_kind(self, agent_id: str) -> str: ...
        def downtime(self, now: datetime) -> timedelta | None: ...

    def _load_agents(self) -> None:
        """Read every agent; a restart credits each with the server's own downtime.

        Heartbeats could not reach a server that was down, so the stale clock of
        each agent moves on by that downtime (or, for a database that never said
        when its server was last up, restarts at now); a fence is kept as stored.
        """
        now = self.clock()
        down = self.downtime(now)
        self.agents = {}
        self.agent_ids = {}
        for row in self.store.agents():
            heard = from_iso(row["last_heartbeat_at"])
            heard = now if down is None else min(heard + down, now)
            agent = self.agent_from_row(row, heard)
            self.agents[agent.id] = agent
            self.agent_ids[agent.name] = agent.id

    def agent_from_row(
        self, row: Row, heard_at: datetime, deaf_at_beat: float | None = None
    ) -> AgentState:
        """The live view of a stored agent, last heard from at `heard_at` (see LoopWatch)."""
        return AgentState(
            id=row["id"],
            name=row["name"],
            status=AgentStatus(row["status"]),
            epoch=row["epoch"],
            last_heartbeat_at=heard_at,
            idle_since=from_iso(row["idle_since"]),
            current_task_id=row["current_task_id"],
            fenced=bool(row["fenced"]),
            deaf_at_beat=self.deaf_seconds() if deaf_at_beat is None else deaf_at_beat,
            host=row["host"],
            pid=row["pid"],
        )

    # -- liveness -------------------------------------------------------------------

    def check_epoch(self, agent_id: str, epoch: int) -> AgentState:
        agent = self.agents.get(agent_id)
        if agent is None:
            raise NotFound(f"no agent {agent_id}", {"agent_id": agent_id})
        if epoch != agent.epoch:
            raise StaleEpoch(
                f"epoch {epoch} of {agent.name} is stale (current {agent.epoch}); register again",
                {"agent_id": agent_id, "epoch": agent.epoch},
            )
        return agent

    def register(
        self, name: str, workdir: str, pid: int | None, host: str | None = None,
        replace: bool = False,
    ) -> dict[str, Any]:  # fmt: skip
        """Upsert by name; a previous incarnation's task and leases are taken back.

        Refused (`WrongTree`, `NameInUse`) before anything is written; see `registration`.
        One registration is exactly one epoch bump, whatever it takes back.
        """
        now = self.clock()
        at = to_iso(now)
        check_tree(workdir, str(self.tree.root))
        agent_id = self.agent_ids.get(name)
        if agent_id is not None:
            holder = self.agents[agent_id].holder(self.deaf_seconds())
            check_name(holder, host, pid, replace, now, self.config_stale_after())
        with self.transition():
            if agent_id is None:
                agent = AgentState(new_agent_id(), name, AgentStatus.IDLE, 1, now, now,
                                   deaf_at_beat=self.deaf_seconds(), host=host, pid=pid)  # fmt: skip
                self.store.insert_agent(
                    {
                        "id": agent.id, "name": name, "status": agent.status, "epoch": 1,
                        "workdir": workdir, "pid": pid, "host": host, "last_heartbeat_at": at,
                        "idle_since": at, "registered_at": at, "updated_at": at,
                    }
                )  # fmt: skip
                self.agents[agent.id] = agent
                self.agent_ids[name] = agent.id
                was_offline = False
            else:
                agent = self.agents[agent_id]
                was_offline = agent.status is AgentStatus.OFFLINE
                epoch = agent.epoch + 1  # the take-back's own fence is this same bump
                self._take_back_current(agent, ReleaseReason.AGENT_REREGISTERED, now)
                agent.epoch = epoch
                agent.status = AgentStatus.IDLE
                agent.fenced = False
                agent.host, agent.pid = host, pid
                agent.last_heartbeat_at = agent.idle_since = now
                agent.deaf_at_beat = self.deaf_seconds()
                self.store.update_agent(
                    agent.id, status=agent.status, epoch=agent.epoch, workdir=workdir, pid=pid,
                    host=host, last_heartbeat_at=at, idle_since=at, current_task_id=None,
                    updated_at=at, fenced=0,
                )  # fmt: skip
            self.store.emit(
                EventType.AGENT_REGISTERED, agent_id=agent.id, name=name, epoch=agent.epoch, pid=pid
            )
            if was_offline:
                self.store.emit(EventType.AGENT_ONLINE, agent_id=agent.id, name=name)
        self.kick()
        return {"agent_id": agent.id, "epoch": agent.epoch, "status": agent.status}

    def heartbeat(self, agent_id: str, epoch: int) -> dict[str, Any]:
        agent = self.check_epoch(agent_id, epoch)
        now = self.clock()
        agent.last_heartbeat_at = now
        agent.deaf_at_beat = self.deaf_seconds()
        with self.transition():
            fields: dict[str, Any] = {"last_heartbeat_at": to_iso(now)}
            online = agent.status is AgentStatus.OFFLINE
            if online:
                agent.status = AgentStatus.IDLE
                agent.idle_since = now
                fields.update(status=agent.status, idle_since=to_iso(now))
            self.store.update_agent(agent_id, **fields)
            if online:
                self.store.emit(EventType.AGENT_ONLINE, agent_id=agent_id, name=agent.name)
                self.kick()
        return {"status": agent.status, "epoch": agent.epoch}

    def touch(self, agent: AgentState) -> None:
        """Any authenticated runner call is proof of life (memory only)."""
        agent.heard(self.clock(), self.deaf_seconds())

    def leave(self, agent_id: str, epoch: int) -> None:
        self.check_epoch(agent_id, epoch)
        with self.transition():
            self._mark_offline(agent_id, ReleaseReason.AGENT_LEFT, self.clock())
        self.kick()

    def _mark_offline(self, agent_id: str, reason: ReleaseReason, now: datetime) -> None:
        """Offline + fence + release; a graceful leave also requeues its task here."""
        agent = self.agents[agent_id]
        if reason is ReleaseReason.AGENT_LEFT:
            self._take_back_current(agent, reason, now)
        elif agent.current_task_id is not None:
            self.release(agent.current_task_id, reason)
        agent.status = AgentStatus.OFFLINE
        agent.epoch += 1
        self.store.update_agent(
            agent_id, status=agent.status, epoch=agent.epoch, updated_at=to_iso(now)
        )
        self.store.emit(EventType.AGENT_OFFLINE, agent_id=agent_id, name=agent.name, reason=reason)

    def _take_back_current(self, agent: AgentState, reason: ReleaseReason, now: datetime) -> None:
        task = self.index.in_flight.get(agent.current_task_id or "")
        if task is not None and task.agent_id == agent.id:
            self._take_back(task, ErrorKind.INFRA, reason.value, now)

    def fence(self, agent_id: str, now: datetime) -> None:
        """Force-take the agent's work back: its epoch moves on, its calls become stale."""
        agent = self.agents[agent_id]
        agent.epoch += 1
        agent.fenced = True
        self.store.update_agent(agent_id, epoch=agent.epoch, fenced=1, updated_at=to_iso(now))

    def free_agent(self, agent: AgentState, now: datetime) -> None:
        agent.current_task_id = None
        at = to_iso(now)
        if agent.status is not AgentStatus.OFFLINE:
            agent.status = AgentStatus.IDLE
            agent.idle_since = now
        self.store.update_agent(
            agent.id, status=agent.status, current_task_id=None, idle_since=at, updated_at=at
        )

    # -- assignment -------------------------------------------------------------------

    def assignment(self, agent_id: str, epoch: int) -> dict[str, Any] | None:
        agent = self.check_epoch(agent_id, epoch)
        self.touch(agent)
        task = self.index.in_flight.get(agent.current_task_id or "")
        if task is None or task.status is not TaskStatus.ASSIGNED:
            return None
        row = self.store.task(task.id)
        assert row is not None and task.assigned_at is not None
        deadline = task.assigned_at.timestamp() + self.config_task_timeout()
        return {
            "id": task.id,
            "title": row["title"],
            "description": row["description"],
            "priority": task.priority,
            "file_scope": sorted(task.scope),
            "attempts": task.attempts,
            "deadline": to_iso(datetime.fromtimestamp(deadline, task.assigned_at.tzinfo)),
            "blocked_on_path": row["blocked_on_path"],
            "error": row["error"],
            "error_kind": row["error_kind"],
            "verify": row["verify"],
        }

    async def wait_assignment(
        self, agent_id: str, epoch: int, wait: float
    ) -> dict[str, Any] | None:
        """Long-poll: answer as soon as an assignment exists, or None after `wait` s."""
        found = self.assignment(agent_id, epoch)
        if found is not None or wait <= 0:
            return found
        event = asyncio.Event()  # one per poll: concurrent polls of one agent all wake
        parked = self._waiters.setdefault(agent_id, set())
        parked.add(event)
        self.kick()
        try:
            await asyncio.wait_for(event.wait(), timeout=wait)
        except TimeoutError:
            pass
        finally:
            parked.discard(event)
            if not parked and self._waiters.get(agent_id) is parked:
                del self._waiters[agent_id]
        return self.assignment(agent_id, epoch)

    def _wake(self, agent_id: str) -> None:
        for event in self._waiters.get(agent_id, ()):
            event.set()

    def config_task_timeout(self) -> float:
        config = getattr(self, "config")  # noqa: B009 - the Engine owns config
        return float(config.task_timeout)

    def config_stale_after(self) -> float:
        config = getattr(self, "config")  # noqa: B009 - the Engine owns config
        return float(config.stale_after)

    # -- leases -----------------------------------------------------------------------

    def acquire(
        self, agent_id: str, epoch: int, task_id: str, paths: list[str], tool: str
    ) -> dict[str, Any]:
        """All-or-nothing lease grant for one write; always an answer, never an error."""
        agent = self.check_epoch(agent_id, epoch)
        self.touch(agent)
        task = self.index.in_flight.get(task_id)
        if task is None or task.agent_id != agent_id:
            return _deny(
                [_denial(p, DenyReason.NOT_OWNER) for p in paths], f"task {task_id} is not yours"
            )
        keys, rejected = self._canonical_all(paths)
        if rejected:
            return _deny(rejected, "; ".join(d["message"] for d in rejected))
        held = [
            (k, self.leases[k]) for k in keys if k in self.leases and self.leases[k][1] != task_id
        ]
        if not held and all(k in self.leases for k in keys):
            return {"decision": "allow", "granted": keys}  # all this task's already: no write
        with self.transition():
            if held:
                return self._deny_held(agent, task_id, held, tool)
            fresh = [key for key in keys if key not in self.leases]
            refused = self.capture_preimages(task_id, fresh)
            if refused:
                return _deny([_denial(d["path"], d["reason"], d["message"]) for d in refused],
                             "; ".join(d["message"] for d in refused))  # fmt: skip
            granted = []
            at = to_iso(self.clock())
            for key in keys:
                if key in self.leases:
                    continue  # re-acquiring your own lease is allow
                if not self.store.insert_lease(key, agent_id, task_id, at):
                    raise RuntimeError(f"lease mirror out of step with the table for {key}")
                self._mirror_lease(key, agent_id, task_id)
                granted.append(key)
                self.store.emit(
                    EventType.LEASE_ACQUIRED,
                    task_id=task_id,
                    agent_id=agent_id,
                    path=key,
                    tool=tool,
                )
        return {"decision": "allow", "granted": keys}

    def _canonical_all(self, paths: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
        keys: list[str] = []
        rejected: list[dict[str, Any]] = []
        for raw in paths:
            try:
                key = self.tree.canonical(raw)
            except PathRejected as err:
                rejected.append(_denial(raw, err.reason, err.message))
                continue
            if key not in keys:
                keys.append(key)
        if not paths:
            rejected.append(_denial("", DenyReason.INVALID_PATH, "no path to lease"))
        return keys, rejected

    def _deny_held(
        self, agent: AgentState, task_id: str, held: list[tuple[str, tuple[str, str]]], tool: str
    ) -> dict[str, Any]:
        denied: list[dict[str, Any]] = []
        for path, (holder_agent, holder_task) in held:
            holder_name = self.holder_name(holder_agent)
            denied.append(
                {
                    "path": path, "holder_agent_id": holder_agent, "holder_agent_name": holder_name,
                    "holder_task_id": holder_task, "holder_kind": self.holder_kind(holder_agent),
                    "reason": DenyReason.HELD,
                    "message": f"{path} is held by {holder_name} for task {holder_task}",
                }
            )  # fmt: skip
            self.store.emit(
                EventType.LEASE_DENIED, task_id=task_id, agent_id=agent.id, path=path, tool=tool,
                holder_agent_id=holder_agent, holder_agent_name=holder_name,
                holder_task_id=holder_task, requester_name=agent.name,
            )  # fmt: skip
        return _deny(denied, "; ".join(d["message"] for d in denied))

    def record_change(
        self,
        agent_id: str,
        epoch: int,
        task_id: str,
        path: str,
        tool: str,
        sha256: str | None = None,
    ) -> None:
        """Ledger row from PostToolUse; never vetoes, never read by the scheduler.

        The row names the owner's current attempt and the content hash the writer
        read after the write: the invariant checker's content oracle.
        """
        self.check_epoch(agent_id, epoch)
        self.require_task(task_id)
        try:
            key = self.tree.canonical(path)
        except PathRejected:
            key = path
        task = self.index.in_flight.get(task_id)
        attempt = task.attempts if task is not None and task.agent_id == agent_id else None
        with self.transition():
            self.store.insert_change(
                task_id, agent_id, key, tool, to_iso(self.clock()), attempt, sha256
            )
            self.store.emit(
                EventType.FILE_CHANGED, task_id=task_id, agent_id=agent_id, path=key, tool=tool,
                **({"sha256": sha256} if sha256 else {}),
            )  # fmt: skip


def _denial(path: str, reason: DenyReason, message: str | None = None) -> dict[str, Any]:
    return {
        "path": path,
        "holder_agent_id": None,
        "holder_agent_name": None,
        "holder_task_id": None,
        "reason": reason,
        "message": message or f"{path}: {reason}",
    }


def _deny(denied: list[dict[str, Any]], message: str) -> dict[str, Any]:
    return {"decision": "deny", "denied": denied, "message": message}
