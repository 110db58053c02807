"""The pure scheduler over literal `FleetState`s: no database, no clock, no event loop.

Builders fill the fields a test does not care about; every test states the
snapshot it schedules and the exact decisions it expects, in order.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from codefleet.coord.policy.scheduler import (
    AgentView,
    Assign,
    BudgetExhausted,
    BudgetView,
    FailTask,
    FleetIdle,
    FleetState,
    MarkOffline,
    Requeue,
    ResumeFleet,
    StopForBudget,
    TaskView,
    schedule,
    wants_wider_window,
)
from codefleet.models import AgentStatus, ErrorKind
from codefleet.resources import resource_key, resource_keys

NOW = datetime(2026, 7, 31, 18, 0, 0, tzinfo=UTC)
STALE_AFTER = timedelta(seconds=20)
TIMEOUT = timedelta(seconds=600)


def task(
    id: str,
    *scope: str,
    priority: int = 3,
    attempts: int = 0,
    max_attempts: int = 3,
    backoff_until: datetime | None = None,
    agent: str | None = None,
    assigned_at: datetime | None = None,
) -> TaskView:
    if agent is not None and assigned_at is None:
        assigned_at = NOW - timedelta(seconds=5)
    return TaskView(
        id=id,
        priority=priority,
        file_scope=frozenset(scope),
        attempts=attempts,
        max_attempts=max_attempts,
        backoff_until=backoff_until,
        assigned_agent_id=agent,
        assigned_at=assigned_at,
    )


def agent(
    id: str,
    name: str | None = None,
    status: AgentStatus = AgentStatus.IDLE,
    seen_ago: float = 1.0,
    idle_for: float = 10.0,
) -> AgentView:
    return AgentView(
        id=id,
        name=name or id,
        status=status,
        last_heartbeat_at=NOW - timedelta(seconds=seen_ago),
        idle_since=NOW - timedelta(seconds=idle_for),
    )


def state(**fields: object) -> FleetState:
    fields.setdefault("live_tasks", 1)
    fields.setdefault("idle_announced", False)
    return FleetState(stale_after=STALE_AFTER, task_timeout=TIMEOUT, **fields)  # type: ignore[arg-type]


STALE = STALE_AFTER.total_seconds() + 1


# -- decision order -------------------------------------------------------------------


def test_decisions_come_in_contract_order_offline_then_take_backs_then_failures_then_assignments():
    snapshot = state(
        agents=(
            agent("a-stale", status=AgentStatus.BUSY, seen_ago=STALE),
            agent("a-late", status=AgentStatus.BUSY),
            agent("a-idle"),
        ),
        in_flight=(
            task("t-orphan", "x.py", attempts=1, agent="a-stale"),
            task("t-late", "y.py", attempts=1, agent="a-late", assigned_at=NOW - TIMEOUT * 2),
        ),
        exhausted=(task("t-spent", attempts=3),),
        candidates=(task("t-ready", "z.py"),),
        live_tasks=4,
    )

    assert schedule(snapshot, NOW) == [
        MarkOffline("a-stale"),
        Requeue("t-orphan", ErrorKind.INFRA, "agent_stale"),
        Requeue("t-late", ErrorKind.TIMEOUT, "deadline"),
        FailTask("t-spent", ErrorKind.ATTEMPTS_EXHAUSTED, "out of attempts"),
        Assign("t-ready", "a-idle"),
    ]


def test_fleet_idle_is_the_last_decision_and_needs_nothing_live_and_not_yet_announced():
    stale_idle = agent("a1", seen_ago=STALE)

    assert schedule(state(agents=(stale_idle,), live_tasks=0), NOW) == [
        MarkOffline("a1"),
        FleetIdle(),
    ]
    assert schedule(state(live_tasks=0, idle_announced=True), NOW) == []
    assert schedule(state(live_tasks=1, idle_announced=False), NOW) == []


def test_an_empty_fleet_decides_nothing():
    assert schedule(state(), NOW) == []


# -- stale agents ---------------------------------------------------------------------


def test_a_stale_agents_task_that_is_out_of_attempts_is_failed_not_requeued():
    snapshot = state(
        agents=(agent("a1", status=AgentStatus.BUSY, seen_ago=STALE),),
        in_flight=(task("t1", attempts=3, max_attempts=3, agent="a1"),),
    )

    assert schedule(snapshot, NOW) == [
        MarkOffline("a1"),
        FailTask("t1", ErrorKind.ATTEMPTS_EXHAUSTED, "agent_stale"),
    ]


def test_an_agent_exactly_at_the_stale_cutoff_is_still_alive():
    snapshot = state(agents=(agent("a1", seen_ago=STALE_AFTER.total_seconds()),))

    assert schedule(snapshot, NOW) == []


def test_an_agent_already_offline_is_not_marked_offline_again():
    snapshot = state(agents=(agent("a1", status=AgentStatus.OFFLINE, seen_ago=STALE * 10),))

    assert schedule(snapshot, NOW) == []


def test_a_lease_held_by_a_task_whose_agent_just_went_stale_does_not_block_assignment():
    snapshot = state(
        agents=(agent("a-stale", status=AgentStatus.BUSY, seen_ago=STALE), agent("a-idle")),
        in_flight=(task("t-orphan", "declared.py", attempts=1, agent="a-stale"),),
        leases=(("leased.py", "t-orphan"),),
        candidates=(task("t-wants-lease", "leased.py"), task("t-wants-scope", "declared.py")),
    )

    decisions = schedule(snapshot, NOW)

    assert decisions[:2] == [
        MarkOffline("a-stale"),
        Requeue("t-orphan", ErrorKind.INFRA, "agent_stale"),
    ]
    assert decisions[2:] == [Assign("t-wants-lease", "a-idle")]


def test_a_lease_held_by_a_live_task_blocks_a_candidate_that_declares_the_path():
    snapshot = state(
        agents=(agent("a-busy", status=AgentStatus.BUSY), agent("a-idle")),
        in_flight=(task("t-holder", agent="a-busy"),),
        leases=(("leased.py", "t-holder"),),
        candidates=(task("t-wants-lease", "leased.py"),),
    )

    assert schedule(snapshot, NOW) == []


def test_a_stale_idle_agent_is_never_handed_a_task():
    snapshot = state(
        agents=(agent("a-stale", seen_ago=STALE, idle_for=1000),),
        candidates=(task("t1"),),
    )

    assert schedule(snapshot, NOW) == [MarkOffline("a-stale")]


def test_a_task_taken_back_goes_to_a_live_agent_never_to_the_one_that_just_went_offline():
    # The stale agent has been idle longest, so it would be first in line if it counted.
    snapshot = state(
        agents=(
            agent("a-stale", seen_ago=STALE, idle_for=1000),
            agent("a-live", idle_for=1),
        ),
        candidates=(task("t1"),),
    )

    assert schedule(snapshot, NOW) == [MarkOffline("a-stale"), Assign("t1", "a-live")]


# -- deadlines ------------------------------------------------------------------------


def test_an_in_flight_task_is_taken_back_at_assigned_at_plus_timeout_plus_sixty_seconds():
    assigned = NOW - TIMEOUT - timedelta(seconds=60)
    snapshot = state(
        agents=(agent("a1", status=AgentStatus.BUSY),),
        in_flight=(task("t1", attempts=1, agent="a1", assigned_at=assigned),),
    )

    assert schedule(snapshot, NOW) == [Requeue("t1", ErrorKind.TIMEOUT, "deadline")]
    assert schedule(snapshot, NOW - timedelta(milliseconds=1)) == []


def test_an_overdue_task_out_of_attempts_is_failed_at_its_deadline():
    snapshot = state(
        agents=(agent("a1", status=AgentStatus.BUSY),),
        in_flight=(
            task("t1", attempts=3, max_attempts=3, agent="a1", assigned_at=NOW - TIMEOUT * 2),
        ),
    )

    assert schedule(snapshot, NOW) == [FailTask("t1", ErrorKind.ATTEMPTS_EXHAUSTED, "deadline")]


def test_a_task_its_live_runner_never_started_is_charged_at_its_deadline():
    never_started = replace(
        task("t1", attempts=3, max_attempts=3, agent="a1", assigned_at=NOW - TIMEOUT * 2),
        unstarted=True,
    )
    snapshot = state(agents=(agent("a1", status=AgentStatus.BUSY),), in_flight=(never_started,))

    assert schedule(snapshot, NOW) == [FailTask("t1", ErrorKind.ATTEMPTS_EXHAUSTED, "deadline")]


def test_a_task_both_orphaned_and_overdue_is_taken_back_once():
    snapshot = state(
        agents=(agent("a1", status=AgentStatus.BUSY, seen_ago=STALE),),
        in_flight=(task("t1", attempts=1, agent="a1", assigned_at=NOW - TIMEOUT * 2),),
    )

    assert schedule(snapshot, NOW) == [
        MarkOffline("a1"),
        Requeue("t1", ErrorKind.INFRA, "agent_stale"),
    ]


def test_an_overdue_tasks_scope_no_longer_blocks_assignment_in_the_same_tick():
    snapshot = state(
        agents=(agent("a-late", status=AgentStatus.BUSY), agent("a-idle")),
        in_flight=(
            task("t-late", "x.py", attempts=1, agent="a-late", assigned_at=NOW - TIMEOUT * 2),
        ),
        leases=(("x.py", "t-late"),),
        candidates=(task("t-next", "x.py"),),
    )

    assert schedule(snapshot, NOW) == [
        Requeue("t-late", ErrorKind.TIMEOUT, "deadline"),
        Assign("t-next", "a-idle"),
    ]


# -- assignment -----------------------------------------------------------------------


def test_the_greedy_scan_skips_a_conflicting_task_without_blocking_the_ones_behind_it():
    snapshot = state(
        agents=(agent("a1", idle_for=30), agent("a2", idle_for=20)),
        candidates=(task("t1", "a.py"), task("t2", "a.py", "b.py"), task("t3", "c.py")),
    )

    assert schedule(snapshot, NOW) == [Assign("t1", "a1"), Assign("t3", "a2")]


def test_declared_scopes_of_in_flight_tasks_are_busy():
    snapshot = state(
        agents=(agent("a-busy", status=AgentStatus.BUSY), agent("a-idle")),
        in_flight=(task("t-running", "a.py", agent="a-busy"),),
        candidates=(task("t1", "a.py"), task("t2", "b.py")),
    )

    assert schedule(snapshot, NOW) == [Assign("t2", "a-idle")]


def test_tasks_with_empty_scopes_never_conflict():
    snapshot = state(
        agents=(agent("a1", idle_for=3), agent("a2", idle_for=2), agent("a3", idle_for=1)),
        candidates=(task("t1"), task("t2"), task("t3")),
    )

    assert schedule(snapshot, NOW) == [Assign("t1", "a1"), Assign("t2", "a2"), Assign("t3", "a3")]


def test_the_longest_idle_agent_gets_the_best_task_and_equal_idleness_breaks_on_name():
    snapshot = state(
        agents=(
            agent("id-1", name="runner-c", idle_for=5),
            agent("id-2", name="runner-b", idle_for=50),
            agent("id-3", name="runner-a", idle_for=5),
        ),
        candidates=(task("best"), task("second"), task("third")),
    )

    assert schedule(snapshot, NOW) == [
        Assign("best", "id-2"),
        Assign("second", "id-3"),
        Assign("third", "id-1"),
    ]


def test_candidates_are_assigned_in_the_order_given_whatever_their_ids_or_priorities():
    # The engine orders `candidates`; the scheduler must not reorder them.
    snapshot = state(
        agents=(agent("a1", idle_for=2), agent("a2", idle_for=1)),
        candidates=(task("z", priority=1), task("a", priority=5), task("m", priority=3)),
    )

    assert schedule(snapshot, NOW) == [Assign("z", "a1"), Assign("a", "a2")]


def test_busy_and_offline_agents_get_nothing():
    snapshot = state(
        agents=(agent("a1", status=AgentStatus.BUSY), agent("a2", status=AgentStatus.OFFLINE)),
        candidates=(task("t1"),),
    )

    assert schedule(snapshot, NOW) == []


def test_a_task_still_backing_off_is_skipped_and_one_whose_backoff_ends_now_is_assigned():
    snapshot = state(
        agents=(agent("a1", idle_for=2), agent("a2", idle_for=1)),
        candidates=(
            task("waiting", backoff_until=NOW + timedelta(milliseconds=1)),
            task("due", backoff_until=NOW),
        ),
    )

    assert schedule(snapshot, NOW) == [Assign("due", "a1")]


def test_a_candidate_out_of_attempts_is_never_assigned():
    snapshot = state(agents=(agent("a1"),), candidates=(task("spent", attempts=2, max_attempts=2),))

    assert schedule(snapshot, NOW) == []


def test_one_tick_assigns_no_more_tasks_than_there_are_idle_agents():
    snapshot = state(agents=(agent("a1"),), candidates=(task("t1"), task("t2")))

    assert schedule(snapshot, NOW) == [Assign("t1", "a1")]


def test_the_same_snapshot_always_gives_the_same_decisions():
    snapshot = state(
        agents=tuple(agent(f"a{n}", idle_for=5) for n in range(5)),
        candidates=tuple(task(f"t{n}", f"f{n % 3}.py") for n in range(8)),
    )

    assert schedule(snapshot, NOW) == schedule(snapshot, NOW)
    assert schedule(snapshot, NOW) == [
        Assign("t0", "a0"),
        Assign("t1", "a1"),
        Assign("t2", "a2"),
    ]


# -- the candidate window ---------------------------------------------------------------


def test_a_cut_window_that_left_idle_agents_asks_for_a_wider_one():
    snapshot = state(
        agents=(agent("a1", idle_for=2), agent("a2", idle_for=1)),
        candidates=(task("t1", "a.py"), task("t2", "a.py")),
        more_candidates=True,
    )

    decisions = schedule(snapshot, NOW)

    assert decisions == [Assign("t1", "a1")]
    assert wants_wider_window(snapshot, decisions) is True


def test_a_complete_window_never_asks_for_a_wider_one():
    snapshot = state(
        agents=(agent("a1", idle_for=2), agent("a2", idle_for=1)),
        candidates=(task("t1", "a.py"), task("t2", "a.py")),
        more_candidates=False,
    )

    assert wants_wider_window(snapshot, schedule(snapshot, NOW)) is False


def test_a_cut_window_that_fed_every_idle_agent_is_wide_enough():
    snapshot = state(
        agents=(agent("a1"),),
        candidates=(task("t1"), task("t2")),
        more_candidates=True,
    )

    assert wants_wider_window(snapshot, schedule(snapshot, NOW)) is False


# -- the usage-limit pause ---------------------------------------------------------------


def test_a_paused_fleet_assigns_nothing_but_still_takes_back_and_fails():
    snapshot = state(
        agents=(agent("a-stale", status=AgentStatus.BUSY, seen_ago=STALE), agent("a-idle")),
        in_flight=(task("t-orphan", attempts=1, agent="a-stale"),),
        exhausted=(task("t-spent", attempts=3),),
        candidates=(task("t-ready"),),
        paused_until=NOW + timedelta(seconds=1),
    )

    assert schedule(snapshot, NOW) == [
        MarkOffline("a-stale"),
        Requeue("t-orphan", ErrorKind.INFRA, "agent_stale"),
        FailTask("t-spent", ErrorKind.ATTEMPTS_EXHAUSTED, "out of attempts"),
    ]


def test_a_pause_that_ran_out_is_lifted_before_the_same_tick_assigns():
    snapshot = state(agents=(agent("a1"),), candidates=(task("t1"),), paused_until=NOW)

    assert schedule(snapshot, NOW) == [ResumeFleet(), Assign("t1", "a1")]


def test_a_paused_fleet_does_not_ask_for_a_wider_window():
    snapshot = state(
        agents=(agent("a1"),),
        candidates=(),
        more_candidates=True,
        paused_until=NOW + timedelta(seconds=1),
    )

    assert wants_wider_window(snapshot, schedule(snapshot, NOW)) is False
    resumed = state(agents=(agent("a1"),), candidates=(), more_candidates=True, paused_until=NOW)
    assert wants_wider_window(resumed, schedule(resumed, NOW)) is True


# -- the fleet's budget ---------------------------------------------------------------------

SPENT = BudgetView(exhausted=True, announced=False)


def test_a_spent_budget_is_announced_once_and_nothing_more_is_assigned():
    running = task("t-run", agent="a-busy")
    snapshot = state(
        agents=(agent("a-busy", status=AgentStatus.BUSY), agent("a-idle")),
        in_flight=(running,),
        candidates=(task("t-ready"),),
        live_tasks=2,
        budget=SPENT,
    )

    assert schedule(snapshot, NOW) == [BudgetExhausted()]
    said = state(
        in_flight=(running,),
        candidates=(task("t-ready"),),
        agents=(agent("a-idle"),),
        live_tasks=2,
        budget=BudgetView(exhausted=True, announced=True),
    )
    assert schedule(said, NOW) == []


def test_a_hard_budget_stop_takes_back_every_running_attempt_and_the_fleet_stops():
    snapshot = state(
        agents=(agent("a1", status=AgentStatus.BUSY), agent("a2", status=AgentStatus.BUSY)),
        in_flight=(task("t2", agent="a2"), task("t1", agent="a1")),
        candidates=(task("t3"),),
        live_tasks=3,
        budget=BudgetView(exhausted=True, announced=False, hard=True),
    )

    assert schedule(snapshot, NOW) == [
        BudgetExhausted(),
        StopForBudget("t1"),
        StopForBudget("t2"),
        FleetIdle(),
    ]


def test_a_spent_budget_with_nothing_running_is_an_idle_fleet_though_tasks_wait():
    snapshot = state(
        agents=(agent("a1"),),
        candidates=(task("t1"),),
        live_tasks=1,
        budget=BudgetView(exhausted=True, announced=True),
    )

    assert schedule(snapshot, NOW) == [FleetIdle()]
    assert wants_wider_window(replace(snapshot, more_candidates=True), []) is False


# -- named resources: strict exclusion --------------------------------------------------


def with_resources(view: TaskView, *names: str) -> TaskView:
    return replace(view, resources=resource_keys(names))


def test_two_candidates_sharing_a_resource_are_never_assigned_in_the_same_tick():
    snapshot = state(
        agents=(agent("a1", idle_for=2), agent("a2", idle_for=1)),
        candidates=(with_resources(task("t1"), "db"), with_resources(task("t2"), "db")),
    )

    assert schedule(snapshot, NOW) == [Assign("t1", "a1")]


def test_a_resource_of_a_running_task_keeps_a_candidate_that_names_it_waiting():
    snapshot = state(
        agents=(agent("a-busy", status=AgentStatus.BUSY), agent("a-idle")),
        in_flight=(with_resources(task("t-running", agent="a-busy"), "db"),),
        candidates=(with_resources(task("t1"), "db"), with_resources(task("t2"), "cache")),
    )

    assert schedule(snapshot, NOW) == [Assign("t2", "a-idle")]


def test_a_resource_a_person_holds_keeps_every_task_that_names_it_waiting():
    snapshot = state(
        agents=(agent("a1"),),
        leases=((resource_key("db"), "i_person"),),
        candidates=(with_resources(task("t1"), "db"), task("t2")),
    )

    assert schedule(snapshot, NOW) == [Assign("t2", "a1")]


def test_a_file_named_like_a_resource_key_is_another_lock():
    snapshot = state(
        agents=(agent("a1", idle_for=2), agent("a2", idle_for=1)),
        candidates=(task("t1", "resource:db"), with_resources(task("t2"), "db")),
    )

    assert schedule(snapshot, NOW) == [Assign("t1", "a1"), Assign("t2", "a2")]
