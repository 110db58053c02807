"""The scheduling policy: one pure function from a snapshot to ordered decisions.

`schedule(state, now)` does no I/O, reads no clock and touches no database.
It returns decisions in this order, and the engine applies them top to bottom
in ONE transaction:

1. mark stale agents offline (their leases are released by that decision);
2. take back their in-flight tasks: requeue, or fail when out of attempts
   (a task its runner never started is requeued uncharged);
3. take back tasks past their server-side deadline the same way (charged even
   when never started: a live runner that never starts it must not loop it);
4. fail pending tasks that are out of attempts;
5. resume the fleet when its usage-limit pause has run out;
6. when the fleet's budget is spent: announce it once, and with a hard stop
   take back every attempt still running;
7. assign runnable tasks to idle agents, unless the fleet is paused or its
   budget is spent; a task whose files or named resources meet what is busy
   waits (a resource strictly: it is taken at assignment);
8. announce that the fleet is idle: nothing live, or a spent budget and
   nothing left running (the fleet stopped; raising the budget resumes it).

The order is the contract: assignment must see the state the earlier steps
leave behind. A lease held by a runner that just went stale is released by
step 1, so step 6 must not count that path as busy, and a task taken back in
step 2 must not be handed to the agent that just went offline. A pause that
ends at `now` is lifted by step 5 before step 7 looks at it, so the tick that
resumes the fleet also fills it. While a pause is on, steps 1-4 still run:
a limit stops new sessions, not the fleet's bookkeeping.

Ties break on ids, so the output is a total order for a given snapshot.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from codefleet.models import (
    DEFAULT_STALE_AFTER_S,
    DEFAULT_TASK_TIMEOUT_S,
    AgentStatus,
    ErrorKind,
    ReleaseReason,
)
from codefleet.toolcalls.leasekeys import KeyIndex

__all__ = [
    "AgentView",
    "Assign",
    "BudgetExhausted",
    "BudgetView",
    "Decision",
    "FailTask",
    "FleetIdle",
    "FleetState",
    "MarkOffline",
    "Requeue",
    "ResumeFleet",
    "StopForBudget",
    "TaskView",
    "candidate_order",
    "first_window",
    "schedule",
    "schedule_widening",
    "wants_wider_window",
]

MIN_WINDOW = 4

DEADLINE_GRACE = timedelta(seconds=60)


@dataclass(frozen=True, slots=True)
class TaskView:
    id: str
    priority: int
    file_scope: frozenset[str]
    attempts: int  # the attempts charged against max_attempts (a usage limit's are not)
    max_attempts: int
    backoff_until: datetime | None = None
    assigned_agent_id: str | None = None
    assigned_at: datetime | None = None
    unstarted: bool = False  # assigned, but its runner has not started it yet
    asked: timedelta = timedelta(0)  # its questions' wait: not charged to its wall clock
    agent: str | None = None  # the agent kind it needs; None: any agent
    resources: frozenset[str] = frozenset()  # lease keys of its named resources (`resources`)

    @property
    def claims(self) -> frozenset[str]:
        """What it keeps others from: its declared files and its resources (disjoint keys)."""
        return self.file_scope | self.resources if self.resources else self.file_scope


@dataclass(frozen=True, slots=True)
class AgentView:
    id: str
    name: str
    status: AgentStatus
    last_heartbeat_at: datetime
    idle_since: datetime
    agent: str = "claude"  # the agent kind this runner drives


@dataclass(frozen=True, slots=True)
class BudgetView:
    """The fleet's budget as the scheduler sees it."""

    exhausted: bool = False
    announced: bool = True  # `fleet_budget_exhausted` was emitted for this exhaustion
    hard: bool = False


@dataclass(frozen=True, slots=True)
class FleetState:
    """What the scheduler may look at.

    `candidates` are pending tasks whose dependencies have all succeeded, best
    first (priority, critical path, age, id); `more_candidates` says the list
    was cut to a window and more exist behind it.
    """

    candidates: tuple[TaskView, ...] = ()
    more_candidates: bool = False
    exhausted: tuple[TaskView, ...] = ()
    in_flight: tuple[TaskView, ...] = ()
    agents: tuple[AgentView, ...] = ()
    leases: tuple[tuple[str, str], ...] = ()  # (lease key: a path or a resource, holder task)
    live_tasks: int = 0
    idle_announced: bool = True
    stale_after: timedelta = timedelta(seconds=DEFAULT_STALE_AFTER_S)
    task_timeout: timedelta = timedelta(seconds=DEFAULT_TASK_TIMEOUT_S)
    paused_until: datetime | None = None  # a usage limit: no assignment before this time
    budget: BudgetView = BudgetView()

    def paused_at(self, now: datetime) -> bool:
        return self.paused_until is not None and now < self.paused_until


@dataclass(frozen=True, slots=True)
class MarkOffline:
    agent_id: str


@dataclass(frozen=True, slots=True)
class Requeue:
    task_id: str
    error_kind: ErrorKind
    reason: str
    charged: bool = True  # False: taken back before its runner started it


@dataclass(frozen=True, slots=True)
class FailTask:
    task_id: str
    error_kind: ErrorKind
    reason: str


@dataclass(frozen=True, slots=True)
class Assign:
    task_id: str
    agent_id: str


@dataclass(frozen=True, slots=True)
class FleetIdle:
    pass


@dataclass(frozen=True, slots=True)
class ResumeFleet:
    """The usage-limit pause ran out: lift it (`fleet_resumed`)."""


@dataclass(frozen=True, slots=True)
class BudgetExhausted:
    """The fleet's budget is spent: say so once (`fleet_budget_exhausted`)."""


@dataclass(frozen=True, slots=True)
class StopForBudget:
    """A hard budget stop: take this running attempt back (rolled back, not charged)."""

    task_id: str


Decision = (
    MarkOffline
    | Requeue
    | FailTask
    | ResumeFleet
    | BudgetExhausted
    | StopForBudget
    | Assign
    | FleetIdle
)


@dataclass(slots=True)
class _Plan:
    decisions: list[Decision] = field(default_factory=list)
    offline: set[str] = field(default_factory=set)
    taken_back: set[str] = field(default_factory=set)


def schedule(state: FleetState, now: datetime) -> list[Decision]:
    """Decide everything that should change at `now`, in contract order."""
    plan = _Plan()
    _take_back_stale_agents(state, now, plan)
    _take_back_overdue(state, now, plan)
    for task in state.exhausted:
        plan.decisions.append(FailTask(task.id, ErrorKind.ATTEMPTS_EXHAUSTED, "out of attempts"))
    if state.paused_until is not None and not state.paused_at(now):
        plan.decisions.append(ResumeFleet())
    if state.budget.exhausted:
        _stop_for_budget(state, plan)
    elif not state.paused_at(now):
        _assign(state, now, plan)
    if not state.idle_announced and (state.live_tasks == 0 or _stopped(state, plan)):
        plan.decisions.append(FleetIdle())
    return plan.decisions


def _stop_for_budget(state: FleetState, plan: _Plan) -> None:
    if not state.budget.announced:
        plan.decisions.append(BudgetExhausted())
    if not state.budget.hard:
        return
    for task in sorted(state.in_flight, key=lambda t: t.id):
        if task.id not in plan.taken_back:
            plan.taken_back.add(task.id)
            plan.decisions.append(StopForBudget(task.id))


def _stopped(state: FleetState, plan: _Plan) -> bool:
    """The budget is spent and nothing is running any more: the fleet has stopped."""
    running = [t for t in state.in_flight if t.id not in plan.taken_back]
    return state.budget.exhausted and not running


def candidate_order(
    priority: int, chain: int, created_at: str, task_id: str
) -> tuple[int, int, str, str]:
    """The sort key of `FleetState.candidates`, best first: priority desc, then the longest
    chain of dependents below the task desc (critical path), then age, then id."""
    return (-priority, -chain, created_at, task_id)


def is_runnable(task: TaskView, now: datetime) -> bool:
    """Pending-and-ready is given; attempts and backoff are checked here."""
    if task.attempts >= task.max_attempts:
        return False
    return task.backoff_until is None or task.backoff_until <= now


def _take_back(
    task: TaskView, kind: ErrorKind, reason: str, plan: _Plan, *, runner_gone: bool
) -> None:
    """Requeue, or fail when out of attempts.

    An attempt whose runner vanished before starting it is not charged; one its
    live runner never started by the deadline is (else it could cycle for ever).
    """
    plan.taken_back.add(task.id)
    if task.unstarted and runner_gone:
        plan.decisions.append(Requeue(task.id, kind, reason, charged=False))
    elif task.attempts >= task.max_attempts:
        plan.decisions.append(FailTask(task.id, ErrorKind.ATTEMPTS_EXHAUSTED, reason))
    else:
        plan.decisions.append(Requeue(task.id, kind, reason))


def _take_back_stale_agents(state: FleetState, now: datetime, plan: _Plan) -> None:
    cutoff = now - state.stale_after
    for agent in sorted(state.agents, key=lambda a: a.id):
        if agent.status is AgentStatus.OFFLINE or agent.last_heartbeat_at >= cutoff:
            continue
        plan.decisions.append(MarkOffline(agent.id))
        plan.offline.add(agent.id)
        for task in state.in_flight:
            if task.assigned_agent_id == agent.id:
                _take_back(task, ErrorKind.INFRA, ReleaseReason.AGENT_STALE, plan, runner_gone=True)


def _take_back_overdue(state: FleetState, now: datetime, plan: _Plan) -> None:
    limit = state.task_timeout + DEADLINE_GRACE
    for task in sorted(state.in_flight, key=lambda t: t.id):
        if task.id in plan.taken_back or task.assigned_at is None:
            continue
        if task.assigned_at + limit + task.asked <= now:
            _take_back(task, ErrorKind.TIMEOUT, ReleaseReason.DEADLINE, plan, runner_gone=False)


def _busy_scope(state: FleetState, plan: _Plan) -> KeyIndex[str]:
    """What running tasks claim and leases hold, each key with the task that makes it busy: a
    part (`api.py::handle`) excludes its file and itself, not the file's other parts."""
    busy: KeyIndex[str] = KeyIndex()
    for task in state.in_flight:
        if task.id not in plan.taken_back:
            busy.update(task.claims, task.id)
    for path, holder in state.leases:
        if holder not in plan.taken_back:
            busy.put(path, holder)
    return busy


def _blocked(task: TaskView, busy: KeyIndex[str]) -> bool:
    """Does a key the task claims meet one another task holds or claims? Its own leases never
    block it: a pending task may hold some, a repair's, its change still on the tree
    (decision 0161); they keep every other task out."""
    if busy.isdisjoint(task.claims):
        return False
    return any(busy.held[k] != task.id for key in task.claims for k in busy.excluded_by(key))


def _idle_agents(state: FleetState, now: datetime, plan: _Plan) -> list[AgentView]:
    cutoff = now - state.stale_after
    idle = [
        a
        for a in state.agents
        if a.status is AgentStatus.IDLE
        and a.id not in plan.offline
        and a.last_heartbeat_at >= cutoff
    ]
    return sorted(idle, key=lambda a: (a.idle_since, a.name, a.id))


def _assign(state: FleetState, now: datetime, plan: _Plan) -> None:
    agents = _idle_agents(state, now, plan)
    if not agents:
        return
    busy = _busy_scope(state, plan)
    for task in state.candidates:
        if not agents:
            return
        claims = task.claims
        if not is_runnable(task, now) or _blocked(task, busy):
            continue  # skipped, never head-of-line blocking
        fit = next((a for a in agents if task.agent in (None, a.agent)), None)
        if fit is None:
            continue  # no idle agent of the kind it needs: skipped like a conflict
        agents.remove(fit)
        plan.decisions.append(Assign(task.id, fit.id))
        busy.update(claims, task.id)


def wants_wider_window(state: FleetState, decisions: Sequence[Decision]) -> bool:
    """True when idle agents were left over only because the window was cut."""
    if not state.more_candidates:
        return False
    if state.paused_until is not None and not any(isinstance(d, ResumeFleet) for d in decisions):
        return False  # paused: nothing was assigned, and a wider window would not change that
    if state.budget.exhausted:
        return False  # likewise for a spent budget
    assigned = sum(isinstance(d, Assign) for d in decisions)
    idle = sum(1 for a in state.agents if a.status is AgentStatus.IDLE)
    return assigned < idle


def first_window(idle_agents: int) -> int:
    """The candidate window a tick starts with: twice its idle agents, at least `MIN_WINDOW`.

    Any start gives the same decisions as the whole ready list: `_assign` walks
    the candidates in order and stops when the agents run out, and
    `wants_wider_window` widens whenever a cut window left an idle agent
    unfed, so only the cost depends on it (docs/history/performance-log.md, "Engine hot paths").
    """
    return max(MIN_WINDOW, 2 * idle_agents)


def schedule_widening(
    snapshot: Callable[[int], FleetState], now: datetime, window: int
) -> list[Decision]:
    """`schedule` over `snapshot(window)`, widened four times over until it is wide enough."""
    while True:
        state = snapshot(window)
        decisions = schedule(state, now)
        if not wants_wider_window(state, decisions):
            return decisions
        window *= 4
