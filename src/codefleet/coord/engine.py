"""The engine: the one surface over its parts, its transactions and when the next tick runs.

The engine is composed of parts, each the one writer of its state (docs/
docs/decisions/0066-the-engine-is-parts-not-mixins.md, "The engine is parts, not mixins"): the task table (`tasks`:
the live index and `idle_announced`), the agent registry (`agents`), the lease
mirror (`leases`), the files part (`files`) and its restore steps, the checks
registry, interactive holders, limits and the `alive_at` mark. Pieces with no
state of their own are handed the parts and `transition`: the runner's and
the operator's thin calls, the tick (`ticks`), an attempt's report
(`outcomes`), a runner's arrival and departure (`arrivals`) and the take-back
steps they share (`takebacks`). Each public method is a real `def` here, one
transition in ONE store transaction (`transition`); its event type shares its
name. The engine runs on the server's event loop thread and never awaits
inside a transition, so transitions are serialized without locks.

The engine owns `_tick_scheduled`: many kicks before a tick coalesce into
one. File I/O never runs inside a transaction: a failed attempt's restore
intent commits first, the files are put back after the COMMIT, and a
transaction of its own releases them. A transaction that fails re-reads only
what it touched, so memory is never ahead of the database.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from datetime import datetime
from typing import Any

from codefleet.attempt import AssignedTask, AttemptReport
from codefleet.coord.calls.arrivals import Arrivals
from codefleet.coord.calls.callparts import CallParts
from codefleet.coord.calls.landingqueue import Landing
from codefleet.coord.calls.leasewait import LeaseWaiting
from codefleet.coord.calls.operatorcalls import OperatorCalls
from codefleet.coord.calls.outcomes import Outcomes
from codefleet.coord.calls.runnercalls import RunnerCalls
from codefleet.coord.calls.takebacks import TakeBacks
from codefleet.coord.calls.ticks import BASE_WINDOW, Ticks
from codefleet.coord.policy import scheduler as sched
from codefleet.coord.policy.answers import Beat, LeaseAnswer, Registered, TaskAnswer
from codefleet.coord.policy.engineconfig import EngineConfig
from codefleet.coord.policy.limitpolicy import Budget
from codefleet.coord.storage.database import Touched
from codefleet.coord.storage.store import Store
from codefleet.coord.tables.agentregistry import AgentRegistry
from codefleet.coord.tables.checkregistry import CheckRegistry
from codefleet.coord.tables.fleetlimits import FleetLimits
from codefleet.coord.tables.leases import LeaseTable
from codefleet.coord.tables.messages import OperatorMessages
from codefleet.coord.tables.persons import InteractiveHolders
from codefleet.coord.tables.preimages import Files
from codefleet.coord.tables.questions import Question, Questions
from codefleet.coord.tables.recovery import AliveMark
from codefleet.coord.tables.restores import Restores
from codefleet.coord.tables.sequences import Sequences
from codefleet.coord.tables.tasktable import TaskTable
from codefleet.coord.tables.validation import NewTask, PreparedBatch
from codefleet.models import TaskStatus, utcnow
from codefleet.paths import TreeRoot

__all__ = ["Engine", "EngineConfig"]

log = logging.getLogger(__name__)


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
            store,
            tree,
            clock,
            self.leases,
            self.holder,
            self.kick,
            cfg.interactive_idle,
            self.transition,
        )
        self.checks = CheckRegistry(store)
        self.limits = FleetLimits(store, Budget(cfg.max_cost, cfg.max_cost_hard))
        self.messages = OperatorMessages(store, clock, self.transition)
        self.questions = Questions(store, clock, self.transition, cfg.question_timeout)
        self.alive = AliveMark(store, clock, cfg.heartbeat_interval)
        self.sequences = Sequences(store, clock)
        parts = self._call_parts()
        self.runner = RunnerCalls(parts, task_timeout=cfg.task_timeout, pull_tick=self._pull_tick)
        self.waiting = LeaseWaiting(
            parts, self.runner.acquire, lease_wait=cfg.lease_wait, task_timeout=cfg.task_timeout
        )
        self.take_backs = TakeBacks(parts)
        self.operator = OperatorCalls(
            parts, self.take_backs, self.restores, max_attempts=cfg.max_attempts
        )
        self.landing = Landing(parts, cfg.landing_batch, cfg.stale_after)
        self.outcomes = Outcomes(parts, self.take_backs, self.landing)
        self.arrivals = Arrivals(
            parts, self.take_backs, tree_id=tree_id, stale_after=cfg.stale_after
        )
        self.ticks = Ticks(
            parts,
            self.take_backs,
            alive=self.alive,
            restores=self.restores,
            interactive=self.interactive,
            config=cfg,
        )
        self.load()
        self.restores.finish()  # a take-back the last process could not finish, before anyone
        self._block_orphans()

    def _call_parts(self) -> CallParts:
        """The parts as the pieces are handed them, with `transition` and `kick`."""
        return CallParts(
            store=self.store,
            tree=self.tree,
            clock=self.clock,
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

    def commit_tasks(
        self, batch: PreparedBatch, redefine: frozenset[str] = frozenset()
    ) -> list[str]:
        return self.operator.commit_tasks(batch, redefine)

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
        self.landing.load()

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
        if touched.tasks:
            self.landing.load()  # the queue as stored; a round in progress starts again

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

    # -- when the next tick runs (the tick itself: `ticks`) ---------------------------

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

    def tick(self) -> list[sched.Decision]:
        return self.ticks.tick()

    def snapshot(self, now: datetime, window: int = BASE_WINDOW) -> sched.FleetState:
        return self.ticks.snapshot(now, window)

    # -- an attempt's report; an agent's arrival and departure (`outcomes`, `arrivals`) ----

    def complete(
        self, task_id: str, agent_id: str, epoch: int, report: AttemptReport
    ) -> TaskAnswer:
        return self.outcomes.complete(task_id, agent_id, epoch, report)

    def register(
        self,
        name: str,
        workdir: str,
        pid: int | None,
        host: str | None = None,
        replace: bool = False,
        agent_kind: str = "claude",
        tree_id: str | None = None,
        probe: str | None = None,
    ) -> Registered:
        return self.arrivals.register(name, workdir, pid, host, replace, agent_kind, tree_id, probe)

    def leave(self, agent_id: str, epoch: int, interrupted: bool = False) -> None:
        self.arrivals.leave(agent_id, epoch, interrupted)

    # -- landing: a worker's steps, the operator's resume (`landing`) ----------------------

    def landing_claim(self, worker: str, timeout_s: float) -> dict[str, Any] | None:
        return self.landing.claim(worker, timeout_s)

    def landing_started(self, step_id: int, check: str) -> None:
        self.landing.started(step_id, check)

    def landing_preimages(self, step_id: int) -> dict[str, Any]:
        return self.landing.preimages(step_id)

    def landing_result(self, step_id: int, results: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        return self.landing.result(step_id, results)

    def landing_resume(self) -> dict[str, Any]:
        return self.landing.resume()

    def landing_state(self) -> dict[str, Any]:
        return self.landing.state()

    def set_integration(self, name: str | None) -> None:
        self.landing.set_integration(name)

    # -- operator transitions -------------------------------------------------------------

    def cancel(self, task_id: str) -> dict[str, Any]:
        return self.operator.cancel(task_id)

    def retry(self, task_id: str) -> dict[str, Any]:
        return self.operator.retry(task_id)

    def say(self, task_id: str, text: str) -> dict[str, Any]:
        return self.operator.say(task_id, text)

    def ask(self, agent_id: str, epoch: int, task_id: str, text: str) -> Question:
        return self.runner.ask(agent_id, epoch, task_id, text)

    def answer(self, task_id: str, text: str, question_id: str | None = None) -> Question:
        return self.operator.answer(task_id, text, question_id)

    def open_questions(self) -> list[Question]:
        return self.operator.open_questions()

    def reset(self) -> None:
        with self.transition():
            self.store.reset()
        self.load()
