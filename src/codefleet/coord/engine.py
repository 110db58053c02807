"""The engine: the tick, the decision applier, and the transitions that cut across parts.

The engine is composed of parts, each the one writer of its state (docs/
decisions.md, "The engine is parts, not mixins"): the task table (`tasks`:
the live index and `idle_announced`), the agent registry (`agents`), the lease
mirror (`leases`), the files part (`files`) and its restore steps, the checks
registry, interactive holders, limits and the `alive_at` mark; the runner's
and the operator's thin calls are pieces handed `transition`. Each public
method is one transition and runs in ONE store transaction (`transition`); its
event type shares its name. The engine runs on the server's event loop thread
and never awaits inside a transition, so transitions are serialized without
locks.

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
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from codefleet.attempt import AssignedTask, AttemptReport
from codefleet.coord import scheduler as sched
from codefleet.coord.agents import AgentRegistry, AgentState
from codefleet.coord.answers import Beat, LeaseAnswer, Registered, TaskAnswer
from codefleet.coord.checks import CheckRegistry
from codefleet.coord.engineconfig import EngineConfig
from codefleet.coord.files import Files
from codefleet.coord.index import LiveTask
from codefleet.coord.interactive import InteractiveHolders
from codefleet.coord.leases import LeaseTable
from codefleet.coord.leasewait import LeaseWaiting
from codefleet.coord.limitpolicy import Budget
from codefleet.coord.limits import FleetLimits, ResumeReason
from codefleet.coord.messages import OperatorMessages
from codefleet.coord.operatorcalls import OperatorCalls
from codefleet.coord.parts import CallParts
from codefleet.coord.questions import Question, Questions
from codefleet.coord.recovery import AliveMark
from codefleet.coord.registration import check_tree
from codefleet.coord.restores import Restores
from codefleet.coord.runnercalls import RunnerCalls
from codefleet.coord.sequences import Sequences
from codefleet.coord.store import Store, Touched
from codefleet.coord.tasks import INTERRUPT_HOLD_S, TaskTable
from codefleet.coord.validation import NewTask, PreparedBatch
from codefleet.errors import InvalidState, NotOwner
from codefleet.models import (
    RETRYABLE_KINDS,
    AgentStatus,
    ErrorKind,
    ReleaseReason,
    TaskStatus,
    to_iso,
    utcnow,
)
from codefleet.paths import TreeRoot
from codefleet.resources import is_resource_key, resource_name, valid_resource_name
from codefleet.statedir import TreeClaim

__all__ = ["Engine", "EngineConfig"]

log = logging.getLogger(__name__)
BASE_WINDOW = 64


class Engine:
    def __init__(
        self,
        store: Store,
        tree: TreeRoot,
        config: EngineConfig | None = None,
        clock: Callable[[], datetime] = utcnow,
        tree_id: str | None = None,
    ) -> None:
        self.store = store
        self.tree = tree
        self.tree_id = tree_id  # the tree's identity (`statedir`); None: runners match by path
        self.config = cfg = config or EngineConfig()
        self.clock = clock
        self.store.on_rollback = self.reload_touched  # memory never ahead of the database
        self.store.clock = clock  # events are stamped with the engine's time
        self._tick_scheduled = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self.tasks = TaskTable(store, clock, cfg)
        self.agents = AgentRegistry(store, clock)
        self.files = Files(store, tree, clock, cfg.rollback, cfg.preimage_max_bytes)
        self.leases = LeaseTable(store, tree, clock, self.files, self.holder)
        self.restores = Restores(self.files, self.leases, self.tasks, self.transition, clock)
        self.interactive = InteractiveHolders(
            store, tree, clock, self.leases, self.holder, self.kick, cfg.interactive_idle
        )
        self.checks = CheckRegistry(store)
        self.limits = FleetLimits(store, Budget(cfg.max_cost, cfg.max_cost_hard))
        self.messages = OperatorMessages(store, clock, self.transition)
        self.questions = Questions(store, clock, self.transition, cfg.question_timeout)
        self.alive = AliveMark(store, clock, cfg.heartbeat_interval)
        self.sequences = Sequences(store, clock)
        parts = CallParts(
            store=store,
            tree=tree,
            clock=clock,
            agents=self.agents,
            tasks=self.tasks,
            leases=self.leases,
            files=self.files,
            checks=self.checks,
            limits=self.limits,
            messages=self.messages,
            questions=self.questions,
            transition=self.transition,
            kick=self.kick,
            sequences=self.sequences,
        )
        self.runner = RunnerCalls(parts, task_timeout=cfg.task_timeout, pull_tick=self._pull_tick)
        self.waiting = LeaseWaiting(
            parts, self.runner.acquire, lease_wait=cfg.lease_wait, task_timeout=cfg.task_timeout
        )
        self.operator = OperatorCalls(parts, max_attempts=cfg.max_attempts)
        self.load()
        self.restores.finish()  # a take-back the last process could not finish, before anyone
        self._block_orphans()

    # -- the thin calls: each writes one part, through its piece (`runnercalls`, `operatorcalls`)

    def heartbeat(
        self, agent_id: str, epoch: int, delivered: tuple[str, int] | None = None
    ) -> Beat:
        return self.runner.heartbeat(agent_id, epoch, delivered)

    def assignment(self, agent_id: str, epoch: int) -> AssignedTask | None:
        return self.runner.assignment(agent_id, epoch)

    async def wait_assignment(self, agent_id: str, epoch: int, wait: float) -> AssignedTask | None:
        return await self.runner.wait_assignment(agent_id, epoch, wait)

    async def handoff(self, agent_id: str, epoch: int) -> AssignedTask | None:
        return await self.runner.handoff(agent_id, epoch)

    def start(self, task_id: str, agent_id: str, epoch: int) -> dict[str, Any]:
        return self.runner.start(task_id, agent_id, epoch)

    def acquire(
        self, agent_id: str, epoch: int, task_id: str, paths: list[str], tool: str
    ) -> LeaseAnswer:
        return self.runner.acquire(agent_id, epoch, task_id, paths, tool)

    async def acquire_waiting(
        self,
        agent_id: str,
        epoch: int,
        task_id: str,
        paths: list[str],
        tool: str,
        seen: Mapping[str, str | None],
        wait: float,
    ) -> LeaseAnswer:
        return await self.waiting.acquire_waiting(agent_id, epoch, task_id, paths, tool, seen, wait)

    def acquire_resource(self, agent_id: str, epoch: int, task_id: str, name: str) -> LeaseAnswer:
        return self.runner.acquire_resource(agent_id, epoch, task_id, name)

    def next_number(self, agent_id: str, epoch: int, task_id: str, sequence: str) -> dict[str, Any]:
        return self.runner.next_number(agent_id, epoch, task_id, sequence)

    def define_check_resources(self, resources: Mapping[str, list[str]]) -> None:
        """Set the resources each named check must hold to run (`[]`: none), in one transaction."""
        if resources:
            with self.transition():
                self.checks.define_resources(resources)

    def define_sequences(self, starts: Mapping[str, int]) -> None:
        """Create or raise the graph's counters (`sequences:`), in one transaction."""
        if starts:
            with self.transition():
                self.sequences.define(starts)

    def record_change(
        self,
        agent_id: str,
        epoch: int,
        task_id: str,
        path: str,
        tool: str,
        sha256: str | None = None,
    ) -> None:
        self.runner.record_change(agent_id, epoch, task_id, path, tool, sha256)

    def record_reads(
        self,
        task_id: str,
        agent_id: str,
        epoch: int,
        attempt: int,
        reads: Sequence[Mapping[str, Any]],
        watch: Sequence[Mapping[str, Any]],
        stale: Sequence[Mapping[str, Any]] = (),
        reconciled: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        return self.runner.record_reads(
            task_id, agent_id, epoch, attempt, reads, watch, stale, reconciled
        )

    def record_check(
        self, task_id: str, agent_id: str, epoch: int, report: Mapping[str, Any]
    ) -> dict[str, Any]:
        return self.runner.record_check(task_id, agent_id, epoch, report)

    def record_command(
        self, task_id: str, agent_id: str, epoch: int, report: Mapping[str, Any]
    ) -> dict[str, Any]:
        return self.runner.record_command(task_id, agent_id, epoch, report)

    def foreign_preimages(self, task_id: str) -> dict[str, Any]:
        return self.runner.foreign_preimages(task_id)

    def define_checks(self, checks: Mapping[str, str]) -> dict[str, Any]:
        return self.operator.define_checks(checks)

    def create_tasks(
        self, specs: Sequence[NewTask], checks: Mapping[str, str] | None = None
    ) -> list[str]:
        return self.operator.create_tasks(specs, checks)

    def prepare_tasks(
        self, specs: Sequence[NewTask], checks: Mapping[str, str] | None = None
    ) -> PreparedBatch:
        return self.operator.prepare_tasks(specs, checks)

    def commit_tasks(self, batch: PreparedBatch) -> list[str]:
        return self.operator.commit_tasks(batch)

    def fleet_event(self, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        return self.operator.fleet_event(kind, payload)

    def record_commits(self, branch: str, commits: list[tuple[str, str]]) -> dict[str, Any]:
        return self.operator.record_commits(branch, commits)

    def set_budget(self, max_cost: float | None, hard: bool) -> dict[str, Any]:
        return self.operator.set_budget(max_cost, hard)

    def resume(self) -> dict[str, Any]:
        return self.operator.resume()

    def require_task(self, task_id: str) -> TaskStatus:
        return self.tasks.require(task_id)

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

    # -- start-up and recovery -----------------------------------------------------------

    def load(self) -> None:
        """Rebuild memory from SQLite (after a restart nothing is lost)."""
        self.tasks.load()
        now = self.clock()
        self.agents.load(now, self.alive.downtime(now))
        self.leases.load()
        self.interactive.load()
        self.files.load()
        self.limits.load(self.clock())
        self.messages.load()
        self.questions.load()
        self.sequences.load()

    def reload_touched(self, touched: Touched) -> None:
        """Re-read what a rolled-back transaction touched; nothing else (the store calls this)."""
        self.tasks.reload(touched.tasks)
        self.agents.reload(touched.agents)
        self.leases.reload(touched.lease_tasks)
        self.files.reload(touched.lease_tasks)
        if touched.interactive:
            self.interactive.load()
        self.limits.load(self.clock())  # a pause is its events: re-read the last one
        self.sequences.load()  # a few names: a rolled-back definition is forgotten

    @contextmanager
    def transition(self) -> Iterator[None]:
        """One store transaction; after the outermost COMMIT, the file restores it asked for."""
        outermost = not self.store.in_transaction
        # idle_announced is memory only: put back what the rolled-back tick may have set
        with self.tasks.idle_kept() if outermost else nullcontext(), self.store.transaction():
            yield
        if outermost:
            self.restores.finish_due()

    def _block_orphans(self) -> None:
        """At start: block pending tasks a dead ancestor left behind (older databases)."""
        roots = self.tasks.orphan_roots()
        if roots:
            with self.transition():
                self.tasks.block_dependents(roots, self.clock())

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
        if not self._tick_scheduled:
            return  # a parked long-poll ran it already
        self._tick_scheduled = False
        self.tick()

    def _pull_tick(self) -> None:
        """A long-poll parked: a kicked tick runs now, not behind every queued request."""
        if not self._tick_scheduled:
            return self.kick()
        try:
            self._kicked_tick()
        except Exception:  # as in the loop's callback: the poll itself goes on waiting
            log.exception("tick failed")

    async def run_ticker(self) -> None:
        while True:
            await asyncio.sleep(self.config.tick_interval)
            try:
                self.tick()
            except Exception:  # a loop boundary: one bad tick must not stop the timer
                log.exception("tick failed")

    def snapshot(self, now: datetime, window: int = BASE_WINDOW) -> sched.FleetState:
        idx = self.tasks.index
        idx.promote_backoff(now)
        candidates, more = idx.candidates(window)
        return sched.FleetState(
            candidates=tuple(candidates),
            more_candidates=more,
            exhausted=tuple(idx.live[t].view() for t in sorted(idx.exhausted)),
            in_flight=tuple(self._view(t, now) for t in idx.in_flight.values()),
            agents=self.agents.views(),
            leases=tuple((path, holder[1]) for path, holder in self.leases.holders.items()),
            live_tasks=len(idx.live),
            idle_announced=self.tasks.idle_announced,
            stale_after=timedelta(seconds=self.config.stale_after),
            task_timeout=timedelta(seconds=self.config.task_timeout),
            paused_until=self.limits.paused_until(),
            budget=self.limits.budget_view(),
        )

    def _view(self, task: LiveTask, now: datetime) -> sched.TaskView:
        """An in-flight task as the scheduler sees it; its questions' wait moves its deadline."""
        view = task.view()
        asked = self.questions.waited(task.id, task.attempts, now)
        return replace(view, asked=asked) if asked else view

    def tick(self) -> list[sched.Decision]:
        """Snapshot, schedule, apply in one transaction; returns what was decided."""
        self.alive.mark()
        self.restores.finish_due()  # left over when a release could not commit: finish them first
        now = self.clock()
        self.interactive.expire_idle(now)
        window = sched.first_window(self.agents.idle_count())
        decisions = sched.schedule_widening(lambda w: self.snapshot(now, w), now, window)
        if not decisions:
            return decisions
        with self.transition():
            for decision in decisions:
                self._apply(decision, now)
        if any(not isinstance(d, sched.Assign | sched.FleetIdle) for d in decisions):
            self.kick()
        return decisions

    def _apply(self, decision: sched.Decision, now: datetime) -> None:
        idx = self.tasks.index
        match decision:
            case sched.MarkOffline(agent_id):
                self._mark_offline(agent_id, ReleaseReason.AGENT_STALE, now)
            case sched.Requeue(task_id, kind, reason):
                task = idx.in_flight.get(task_id)
                if task is None:
                    log.info("skip stale Requeue of %s: no longer in flight", task_id)
                    return
                self._take_back(task, kind, reason, now, charged=decision.charged)
            case sched.FailTask(task_id, kind, reason):
                live = idx.live.get(task_id)
                if live is None:
                    log.info("skip stale FailTask of %s: already terminal", task_id)
                    return
                if task_id in idx.in_flight:
                    self._fence_owner(live, now)  # an overdue last attempt is a take-back too
                self._end_attempt(live, release_for(reason), now)
                self.tasks.fail(live, kind, reason, now)
            case sched.ResumeFleet():
                self.limits.resume(ResumeReason.ELAPSED, now)
            case sched.BudgetExhausted():
                pending = sum(t.status is TaskStatus.PENDING for t in idx.live.values())
                self.limits.announce_exhausted(sorted(idx.in_flight), pending)
            case sched.StopForBudget(task_id):
                self._stop_for_budget(task_id, now)
            case sched.Assign(task_id, agent_id):
                self._assign(task_id, agent_id, now)
            case sched.FleetIdle():
                self.tasks.announce_idle(
                    **({"stopped": "budget"} if self.limits.exhausted() else {})
                )
            case _:
                raise TypeError(f"unknown decision {decision!r}")

    # -- an attempt: assign, complete -------------------------------------------

    def _assign(self, task_id: str, agent_id: str, now: datetime) -> None:
        task = self.tasks.index.live.get(task_id)
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
        held = self.leases.held_by_others(sorted(task.resources), task_id)
        if held:
            log.info("skip stale Assign of %s: %s is held by %s", task_id, *held[0])
            return
        self.tasks.assign(task, agent_id, agent.name, now)
        self.leases.grant(sorted(task.resources), agent_id, task_id, "assign")  # taken with it
        self.agents.busy(agent, task_id, to_iso(now))
        self.agents.wake(agent_id)

    def complete(
        self, task_id: str, agent_id: str, epoch: int, report: AttemptReport
    ) -> TaskAnswer:
        """Apply one attempt's outcome, once; an outdated report is a no-op duplicate."""
        self.agents.check_epoch(agent_id, epoch)
        self.tasks.require(task_id)
        task = self.tasks.index.live.get(task_id)
        if task is None or report.attempt < task.attempts:
            return self.tasks.answer(task_id, duplicate=True)
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
            self.tasks.record_usage(task, agent_id, report)
            self.limits.spend(report.cost_usd)
            self._end_attempt(task, ReleaseReason.TASK_ENDED, now, succeeded=report.ok)
            if report.ok:
                if report.duration_ms:
                    self.leases.waits.note_finished(report.duration_ms / 1000)
                self.limits.succeeded()
                self.tasks.succeed(task, report, now)
            else:
                self._settle_failure(task, report, now)
        self.kick()
        return self.tasks.answered(task)  # from the live index: what was just stored, unread

    def _settle_failure(self, task: LiveTask, report: AttemptReport, now: datetime) -> None:
        kind = report.error_kind or ErrorKind.AGENT_ERROR
        error = report.error or kind.value
        if kind not in RETRYABLE_KINDS:
            self.tasks.fail(task, kind, error, now)
            return
        if kind is ErrorKind.RATE_LIMITED:
            self._limit_reached(task, report, error, now)
            return
        if task.charged >= task.max_attempts:  # the last attempt: no requeue to wait out
            spent = f"out of attempts ({task.charged}/{task.max_attempts}); last: {kind}: {error}"
            self.tasks.fail(task, ErrorKind.ATTEMPTS_EXHAUSTED, spent, now, last_error_kind=kind)
            return
        widen = None
        if kind is ErrorKind.VETO and report.blocked_on_path:
            widen = self._canonical_or_none(report.blocked_on_path)
        self.tasks.requeue(task, kind, error, now, blocked_on_path=widen)

    def _canonical_or_none(self, raw: str) -> str | None:
        """The lease key a veto names: a resource's own key, or a path canonicalized."""
        if is_resource_key(raw):
            return raw if valid_resource_name(resource_name(raw)) else None
        try:
            return self.tree.canonical(raw)
        except ValueError:
            return None

    # -- a usage limit, a budget stop ------------------------------------------------------------

    def _limit_reached(
        self, task: LiveTask, report: AttemptReport, error: str, now: datetime
    ) -> None:
        """A usage limit: the fleet pauses and the attempt is not charged.

        Docs: decisions.md, "A usage limit pauses the fleet".
        """
        agent = self.agents.get(task.agent_id or "")
        who = agent.name if agent else "a runner"
        until = self.limits.limited(task.id, report.retry_after_s, f"{who}: {error}", now)
        self.tasks.requeue(
            task, ErrorKind.RATE_LIMITED, error, now, charged=False, paused_until=to_iso(until)
        )

    def _stop_for_budget(self, task_id: str, now: datetime) -> None:
        """A hard budget stop: take the attempt back, roll it back, do not charge it."""
        task = self.tasks.index.in_flight.get(task_id)
        if task is None:
            log.info("skip stale StopForBudget of %s: no longer in flight", task_id)
            return
        self._fence_owner(task, now)
        self._end_attempt(task, ReleaseReason.FLEET_BUDGET, now)
        reason = "the fleet's budget is spent (hard stop)"
        self.tasks.requeue(task, ErrorKind.BUDGET, reason, now, charged=False)

    # -- taking an attempt back ------------------------------------------------------------

    def _take_back(
        self, task: LiveTask, kind: ErrorKind, reason: str, now: datetime, charged: bool = True
    ) -> None:
        """Requeue an in-flight task the server itself takes away from its agent.

        An operator's interrupt holds it briefly: its run's other runners are leaving too.
        """
        self._fence_owner(task, now)
        self._end_attempt(task, release_for(reason), now)
        hold = INTERRUPT_HOLD_S if reason == ReleaseReason.INTERRUPTED else 0.0
        self.tasks.requeue(task, kind, reason, now, charged=charged, hold_s=hold)

    def _fence_owner(self, task: LiveTask, now: datetime) -> None:
        """Bump the owner's epoch, unless going offline already did (one bump per take-back)."""
        agent = self.agents.get(task.agent_id or "")
        if agent is not None and agent.status is not AgentStatus.OFFLINE:
            self.agents.fence(agent.id, now)

    def _end_attempt(
        self, task: LiveTask, reason: ReleaseReason, now: datetime, succeeded: bool = False
    ) -> None:
        """Settle files, release the attempt's leases, free its agent: the caller's transaction."""
        self.leases.release(task.id, reason, succeeded)
        agent = self.agents.get(task.agent_id or "")
        if agent and agent.current_task_id == task.id:
            self.agents.free(agent, now)

    # -- an agent's arrival and departure -------------------------------------------------

    def register(
        self,
        name: str,
        workdir: str,
        pid: int | None,
        host: str | None = None,
        replace: bool = False,
        agent_kind: str = "claude",
        tree_id: str | None = None,
    ) -> Registered:
        """Upsert by name; a previous incarnation's task and leases are taken back.

        Refused (`WrongTree`, `NameInUse`) before anything is written; see `registration`.
        One registration is exactly one epoch bump, whatever it takes back.
        """
        now = self.clock()
        check_tree(TreeClaim(workdir, tree_id), TreeClaim(str(self.tree.root), self.tree_id))
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
            self.agents.drives(agent, agent_kind)
        self.kick()
        return Registered(agent.id, agent.epoch, agent.status)

    def leave(self, agent_id: str, epoch: int, interrupted: bool = False) -> None:
        """A graceful leave; `interrupted`: the operator stopped the runner, whose attempt
        is then not charged (docs/decisions.md, "An attempt is charged only for its own
        failure")."""
        self.agents.check_epoch(agent_id, epoch)
        reason = ReleaseReason.INTERRUPTED if interrupted else ReleaseReason.AGENT_LEFT
        with self.transition():
            self._mark_offline(agent_id, reason, self.clock())
        self.kick()

    def _mark_offline(self, agent_id: str, reason: ReleaseReason, now: datetime) -> None:
        """Offline + fence + release; a graceful leave also requeues its task here."""
        agent = self.agents.by_id[agent_id]
        if reason in (ReleaseReason.AGENT_LEFT, ReleaseReason.INTERRUPTED):
            self._take_back_current(agent, reason, now)
        elif agent.current_task_id is not None:
            self.leases.release(agent.current_task_id, reason)
        self.agents.go_offline(agent, reason, now)

    def _take_back_current(self, agent: AgentState, reason: ReleaseReason, now: datetime) -> None:
        task = self.tasks.index.in_flight.get(agent.current_task_id or "")
        if task is not None and task.agent_id == agent.id:
            started = task.status is TaskStatus.RUNNING
            charged = started and reason is not ReleaseReason.INTERRUPTED
            self._take_back(task, ErrorKind.INFRA, reason, now, charged=charged)

    # -- operator transitions -------------------------------------------------------------

    def cancel(self, task_id: str) -> dict[str, Any]:
        status = self.tasks.require(task_id)
        task = self.tasks.index.live.get(task_id)
        if task is None:
            raise InvalidState(f"task {task_id} is already {status}", {"status": status})
        now = self.clock()
        with self.transition():
            if task.agent_id and task.status in (TaskStatus.ASSIGNED, TaskStatus.RUNNING):
                self.agents.fence(task.agent_id, now)
            self._end_attempt(task, ReleaseReason.CANCELLED, now)
            self.tasks.cancel(task, now)
        self.kick()
        return {"status": TaskStatus.CANCELLED}

    def say(self, task_id: str, text: str) -> dict[str, Any]:
        """Keep an operator message for a task that has not finished (`coord.messages`)."""
        status = self.tasks.require(task_id)
        task = self.tasks.index.live.get(task_id)
        if task is None:
            raise InvalidState(
                f"task {task_id} is already {status}: a message reaches only a task that has "
                "not finished",
                {"status": status},
            )
        return self.messages.say(task, text)

    def ask(self, agent_id: str, epoch: int, task_id: str, text: str) -> Question:
        return self.runner.ask(agent_id, epoch, task_id, text)

    def answer(self, task_id: str, text: str, question_id: str | None = None) -> Question:
        """The operator answers a running task's open question (`coord.questions`)."""
        status = self.tasks.require(task_id)
        if task_id not in self.tasks.index.live:
            raise InvalidState(f"task {task_id} is already {status}", {"status": status})
        waiting = [
            q
            for q in self.open_questions()
            if q.task_id == task_id and question_id in (None, q.question_id)
        ]
        return self.questions.answer(waiting, task_id, text)

    def open_questions(self) -> list[Question]:
        """The unanswered questions of attempts still running (an ended attempt's are moot)."""
        flight = self.tasks.index.in_flight
        return [
            q
            for q in self.questions.open()
            if q.task_id in flight and flight[q.task_id].attempts == q.attempt
        ]

    def retry(self, task_id: str) -> dict[str, Any]:
        """A failed or cancelled task starts over; its blocked dependents come back."""
        status = self.tasks.require(task_id)
        if status not in (TaskStatus.FAILED, TaskStatus.CANCELLED):
            raise InvalidState(
                f"only failed or cancelled tasks can be retried; {task_id} is {status}"
            )
        self.restores.finish([task_id])  # a file repaired since can now be put back
        stuck = self.files.unrestorable_of(task_id)
        if stuck:
            raise InvalidState(
                f"{task_id} still holds {', '.join(sorted(stuck))}, which could not be restored "
                f"({'; '.join(stuck.values())}); repair it, then retry",
                {"unrestorable": stuck},
            )
        with self.transition():
            self.tasks.retry(task_id, self.clock())
        self.kick()
        return {"status": TaskStatus.PENDING}

    def reset(self) -> None:
        with self.transition():
            self.store.reset()
        self.load()


def release_for(reason: str) -> ReleaseReason:
    """The release reason of a take-back's reason text (`task_ended` when it names none)."""
    known = {r.value for r in ReleaseReason}
    return ReleaseReason(reason) if reason in known else ReleaseReason.TASK_ENDED
