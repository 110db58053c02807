"""The engine: the one surface over its parts, its transactions and when the next tick runs.

The engine is composed of parts, each the one writer of its state (docs/
docs/decisions/0066-the-engine-is-parts-not-mixins.md, "The engine is parts, not mixins"): the task table (`tasks`:
the live index and `idle_announced`), the agent registry (`agents`), the lease
mirror (`leases`), the pre-images part (`preimages`) and its restore steps, the checks
registry, a person's sessions (`person`), limits and the `alive_at` mark (`recovery`). Pieces
with no state of their own are handed the parts and `transition`: the tick
(`ticks`), an attempt's report (`outcomes`), a runner's arrival and departure
(`arrivals`) and the take-back steps they share (`takebacks`).

One way in (docs/decisions/0142-one-way-into-the-engine.md): every route names the
calls object it enters and calls it there, with no forward on the engine:
a runner's `engine.runner` (and `engine.waiting` for a parked lease,
`engine.arrivals` to arrive and leave, `engine.outcomes` to report), a person's
`engine.person`, the operator's `engine.operator`, a landing worker's
`engine.landing_queue`. Each call is one transition in ONE store transaction (the
engine's `transition`, which every one of them is handed); its event type shares
its name. The engine runs on the server's event loop thread and never awaits
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
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from datetime import datetime

from codefleet.coord.calls.arrivals import Arrivals
from codefleet.coord.calls.callparts import CallParts
from codefleet.coord.calls.landingqueue import LandingQueue
from codefleet.coord.calls.leasewaiting import LeaseWaiting
from codefleet.coord.calls.operatorcalls import OperatorCalls
from codefleet.coord.calls.outcomes import Outcomes
from codefleet.coord.calls.runnercalls import RunnerCalls
from codefleet.coord.calls.takebacks import TakeBacks
from codefleet.coord.calls.ticks import Ticks
from codefleet.coord.policy.engineconfig import EngineConfig
from codefleet.coord.policy.limitpolicy import Budget
from codefleet.coord.storage.database import Touched
from codefleet.coord.storage.store import Store
from codefleet.coord.tables.agentregistry import AgentRegistry
from codefleet.coord.tables.checkregistry import CheckRegistry
from codefleet.coord.tables.fleetlimits import FleetLimits
from codefleet.coord.tables.leases import LeaseTable
from codefleet.coord.tables.messages import Messages
from codefleet.coord.tables.persons import PERSON_KIND, Persons
from codefleet.coord.tables.preimages import Preimages
from codefleet.coord.tables.questions import Questions
from codefleet.coord.tables.recovery import Recovery, database_id
from codefleet.coord.tables.restores import Restores
from codefleet.coord.tables.sequences import Sequences
from codefleet.coord.tables.tasktable import TaskTable
from codefleet.models import utcnow
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
        self.preimages = Preimages(store, tree, clock, cfg.rollback, cfg.preimage_max_bytes)
        self.leases = LeaseTable(store, tree, clock, self.preimages, self.holder)
        self.restores = Restores(self.preimages, self.leases, self.tasks, self.transition, clock)
        self.person = Persons(  # a person's calls: a part that is its own calls object
            store,
            tree,
            clock,
            self.leases,
            self.holder,
            self.kick,
            cfg.interactive_idle,
            self.transition,
        )
        self.checks = CheckRegistry(store, tree)
        self.limits = FleetLimits(store, Budget(cfg.max_cost, cfg.max_cost_hard))
        self.messages = Messages(store, clock, self.transition)
        self.questions = Questions(store, clock, self.transition, cfg.question_timeout)
        self.recovery = Recovery(store, clock, cfg.heartbeat_interval)
        self.sequences = Sequences(store, clock)
        parts = self._call_parts()
        # the calls objects every route enters by name (`engine.runner.acquire(...)`), no forwards
        self.runner = RunnerCalls(
            parts,
            task_timeout=cfg.task_timeout,
            pull_tick=self._pull_tick,
            verify_before_landing=cfg.verify_before_landing,
            landing_stack=cfg.landing_stack,
            lease_granularity=cfg.lease_granularity,
        )
        self.waiting = LeaseWaiting(
            parts, self.runner.acquire, lease_wait=cfg.lease_wait, task_timeout=cfg.task_timeout
        )
        self.take_backs = TakeBacks(parts)
        self.leases.on_unwound = self.take_backs.unwind_stacked  # a stack under a rollback
        self.operator = OperatorCalls(
            parts, self.take_backs, self.restores, max_attempts=cfg.max_attempts
        )
        self.landing_queue = LandingQueue(
            parts, cfg.landing_batch, cfg.stale_after, cfg.landing_parallel, cfg.repair_turns
        )
        # what a verify may leave to the landing check
        self.runner.landing_check = lambda: self.landing_queue.integration
        self.outcomes = Outcomes(parts, self.take_backs, self.landing_queue)
        self.arrivals = Arrivals(
            parts, self.take_backs, tree_id=tree_id, stale_after=cfg.stale_after
        )
        self.ticks = Ticks(
            parts,
            self.take_backs,
            recovery=self.recovery,
            restores=self.restores,
            persons=self.person,
            config=cfg,
        )
        self.load()
        self.database_id = database_id(store)  # which record this is (a client follows it)
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
            preimages=self.preimages,
            checks=self.checks,
            limits=self.limits,
            messages=self.messages,
            questions=self.questions,
            transition=self.transition,
            kick=self.kick,
            sequences=self.sequences,
        )

    # -- reads the server makes ------------------------------------------------------

    def holder(self, agent_id: str) -> tuple[str | None, str]:
        """A lease holder's name and kind: a runner (`task`), or a person's session."""
        agent = self.agents.get(agent_id)
        person = self.person.by_agent.get(agent_id)
        name = agent.name if agent is not None else (person.name if person else None)
        return name, PERSON_KIND if person is not None else "task"

    # -- start-up and recovery -----------------------------------------------------------

    def load(self) -> None:
        """Rebuild memory from SQLite (after a restart nothing is lost)."""
        self.tasks.load()
        now = self.clock()
        self.agents.load(now, self.recovery.downtime(now))
        self.leases.load()
        self.person.load()
        self.preimages.load()
        self.limits.load(self.clock())
        self.messages.load()
        self.questions.load()
        self.sequences.load()
        self.landing_queue.load()

    def reload_touched(self, touched: Touched) -> None:
        """Re-read what a rolled-back transaction touched; nothing else (the store calls this)."""
        self.tasks.reload(touched.tasks)
        self.agents.reload(touched.agents)
        self.leases.reload(touched.lease_tasks)
        self.preimages.reload(touched.lease_tasks)
        if touched.person_sessions:
            self.person.load()
        self.limits.load(self.clock())  # a pause is its events: re-read the last one
        self.sequences.load()  # a few names: a rolled-back definition is forgotten
        if touched.tasks:
            self.landing_queue.load()  # the queue as stored; a round in progress starts again

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
        self.ticks.tick()

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
                self.ticks.tick()
            except Exception:  # a loop boundary: one bad tick must not stop the timer
                log.exception("tick failed")

    def reset(self) -> None:
        with self.transition():
            self.store.reset()
        self.load()
