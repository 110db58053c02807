"""The candidate window changes what a tick costs, never what it decides.

Random fleet states (seeded, so a failure names its seed) are scheduled over
the whole ready list and through `schedule_widening` from several first
windows: the old fixed 64, `first_window(idle agents)` and every small one.
"""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import timedelta

import pytest
from test_scheduler import NOW, STALE, agent, state, task

from codefleet.coord.policy.scheduler import (
    BudgetView,
    FleetState,
    TaskView,
    first_window,
    schedule,
    schedule_widening,
)
from codefleet.models import AgentStatus

PATHS = [f"src/m{n}.py" for n in range(6)]


def _scope(rng: random.Random) -> tuple[str, ...]:
    return tuple(rng.sample(PATHS, rng.choice([0, 0, 1, 1, 2])))


def _candidate(rng: random.Random, n: int) -> TaskView:
    backoff = rng.choice([None, None, None, NOW, NOW + timedelta(seconds=5)])
    attempts = rng.choice([0, 0, 0, 1, 3])
    return task(f"c{n:03}", *_scope(rng), attempts=attempts, backoff_until=backoff)


def _agents(rng: random.Random) -> tuple[list, list]:
    agents, busy = [], []
    for n in range(rng.randint(0, 12)):
        status = rng.choice(
            [AgentStatus.IDLE, AgentStatus.IDLE, AgentStatus.BUSY, AgentStatus.OFFLINE]
        )
        seen = rng.choice([1.0, 1.0, 1.0, STALE])
        agents.append(agent(f"a{n:02}", status=status, seen_ago=seen, idle_for=rng.random() * 30))
        if status is AgentStatus.BUSY:
            overdue = rng.random() < 0.1
            assigned = NOW - timedelta(seconds=7200 if overdue else 5)
            busy.append(task(f"f{n:02}", *_scope(rng), agent=f"a{n:02}", assigned_at=assigned))
    return agents, busy


def random_state(rng: random.Random) -> FleetState:
    agents, in_flight = _agents(rng)
    leases = tuple((p, t.id) for t in in_flight for p in PATHS if rng.random() < 0.1)
    paused = rng.choice([None, None, None, NOW, NOW + timedelta(seconds=30)])
    budget = rng.choice([BudgetView(), BudgetView(), BudgetView(exhausted=True, hard=True)])
    candidates = tuple(_candidate(rng, n) for n in range(rng.randint(0, 120)))
    return state(
        agents=tuple(agents),
        in_flight=tuple(in_flight),
        candidates=candidates,
        leases=leases,
        paused_until=paused,
        budget=budget,
        live_tasks=len(candidates),
    )


def cut(full: FleetState, window: int) -> FleetState:
    """What the engine's snapshot gives for `window`: the first `window` candidates."""
    return replace(
        full,
        candidates=full.candidates[:window],
        more_candidates=len(full.candidates) > window,
    )


@pytest.mark.parametrize("seed", range(400))
def test_every_first_window_decides_what_the_whole_ready_list_decides(seed: int):
    rng = random.Random(seed)
    full = random_state(rng)
    expected = schedule(full, NOW)
    idle = sum(1 for a in full.agents if a.status is AgentStatus.IDLE)

    for window in {1, 2, 3, 4, 7, 64, first_window(idle), rng.randint(1, 130)}:
        widened = schedule_widening(lambda w: cut(full, w), NOW, window)
        assert widened == expected, (seed, window)


def test_the_first_window_is_twice_the_idle_agents_and_never_below_four():
    assert [first_window(n) for n in (0, 1, 2, 3, 16, 100)] == [4, 4, 4, 6, 32, 200]


def test_a_window_of_conflicting_candidates_is_widened_until_an_idle_agent_is_fed():
    hot = [task(f"hot-{n:02}", "a.py") for n in range(10)]
    full = state(
        agents=(agent("a1", idle_for=2), agent("a2", idle_for=1)),
        candidates=(*hot, task("cold", "b.py")),
    )
    windows: list[int] = []

    def snapshot(window: int) -> FleetState:
        windows.append(window)
        return cut(full, window)

    decisions = schedule_widening(snapshot, NOW, 2)

    assert decisions == schedule(full, NOW)
    assert [d.task_id for d in decisions] == ["hot-00", "cold"]  # type: ignore[union-attr]
    assert windows == [2, 8, 32]
