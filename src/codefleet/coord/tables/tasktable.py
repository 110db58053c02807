"""The task table's mirror: the live index, and the transitions that touch tasks only.

This part owns the live index (`index`: statuses, edges, the live tasks, the
ready queue and the in-flight set) and `idle_announced` (has this drain been
announced?), and is their only writer. Each transition here changes one task
(or a closure of its dependents) in the index, its row and its event in the
caller's transaction, and shares its word with that event: `assign` writes
`task_assigned`, `requeue` `task_requeued`, `fail` `task_failed`, and so on.
What else an attempt's end touches (the agent, the leases, the limits) is the
engine's to compose around these.

A rolled-back transaction re-reads the tasks it touched (`reload`) and puts
back `idle_announced` (`idle_kept`), so memory is never ahead of the rows.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any, Final

from codefleet.attempt import AttemptReport
from codefleet.coord.policy.answers import TaskAnswer
from codefleet.coord.policy.engineconfig import EngineConfig
from codefleet.coord.storage.database import Row
from codefleet.coord.storage.store import Store
from codefleet.coord.tables import validation
from codefleet.coord.tables.liveindex import DEAD, LiveIndex, LiveTask, live_task
from codefleet.coord.tables.recovery import reload_tasks
from codefleet.errors import NotFound, NotOwner
from codefleet.models import ErrorKind, EventType, TaskStatus, to_iso
from codefleet.resources import is_resource_key, resource_name

__all__ = ["NO_BACKOFF", "TaskTable"]

# A veto waits on the holder (its scope), a failed verify has the output to act on:
# a timer adds nothing to either (docs/decisions/0009-a-veto-requeues-without-backoff.md, "A veto requeues without backoff").
# A usage limit pauses the whole fleet instead ("A usage limit pauses the fleet"), and a
# spent fleet budget stops it ("The fleet's budget").
# An interrupted attempt's requeue waits this long, uncharged: the runners of the run the
# operator stopped leave at the same moment, and must not be handed it on their way out.
INTERRUPT_HOLD_S: Final = 3.0

NO_BACKOFF = frozenset(
    {
        ErrorKind.VETO,
        ErrorKind.VERIFY_FAILED,
        ErrorKind.INTEGRATION_FAILED,
        ErrorKind.STALE_READ,
        ErrorKind.RATE_LIMITED,
        ErrorKind.BUDGET,
    }
)


# What a redefinition writes over a stored task (its seq, status and history stay).
REDEFINED_COLUMNS: Final = (
    "title",
    "description",
    "priority",
    "file_scope",
    "max_attempts",
    "verify",
    "agent",
    "on_stale_read",
    "lease_granularity",
    "ask",
    "shell",
    "resources",
    "updated_at",
)


class TaskTable:
    """The live index of one engine and its task transitions; runs on the engine's thread."""

    def __init__(self, store: Store, clock: Callable[[], datetime], config: EngineConfig) -> None:
        self.store = store
        self.clock = clock
        self.config = config
        self.index = LiveIndex()
        self.idle_announced = True
        self.landed = 0  # the last landing order number handed out
        self.landing_seq = 0  # the last landing queue number handed out

    # -- memory from the record ------------------------------------------------------

    def load(self) -> None:
        """Rebuild the index from the rows (after a restart nothing is lost)."""
        idx = self.index = LiveIndex()
        idx.status = {k: TaskStatus(v) for k, v in self.store.task_statuses().items()}
        idx.add_edges(self.store.edges())
        for row in self.store.live_tasks():
            task = live_task(row)
            task.unmet = idx.unmet_of(task.id)
            idx.add_live(task)
            if task.status is TaskStatus.PENDING:
                idx.place_pending(task)
            else:
                idx.set_status(task, task.status)
        idx.compute_chains(list(idx.live))
        self.idle_announced = not idx.live
        self.landed, self.landing_seq = self.store.landing_counters()

    def reload(self, task_ids: set[str]) -> None:
        """Re-read the tasks a rolled-back transaction touched."""
        reload_tasks(self.index, self.store, task_ids)

    @contextmanager
    def idle_kept(self) -> Iterator[None]:
        """Put `idle_announced` back if the transaction inside fails (it is memory only)."""
        idle = self.idle_announced
        try:
            yield
        except BaseException:
            self.idle_announced = idle
            raise

    # -- reads ---------------------------------------------------------------------------

    def require(self, task_id: str) -> TaskStatus:
        status = self.index.status.get(task_id)
        if status is None:
            raise NotFound(f"no task {task_id}", {"task_id": task_id})
        return status

    def owned(self, task_id: str, agent_id: str) -> LiveTask:
        """The in-flight task the agent owns, or `NotOwner` (`NotFound` for no such task)."""
        task = self.index.in_flight.get(task_id)
        if task is None or task.agent_id != agent_id:
            self.require(task_id)
            raise NotOwner(f"agent {agent_id} does not own task {task_id}", {"task_id": task_id})
        return task

    def answer(self, task_id: str, duplicate: bool) -> TaskAnswer:
        """What a runner is told after its report: the task's status as stored now."""
        row = self.store.task(task_id)
        assert row is not None
        return TaskAnswer(
            TaskStatus(row["status"]), row["attempts"], row["backoff_until"], duplicate
        )

    def answered(self, task: LiveTask) -> TaskAnswer:
        """The answer to the report just applied, from the live index (no re-read)."""
        until = task.backoff_until
        return TaskAnswer(
            self.index.status[task.id], task.attempts, to_iso(until) if until else None, False
        )

    def orphan_roots(self) -> list[str]:
        """Dead tasks with a pending dependent left behind (older databases)."""
        return self.index.dead_parents(list(self.index.live), DEAD)

    # -- the fleet's drain ---------------------------------------------------------------

    def announce_idle(self, **stopped: Any) -> None:
        self.idle_announced = True
        self.store.emit(EventType.FLEET_IDLE, counts=self.store.task_counts(), **stopped)

    def rearm_idle(self) -> None:
        """The fleet may run again: its next drain is news again."""
        if self.index.live:
            self.idle_announced = False

    # -- an attempt ----------------------------------------------------------------------

    def assign(self, task: LiveTask, agent_id: str, agent_name: str, now: datetime) -> None:
        """The next attempt (a repair attempt, `repair_session`, was made uncharged already)."""
        repair = task.repair_session is not None
        task.attempts += 1
        task.agent_id = agent_id
        task.assigned_at = now
        task.verified_on = None  # this attempt's verify has not run yet
        task.repairs = task.repairs + 1 if repair else 0
        self.index.set_status(task, TaskStatus.ASSIGNED)
        at = to_iso(now)
        self.store.update_task(
            task.id,
            status=TaskStatus.ASSIGNED,
            assigned_agent_id=agent_id,
            attempts=task.attempts,
            assigned_at=at,
            started_at=None,
            backoff_until=None,
            updated_at=at,
            repairs=task.repairs,
        )
        self.store.emit(
            EventType.TASK_ASSIGNED,
            task_id=task.id,
            agent_id=agent_id,
            agent_name=agent_name,
            attempt=task.attempts,
            **({"repair": True, "session_id": task.repair_session} if repair else {}),
        )

    def await_repair(self, task: LiveTask, session_id: str, error: str, now: datetime) -> None:
        """Its landing failed: back to pending for a repair attempt that resumes `session_id`,
        its change on the tree and its leases kept (the caller emitted `repair_started`). The
        repair attempt is not charged (decision 0161): counted so now, so it may run even
        after the task's last charged attempt."""
        task.repair_session = session_id
        task.uncharged += 1
        task.agent_id = None
        task.assigned_at = None
        task.backoff_until = None
        task.error, task.error_kind = error, ErrorKind.INTEGRATION_FAILED.value
        task.blocked_on_path = None
        self.index.set_status(task, TaskStatus.PENDING)
        self.index.place_pending(task)
        self.idle_announced = False
        self.store.update_task(
            task.id,
            status=TaskStatus.PENDING,
            assigned_agent_id=None,
            backoff_until=None,
            error=error,
            error_kind=ErrorKind.INTEGRATION_FAILED,
            blocked_on_path=None,
            repair_session=session_id,
            uncharged_attempts=task.uncharged,
            updated_at=to_iso(now),
        )

    def end_repair(self, task: LiveTask) -> None:
        """A repair attempt ended (well or not): the next attempt is fresh unless blamed again."""
        if task.repair_session is not None:
            task.repair_session = None
            self.store.update_task(task.id, repair_session=None)

    def start(self, task: LiveTask, now: datetime) -> None:
        self.index.set_status(task, TaskStatus.RUNNING)
        self.store.update_task(
            task.id, status=TaskStatus.RUNNING, started_at=to_iso(now), updated_at=to_iso(now)
        )
        self.store.emit(
            EventType.TASK_STARTED, task_id=task.id, agent_id=task.agent_id, attempt=task.attempts
        )

    def record_usage(self, task: LiveTask, agent_id: str, report: AttemptReport) -> None:
        self.store.add_usage(
            task.id,
            agent_id,
            report.input_tokens,
            report.output_tokens,
            report.cost_usd,
            succeeded=report.ok,
        )
        self.store.update_task(
            task.id,
            duration_ms=report.duration_ms,
            session_id=report.session_id,
            result_summary=report.summary,
        )

    def queue_landing(self, task: LiveTask, report: AttemptReport, now: datetime) -> None:
        """Finished well: it waits to land with its leases kept. Its agent is free (the
        caller frees it); `agent_id` stays as who did the work, for the events."""
        self.landing_seq += 1
        task.landed_cost_usd = report.cost_usd
        self.index.set_status(task, TaskStatus.LANDING)
        self.store.update_task(
            task.id,
            status=TaskStatus.LANDING,
            landing_seq=self.landing_seq,
            updated_at=to_iso(now),
        )

    def land(self, task: LiveTask, now: datetime, **landing: Any) -> int:
        """It landed: the next order number, then `succeed` (`landed` carries `landing`)."""
        self.landed += 1
        self.store.update_task(task.id, landed_order=self.landed)
        self.store.emit(EventType.LANDED, task_id=task.id, order=self.landed, **landing)
        row = self.store.task(task.id)
        summary = row["result_summary"] if row else None
        self.succeed(task, now, summary=summary, cost_usd=task.landed_cost_usd)
        return self.landed

    def succeed(
        self, task: LiveTask, now: datetime, *, summary: str | None, cost_usd: float
    ) -> None:
        """Done, landed in order; each dependent whose last unmet dependency this was becomes
        ready."""
        at = to_iso(now)
        self.index.finish(task, TaskStatus.SUCCEEDED)
        self.store.update_task(
            task.id,
            status=TaskStatus.SUCCEEDED,
            error=None,
            error_kind=None,
            completed_at=at,
            updated_at=at,
        )
        self.store.emit(
            EventType.TASK_SUCCEEDED,
            task_id=task.id,
            agent_id=task.agent_id,
            attempt=task.attempts,
            summary=summary,
            cost_usd=cost_usd,
            order=self.landed,
        )
        for child_id in self.index.children.get(task.id, ()):
            child = self.index.live.get(child_id)
            if child is None:
                continue
            child.unmet -= 1
            if child.unmet == 0:
                self.index.place_pending(child)
                self.store.emit(EventType.TASK_UNBLOCKED, task_id=child_id, by=task.id)

    def requeue(
        self,
        task: LiveTask,
        kind: ErrorKind,
        error: str,
        now: datetime,
        blocked_on_path: str | None = None,
        charged: bool = True,
        hold_s: float = 0.0,
        **detail: Any,
    ) -> None:
        """Back to pending; a veto waits on its path, a failed verify retries at once.

        `charged=False`: the attempt does not count against `max_attempts` and has no
        backoff (docs/decisions/0082-an-attempt-is-charged-only-for-its-own-failure.md, "An attempt is charged only for its own failure"),
        only the `hold_s` its caller asks for.
        """
        self.end_repair(task)  # rolled back: the next attempt starts afresh
        if not charged:
            task.uncharged += 1
            self.store.update_task(task.id, uncharged_attempts=task.uncharged)
            detail["charged"] = False
        backoff = now + timedelta(seconds=hold_s) if hold_s > 0 else None
        if kind not in NO_BACKOFF and charged:
            seconds = min(self.config.backoff_base * task.charged, self.config.backoff_cap)
            backoff = now + timedelta(seconds=seconds) if seconds > 0 else None
        widened: dict[str, Any] = {}
        if blocked_on_path and is_resource_key(blocked_on_path):  # a veto on a resource
            task.resources = task.resources | {blocked_on_path}
            widened["resources"] = sorted(map(resource_name, task.resources))
        elif blocked_on_path:
            task.scope = task.scope | {blocked_on_path}
        task.backoff_until = backoff
        task.agent_id = None
        task.assigned_at = None
        task.error, task.error_kind, task.blocked_on_path = error, kind.value, blocked_on_path
        self.index.set_status(task, TaskStatus.PENDING)
        self.index.place_pending(task)
        self.idle_announced = False
        until = to_iso(backoff) if backoff else None
        scope = sorted(task.scope)
        self.store.update_task(
            task.id,
            status=TaskStatus.PENDING,
            assigned_agent_id=None,
            backoff_until=until,
            error=error,
            error_kind=kind,
            blocked_on_path=blocked_on_path,
            file_scope=scope,
            updated_at=to_iso(now),
            **widened,
        )
        self.store.emit(
            EventType.TASK_REQUEUED,
            task_id=task.id,
            error_kind=kind,
            reason=error,
            attempt=task.attempts,
            backoff_until=until,
            blocked_on_path=blocked_on_path,
            file_scope=scope,
            **widened,
            **detail,
        )

    # -- the end of a task -----------------------------------------------------------------

    def fail(
        self,
        task: LiveTask,
        kind: ErrorKind,
        error: str,
        now: datetime,
        last_error_kind: ErrorKind | None = None,
    ) -> None:
        """Terminal failure; its dependents are blocked in the same transaction."""
        self.end_repair(task)
        at = to_iso(now)
        self.index.finish(task, TaskStatus.FAILED)
        self.store.update_task(
            task.id,
            status=TaskStatus.FAILED,
            error=error,
            error_kind=kind,
            assigned_agent_id=None,
            completed_at=at,
            updated_at=at,
        )
        self.store.emit(
            EventType.TASK_FAILED,
            task_id=task.id,
            error_kind=kind,
            error=error,
            attempt=task.attempts,
            **({"last_error_kind": last_error_kind} if last_error_kind else {}),
        )
        self.block_dependents([task.id], now)

    def cancel(self, task: LiveTask, now: datetime) -> None:
        """The operator ends the task; its dependents are blocked in the same transaction."""
        self.end_repair(task)
        at = to_iso(now)
        self.index.finish(task, TaskStatus.CANCELLED)
        self.store.update_task(
            task.id,
            status=TaskStatus.CANCELLED,
            error_kind=ErrorKind.CANCELLED,
            error="cancelled by operator",
            assigned_agent_id=None,
            completed_at=at,
            updated_at=at,
        )
        self.store.emit(EventType.TASK_CANCELLED, task_id=task.id)
        self.block_dependents([task.id], now)

    def block_dependents(self, roots: list[str], now: datetime) -> None:
        """Every transitive pending dependent of `roots` (tasks that did not succeed) is blocked.

        Docs: docs/decisions/0007-the-cascade-is-a-closure.md, "The cascade is a closure".
        """
        at = to_iso(now)
        for task_id, root in self.index.pending_below(roots):
            self.index.finish(self.index.live[task_id], TaskStatus.BLOCKED_UPSTREAM)
            message = f"upstream task {root} did not succeed"
            self.store.update_task(
                task_id, status=TaskStatus.BLOCKED_UPSTREAM, error=message, updated_at=at
            )
            self.store.emit(
                EventType.TASK_BLOCKED_UPSTREAM,
                task_id=task_id,
                upstream=root,
                upstream_status=self.index.status[root],  # "blocked: C1 was cancelled"
            )

    def retry(self, task_id: str, now: datetime) -> None:
        """A failed or cancelled task starts over; the dependents it blocked come back."""
        self._retried(task_id, now, reason="retry")
        idx = self.index
        queue = deque(idx.children.get(task_id, ()))
        while queue:
            child_id = queue.popleft()
            if idx.status.get(child_id) is not TaskStatus.BLOCKED_UPSTREAM:
                continue
            if any(idx.status.get(p) in DEAD for p in idx.parents.get(child_id, ())):
                continue
            self._retried(child_id, now, reason="upstream_retried")
            queue.extend(idx.children.get(child_id, ()))

    def _retried(self, task_id: str, now: datetime, reason: str) -> None:
        """Pending again with a fresh allowance: its attempts so far are set aside (not
        charged, `retried_attempts`), not erased, so its history and numbers go on."""
        row = self.store.task(task_id)
        assert row is not None
        done = int(row["attempts"])
        row.update(
            status=TaskStatus.PENDING,
            uncharged_attempts=done,
            retried_attempts=done,
            backoff_until=None,
            assigned_agent_id=None,
            error=None,
            error_kind=None,
            blocked_on_path=None,
        )
        task = live_task(row)
        task.unmet = self.index.unmet_of(task_id)
        self.index.add_live(task)
        self.index.place_pending(task)
        self.index.compute_chains([task_id])
        self.idle_announced = False
        self.store.update_task(
            task_id,
            status=TaskStatus.PENDING,
            uncharged_attempts=done,
            retried_attempts=done,
            backoff_until=None,
            error=None,
            error_kind=None,
            blocked_on_path=None,
            completed_at=None,
            updated_at=to_iso(now),
        )
        self.store.emit(
            EventType.TASK_RETRIED, task_id=task_id, reason=reason, attempt=done, set_aside=done
        )

    # -- a graph load --------------------------------------------------------------------

    def redefine(
        self, rows: list[Row], edges: list[tuple[str, str]], depends_on: Sequence[Sequence[str]]
    ) -> None:
        """Write a checked batch's definitions over stored tasks that have not started.

        Each keeps its seq, creation time and dependents; its fields and its own
        dependency edges are the new ones. One below an already-dead parent is blocked.
        """
        idx = self.index
        ids = {str(row["id"]) for row in rows}
        old_parents = {p for task_id in ids for p in idx.parents_of(task_id)}
        parents: dict[str, list[str]] = {task_id: [] for task_id in ids}
        for child, parent in edges:
            parents[child].append(parent)
        for row in rows:
            task_id = str(row["id"])
            self.store.update_task(task_id, **{k: row[k] for k in REDEFINED_COLUMNS})
            self.store.replace_dependencies(task_id, parents[task_id])
            idx.replace_parents(task_id, parents[task_id])
        self.store.emit_many(EventType.TASK_REDEFINED, validation.created_events(rows, depends_on))
        reload_tasks(idx, self.store, ids)
        idx.compute_chains(sorted(old_parents - ids))
        roots = idx.dead_parents(sorted(ids), DEAD)
        if roots:
            self.block_dependents(roots, self.clock())
        self.idle_announced = False

    def create(
        self, rows: list[Row], edges: list[tuple[str, str]], depends_on: Sequence[Sequence[str]]
    ) -> None:
        """Insert a checked batch; a task below an already-dead parent is born blocked.

        Critical-path lengths of the new tasks and their ancestors are refreshed.
        """
        self.store.insert_tasks(rows, edges)
        self.store.emit_many(EventType.TASK_CREATED, validation.created_events(rows, depends_on))
        idx = self.index
        idx.add_edges(edges)
        idx.add_created(rows)
        roots = idx.dead_parents([r["id"] for r in rows], DEAD)
        if roots:
            self.block_dependents(roots, self.clock())
        live_ids = [r["id"] for r in rows if r["id"] in idx.live]
        idx.place_created(live_ids)
        if live_ids:
            self.idle_announced = False
