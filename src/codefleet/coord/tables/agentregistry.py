"""The agent registry: every runner the server knows, its epoch, liveness and long polls.

This part owns `by_id` and `ids` (name -> id), each agent's epoch and fence,
what was last heard from it, and the events parked by long polls; nothing
else writes them. Its writes run inside the caller's transaction (the
engine's); the transitions that also move a task (a re-registration or a
leave that takes work back) are the engine's, which calls in here.

Fencing: an agent's `epoch` is bumped on every registration and every forced
take-back (stale, deadline, cancel, re-registration). Every runner call but
register carries the epoch it was given; a mismatch is `StaleEpoch`, after
which the runner drops what it was doing and registers again. Until it does,
a fenced agent is not handed new work: its runner is still busy aborting.
Liveness is observed, never rolled back: `reload` keeps what was heard.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from codefleet.coord.policy.registration import NameHolder, check_name
from codefleet.coord.policy.scheduler import AgentView
from codefleet.coord.storage.rows import AgentRow
from codefleet.coord.storage.store import Store
from codefleet.errors import NotFound, StaleEpoch
from codefleet.models import (
    AgentStatus,
    EventType,
    ReleaseReason,
    Workspace,
    from_iso,
    new_agent_id,
    to_iso,
)

__all__ = ["AgentRegistry", "AgentState"]


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
    agent: str = "claude"  # the agent kind its runner drives (`models.AgentKind`)
    workspace: str = "tree"  # where it works (`models.Workspace`): the tree, or a clone
    head: str | None = None  # a clone's landed commit, as its last heartbeat said (memory only)

    def holder(self, deaf: float) -> NameHolder:
        heard = self.heard_at(deaf)
        return NameHolder(self.id, self.name, self.status, self.host, self.pid, heard)

    def view(self, deaf: float = 0.0) -> AgentView:
        status = (
            AgentStatus.BUSY if self.fenced and self.status is AgentStatus.IDLE else self.status
        )
        heard = self.heard_at(deaf)
        return AgentView(self.id, self.name, status, heard, self.idle_since, self.agent)

    def heard_at(self, deaf: float) -> datetime:
        """The last heartbeat, moved later by the time the server could not listen since."""
        return self.last_heartbeat_at + timedelta(seconds=max(0.0, deaf - self.deaf_at_beat))

    def heard(self, now: datetime, deaf: float) -> None:
        self.last_heartbeat_at = max(self.last_heartbeat_at, now)
        self.deaf_at_beat = deaf


class AgentRegistry:
    """The runners of one engine; every method runs on the engine's thread."""

    def __init__(self, store: Store, clock: Callable[[], datetime]) -> None:
        self.store = store
        self.clock = clock
        self.deaf_seconds: Callable[[], float] = lambda: 0.0  # the server plugs in its LoopWatch
        self.by_id: dict[str, AgentState] = {}
        self.ids: dict[str, str] = {}
        self._waiters: dict[str, set[asyncio.Event]] = {}

    def get(self, agent_id: str) -> AgentState | None:
        return self.by_id.get(agent_id)

    def all(self) -> Iterable[AgentState]:
        return self.by_id.values()

    def views(self) -> tuple[AgentView, ...]:
        deaf = self.deaf_seconds()  # stale means unheard while listening
        return tuple(a.view(deaf) for a in self.by_id.values())

    def any_in_clones(self) -> bool:
        """Is a runner that works in its own clone online (it cannot stack: decision 0156)?"""
        return any(
            a.workspace == Workspace.CLONE and a.status is not AgentStatus.OFFLINE
            for a in self.by_id.values()
        )

    def idle_count(self) -> int:
        return sum(1 for a in self.by_id.values() if a.status is AgentStatus.IDLE)

    # -- memory from the record ------------------------------------------------------

    def load(self, now: datetime, down: timedelta | None) -> None:
        """Read every agent; each is credited with the server's own downtime.

        Heartbeats could not reach a server that was down, so the stale clock of
        each agent moves on by that downtime (or, for a database that never said
        when its server was last up, restarts at now); a fence is kept as stored.
        """
        self.by_id = {}
        self.ids = {}
        for row in self.store.agent_rows():
            heard = from_iso(row.last_heartbeat_at)
            self._put(self._from_row(row, now if down is None else min(heard + down, now)))

    def reload(self, agent_ids: Iterable[str]) -> None:
        """Re-read agents a rolled-back transaction touched; what was heard is kept."""
        for agent_id in agent_ids:
            known = self.by_id.get(agent_id)
            row = self.store.agent_row(agent_id)
            if row is None:  # its registration was rolled back
                if known is not None:
                    self.by_id.pop(agent_id)
                    self.ids.pop(known.name, None)
                continue
            heard = known.last_heartbeat_at if known else from_iso(row.last_heartbeat_at)
            self._put(self._from_row(row, heard, known.deaf_at_beat if known else None))

    def _put(self, agent: AgentState) -> None:
        self.by_id[agent.id] = agent
        self.ids[agent.name] = agent.id

    def _from_row(
        self, row: AgentRow, heard_at: datetime, deaf_at_beat: float | None = None
    ) -> AgentState:
        """The live view of a stored agent, last heard from at `heard_at` (see LoopWatch)."""
        return AgentState(
            id=row.id,
            name=row.name,
            status=row.status,
            epoch=row.epoch,
            last_heartbeat_at=heard_at,
            idle_since=from_iso(row.idle_since),
            current_task_id=row.current_task_id,
            fenced=row.fenced,
            deaf_at_beat=self.deaf_seconds() if deaf_at_beat is None else deaf_at_beat,
            host=row.host,
            pid=row.pid,
            agent=row.agent,
            workspace=row.workspace,
        )

    # -- liveness and fencing --------------------------------------------------------------

    def check_epoch(self, agent_id: str, epoch: int) -> AgentState:
        agent = self.by_id.get(agent_id)
        if agent is None:
            raise NotFound(f"no agent {agent_id}", {"agent_id": agent_id})
        if epoch != agent.epoch:
            raise StaleEpoch(
                f"epoch {epoch} of {agent.name} is stale (current {agent.epoch}); register again",
                {"agent_id": agent_id, "epoch": agent.epoch},
            )
        return agent

    def touch(self, agent: AgentState) -> None:
        """Any authenticated runner call is proof of life (memory only)."""
        agent.heard(self.clock(), self.deaf_seconds())

    def beat(self, agent: AgentState, now: datetime) -> None:
        """A heartbeat, in memory: heard now (kept even if its transaction rolls back)."""
        agent.last_heartbeat_at = now
        agent.deaf_at_beat = self.deaf_seconds()

    def record_beat(self, agent: AgentState, now: datetime) -> bool:
        """The caller's transaction: the heartbeat's row; True when it came back online."""
        fields: dict[str, object] = {"last_heartbeat_at": to_iso(now)}
        online = agent.status is AgentStatus.OFFLINE
        if online:
            agent.status = AgentStatus.IDLE
            agent.idle_since = now
            fields.update(status=agent.status, idle_since=to_iso(now))
        self.store.update_agent(agent.id, **fields)
        if online:
            self.store.emit(EventType.AGENT_ONLINE, agent_id=agent.id, name=agent.name)
        return online

    def fence(self, agent_id: str, now: datetime) -> None:
        """Force-take the agent's work back: its epoch moves on, its calls become stale."""
        agent = self.by_id[agent_id]
        agent.epoch += 1
        agent.fenced = True
        self.store.update_agent(agent_id, epoch=agent.epoch, fenced=1, updated_at=to_iso(now))

    def free(self, agent: AgentState, now: datetime) -> None:
        agent.current_task_id = None
        at = to_iso(now)
        if agent.status is not AgentStatus.OFFLINE:
            agent.status = AgentStatus.IDLE
            agent.idle_since = now
        self.store.update_agent(
            agent.id, status=agent.status, current_task_id=None, idle_since=at, updated_at=at
        )

    def busy(self, agent: AgentState, task_id: str, at: str) -> None:
        agent.status = AgentStatus.BUSY
        agent.current_task_id = task_id
        self.store.update_agent(
            agent.id,
            status=AgentStatus.BUSY,
            current_task_id=task_id,
            last_assigned_at=at,
            updated_at=at,
        )

    def go_offline(self, agent: AgentState, reason: ReleaseReason, now: datetime) -> None:
        agent.status = AgentStatus.OFFLINE
        agent.epoch += 1
        self.store.update_agent(
            agent.id, status=agent.status, epoch=agent.epoch, updated_at=to_iso(now)
        )
        self.store.emit(EventType.AGENT_OFFLINE, agent_id=agent.id, name=agent.name, reason=reason)
        self.wake(agent.id)  # its parked long-polls answer now (stale epoch), not after `wait`

    # -- registration ----------------------------------------------------------------------

    def admit(
        self,
        name: str,
        host: str | None,
        pid: int | None,
        replace: bool,
        now: datetime,
        stale_after: float,
    ) -> AgentState | None:
        """The agent already under `name` (None: a new name); `NameInUse` if another holds it."""
        agent_id = self.ids.get(name)
        if agent_id is None:
            return None
        agent = self.by_id[agent_id]
        check_name(agent.holder(self.deaf_seconds()), host, pid, replace, now, stale_after)
        return agent

    def enroll(
        self, name: str, workdir: str, pid: int | None, host: str | None, now: datetime
    ) -> AgentState:
        """A new name: its row and `agent_registered`, in the caller's transaction."""
        at = to_iso(now)
        agent = AgentState(
            new_agent_id(),
            name,
            AgentStatus.IDLE,
            1,
            now,
            now,
            deaf_at_beat=self.deaf_seconds(),
            host=host,
            pid=pid,
        )
        self.store.insert_agent(
            {
                "id": agent.id,
                "name": name,
                "status": agent.status,
                "epoch": 1,
                "workdir": workdir,
                "pid": pid,
                "host": host,
                "last_heartbeat_at": at,
                "idle_since": at,
                "registered_at": at,
                "updated_at": at,
            }
        )
        self._put(agent)
        self._registered(agent, pid)
        return agent

    def reincarnate(
        self,
        agent: AgentState,
        epoch: int,
        was_offline: bool,
        workdir: str,
        pid: int | None,
        host: str | None,
        now: datetime,
    ) -> None:
        """A known name registers again (after its old work was taken back): one epoch bump."""
        at = to_iso(now)
        agent.epoch = epoch
        agent.status = AgentStatus.IDLE
        agent.fenced = False
        agent.host, agent.pid = host, pid
        agent.last_heartbeat_at = agent.idle_since = now
        agent.deaf_at_beat = self.deaf_seconds()
        self.store.update_agent(
            agent.id,
            status=agent.status,
            epoch=agent.epoch,
            workdir=workdir,
            pid=pid,
            host=host,
            last_heartbeat_at=at,
            idle_since=at,
            current_task_id=None,
            updated_at=at,
            fenced=0,
        )
        self._registered(agent, pid)
        if was_offline:
            self.store.emit(EventType.AGENT_ONLINE, agent_id=agent.id, name=agent.name)

    def drives(self, agent: AgentState, kind: str, workspace: str = "tree") -> None:
        """Record the agent kind its runner (re-)registered with, and where it works, in the
        caller's transaction."""
        if (agent.agent, agent.workspace) != (kind, workspace):
            agent.agent, agent.workspace = kind, workspace
            self.store.update_agent(agent.id, agent=kind, workspace=workspace)

    def _registered(self, agent: AgentState, pid: int | None) -> None:
        self.store.emit(
            EventType.AGENT_REGISTERED,
            agent_id=agent.id,
            name=agent.name,
            epoch=agent.epoch,
            pid=pid,
        )

    # -- long polls ------------------------------------------------------------------------

    async def wait_for_wake(self, agent_id: str, wait: float, parked: Callable[[], None]) -> None:
        """Park until `wake(agent_id)` or `wait` s; `parked` runs once the poll is parked."""
        event = asyncio.Event()  # one per poll: concurrent polls of one agent all wake
        waiting = self._waiters.setdefault(agent_id, set())
        waiting.add(event)
        parked()
        try:
            async with asyncio.timeout(wait):  # in the poll's own task: no extra hop on a wake
                await event.wait()
        except TimeoutError:
            pass
        finally:
            waiting.discard(event)
            if not waiting and self._waiters.get(agent_id) is waiting:
                del self._waiters[agent_id]

    def wake(self, agent_id: str) -> None:
        for event in self._waiters.get(agent_id, ()):
            event.set()
