"""How a graph would run on N runners, played through the real scheduler policy.

`simulate` advances a simulated clock from one task completion to the next.
At each step it builds the `FleetState` the engine would build (a window of
the ready tasks best first by `scheduler.candidate_order`, widened while
`scheduler.schedule_widening` says so, as the engine does, the in-flight tasks with their declared
scopes, the runners, longest-idle first) and applies the `Assign` decisions
`scheduler.schedule` returns: the same greedy, scope-aware
policy that runs the fleet, not a second implementation. Nothing fails, is
vetoed or retried here, so the figures are what the declared graph allows
at best. Pure: no I/O, no clock (the simulated time starts at a fixed epoch).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sortedcontainers import SortedList

from codefleet.coord.policy.scheduler import (
    AgentView,
    Assign,
    FleetState,
    TaskView,
    candidate_order,
    first_window,
    schedule_widening,
)
from codefleet.dag import chain_lengths, children_of
from codefleet.models import AgentStatus

__all__ = ["SimTask", "Simulation", "simulate"]

EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
FOREVER = timedelta(days=3650)  # no runner goes stale and no task overruns in a simulation
CREATED = EPOCH.isoformat()  # one batch: every task has the same age, so ties break on id


@dataclass(frozen=True, slots=True)
class SimTask:
    id: str
    priority: int
    scope: frozenset[str]
    depends_on: tuple[str, ...]
    duration: float  # minutes, or 1.0 per task when the graph carries no estimates


@dataclass(frozen=True, slots=True)
class Simulation:
    """What the simulated run gives: makespan, average and peak number of busy runners."""

    runners: int
    makespan: float
    total_work: float
    peak: int
    order: tuple[str, ...]  # the tasks in the order they were assigned

    @property
    def parallelism(self) -> float:
        """Busy runners on average over the run (total work / makespan)."""
        return self.total_work / self.makespan if self.makespan > 0 else 0.0


@dataclass(slots=True)
class _Run:
    tasks: Mapping[str, SimTask]
    chain: Mapping[str, int]
    unmet: dict[str, int]
    ready: SortedList  # candidate_order keys of the tasks not started whose deps all finished
    running: dict[str, tuple[str, float]]  # task id -> (agent id, end time)
    idle_since: dict[str, float]  # agent id -> when it became idle (only idle agents)
    order: list[str]

    def key(self, task_id: str) -> tuple[int, int, str, str]:
        return candidate_order(self.tasks[task_id].priority, self.chain[task_id], CREATED, task_id)

    def make_ready(self, task_id: str) -> None:
        self.ready.add(self.key(task_id))


def simulate(tasks: Sequence[SimTask], runners: int) -> Simulation:
    """Play `tasks` (an acyclic graph) on `runners` runners; see the module docstring."""
    by_id = {t.id: t for t in tasks}
    deps = {t.id: [d for d in t.depends_on if d in by_id] for t in tasks}
    run = _Run(
        tasks=by_id,
        chain=chain_lengths(deps),
        unmet={t: len(set(d)) for t, d in deps.items()},
        ready=SortedList(),
        running={},
        idle_since={_agent(n): 0.0 for n in range(1, runners + 1)},
        order=[],
    )
    children = children_of(deps)
    for task_id, parents in deps.items():
        if not parents:
            run.make_ready(task_id)
    now, peak = 0.0, 0
    while run.ready or run.running:
        _assign(run, now)
        peak = max(peak, len(run.running))
        if not run.running:
            break  # nothing can ever start (cannot happen for an acyclic graph)
        now = min(end for _, end in run.running.values())
        for task_id in sorted(t for t, (_, end) in run.running.items() if end <= now):
            agent_id, _ = run.running.pop(task_id)
            run.idle_since[agent_id] = now
            for child in children[task_id]:
                run.unmet[child] -= 1
                if run.unmet[child] == 0:
                    run.make_ready(child)
    total = sum(t.duration for t in tasks)
    return Simulation(runners, now, total, peak, tuple(run.order))


def _assign(run: _Run, now: float) -> None:
    """One engine tick: widen the candidate window as the engine does, apply the Assigns."""
    at = EPOCH + timedelta(minutes=now)
    window = first_window(len(run.idle_since))
    for decision in schedule_widening(lambda w: _state(run, at, w), at, window):
        if isinstance(decision, Assign):
            task = run.tasks[decision.task_id]
            run.ready.remove(run.key(task.id))
            del run.idle_since[decision.agent_id]
            run.running[task.id] = (decision.agent_id, now + task.duration)
            run.order.append(task.id)


def _state(run: _Run, at: datetime, window: int) -> FleetState:
    in_flight = tuple(
        _view(run.tasks[t], agent_id, at) for t, (agent_id, _) in sorted(run.running.items())
    )
    agents = [
        AgentView(a, a, AgentStatus.IDLE, at, EPOCH + timedelta(minutes=since))
        for a, since in run.idle_since.items()
    ]
    agents += [AgentView(a, a, AgentStatus.BUSY, at, at) for a, _ in run.running.values()]
    return FleetState(
        candidates=tuple(_view(run.tasks[key[3]], None, None) for key in run.ready[:window]),
        more_candidates=len(run.ready) > window,
        in_flight=in_flight,
        agents=tuple(agents),
        stale_after=FOREVER,
        task_timeout=FOREVER,
    )


def _view(task: SimTask, agent_id: str | None, at: datetime | None) -> TaskView:
    return TaskView(
        id=task.id,
        priority=task.priority,
        file_scope=task.scope,
        attempts=0 if agent_id is None else 1,
        max_attempts=2,
        assigned_agent_id=agent_id,
        assigned_at=at,
    )


def _agent(n: int) -> str:
    return f"runner-{n:03d}"  # zero-padded so names sort like numbers
