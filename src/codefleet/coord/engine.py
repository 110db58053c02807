"""The engine: every state transition, and the tick loop that applies the scheduler.

The engine is the only code that changes task, agent or lease state. Each
public method is one transition and runs in ONE store transaction; its event
type shares its name (grep `requeue` and you find the method, the store call
and `task_requeued`). The engine runs on the server's event loop thread and
never awaits inside a transition, so transitions are serialized without locks.

A tick takes a snapshot of the live index, calls the pure `schedule`, and
applies the returned decisions in order in one transaction; a decision that
went stale against current state is skipped with a logged reason. Ticks run
reactively (any transition that can create readiness kicks one) and on a timer.

Lease exclusion is the primary key of `file_leases`; the in-memory lease map
is a mirror for answering denials with the holder's name.

File I/O never runs inside a transaction (`engine_files`): a transition that
ends a failed attempt commits a restore intent, and `transition()`
(`engine_recovery`) puts the files back after the COMMIT and releases them in
a transaction of their own. A transaction that fails re-reads only what it
touched, so memory is never ahead of the database.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from codefleet.coord import scheduler as sched
from codefleet.coord.agents import AgentsMixin, AgentState
from codefleet.coord.checks import ChecksMixin
from codefleet.coord.files import FilesMixin
from codefleet.coord.graph import GraphMixin
from codefleet.coord.index import LiveIndex, LiveTask, live_task
from codefleet.coord.interactive import InteractiveHolders
from codefleet.coord.limitpolicy import Budget
from codefleet.coord.limits import FleetLimits, ResumeReason
from codefleet.coord.recovery import RecoveryMixin
from codefleet.coord.store import Store
from codefleet.errors import InvalidState, NotFound, NotOwner
from codefleet.models import (
    RETRYABLE_KINDS,
    AgentStatus,
    ErrorKind,
    EventType,
    ReleaseReason,
    TaskStatus,
    to_iso,
    utcnow,
)
from codefleet.paths import TreeRoot

__all__ = ["Engine", "EngineConfig", "Report"]

log = logging.getLogger(__name__)
BASE_WINDOW = 64
# A veto waits on the holder (its scope), a failed verify has the output to act on:
# a timer adds nothing to either (docs/decisions.md, "A veto requeues without backoff").
# A usage limit pauses the whole fleet instead ("A usage limit pauses the fleet"), and a
# spent fleet budget stops it ("The fleet's budget").
NO_BACKOFF = frozenset(
    {ErrorKind.VETO, ErrorKind.VERIFY_FAILED, ErrorKind.RATE_LIMITED, ErrorKind.BUDGET}
)


@dataclass(frozen=True, slots=True)
class EngineConfig:
    stale_after: float = 20.0
    task_timeout: float = 600.0
    backoff_base: float = 2.0
    backoff_cap: float = 30.0
    heartbeat_interval: float = 5.0
    poll_interval: float = 1.0
    tick_interval: float = 0.5
    max_attempts: int = 3
    rollback: bool = True
    preimage_max_bytes: int = 10 * 1024 * 1024
    interactive_idle: float = 900.0
    max_cost: float | None = None  # the fleet's budget in USD (None: no cap)
    max_cost_hard: bool = False  # a spent budget also stops running attempts


@dataclass(frozen=True, slots=True)
class Report:
    """What a runner says about one attempt of one task."""

    attempt: int
    ok: bool
    summary: str | None = None
    error: str | None = None
    error_kind: ErrorKind | None = None
    blocked_on_path: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    duration_ms: int | None = None
    session_id: str | None = None
    retry_after_s: float | None = None  # a usage limit's stated retry time, when it gave one


class Engine(RecoveryMixin, AgentsMixin, GraphMixin, FilesMixin, ChecksMixin):
    def __init__(
        self,
        store: Store,
        tree: TreeRoot,
        config: EngineConfig | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.store = store
        self.tree = tree
        self.config = config or EngineConfig()
        self.clock = clock
        self.rollback = self.config.rollback
        self.preimage_max_bytes = self.config.preimage_max_bytes
        self.store.on_rollback = self.reload_touched  # memory never ahead of the database
        self.store.clock = clock  # events are stamped with the engine's time
        self.index = LiveIndex()
        self.agents: dict[str, AgentState] = {}
        self.agent_ids: dict[str, str] = {}
        self.leases: dict[str, tuple[str, str]] = {}
        self.task_leases: dict[str, set[str]] = {}
        self.restoring: dict[str, dict[str, str | None]] = {}
        self.idle_announced = True
        self._waiters: dict[str, set[asyncio.Event]] = {}
        self._tick_scheduled = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self.deaf_seconds: Callable[[], float] = lambda: 0.0  # the server plugs in its LoopWatch
        self.interactive = InteractiveHolders(self, self.config.interactive_idle)
        self._finishing = False
        self._alive_marked: datetime | None = None
        self.limits = FleetLimits(store, Budget(self.config.max_cost, self.config.max_cost_hard))
        self.load()
        self.finish_restores()  # a take-back the last process could not finish, before anyone
        self._block_orphans()

    @property
    def default_max_attempts(self) -> int:
        return self.config.max_attempts

    @property
    def heartbeat_interval(self) -> float:
        return self.config.heartbeat_interval

    # -- start-up -------------------------------------------------------------------

    def load(self) -> None:
        """Rebuild the live index from SQLite (after a restart nothing is lost)."""
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
        self._load_agents()
        self.leases = {}
        self.task_leases = {}
        for lease in self.store.leases():
            self._mirror_lease(lease["path"], lease["agent_id"], lease["task_id"])
        self.interactive.load()
        self.load_restores()
        self.limits.load(self.clock())
        self.idle_announced = not idx.live

    def _mirror_lease(self, path: str, agent_id: str, task_id: str) -> None:
        self.leases[path] = (agent_id, task_id)
        self.task_leases.setdefault(task_id, set()).add(path)

    def holder_name(self, agent_id: str) -> str | None:
        """The name of a lease holder: a runner, or a person's interactive session."""
        agent = self.agents.get(agent_id)
        if agent is not None:
            return agent.name
        holder = self.interactive.by_agent.get(agent_id)
        return holder.name if holder else None

    def holder_kind(self, agent_id: str) -> str:
        return "interactive" if agent_id in self.interactive.by_agent else "task"

    # -- ticking --------------------------------------------------------------------

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def kick(self) -> None:
        """Ask for a tick soon; many kicks before it runs coalesce into one."""
        if self._loop is None or self._tick_scheduled:
            return
        self._tick_scheduled = True
        self._loop.call_soon(self._kicked_tick)

    def _kicked_tick(self) -> None:
        self._tick_scheduled = False
        self.tick()

    async def run_ticker(self) -> None:
        while True:
            await asyncio.sleep(self.config.tick_interval)
            try:
                self.tick()
            except Exception:  # a loop boundary: one bad tick must not stop the timer
                log.exception("tick failed")

    def snapshot(self, now: datetime, window: int = BASE_WINDOW) -> sched.FleetState:
        idx = self.index
        idx.promote_backoff(now)
        candidates, more = idx.candidates(window)
        deaf = self.deaf_seconds()  # stale means unheard while listening
        return sched.FleetState(
            candidates=tuple(candidates),
            more_candidates=more,
            exhausted=tuple(idx.live[t].view() for t in sorted(idx.exhausted)),
            in_flight=tuple(t.view() for t in idx.in_flight.values()),
            agents=tuple(a.view(deaf) for a in self.agents.values()),
            leases=tuple((path, holder[1]) for path, holder in self.leases.items()),
            live_tasks=len(idx.live),
            idle_announced=self.idle_announced,
            stale_after=timedelta(seconds=self.config.stale_after),
            task_timeout=timedelta(seconds=self.config.task_timeout),
            paused_until=self.limits.paused_until(),
            budget=self.limits.budget_view(),
        )

    def tick(self) -> list[sched.Decision]:
        """Snapshot, schedule, apply in one transaction; returns what was decided."""
        self.mark_alive()
        self.finish_due_restores()  # left over when a release could not commit: finish them first
        now = self.clock()
        self.interactive.expire_idle(now)
        window = BASE_WINDOW
        while True:
            state = self.snapshot(now, window)
            decisions = sched.schedule(state, now)
            if not sched.wants_wider_window(state, decisions):
                break
            window *= 4
        if not decisions:
            return decisions
        with self.transition():
            for decision in decisions:
                self._apply(decision, now)
        if any(not isinstance(d, sched.Assign | sched.FleetIdle) for d in decisions):
            self.kick()
        return decisions

    def _apply(self, decision: sched.Decision, now: datetime) -> None:
        match decision:
            case sched.MarkOffline(agent_id):
                self._mark_offline(agent_id, ReleaseReason.AGENT_STALE, now)
            case sched.Requeue(task_id, kind, reason):
                task = self.index.in_flight.get(task_id)
                if task is None:
                    log.info("skip stale Requeue of %s: no longer in flight", task_id)
                    return
                self._take_back(task, kind, reason, now)
            case sched.FailTask(task_id, kind, reason):
                live = self.index.live.get(task_id)
                if live is None:
                    log.info("skip stale FailTask of %s: already terminal", task_id)
                    return
                if task_id in self.index.in_flight:
                    self._fence_owner(live, now)  # an overdue last attempt is a take-back too
                self._end_attempt(live, ReleaseReason(_release_for(reason)), now)
                self._fail(live, kind, reason, now)
            case sched.ResumeFleet():
                self.limits.resume(ResumeReason.ELAPSED, now)
            case sched.BudgetExhausted():
                pending = sum(t.status is TaskStatus.PENDING for t in self.index.live.values())
                self.limits.announce_exhausted(sorted(self.index.in_flight), pending)
            case sched.StopForBudget(task_id):
                self._stop_for_budget(task_id, now)
            case sched.Assign(task_id, agent_id):
                self._assign(task_id, agent_id, now)
            case sched.FleetIdle():
                self.idle_announced = True
                stopped = {"stopped": "budget"} if self.limits.exhausted() else {}
                self.store.emit(EventType.FLEET_IDLE, counts=self.store.task_counts(), **stopped)
            case _:
                raise TypeError(f"unknown decision {decision!r}")

    # -- task transitions ---------------------------------------------------------------

    def _assign(self, task_id: str, agent_id: str, now: datetime) -> None:
        task = self.index.live.get(task_id)
        agent = self.agents.get(agent_id)
        if task is None or task.status is not TaskStatus.PENDING or task.ready_key is None:
            log.info("skip stale Assign of %s: not ready", task_id)
            return
        if agent is None or agent.status is not AgentStatus.IDLE:
            log.info("skip stale Assign to %s: agent not idle", agent_id)
            return
        if self.task_leases.get(task_id):
            log.info("skip Assign of %s: its last attempt's files are not restored yet", task_id)
            return
        task.attempts += 1
        task.agent_id = agent_id
        task.assigned_at = now
        self.index.set_status(task, TaskStatus.ASSIGNED)
        at = to_iso(now)
        self.store.update_task(
            task_id,
            status=TaskStatus.ASSIGNED,
            assigned_agent_id=agent_id,
            attempts=task.attempts,
            assigned_at=at,
            started_at=None,
            backoff_until=None,
            updated_at=at,
        )
        agent.status = AgentStatus.BUSY
        agent.current_task_id = task_id
        self.store.update_agent(
            agent_id,
            status=AgentStatus.BUSY,
            current_task_id=task_id,
            last_assigned_at=at,
            updated_at=at,
        )
        self.store.emit(
            EventType.TASK_ASSIGNED,
            task_id=task_id,
            agent_id=agent_id,
            agent_name=agent.name,
            attempt=task.attempts,
        )
        self._wake(agent_id)

    def start(self, task_id: str, agent_id: str, epoch: int) -> dict[str, Any]:
        self.check_epoch(agent_id, epoch)
        task = self._owned(task_id, agent_id)
        if task.status is TaskStatus.RUNNING:
            return {"status": task.status}
        now = self.clock()
        with self.transition():
            self.index.set_status(task, TaskStatus.RUNNING)
            self.store.update_task(
                task_id, status=TaskStatus.RUNNING, started_at=to_iso(now), updated_at=to_iso(now)
            )
            self.store.emit(
                EventType.TASK_STARTED, task_id=task_id, agent_id=agent_id, attempt=task.attempts
            )
        return {"status": task.status}

    def _owned(self, task_id: str, agent_id: str) -> LiveTask:
        task = self.index.in_flight.get(task_id)
        if task is None or task.agent_id != agent_id:
            self.require_task(task_id)
            raise NotOwner(f"agent {agent_id} does not own task {task_id}", {"task_id": task_id})
        return task

    def require_task(self, task_id: str) -> TaskStatus:
        status = self.index.status.get(task_id)
        if status is None:
            raise NotFound(f"no task {task_id}", {"task_id": task_id})
        return status

    def complete(self, task_id: str, agent_id: str, epoch: int, report: Report) -> dict[str, Any]:
        """Apply one attempt's outcome, once; an outdated report is a no-op duplicate."""
        self.check_epoch(agent_id, epoch)
        self.require_task(task_id)
        task = self.index.live.get(task_id)
        if task is None or report.attempt < task.attempts:
            return self._task_answer(task_id, duplicate=True)
        if (
            task.agent_id != agent_id
            or task.status not in (TaskStatus.ASSIGNED, TaskStatus.RUNNING)
            or report.attempt != task.attempts
        ):
            raise NotOwner(
                f"agent {agent_id} does not own attempt {report.attempt} of {task_id}",
                {"task_id": task_id, "attempt": task.attempts},
            )
        now = self.clock()
        with self.transition():
            self._record_usage(task, agent_id, report)
            self._end_attempt(task, ReleaseReason.TASK_ENDED, now, succeeded=report.ok)
            if report.ok:
                self._succeed(task, report, now)
            else:
                self._settle_failure(task, report, now)
        self.kick()
        return self._task_answer(task_id, duplicate=False)

    def _task_answer(self, task_id: str, duplicate: bool) -> dict[str, Any]:
        row = self.store.task(task_id)
        assert row is not None
        return {
            "status": row["status"],
            "attempts": row["attempts"],
            "backoff_until": row["backoff_until"],
            "duplicate": duplicate,
        }

    def _record_usage(self, task: LiveTask, agent_id: str, report: Report) -> None:
        self.store.add_usage(
            task.id,
            agent_id,
            report.input_tokens,
            report.output_tokens,
            report.cost_usd,
            succeeded=report.ok,
        )
        self.limits.spend(report.cost_usd)
        self.store.update_task(
            task.id,
            duration_ms=report.duration_ms,
            session_id=report.session_id,
            result_summary=report.summary,
        )

    def _succeed(self, task: LiveTask, report: Report, now: datetime) -> None:
        at = to_iso(now)
        self.limits.succeeded()
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
            summary=report.summary,
            cost_usd=report.cost_usd,
        )
        for child_id in self.index.children.get(task.id, ()):
            child = self.index.live.get(child_id)
            if child is None:
                continue
            child.unmet -= 1
            if child.unmet == 0:
                self.index.place_pending(child)
                self.store.emit(EventType.TASK_UNBLOCKED, task_id=child_id, by=task.id)

    def _settle_failure(self, task: LiveTask, report: Report, now: datetime) -> None:
        kind = report.error_kind or ErrorKind.AGENT_ERROR
        error = report.error or kind.value
        if kind not in RETRYABLE_KINDS:
            self._fail(task, kind, error, now)
            return
        if kind is ErrorKind.RATE_LIMITED:
            self._limit_reached(task, report, error, now)
            return
        if task.charged >= task.max_attempts:  # the last attempt: no requeue to wait out
            spent = f"out of attempts ({task.charged}/{task.max_attempts}); last: {kind}: {error}"
            self._fail(task, ErrorKind.ATTEMPTS_EXHAUSTED, spent, now, last_error_kind=kind)
            return
        widen = None
        if kind is ErrorKind.VETO and report.blocked_on_path:
            widen = self._canonical_or_none(report.blocked_on_path)
        self._requeue(task, kind, error, now, blocked_on_path=widen)

    def _limit_reached(self, task: LiveTask, report: Report, error: str, now: datetime) -> None:
        """A usage limit: the fleet pauses and the attempt is not charged.

        Docs: decisions.md, "A usage limit pauses the fleet".
        """
        agent = self.agents.get(task.agent_id or "")
        who = agent.name if agent else "a runner"
        until = self.limits.limited(task.id, report.retry_after_s, f"{who}: {error}", now)
        task.uncharged += 1
        self.store.update_task(task.id, uncharged_attempts=task.uncharged)
        self._requeue(task, ErrorKind.RATE_LIMITED, error, now, charged=False,
                      paused_until=to_iso(until))  # fmt: skip

    def _stop_for_budget(self, task_id: str, now: datetime) -> None:
        """A hard budget stop: take the attempt back, roll it back, do not charge it."""
        task = self.index.in_flight.get(task_id)
        if task is None:
            log.info("skip stale StopForBudget of %s: no longer in flight", task_id)
            return
        self._fence_owner(task, now)
        self._end_attempt(task, ReleaseReason.FLEET_BUDGET, now)
        task.uncharged += 1
        self.store.update_task(task.id, uncharged_attempts=task.uncharged)
        reason = "the fleet's budget is spent (hard stop)"
        self._requeue(task, ErrorKind.BUDGET, reason, now, charged=False)

    def set_budget(self, max_cost: float | None, hard: bool) -> dict[str, Any]:
        """Change the fleet's budget live (`codefleet budget`); a higher cap resumes assignment."""
        before = (self.limits.budget, self.limits.announced)
        try:
            with self.transition():
                self.limits.set_budget(Budget(max_cost, hard))
        except BaseException:
            self.limits.budget, self.limits.announced = before
            raise
        if self.index.live:
            self.idle_announced = False  # the fleet may run again: its drain is news again
        self.kick()
        return self.limits.budget_json()

    def resume(self) -> dict[str, Any]:
        """Lift a usage-limit pause by hand (`codefleet resume`)."""
        now = self.clock()
        was = self.limits.view(now)["pause"]
        with self.transition():
            resumed = self.limits.resume(ResumeReason.OPERATOR, now)
        self.kick()
        return {"resumed": resumed, "paused_until": None, "was": was}

    def _canonical_or_none(self, raw: str) -> str | None:
        try:
            return self.tree.canonical(raw)
        except ValueError:
            return None

    def _take_back(self, task: LiveTask, kind: ErrorKind, reason: str, now: datetime) -> None:
        """Requeue an in-flight task the server itself takes away from its agent."""
        self._fence_owner(task, now)
        self._end_attempt(task, ReleaseReason(_release_for(reason)), now)
        self._requeue(task, kind, reason, now)

    def _fence_owner(self, task: LiveTask, now: datetime) -> None:
        """Bump the owner's epoch, unless going offline already did (one bump per take-back)."""
        agent = self.agents.get(task.agent_id or "")
        if agent is not None and agent.status is not AgentStatus.OFFLINE:
            self.fence(agent.id, now)

    def _requeue(
        self,
        task: LiveTask,
        kind: ErrorKind,
        error: str,
        now: datetime,
        blocked_on_path: str | None = None,
        **detail: Any,
    ) -> None:
        """Back to pending; a veto waits on its path, a failed verify retries at once."""
        backoff = None
        if kind not in NO_BACKOFF:
            seconds = min(self.config.backoff_base * task.attempts, self.config.backoff_cap)
            backoff = now + timedelta(seconds=seconds) if seconds > 0 else None
        if blocked_on_path:
            task.scope = task.scope | {blocked_on_path}
        task.backoff_until = backoff
        task.agent_id = None
        task.assigned_at = None
        self.index.set_status(task, TaskStatus.PENDING)
        self.index.place_pending(task)
        self.idle_announced = False
        at = to_iso(now)
        self.store.update_task(
            task.id,
            status=TaskStatus.PENDING,
            assigned_agent_id=None,
            backoff_until=to_iso(backoff) if backoff else None,
            error=error,
            error_kind=kind,
            blocked_on_path=blocked_on_path,
            file_scope=sorted(task.scope),
            updated_at=at,
        )
        self.store.emit(
            EventType.TASK_REQUEUED,
            task_id=task.id,
            error_kind=kind,
            reason=error,
            attempt=task.attempts,
            backoff_until=to_iso(backoff) if backoff else None,
            blocked_on_path=blocked_on_path,
            file_scope=sorted(task.scope),
            **detail,
        )

    def _fail(
        self,
        task: LiveTask,
        kind: ErrorKind,
        error: str,
        now: datetime,
        last_error_kind: ErrorKind | None = None,
    ) -> None:
        """Terminal failure; its dependents are blocked in the same transaction."""
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
        self._block_dependents([task.id], now)

    def _block_dependents(self, roots: list[str], now: datetime) -> None:
        """Every transitive pending dependent of `roots` (tasks that did not succeed) is blocked.

        Docs: decisions.md, "The cascade is a closure".
        """
        at = to_iso(now)
        for task_id, root in self.index.pending_below(roots):
            self.index.finish(self.index.live[task_id], TaskStatus.BLOCKED_UPSTREAM)
            message = f"upstream task {root} did not succeed"
            self.store.update_task(
                task_id, status=TaskStatus.BLOCKED_UPSTREAM, error=message, updated_at=at
            )
            self.store.emit(EventType.TASK_BLOCKED_UPSTREAM, task_id=task_id, upstream=root)

    def _block_orphans(self) -> None:
        """At start: block pending tasks a dead ancestor left behind (older databases)."""
        roots = self.index.dead_parents(list(self.index.live), _DEAD)
        if roots:
            with self.transition():
                self._block_dependents(roots, self.clock())

    def _end_attempt(
        self, task: LiveTask, reason: ReleaseReason, now: datetime, succeeded: bool = False
    ) -> None:
        """Settle files, release the attempt's leases, free its agent: the caller's transaction."""
        self.release(task.id, reason, succeeded)
        agent = self.agents.get(task.agent_id or "")
        if agent and agent.current_task_id == task.id:
            self.free_agent(agent, now)

    def release(self, task_id: str, reason: ReleaseReason, succeeded: bool = False) -> None:
        """End the attempt's hold on its files: patch them (success) or restore them, then release.

        A failed attempt's files keep their leases until they are put back, after
        this transaction commits (`engine_files`); the others are released here.
        """
        held = self.task_leases.get(task_id, set()) - set(self.restoring.get(task_id, ()))
        if not held:
            return
        if succeeded:
            self.record_patches(task_id)
        else:
            held -= self.request_restores(task_id, held, reason)
        self.drop_leases(task_id, held, reason)

    def drop_leases(self, task_id: str, paths: Iterable[str], reason: str) -> None:
        """Delete the task's lease rows for `paths` and their mirror; one event per path."""
        for path in sorted(paths):
            agent_id, _ = self.leases.pop(path)
            self.store.delete_lease(path, task_id)
            self.store.emit(
                EventType.LEASE_RELEASED, task_id=task_id, agent_id=agent_id, path=path,
                reason=reason,
            )  # fmt: skip
            held = self.task_leases[task_id]
            held.discard(path)
            if not held:
                del self.task_leases[task_id]

    # -- operator transitions -------------------------------------------------------------

    def cancel(self, task_id: str) -> dict[str, Any]:
        status = self.require_task(task_id)
        task = self.index.live.get(task_id)
        if task is None:
            raise InvalidState(f"task {task_id} is already {status}", {"status": status})
        now = self.clock()
        with self.transition():
            if task.agent_id and task.status in (TaskStatus.ASSIGNED, TaskStatus.RUNNING):
                self.fence(task.agent_id, now)
            self._end_attempt(task, ReleaseReason.CANCELLED, now)
            at = to_iso(now)
            self.index.finish(task, TaskStatus.CANCELLED)
            self.store.update_task(
                task_id,
                status=TaskStatus.CANCELLED,
                error_kind=ErrorKind.CANCELLED,
                error="cancelled by operator",
                assigned_agent_id=None,
                completed_at=at,
                updated_at=at,
            )
            self.store.emit(EventType.TASK_CANCELLED, task_id=task_id)
            self._block_dependents([task_id], now)
        self.kick()
        return {"status": TaskStatus.CANCELLED}

    def retry(self, task_id: str) -> dict[str, Any]:
        """A failed or cancelled task starts over; its blocked dependents come back."""
        status = self.require_task(task_id)
        if status not in (TaskStatus.FAILED, TaskStatus.CANCELLED):
            raise InvalidState(
                f"only failed or cancelled tasks can be retried; {task_id} is {status}"
            )
        self.finish_restores([task_id])  # a file repaired since can now be put back
        stuck = self.unrestorable_of(task_id)
        if stuck:
            raise InvalidState(
                f"{task_id} still holds {', '.join(sorted(stuck))}, which could not be restored "
                f"({'; '.join(stuck.values())}); repair it, then retry",
                {"unrestorable": stuck},
            )
        now = self.clock()
        with self.transition():
            self._revive(task_id, now, reason="retry")
            queue = deque(self.index.children.get(task_id, ()))
            while queue:
                child_id = queue.popleft()
                if self.index.status.get(child_id) is not TaskStatus.BLOCKED_UPSTREAM:
                    continue
                if any(
                    self.index.status.get(p) in _DEAD for p in self.index.parents.get(child_id, ())
                ):
                    continue
                self._revive(child_id, now, reason="upstream_retried")
                queue.extend(self.index.children.get(child_id, ()))
        self.kick()
        return {"status": TaskStatus.PENDING}

    def _revive(self, task_id: str, now: datetime, reason: str) -> None:
        row = self.store.task(task_id)
        assert row is not None
        row.update(
            status=TaskStatus.PENDING, attempts=0, uncharged_attempts=0, backoff_until=None,
            assigned_agent_id=None,
        )  # fmt: skip
        task = live_task(row)
        task.unmet = self.index.unmet_of(task_id)
        self.index.add_live(task)
        self.index.place_pending(task)
        self.index.compute_chains([task_id])
        self.idle_announced = False
        self.store.update_task(
            task_id,
            status=TaskStatus.PENDING,
            attempts=0,
            uncharged_attempts=0,
            backoff_until=None,
            error=None,
            error_kind=None,
            blocked_on_path=None,
            completed_at=None,
            updated_at=to_iso(now),
        )
        self.store.emit(EventType.TASK_RETRIED, task_id=task_id, reason=reason, attempt=0)

    def fleet_event(self, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        """The run's bookends (`fleet_started`, `run_finished`): events only."""
        event_type = EventType(kind)
        if event_type not in (EventType.FLEET_STARTED, EventType.RUN_FINISHED):
            raise ValueError(f"{kind} is not a fleet event")
        with self.transition():
            event = self.store.emit(event_type, **payload)
        return {"event_id": event["id"]}

    def record_commits(self, branch: str, commits: list[tuple[str, str]]) -> dict[str, Any]:
        """One `task_committed` event per (task, commit); every task must have succeeded."""
        for task_id, _ in commits:
            if self.require_task(task_id) is not TaskStatus.SUCCEEDED:
                raise InvalidState(f"{task_id} has not succeeded", {"task_id": task_id})
        with self.store.transaction():
            for task_id, commit in commits:
                self.store.emit(
                    EventType.TASK_COMMITTED, task_id=task_id, branch=branch, commit=commit
                )
        return {"recorded": len(commits)}

    def reset(self) -> None:
        with self.transition():
            self.store.reset()
        self.load()


_DEAD = frozenset({TaskStatus.FAILED, TaskStatus.CANCELLED, TaskStatus.BLOCKED_UPSTREAM})


def _release_for(reason: str) -> str:
    known = {r.value for r in ReleaseReason}
    return reason if reason in known else ReleaseReason.TASK_ENDED.value
