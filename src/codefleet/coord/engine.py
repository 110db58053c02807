"""The engine: the tick, the decision applier, and the transitions that cut across parts.

The engine is composed of parts, each the one writer of its state (docs/
decisions.md, "The engine is parts, not mixins"): the agent registry
(`agents`), the lease mirror (`leases`), the files part (`files`), the checks
registry, interactive holders, limits and the `alive_at` mark; the engine
itself owns the live index and `idle_announced`. Each public method is one
transition and runs in ONE store transaction (`transition`); its event type
shares its name. The engine runs on the server's event loop thread and never
awaits inside a transition, so transitions are serialized without locks.

A tick takes a snapshot, calls the pure `schedule`, and applies the returned
decisions in order in one transaction; a stale decision is skipped with a
logged reason. File I/O never runs inside a transaction: a failed attempt's
restore intent commits first, the files are put back after the COMMIT, and a
transaction of its own releases them. A transaction that fails re-reads only
what it touched, so memory is never ahead of the database.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

from codefleet.attempt import AssignedTask, AttemptReport
from codefleet.coord import graph
from codefleet.coord import scheduler as sched
from codefleet.coord.agents import AgentRegistry, AgentState
from codefleet.coord.answers import Beat, LeaseAnswer, Registered, TaskAnswer
from codefleet.coord.checks import CheckRegistry, validated_checks
from codefleet.coord.engineconfig import EngineConfig
from codefleet.coord.files import Files
from codefleet.coord.graph import NewTask, PreparedBatch
from codefleet.coord.index import DEAD, LiveIndex, LiveTask, live_task
from codefleet.coord.interactive import InteractiveHolders
from codefleet.coord.leases import LeaseTable, denial
from codefleet.coord.limitpolicy import Budget
from codefleet.coord.limits import FleetLimits, ResumeReason
from codefleet.coord.recovery import AliveMark, reload_tasks
from codefleet.coord.registration import check_tree
from codefleet.coord.store import Store, Touched
from codefleet.errors import InvalidState, NotFound, NotOwner
from codefleet.models import (
    RETRYABLE_KINDS,
    AgentStatus,
    DenyReason,
    ErrorKind,
    EventType,
    ReleaseReason,
    TaskStatus,
    to_iso,
    utcnow,
)
from codefleet.paths import PathRejected, TreeRoot

__all__ = ["Engine", "EngineConfig"]

log = logging.getLogger(__name__)
BASE_WINDOW = 64
# A veto waits on the holder (its scope), a failed verify has the output to act on:
# a timer adds nothing to either (docs/decisions.md, "A veto requeues without backoff").
# A usage limit pauses the whole fleet instead ("A usage limit pauses the fleet"), and a
# spent fleet budget stops it ("The fleet's budget").
NO_BACKOFF = frozenset(
    {ErrorKind.VETO, ErrorKind.VERIFY_FAILED, ErrorKind.RATE_LIMITED, ErrorKind.BUDGET}
)


class Engine:
    def __init__(
        self,
        store: Store,
        tree: TreeRoot,
        config: EngineConfig | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.store = store
        self.tree = tree
        self.config = cfg = config or EngineConfig()
        self.clock = clock
        self.store.on_rollback = self.reload_touched  # memory never ahead of the database
        self.store.clock = clock  # events are stamped with the engine's time
        self.index = LiveIndex()
        self.idle_announced = True
        self._tick_scheduled = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._finishing = False
        self.agents = AgentRegistry(store, clock)
        self.files = Files(store, tree, clock, cfg.rollback, cfg.preimage_max_bytes)
        self.leases = LeaseTable(store, tree, clock, self.files, self.holder)
        self.interactive = InteractiveHolders(
            store, tree, clock, self.leases, self.holder, self.kick, cfg.interactive_idle
        )
        self.checks = CheckRegistry(store)
        self.limits = FleetLimits(store, Budget(cfg.max_cost, cfg.max_cost_hard))
        self.alive = AliveMark(store, clock, cfg.heartbeat_interval)
        self.load()
        self.finish_restores()  # a take-back the last process could not finish, before anyone
        self._block_orphans()

    # -- reads the server makes ------------------------------------------------------

    @property
    def deaf_seconds(self) -> Callable[[], float]:
        """How long the server could not listen (the server plugs in its LoopWatch)."""
        return self.agents.deaf_seconds

    @deaf_seconds.setter
    def deaf_seconds(self, watch: Callable[[], float]) -> None:
        self.agents.deaf_seconds = watch

    @property
    def restoring(self) -> Mapping[str, Mapping[str, str | None]]:
        return self.files.restoring

    def holder(self, agent_id: str) -> tuple[str | None, str]:
        """A lease holder's name and kind: a runner (`task`), or a person's session."""
        agent = self.agents.get(agent_id)
        person = self.interactive.by_agent.get(agent_id)
        name = agent.name if agent is not None else (person.name if person else None)
        return name, "interactive" if person is not None else "task"

    def holder_name(self, agent_id: str) -> str | None:
        return self.holder(agent_id)[0]

    def holder_kind(self, agent_id: str) -> str:
        return self.holder(agent_id)[1]

    # -- start-up and recovery -----------------------------------------------------------

    def load(self) -> None:
        """Rebuild memory from SQLite (after a restart nothing is lost)."""
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
        now = self.clock()
        self.agents.load(now, self.alive.downtime(now))
        self.leases.load()
        self.interactive.load()
        self.files.load()
        self.limits.load(self.clock())
        self.idle_announced = not idx.live

    def reload_touched(self, touched: Touched) -> None:
        """Re-read what a rolled-back transaction touched; nothing else (the store calls this)."""
        reload_tasks(self.index, self.store, touched.tasks)
        self.agents.reload(touched.agents)
        self.leases.reload(touched.lease_tasks)
        self.files.reload(touched.lease_tasks)
        if touched.interactive:
            self.interactive.load()
        self.limits.load(self.clock())  # a pause is its events: re-read the last one

    @contextmanager
    def transition(self) -> Iterator[None]:
        """One store transaction; after the outermost COMMIT, the file restores it asked for."""
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
        due = self.files.restores_due()
        if not due or self._finishing:
            return
        self._finishing = True
        try:
            self.finish_restores(due)
        except Exception:  # a loop boundary: the restores stay due, the next tick retries
            log.exception("could not finish the restores of %s; retrying at the next tick", due)
        finally:
            self._finishing = False

    def finish_restores(self, task_ids: Iterable[str] | None = None) -> None:
        """Put back each task's files, then release them (default: every restore not tried)."""
        restoring = self.files.restoring
        for task_id in sorted(restoring if task_ids is None else task_ids):
            if task_id in restoring:
                self._finish_restore(task_id)

    def _finish_restore(self, task_id: str) -> None:
        outcomes = self.files.put_back(task_id)  # file I/O, no transaction open
        with self.transition():
            failed = []
            for outcome in outcomes:
                if outcome.error is None:
                    self.files.settle_restored(outcome)
                    self.leases.drop(task_id, [outcome.row.path], outcome.row.reason)
                else:
                    failed.append(self.files.settle_unrestorable(outcome))
            if failed:
                self._fail_unrestored(task_id, failed)

    def _fail_unrestored(self, task_id: str, errors: list[str]) -> None:
        """The attempt's requeue is void: a task whose file cannot be put back fails (`infra`)."""
        task = self.index.live.get(task_id)
        if task is None:
            return  # already failed or cancelled: the event and the held lease say the rest
        message = (
            f"could not restore {'; '.join(errors)}; the lease stays held until the file is "
            "repaired (then `codefleet retry`, or a server restart, restores and releases it)"
        )
        self._fail(task, ErrorKind.INFRA, message, self.clock())

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
        return sched.FleetState(
            candidates=tuple(candidates),
            more_candidates=more,
            exhausted=tuple(idx.live[t].view() for t in sorted(idx.exhausted)),
            in_flight=tuple(t.view() for t in idx.in_flight.values()),
            agents=self.agents.views(),
            leases=tuple((path, holder[1]) for path, holder in self.leases.holders.items()),
            live_tasks=len(idx.live),
            idle_announced=self.idle_announced,
            stale_after=timedelta(seconds=self.config.stale_after),
            task_timeout=timedelta(seconds=self.config.task_timeout),
            paused_until=self.limits.paused_until(),
            budget=self.limits.budget_view(),
        )

    def tick(self) -> list[sched.Decision]:
        """Snapshot, schedule, apply in one transaction; returns what was decided."""
        self.alive.mark()
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
                self._end_attempt(live, release_for(reason), now)
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
        if self.leases.paths_of(task_id):
            log.info("skip Assign of %s: its last attempt's files are not restored yet", task_id)
            return
        task.attempts += 1
        task.agent_id = agent_id
        task.assigned_at = now
        self.index.set_status(task, TaskStatus.ASSIGNED)
        at = to_iso(now)
        self.store.update_task(
            task_id, status=TaskStatus.ASSIGNED, assigned_agent_id=agent_id,
            attempts=task.attempts, assigned_at=at, started_at=None, backoff_until=None,
            updated_at=at,
        )  # fmt: skip
        self.agents.busy(agent, task_id, at)
        self.store.emit(
            EventType.TASK_ASSIGNED, task_id=task_id, agent_id=agent_id, agent_name=agent.name,
            attempt=task.attempts,
        )  # fmt: skip
        self.agents.wake(agent_id)

    def start(self, task_id: str, agent_id: str, epoch: int) -> dict[str, Any]:
        self.agents.check_epoch(agent_id, epoch)
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

    def complete(
        self, task_id: str, agent_id: str, epoch: int, report: AttemptReport
    ) -> TaskAnswer:
        """Apply one attempt's outcome, once; an outdated report is a no-op duplicate."""
        self.agents.check_epoch(agent_id, epoch)
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

    def _task_answer(self, task_id: str, duplicate: bool) -> TaskAnswer:
        row = self.store.task(task_id)
        assert row is not None
        return TaskAnswer(
            TaskStatus(row["status"]), row["attempts"], row["backoff_until"], duplicate
        )

    def _record_usage(self, task: LiveTask, agent_id: str, report: AttemptReport) -> None:
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

    def _succeed(self, task: LiveTask, report: AttemptReport, now: datetime) -> None:
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

    def _settle_failure(self, task: LiveTask, report: AttemptReport, now: datetime) -> None:
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

    def _limit_reached(
        self, task: LiveTask, report: AttemptReport, error: str, now: datetime
    ) -> None:
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
        self._end_attempt(task, release_for(reason), now)
        self._requeue(task, kind, reason, now)

    def _fence_owner(self, task: LiveTask, now: datetime) -> None:
        """Bump the owner's epoch, unless going offline already did (one bump per take-back)."""
        agent = self.agents.get(task.agent_id or "")
        if agent is not None and agent.status is not AgentStatus.OFFLINE:
            self.agents.fence(agent.id, now)

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
        roots = self.index.dead_parents(list(self.index.live), DEAD)
        if roots:
            with self.transition():
                self._block_dependents(roots, self.clock())

    def _end_attempt(
        self, task: LiveTask, reason: ReleaseReason, now: datetime, succeeded: bool = False
    ) -> None:
        """Settle files, release the attempt's leases, free its agent: the caller's transaction."""
        self.leases.release(task.id, reason, succeeded)
        agent = self.agents.get(task.agent_id or "")
        if agent and agent.current_task_id == task.id:
            self.agents.free(agent, now)

    # -- runner calls ---------------------------------------------------------------------

    def register(
        self, name: str, workdir: str, pid: int | None, host: str | None = None,
        replace: bool = False,
    ) -> Registered:  # fmt: skip
        """Upsert by name; a previous incarnation's task and leases are taken back.

        Refused (`WrongTree`, `NameInUse`) before anything is written; see `registration`.
        One registration is exactly one epoch bump, whatever it takes back.
        """
        now = self.clock()
        check_tree(workdir, str(self.tree.root))
        known = self.agents.admit(name, host, pid, replace, now, self.config.stale_after)
        with self.transition():
            if known is None:
                agent = self.agents.enroll(name, workdir, pid, host, now)
            else:
                agent = known
                was_offline = agent.status is AgentStatus.OFFLINE
                epoch = agent.epoch + 1  # the take-back's own fence is this same bump
                self._take_back_current(agent, ReleaseReason.AGENT_REREGISTERED, now)
                self.agents.reincarnate(agent, epoch, was_offline, workdir, pid, host, now)
        self.kick()
        return Registered(agent.id, agent.epoch, agent.status)

    def heartbeat(self, agent_id: str, epoch: int) -> Beat:
        agent = self.agents.check_epoch(agent_id, epoch)
        now = self.clock()
        self.agents.beat(agent, now)
        with self.transition():
            if self.agents.record_beat(agent, now):
                self.kick()
        return Beat(agent.status, agent.epoch)

    def leave(self, agent_id: str, epoch: int) -> None:
        self.agents.check_epoch(agent_id, epoch)
        with self.transition():
            self._mark_offline(agent_id, ReleaseReason.AGENT_LEFT, self.clock())
        self.kick()

    def _mark_offline(self, agent_id: str, reason: ReleaseReason, now: datetime) -> None:
        """Offline + fence + release; a graceful leave also requeues its task here."""
        agent = self.agents.by_id[agent_id]
        if reason is ReleaseReason.AGENT_LEFT:
            self._take_back_current(agent, reason, now)
        elif agent.current_task_id is not None:
            self.leases.release(agent.current_task_id, reason)
        self.agents.go_offline(agent, reason, now)

    def _take_back_current(self, agent: AgentState, reason: ReleaseReason, now: datetime) -> None:
        task = self.index.in_flight.get(agent.current_task_id or "")
        if task is not None and task.agent_id == agent.id:
            self._take_back(task, ErrorKind.INFRA, reason, now)

    def assignment(self, agent_id: str, epoch: int) -> AssignedTask | None:
        agent = self.agents.check_epoch(agent_id, epoch)
        self.agents.touch(agent)
        task = self.index.in_flight.get(agent.current_task_id or "")
        if task is None or task.status is not TaskStatus.ASSIGNED:
            return None
        row = self.store.task(task.id)
        assert row is not None and task.assigned_at is not None
        deadline = task.assigned_at.timestamp() + self.config.task_timeout
        kind = row["error_kind"]
        return AssignedTask(
            id=task.id, title=row["title"], description=row["description"],
            priority=task.priority, file_scope=tuple(sorted(task.scope)), attempts=task.attempts,
            deadline=datetime.fromtimestamp(deadline, task.assigned_at.tzinfo),
            blocked_on_path=row["blocked_on_path"], error=row["error"],
            error_kind=None if kind is None else ErrorKind(kind), verify=row["verify"],
        )  # fmt: skip

    async def wait_assignment(self, agent_id: str, epoch: int, wait: float) -> AssignedTask | None:
        """Long-poll: answer as soon as an assignment exists, or None after `wait` s."""
        found = self.assignment(agent_id, epoch)
        if found is not None or wait <= 0:
            return found
        await self.agents.wait_for_wake(agent_id, wait, self.kick)
        return self.assignment(agent_id, epoch)

    def acquire(
        self, agent_id: str, epoch: int, task_id: str, paths: list[str], tool: str
    ) -> LeaseAnswer:
        """All-or-nothing lease grant for one write; always an answer, never an error."""
        agent = self.agents.check_epoch(agent_id, epoch)
        self.agents.touch(agent)
        task = self.index.in_flight.get(task_id)
        if task is None or task.agent_id != agent_id:
            refused = [denial(p, DenyReason.NOT_OWNER) for p in paths]
            return LeaseAnswer.deny(refused, f"task {task_id} is not yours")
        keys, rejected = self.leases.canonical_all(paths)
        if rejected:
            return LeaseAnswer.deny(rejected)
        if self.leases.all_ours(keys, task_id):
            return LeaseAnswer(True, granted=tuple(keys))  # a re-acquire writes nothing
        with self.transition():
            return self.leases.acquire(agent_id, agent.name, task_id, keys, tool)

    def record_change(
        self, agent_id: str, epoch: int, task_id: str, path: str, tool: str,
        sha256: str | None = None,
    ) -> None:  # fmt: skip
        """Ledger row from PostToolUse; never vetoes, never read by the scheduler.

        The row names the owner's current attempt and the content hash the writer
        read after the write: the invariant checker's content oracle.
        """
        self.agents.check_epoch(agent_id, epoch)
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

    def record_check(
        self, task_id: str, agent_id: str, epoch: int, report: Mapping[str, Any]
    ) -> dict[str, Any]:
        """One `check_started` or `check_finished` event for the owner's current attempt."""
        agent = self.agents.check_epoch(agent_id, epoch)
        self.agents.touch(agent)
        task = self._owned(task_id, agent_id)
        if report["attempt"] != task.attempts:
            raise NotOwner(
                f"attempt {report['attempt']} of {task_id} is over",
                {"task_id": task_id, "attempt": task.attempts},
            )
        command = self.checks.command(str(report["name"]))
        with self.transition():
            event_id = self.checks.record(task_id, agent_id, task.attempts, command, report)
        return {"event_id": event_id}

    def foreign_preimages(self, task_id: str) -> dict[str, Any]:
        """Pre-images of every path leased by another task: what the isolated view restores."""
        self.require_task(task_id)
        return self.files.foreign_preimages(task_id, self.leases.holders)

    # -- the graph and its checks ----------------------------------------------------------

    def define_checks(self, checks: Mapping[str, str]) -> dict[str, Any]:
        """Define or redefine named checks; returns the names whose command changed."""
        valid = validated_checks(checks)
        with self.transition():
            changed = self.checks.define(valid, to_iso(self.clock()))
        return {"defined": sorted(valid), "changed": changed}

    def create_tasks(
        self, specs: Sequence[NewTask], checks: Mapping[str, str] | None = None
    ) -> list[str]:
        """Validate the whole batch, then insert it (and its checks) in one transaction."""
        return self.commit_tasks(self.prepare_tasks(specs, checks))

    def prepare_tasks(
        self, specs: Sequence[NewTask], checks: Mapping[str, str] | None = None
    ) -> PreparedBatch:
        """The heavy, state-free half of a load (`graph`); safe to run off the loop thread."""
        return graph.prepare_tasks(self.tree, specs, checks)

    def commit_tasks(self, batch: PreparedBatch) -> list[str]:
        """Check the batch against what is stored now, then insert it in one transaction.

        A task below an already-dead parent is born `blocked_upstream`; critical-path
        lengths of the new tasks and their ancestors are refreshed in the index.
        """
        graph.check_against(batch, self.index.status, self.checks.known())
        at = to_iso(self.clock())
        rows, edges = graph.task_rows(batch, self.store.max_seq(), at, self.config.max_attempts)
        with self.transition():
            self.checks.define(batch.checks, at)
            self.store.insert_tasks(rows, edges)
            for row, spec in zip(rows, batch.specs, strict=True):
                self.store.emit(
                    EventType.TASK_CREATED, task_id=str(row["id"]), title=row["title"],
                    priority=row["priority"], file_scope=row["file_scope"],
                    depends_on=list(spec.depends_on),
                )  # fmt: skip
            idx = self.index
            idx.add_edges(edges)
            idx.add_created(rows)
            roots = idx.dead_parents([r["id"] for r in rows], DEAD)
            if roots:
                self._block_dependents(roots, self.clock())
            live_ids = [r["id"] for r in rows if r["id"] in idx.live]
            for task_id in live_ids:
                idx.place_pending(idx.live[task_id])
            idx.compute_chains(live_ids)
            if live_ids:
                self.idle_announced = False
        self.kick()
        return batch.ids

    # -- operator transitions -------------------------------------------------------------

    def cancel(self, task_id: str) -> dict[str, Any]:
        status = self.require_task(task_id)
        task = self.index.live.get(task_id)
        if task is None:
            raise InvalidState(f"task {task_id} is already {status}", {"status": status})
        now = self.clock()
        with self.transition():
            if task.agent_id and task.status in (TaskStatus.ASSIGNED, TaskStatus.RUNNING):
                self.agents.fence(task.agent_id, now)
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
        stuck = self.files.unrestorable_of(task_id)
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
                    self.index.status.get(p) in DEAD for p in self.index.parents.get(child_id, ())
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


def release_for(reason: str) -> ReleaseReason:
    """The release reason of a take-back's reason text (`task_ended` when it names none)."""
    known = {r.value for r in ReleaseReason}
    return ReleaseReason(reason) if reason in known else ReleaseReason.TASK_ENDED
