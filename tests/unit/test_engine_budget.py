"""The fleet's budget in the engine: a real SQLite file, a scratch tree, an injected clock.

Once the recorded cost reaches `max_cost` nothing more is assigned; running attempts
finish, or with a hard stop are taken back (rolled back, not charged); raising the cap
resumes assignment (docs/decisions/0056-the-fleets-budget.md, "The fleet's budget"). Same harness as
`test_engine.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import test_engine
from test_engine import Fleet, assigned

from codefleet.coord.policy import scheduler as sched
from codefleet.models import EventType, TaskStatus

make_fleet = test_engine.make_fleet  # the engine harness's fixtures
fleet = test_engine.fleet


def _two_running(fleet: Fleet) -> None:
    for t in ("T1", "T2", "T3"):
        fleet.add(t, f"{t.lower()}.py")
    fleet.register("runner-1")
    fleet.register("runner-2")
    assert len(assigned(fleet.tick())) == 2
    fleet.start("T1")
    fleet.start("T2")


def test_reaching_the_cap_stops_assignment_and_the_running_task_finishes(
    make_fleet: Callable[..., Fleet],
):
    fleet = make_fleet(max_cost=1.0)
    _two_running(fleet)

    fleet.finish("T1", cost_usd=0.6)
    assert len(assigned(fleet.tick())) == 1  # under the cap: T3 goes to the freed runner
    fleet.start("T3")
    fleet.finish("T2", cost_usd=0.5)  # 1.1 spent

    decisions = fleet.tick()
    assert decisions == [sched.BudgetExhausted()]
    [spent] = fleet.events(EventType.FLEET_BUDGET_EXHAUSTED)
    assert spent["payload"] == {
        "max_cost_usd": 1.0,
        "spent_usd": 1.1,
        "hard": False,
        "running": ["T3"],
        "not_started": 0,
    }
    fleet.finish("T3", cost_usd=0.2)  # a running task finishes, and its cost counts
    assert fleet.task("T3")["status"] == TaskStatus.SUCCEEDED
    assert fleet.engine.limits.budget_json()["spent_usd"] == 1.3


def test_a_spent_budget_leaves_pending_tasks_waiting_and_the_fleet_idle(
    make_fleet: Callable[..., Fleet],
):
    fleet = make_fleet(max_cost=0.5)
    fleet.add("T1")
    fleet.add("T2")
    fleet.register("runner-1")
    fleet.run("T1", cost_usd=0.5)

    assert fleet.tick() == [sched.BudgetExhausted(), sched.FleetIdle()]
    assert fleet.task("T2")["status"] == TaskStatus.PENDING
    [idle] = fleet.events(EventType.FLEET_IDLE)
    assert idle["payload"]["stopped"] == "budget"
    assert fleet.tick() == []  # said once


def test_raising_the_budget_resumes_assignment(make_fleet: Callable[..., Fleet]):
    fleet = make_fleet(max_cost=0.5)
    fleet.add("T1")
    fleet.add("T2")
    fleet.register("runner-1")
    fleet.run("T1", cost_usd=0.5)
    fleet.tick()

    answer = fleet.engine.operator.set_budget(2.0, hard=False)

    assert answer == {
        "max_cost_usd": 2.0,
        "hard": False,
        "spent_usd": 0.5,
        "exhausted": False,
        "simulated": False,
    }
    assert [d.task_id for d in fleet.tick() if isinstance(d, sched.Assign)] == ["T2"]
    [raised] = fleet.events(EventType.FLEET_BUDGET_SET)
    assert (raised["payload"]["previous_usd"], raised["payload"]["max_cost_usd"]) == (0.5, 2.0)


def test_a_hard_stop_takes_back_running_attempts_rolled_back_and_uncharged(
    make_fleet: Callable[..., Fleet], workdir: Path
):
    fleet = make_fleet(max_cost=1.0, max_cost_hard=True)
    _two_running(fleet)
    assert fleet.acquire("T2", "a.py").allowed
    (workdir / "a.py").write_text("half done\n")
    owner = fleet.owner("T2")
    epoch = fleet.epoch(owner)

    fleet.finish("T1", cost_usd=1.0)
    decisions = fleet.tick()

    assert decisions == [sched.BudgetExhausted(), sched.StopForBudget("T2"), sched.FleetIdle()]
    assert (workdir / "a.py").read_text() == "A = 1\n"
    row = fleet.task("T2")
    assert (row["status"], row["attempts"], row["uncharged_attempts"]) == ("pending", 1, 1)
    assert row["error_kind"] == "budget"
    assert fleet.epoch(owner) == epoch + 1  # fenced: its runner drops the session
    released = fleet.events(EventType.LEASE_RELEASED)
    assert [(e["payload"]["path"], e["payload"]["reason"]) for e in released] == [
        ("a.py", "fleet_budget")
    ]


def test_lowering_the_cap_below_what_was_spent_announces_it_at_once(fleet: Fleet):
    fleet.add("T1")
    fleet.add("T2")
    fleet.register("runner-1")
    fleet.run("T1", cost_usd=0.3)

    fleet.engine.operator.set_budget(0.25, hard=False)

    assert fleet.tick() == [sched.BudgetExhausted(), sched.FleetIdle()]


def test_a_cap_set_live_outlives_a_restart_and_a_servers_own_cap_wins(
    make_fleet: Callable[..., Fleet],
):
    first = make_fleet()
    first.add("T1")
    first.register("runner-1")
    first.run("T1", cost_usd=0.4)
    first.engine.operator.set_budget(0.4, hard=True)

    again = make_fleet()  # the same database, no cap of its own
    assert again.engine.limits.budget_json() == {
        "max_cost_usd": 0.4,
        "hard": True,
        "spent_usd": 0.4,
        "exhausted": True,
        "simulated": False,
    }
    assert again.engine.limits.announced  # no second announcement after a restart

    own = make_fleet(max_cost=5.0)
    assert own.engine.limits.budget_json()["max_cost_usd"] == 5.0


def test_the_cost_is_simulated_while_every_fleet_run_said_so_and_after_a_restart(
    make_fleet: Callable[..., Fleet],
):
    first = make_fleet()
    assert not first.engine.limits.budget_json()["simulated"]  # no run yet: nothing to label

    first.engine.operator.fleet_event("fleet_started", {"runners": 1, "simulated": True})
    assert first.engine.limits.budget_json()["simulated"]
    assert make_fleet().engine.limits.budget_json()["simulated"]  # read back from the log

    first.engine.operator.fleet_event("fleet_started", {"runners": 1})  # a live run: a mix is plain
    assert not first.engine.limits.budget_json()["simulated"]
    assert not make_fleet().engine.limits.budget_json()["simulated"]
