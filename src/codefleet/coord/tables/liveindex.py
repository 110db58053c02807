"""The engine's in-memory index of the live part of the fleet.

SQLite is the record; this index is an accelerator kept beside it by the
single writer (the engine), so that a tick costs in proportion to the live
work and the idle agents, never to the number of finished tasks:

- `ready` holds the pending tasks whose dependencies have all succeeded and
  that are neither backing off nor out of attempts, sorted best first by
  (priority desc, critical path desc, created_at, id);
- `backoff` is a heap of pending tasks waiting out their backoff;
- `unmet` counts each pending task's unfinished dependencies, decremented
  as parents succeed, so readiness is found without scanning edges.

It is rebuilt from SQLite on start (`load`), so losing it loses nothing.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from itertools import islice
from typing import Any, Final

from sortedcontainers import SortedList

from codefleet.coord.policy import readiness
from codefleet.coord.policy.readiness import Standing, standing
from codefleet.coord.policy.scheduler import TaskView, candidate_order
from codefleet.models import TaskStatus, from_iso
from codefleet.resources import resource_keys

__all__ = ["DEAD", "LiveIndex", "LiveTask", "live_task"]

ReadyKey = tuple[int, int, str, str]
# The statuses a task that did not succeed ends in: its dependents can never run.
DEAD: Final = frozenset({TaskStatus.FAILED, TaskStatus.CANCELLED, TaskStatus.BLOCKED_UPSTREAM})


@dataclass(slots=True)
class LiveTask:
    id: str
    priority: int
    scope: frozenset[str]
    status: TaskStatus
    attempts: int
    max_attempts: int
    created_at: str
    backoff_until: datetime | None = None
    agent_id: str | None = None
    assigned_at: datetime | None = None
    uncharged: int = 0  # attempts a usage limit ended: they do not count against max_attempts
    unmet: int = 0
    chain: int = 1
    ready_key: ReadyKey | None = None
    # what an assignment carries, kept as stored so it is answered without a read
    title: str = ""
    description: str = ""
    verify: str | None = None
    on_stale_read: str | None = None  # None: the default policy (reconcile)
    lease_granularity: str | None = None  # None: the runner's
    ask: bool = True  # False: the graph said `ask: false`
    shell_mode: str | None = None
    error: str | None = None  # the last attempt's failure (set by a requeue, kept as stored)
    error_kind: str | None = None
    blocked_on_path: str | None = None
    agent: str | None = None  # the agent kind the task needs; None: any
    resources: frozenset[str] = frozenset()  # the lease keys of its named resources
    verified_on: int | None = None  # the landed count when its attempt's verify check started
    landed_cost_usd: float = 0.0  # the cost of the attempt waiting to land (memory only)
    # the session its next attempt resumes to repair its change, still on the tree (None: fresh)
    repair_session: str | None = None
    repairs: int = 0  # repair attempts since its last fresh one

    @property
    def charged(self) -> int:
        """The attempts that count against `max_attempts`."""
        return readiness.charged(self.attempts, self.uncharged)

    def standing(self) -> Standing:
        """Where it stands by the one readiness rule, any backoff still counting."""
        return standing(
            unmet=self.unmet,
            charged=self.charged,
            max_attempts=self.max_attempts,
            backoff_until=self.backoff_until,
            now=None,
        )

    def view(self) -> TaskView:
        return TaskView(
            id=self.id,
            priority=self.priority,
            file_scope=self.scope,
            attempts=self.charged,
            max_attempts=self.max_attempts,
            backoff_until=self.backoff_until,
            assigned_agent_id=self.agent_id,
            assigned_at=self.assigned_at,
            unstarted=self.status is TaskStatus.ASSIGNED,
            agent=self.agent,
            resources=self.resources,
        )


def live_task(row: Mapping[str, Any]) -> LiveTask:
    """The live view of a stored task row."""
    return LiveTask(
        id=row["id"],
        priority=row["priority"],
        scope=frozenset(row["file_scope"]),
        status=TaskStatus(row["status"]),
        attempts=row["attempts"],
        max_attempts=row["max_attempts"],
        created_at=row["created_at"],
        backoff_until=from_iso(row["backoff_until"]) if row["backoff_until"] else None,
        agent_id=row["assigned_agent_id"],
        assigned_at=from_iso(row["assigned_at"]) if row["assigned_at"] else None,
        uncharged=int(row.get("uncharged_attempts") or 0),
        title=row["title"],
        description=row["description"],
        verify=row.get("verify"),
        agent=row.get("agent"),
        on_stale_read=row.get("on_stale_read"),
        lease_granularity=row.get("lease_granularity"),
        ask=row.get("ask") != 0,
        shell_mode=row.get("shell"),
        error=row["error"],
        error_kind=row["error_kind"],
        blocked_on_path=row["blocked_on_path"],
        resources=resource_keys(row.get("resources") or ()),
        repair_session=row.get("repair_session"),
        repairs=int(row.get("repairs") or 0),
    )


@dataclass
class LiveIndex:
    status: dict[str, TaskStatus] = field(default_factory=dict)
    live: dict[str, LiveTask] = field(default_factory=dict)
    parents: dict[str, list[str]] = field(default_factory=dict)
    children: dict[str, list[str]] = field(default_factory=dict)
    ready: SortedList = field(default_factory=SortedList)
    backoff: list[tuple[datetime, str]] = field(default_factory=list)
    exhausted: set[str] = field(default_factory=set)
    in_flight: dict[str, LiveTask] = field(default_factory=dict)

    # -- graph ------------------------------------------------------------------

    def add_edges(self, edges: Iterable[tuple[str, str]]) -> None:
        for child, parent in edges:
            self.parents.setdefault(child, []).append(parent)
            self.children.setdefault(parent, []).append(child)

    def unmet_of(self, task_id: str) -> int:
        return sum(
            1
            for p in self.parents.get(task_id, ())
            if self.status.get(p) is not TaskStatus.SUCCEEDED
        )

    def pending_below(self, roots: Iterable[str]) -> list[tuple[str, str]]:
        """`(task, root)` for each live pending task below `roots`, breadth first, once each.

        The walk goes through pending tasks only: every dependent of a task that
        did not succeed is already blocked (the cascade keeps that true), so a
        non-pending dependent has nothing pending below it that another root
        would not reach. The result is the transitive closure whatever the order
        the tasks were listed or created in.
        """
        found: list[tuple[str, str]] = []
        seen: set[str] = set()
        queue = deque((child, root) for root in roots for child in self.children.get(root, ()))
        while queue:
            task_id, root = queue.popleft()
            task = self.live.get(task_id)
            if task_id in seen or task is None or task.status is not TaskStatus.PENDING:
                continue
            seen.add(task_id)
            found.append((task_id, root))
            queue.extend((child, root) for child in self.children.get(task_id, ()))
        return found

    def dead_parents(self, task_ids: Iterable[str], dead: frozenset[TaskStatus]) -> list[str]:
        """The parents of `task_ids` whose status is in `dead`, each once, sorted."""
        return sorted(
            {p for t in task_ids for p in self.parents.get(t, ()) if self.status.get(p) in dead}
        )

    def compute_chains(self, task_ids: Iterable[str]) -> None:
        """Longest chain of live dependents below each task, then lift ancestors."""
        pending = list(task_ids)
        order = self._reverse_topological(pending)
        for task_id in order:
            self._refresh_chain(task_id)
        self._lift_ancestors(pending)

    def _reverse_topological(self, task_ids: list[str]) -> list[str]:
        batch = set(task_ids)
        outstanding = {t: sum(1 for c in self.children.get(t, ()) if c in batch) for t in batch}
        queue = deque(t for t, n in outstanding.items() if n == 0)
        order: list[str] = []
        while queue:
            task_id = queue.popleft()
            order.append(task_id)
            for parent in self.parents.get(task_id, ()):
                if parent in outstanding:
                    outstanding[parent] -= 1
                    if outstanding[parent] == 0:
                        queue.append(parent)
        return order

    def _refresh_chain(self, task_id: str) -> bool:
        task = self.live.get(task_id)
        if task is None:
            return False
        below = [self.live[c].chain for c in self.children.get(task_id, ()) if c in self.live]
        chain = 1 + max(below, default=0)
        if chain == task.chain:
            return False
        self.discard_ready(task)
        task.chain = chain
        if task.ready_key is None and self._belongs_in_ready(task):
            self.add_ready(task)
        return True

    def _lift_ancestors(self, task_ids: list[str]) -> None:
        batch = set(task_ids)  # settled by the reverse-topological pass: start above it
        queue = deque(p for t in task_ids for p in self.parents.get(t, ()) if p not in batch)
        while queue:
            parent = queue.popleft()
            if self._refresh_chain(parent):
                queue.extend(self.parents.get(parent, ()))

    # -- readiness --------------------------------------------------------------

    def _belongs_in_ready(self, task: LiveTask) -> bool:
        return task.status is TaskStatus.PENDING and task.standing() is Standing.READY

    def add_ready(self, task: LiveTask) -> None:
        task.ready_key = candidate_order(task.priority, task.chain, task.created_at, task.id)
        self.ready.add(task.ready_key)

    def discard_ready(self, task: LiveTask) -> None:
        if task.ready_key is not None:
            self.ready.discard(task.ready_key)
            task.ready_key = None

    def place_pending(self, task: LiveTask) -> None:
        """File a pending task where it belongs: ready, backing off, exhausted or waiting."""
        self.discard_ready(task)
        self.in_flight.pop(task.id, None)
        match task.standing():
            case Standing.EXHAUSTED:
                self.exhausted.add(task.id)
            case Standing.BACKING_OFF:
                assert task.backoff_until is not None
                heapq.heappush(self.backoff, (task.backoff_until, task.id))
            case Standing.READY:
                self.add_ready(task)
            case Standing.WAITING:
                pass

    def promote_backoff(self, now: datetime) -> None:
        while self.backoff and self.backoff[0][0] <= now:
            until, task_id = heapq.heappop(self.backoff)
            task = self.live.get(task_id)
            if task is None or task.backoff_until != until or task.status is not TaskStatus.PENDING:
                continue  # superseded entry
            task.backoff_until = None
            if self._belongs_in_ready(task):
                self.add_ready(task)

    def candidates(self, window: int) -> tuple[list[TaskView], bool]:
        views = [self.live[key[3]].view() for key in islice(self.ready, window)]
        return views, len(self.ready) > window

    # -- membership ---------------------------------------------------------------

    def add_created(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Newly created pending tasks (their edges added first); not placed yet."""
        live, status, parents = self.live, self.status, self.parents
        pending, succeeded = TaskStatus.PENDING, TaskStatus.SUCCEEDED
        for row in rows:
            task_id = row["id"]
            task = live[task_id] = LiveTask(
                task_id,
                row["priority"],
                frozenset(row["file_scope"]),
                pending,
                0,
                row["max_attempts"],
                row["created_at"],
                title=row["title"],
                description=row["description"],
                verify=row.get("verify"),
                agent=row.get("agent"),
                on_stale_read=row.get("on_stale_read"),
                lease_granularity=row.get("lease_granularity"),
                ask=row.get("ask") != 0,
                shell_mode=row.get("shell"),
                resources=resource_keys(row.get("resources") or ()),
            )
            status[task_id] = pending
            task.unmet = sum(1 for p in parents.get(task_id, ()) if status.get(p) is not succeeded)

    def place_created(self, task_ids: list[str]) -> None:
        """Chain and place a batch `add_created` made live (no task of it placed yet).

        The same end state as `place_pending` of each, then `compute_chains`, without
        moving a ready entry twice: nothing stored depends on a new task, so the batch's
        chains are settled bottom up within it, filed once, and its ancestors lifted.
        """
        live, children = self.live, self.children
        for task_id in self._reverse_topological(task_ids):
            below = [live[c].chain for c in children.get(task_id, ()) if c in live]
            live[task_id].chain = 1 + max(below, default=0)
        ready: list[ReadyKey] = []
        for task_id in task_ids:
            task = live[task_id]
            placed = task.standing()  # a new task: no backoff, never charged
            if placed is Standing.EXHAUSTED:
                self.exhausted.add(task_id)
            elif placed is Standing.READY:
                task.ready_key = candidate_order(
                    task.priority, task.chain, task.created_at, task_id
                )
                ready.append(task.ready_key)
        self.ready.update(ready)
        self._lift_ancestors(task_ids)

    def add_live(self, task: LiveTask) -> None:
        self.live[task.id] = task
        self.status[task.id] = task.status

    def set_status(self, task: LiveTask, status: TaskStatus) -> None:
        task.status = status
        self.status[task.id] = status
        if status in (TaskStatus.ASSIGNED, TaskStatus.RUNNING):
            self.discard_ready(task)
            self.in_flight[task.id] = task
        elif status is TaskStatus.LANDING:  # no agent any more: nothing to take back
            self.discard_ready(task)
            self.in_flight.pop(task.id, None)

    def forget(self, task_id: str) -> None:
        """Drop a task from the live structures (to be re-read); its status and edges stay."""
        task = self.live.pop(task_id, None)
        if task is not None:
            self.discard_ready(task)
        self.in_flight.pop(task_id, None)
        self.exhausted.discard(task_id)

    def drop(self, task_id: str) -> None:
        """Forget a task entirely: its status and its edges (its insert was rolled back)."""
        self.forget(task_id)
        self.status.pop(task_id, None)
        for parent in self.parents.pop(task_id, ()):
            siblings = self.children.get(parent, [])
            if task_id in siblings:
                siblings.remove(task_id)
        for child in self.children.pop(task_id, ()):
            others = self.parents.get(child, [])
            if task_id in others:
                others.remove(task_id)

    def replace_parents(self, task_id: str, parents: Iterable[str]) -> None:
        """The task's dependency edges are now `parents` (its children's stay)."""
        for parent in self.parents.pop(task_id, ()):
            siblings = self.children.get(parent, [])
            if task_id in siblings:
                siblings.remove(task_id)
        self.add_edges((task_id, parent) for parent in parents)

    def parents_of(self, task_id: str) -> list[str]:
        return list(self.parents.get(task_id, ()))

    def finish(self, task: LiveTask, status: TaskStatus) -> None:
        """Drop a task that reached a terminal status from every live structure."""
        self.discard_ready(task)
        self.in_flight.pop(task.id, None)
        self.exhausted.discard(task.id)
        self.live.pop(task.id, None)
        self.status[task.id] = status
