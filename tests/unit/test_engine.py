"""The engine over a real SQLite file, a scratch tree and an injected clock.

No event loop and no sleeping: the engine is never attached, so `kick()` is a
no-op and each test calls `tick()` itself after moving the clock by hand.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from codefleet.attempt import AttemptReport
from codefleet.coord.calls.ticks import BASE_WINDOW
from codefleet.coord.engine import Engine, EngineConfig
from codefleet.coord.policy import scheduler as sched
from codefleet.coord.policy.answers import Beat, LeaseAnswer, TaskAnswer
from codefleet.coord.storage.database import Row
from codefleet.coord.storage.store import Store
from codefleet.coord.tables.validation import NewTask
from codefleet.errors import InvalidGraph, InvalidState, NotFound, NotOwner, StaleEpoch
from codefleet.models import AgentStatus, ErrorKind, EventType, TaskStatus, to_iso
from codefleet.paths import TreeRoot

T0 = datetime(2026, 7, 31, 18, 0, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@dataclass
class Fleet:
    """An engine plus the handles a test needs to drive it and read what it wrote."""

    engine: Engine
    clock: Clock
    db_path: Path
    commits: list[list[Row]] = field(default_factory=list)

    # -- driving ----------------------------------------------------------------

    def add(
        self, task_id: str, *scope: str, deps: tuple[str, ...] = (), **fields: Any
    ) -> list[str]:
        spec = NewTask(title=task_id, id=task_id, file_scope=scope, depends_on=deps, **fields)
        return self.engine.operator.create_tasks([spec])

    def register(self, name: str) -> str:
        return str(self.engine.arrivals.register(name, str(self.engine.tree.root), 4242).agent_id)

    def epoch(self, agent_id: str) -> int:
        return self.engine.agents.by_id[agent_id].epoch

    def tick(self) -> list[sched.Decision]:
        return self.engine.ticks.tick()

    def owner(self, task_id: str) -> str:
        agent_id = self.engine.tasks.index.live[task_id].agent_id
        assert agent_id is not None, f"{task_id} is not assigned"
        return agent_id

    def start(self, task_id: str) -> None:
        agent_id = self.owner(task_id)
        self.engine.runner.start(task_id, agent_id, self.epoch(agent_id))

    def acquire(self, task_id: str, *paths: str) -> LeaseAnswer:
        agent_id = self.owner(task_id)
        return self.engine.runner.acquire(
            agent_id, self.epoch(agent_id), task_id, list(paths), "Write"
        )

    def finish(self, task_id: str, ok: bool = True, **report: Any) -> TaskAnswer:
        agent_id = self.owner(task_id)
        attempt = self.engine.tasks.index.live[task_id].attempts
        return self.engine.outcomes.complete(
            task_id, agent_id, self.epoch(agent_id), AttemptReport(attempt=attempt, ok=ok, **report)
        )

    def run(self, task_id: str, ok: bool = True, **report: Any) -> TaskAnswer:
        """Tick until `task_id` is assigned, then start it and report on it."""
        if task_id not in self.engine.tasks.index.in_flight:
            decisions = self.tick()
            assert any(isinstance(d, sched.Assign) and d.task_id == task_id for d in decisions), (
                f"{task_id} was not assigned: {decisions}"
            )
        self.start(task_id)
        return self.finish(task_id, ok, **report)

    # -- reading ------------------------------------------------------------------

    def task(self, task_id: str) -> Row:
        row = self.engine.store.task(task_id)
        assert row is not None
        return row

    def agent(self, agent_id: str) -> Row:
        row = self.engine.store.agent(agent_id)
        assert row is not None
        return row

    def events(self, type_: EventType | None = None, since: int = 0) -> list[Row]:
        return self.engine.store.events(since, 100_000, type_.value if type_ else None)

    def candidate_ids(self) -> list[str]:
        return [t.id for t in self.engine.ticks.snapshot(self.clock()).candidates]

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        """Read through a second connection: only what was committed is visible."""
        with sqlite3.connect(self.db_path) as other:
            return other.execute(sql).fetchall()


@pytest.fixture
def make_fleet(tmp_path: Path, workdir: Path) -> Iterator[Callable[..., Fleet]]:
    stores: list[Store] = []

    def make(**config: Any) -> Fleet:
        clock = Clock()
        db_path = tmp_path / "fleet.sqlite"
        commits: list[list[Row]] = []
        store = Store(db_path, on_commit=commits.append)
        stores.append(store)
        tree = TreeRoot(workdir, protected=[db_path, tmp_path / "runs"])
        engine = Engine(store, tree, EngineConfig(**config), clock=clock)
        return Fleet(engine, clock, db_path, commits)

    yield make
    for store in stores:
        store.close()


@pytest.fixture
def fleet(make_fleet: Callable[..., Fleet]) -> Fleet:
    return make_fleet()


def assigned(decisions: list[sched.Decision]) -> list[tuple[str, str]]:
    return [(d.task_id, d.agent_id) for d in decisions if isinstance(d, sched.Assign)]


# -- ordering -------------------------------------------------------------------------


def test_among_equal_priorities_the_task_heading_the_longest_chain_runs_first(fleet: Fleet):
    fleet.engine.operator.create_tasks(
        [NewTask("a-short", id="a-short"), NewTask("head", id="head")]
    )
    fleet.add("mid", deps=("head",))  # added later: the head's chain must be lifted
    fleet.add("tail", deps=("mid",))
    agent = fleet.register("runner-1")

    assert assigned(fleet.tick()) == [("head", agent)]


def test_ready_order_is_priority_then_critical_path_then_age_then_id(fleet: Fleet):
    fleet.add("old")
    fleet.clock.advance(1)
    fleet.engine.operator.create_tasks(
        [
            NewTask("zeta", id="zeta"),
            NewTask("alpha", id="alpha"),
            NewTask("hi", id="hi", priority=4),
            NewTask("long", id="long"),
            NewTask("long-child", id="long-child", priority=1, depends_on=["long"]),
        ]
    )

    assert fleet.candidate_ids() == ["hi", "long", "old", "alpha", "zeta"]


def test_idle_agents_take_the_ready_tasks_best_first(fleet: Fleet):
    fleet.engine.operator.create_tasks(
        [NewTask("low", id="low", priority=1), NewTask("top", id="top", priority=5)]
    )
    first = fleet.register("runner-1")
    fleet.clock.advance(1)
    second = fleet.register("runner-2")

    assert assigned(fleet.tick()) == [("top", first), ("low", second)]


# -- cascades -------------------------------------------------------------------------


def test_a_success_unblocks_a_dependent_only_once_all_its_dependencies_succeeded(fleet: Fleet):
    fleet.engine.operator.create_tasks(
        [
            NewTask("p1", id="p1"),
            NewTask("p2", id="p2"),
            NewTask("child", id="child", depends_on=["p1", "p2"]),
        ]
    )
    fleet.register("runner-1")
    fleet.register("runner-2")
    fleet.tick()

    fleet.run("p1")
    assert fleet.events(EventType.TASK_UNBLOCKED) == []
    assert "child" not in fleet.candidate_ids()

    fleet.run("p2")
    [unblocked] = fleet.events(EventType.TASK_UNBLOCKED)
    assert (unblocked["task_id"], unblocked["payload"]["by"]) == ("child", "p2")
    assert fleet.task("child")["status"] == TaskStatus.PENDING
    assert fleet.candidate_ids() == ["child"]


def test_a_failure_blocks_every_transitive_dependent_naming_the_failed_ancestor(fleet: Fleet):
    fleet.add("root")
    fleet.add("mid", deps=("root",))
    fleet.add("leaf", deps=("mid",))
    fleet.add("last", deps=("leaf",))
    fleet.add("bystander")
    fleet.register("runner-1")

    fleet.run("root", ok=False, error_kind=ErrorKind.BUDGET, error="over budget")

    root = fleet.task("root")
    assert (root["status"], root["error_kind"]) == (TaskStatus.FAILED, ErrorKind.BUDGET)
    for task_id in ("mid", "leaf", "last"):
        assert fleet.task(task_id)["status"] == TaskStatus.BLOCKED_UPSTREAM
        assert "root" in fleet.task(task_id)["error"]
    blocked = {
        e["task_id"]: e["payload"]["upstream"]
        for e in fleet.events(EventType.TASK_BLOCKED_UPSTREAM)
    }
    assert blocked == {"mid": "root", "leaf": "root", "last": "root"}
    assert fleet.task("bystander")["status"] == TaskStatus.PENDING


def test_cancelling_a_pending_task_blocks_its_dependents(fleet: Fleet):
    fleet.add("root")
    fleet.add("child", deps=("root",))

    assert fleet.engine.operator.cancel("root") == {"status": TaskStatus.CANCELLED}

    assert fleet.task("root")["status"] == TaskStatus.CANCELLED
    assert fleet.task("child")["status"] == TaskStatus.BLOCKED_UPSTREAM
    with pytest.raises(InvalidState):
        fleet.engine.operator.cancel("root")


def test_a_task_depending_on_a_task_that_already_failed_is_born_blocked(fleet: Fleet):
    fleet.add("root")
    fleet.engine.operator.cancel("root")

    fleet.add("late", deps=("root",))

    assert fleet.task("late")["status"] == TaskStatus.BLOCKED_UPSTREAM
    assert fleet.candidate_ids() == []


def test_a_task_depending_on_a_task_that_already_succeeded_is_ready_at_once(fleet: Fleet):
    fleet.add("root")
    fleet.register("runner-1")
    fleet.run("root")

    fleet.add("late", deps=("root",))

    assert fleet.candidate_ids() == ["late"]


def test_retry_sets_earlier_attempts_aside_and_walks_blocked_dependents_back(fleet: Fleet):
    fleet.add("root", max_attempts=1)
    fleet.add("other")
    fleet.add("mid", deps=("root",))
    fleet.add("leaf", deps=("mid",))
    fleet.add("guarded", deps=("root", "other"))
    fleet.engine.operator.cancel("other")
    agent = fleet.register("runner-1")
    fleet.run("root", ok=False, error_kind=ErrorKind.AGENT_ERROR)
    fleet.tick()  # out of attempts: failed
    assert fleet.task("root")["status"] == TaskStatus.FAILED
    assert fleet.task("leaf")["status"] == TaskStatus.BLOCKED_UPSTREAM

    assert fleet.engine.operator.retry("root") == {"status": TaskStatus.PENDING}

    root = fleet.task("root")
    assert (root["status"], root["attempts"], root["error"]) == (TaskStatus.PENDING, 1, None)
    assert (root["uncharged_attempts"], root["retried_attempts"]) == (1, 1)  # kept, not charged
    assert fleet.task("mid")["status"] == TaskStatus.PENDING
    assert fleet.task("leaf")["status"] == TaskStatus.PENDING
    assert fleet.task("guarded")["status"] == TaskStatus.BLOCKED_UPSTREAM  # "other" is still dead
    retried = [(e["task_id"], e["payload"]["reason"]) for e in fleet.events(EventType.TASK_RETRIED)]
    assert retried == [("root", "retry"), ("mid", "upstream_retried"), ("leaf", "upstream_retried")]
    assert assigned(fleet.tick()) == [("root", agent)]
    assert fleet.task("root")["attempts"] == 2  # attempt numbers are never reused


def test_a_retried_task_keeps_its_attempts_numbered_and_gets_its_whole_allowance_again(
    make_fleet: Callable[..., Fleet],
):
    fleet = make_fleet(backoff_base=0)
    fleet.add("T1", max_attempts=2)
    fleet.register("runner-1")
    for _ in range(2):
        fleet.run("T1", ok=False, error_kind=ErrorKind.AGENT_ERROR)
        fleet.tick()
    assert fleet.task("T1")["status"] == TaskStatus.FAILED

    fleet.engine.operator.retry("T1")
    for _ in range(2):
        fleet.run("T1", ok=False, error_kind=ErrorKind.AGENT_ERROR)
        fleet.tick()

    row = fleet.task("T1")
    assert (row["status"], row["attempts"], row["retried_attempts"]) == ("failed", 4, 2)
    numbers = [e["payload"]["attempt"] for e in fleet.events(EventType.TASK_ASSIGNED)]
    assert numbers == [1, 2, 3, 4]
    [retried] = fleet.events(EventType.TASK_RETRIED)
    assert (retried["payload"]["attempt"], retried["payload"]["set_aside"]) == (2, 2)


def test_only_failed_or_cancelled_tasks_can_be_retried(fleet: Fleet):
    fleet.add("root")
    fleet.add("child", deps=("root",))
    fleet.engine.operator.cancel("root")

    with pytest.raises(InvalidState):
        fleet.engine.operator.retry("child")  # blocked_upstream comes back only with its ancestor
    with pytest.raises(NotFound):
        fleet.engine.operator.retry("nope")


# -- stale agents, re-registration, heartbeats ------------------------------------------


def _running_with_lease(fleet: Fleet, path: str = "a.py") -> tuple[str, str]:
    agent = fleet.register("runner-1")
    fleet.add("T", path)
    fleet.tick()
    fleet.start("T")
    assert fleet.acquire("T", path).allowed
    return agent, "T"


def test_re_acquiring_leases_the_task_already_holds_opens_no_transaction(
    make_fleet: Callable[..., Fleet], monkeypatch: pytest.MonkeyPatch
):
    fleet = make_fleet()
    _running_with_lease(fleet, "a.py")
    opened: list[int] = []
    real = fleet.engine.store.transaction
    monkeypatch.setattr(fleet.engine.store, "transaction", lambda: opened.append(1) or real())

    again = fleet.acquire("T", "./a.py")
    more = fleet.acquire("T", "a.py", "b.py")

    assert (again.allowed, again.granted) == (True, ("a.py",))
    assert (more.allowed, more.granted) == (True, ("a.py", "b.py"))
    assert opened == [1]  # only the request with a new path wrote anything


def test_a_stale_agent_is_fenced_with_its_task_requeued_then_its_leases_go_once_restored(
    make_fleet: Callable[..., Fleet],
):
    fleet = make_fleet(stale_after=20)
    agent, task = _running_with_lease(fleet)
    epoch = fleet.epoch(agent)
    first_new_event = fleet.engine.store.last_event_id() + 1
    fleet.commits.clear()

    fleet.clock.advance(20.001)
    decisions = fleet.tick()

    assert decisions == [
        sched.MarkOffline(agent),
        sched.Requeue(task, ErrorKind.INFRA, "agent_stale"),
    ]
    # one COMMIT fences the agent, requeues its task and records the restore intent;
    # the lease goes in a second one, once the file is back (docs/decisions/0030-take-backs-commit-their-intent-before-any-file-i-o.md: "Take-backs ...")
    fence, release = fleet.commits
    assert fence + release == fleet.events(since=first_new_event - 1)
    assert [e["type"] for e in fence] == ["restore_requested", "agent_offline", "task_requeued"]
    assert fence[0]["payload"] == {"paths": ["a.py"], "reason": "agent_stale"}
    assert [e["type"] for e in release] == ["lease_released"]
    assert release[0]["payload"] == {"path": "a.py", "reason": "agent_stale"}
    assert fleet.rows("SELECT status, epoch, current_task_id FROM agents") == [
        ("offline", epoch + 1, None)
    ]
    assert fleet.rows("SELECT COUNT(*) FROM file_leases") == [(0,)]
    status, kind, backoff = fleet.rows("SELECT status, error_kind, backoff_until FROM tasks")[0]
    assert (status, kind) == ("pending", "infra")
    assert backoff == to_iso(fleet.clock() + timedelta(seconds=2))


def test_a_fault_while_taking_back_a_stale_agents_task_undoes_the_whole_tick(
    make_fleet: Callable[..., Fleet], monkeypatch: pytest.MonkeyPatch
):
    fleet = make_fleet(stale_after=20)
    _running_with_lease(fleet)
    before = fleet.engine.store.last_event_id()
    real_emit = fleet.engine.store.emit

    def emit_failing_on_requeue(type_: EventType, **kwargs: Any) -> Row:
        if type_ is EventType.TASK_REQUEUED:
            raise RuntimeError("disk on fire")
        return real_emit(type_, **kwargs)

    monkeypatch.setattr(fleet.engine.store, "emit", emit_failing_on_requeue)
    fleet.clock.advance(21)
    with pytest.raises(RuntimeError, match="disk on fire"):
        fleet.tick()

    # The offline marking and the lease release ran before the fault: both rolled back.
    assert fleet.rows("SELECT status, epoch FROM agents") == [("busy", 1)]
    assert fleet.rows("SELECT path FROM file_leases") == [("a.py",)]
    assert fleet.rows("SELECT status FROM tasks") == [("running",)]
    assert fleet.rows(f"SELECT COUNT(*) FROM events WHERE id > {before}") == [(0,)]


def test_a_path_leased_by_a_stale_agents_task_is_free_for_assignment_in_the_same_tick(
    make_fleet: Callable[..., Fleet],
):
    fleet = make_fleet(stale_after=20)
    stale, orphan = _running_with_lease(fleet)
    fleet.clock.advance(15)
    fresh = fleet.register("runner-2")
    fleet.add("next", "a.py")
    assert fleet.tick() == []  # a.py is leased by a live task

    fleet.clock.advance(5.001)
    decisions = fleet.tick()

    assert decisions == [
        sched.MarkOffline(stale),
        sched.Requeue(orphan, ErrorKind.INFRA, "agent_stale"),
        sched.Assign("next", fresh),
    ]
    assert fleet.acquire("next", "a.py").allowed


def test_a_task_taken_back_from_a_stale_agent_waits_for_a_live_agent(
    make_fleet: Callable[..., Fleet],
):
    fleet = make_fleet(stale_after=20, backoff_base=0)
    stale, orphan = _running_with_lease(fleet)
    fleet.clock.advance(21)
    fleet.tick()

    assert fleet.tick() == []  # ready again at once, but its only agent is offline
    fresh = fleet.register("runner-2")
    assert assigned(fleet.tick()) == [(orphan, fresh)]
    assert fresh != stale


def test_re_registration_bumps_the_epoch_and_requeues_the_previous_incarnations_task(fleet: Fleet):
    agent, task = _running_with_lease(fleet)
    old_epoch = fleet.epoch(agent)

    answer = fleet.engine.arrivals.register(
        "runner-1", str(fleet.engine.tree.root), 4343, replace=True
    )

    assert answer.agent_id == agent
    assert answer.epoch == old_epoch + 1  # one registration, one bump (not one per take-back)
    assert fleet.agent(agent)["status"] == AgentStatus.IDLE
    assert fleet.agent(agent)["pid"] == 4343
    row = fleet.task(task)
    assert (row["status"], row["error_kind"], row["assigned_agent_id"]) == (
        "pending",
        "infra",
        None,
    )
    assert fleet.engine.store.leases() == []
    [released] = fleet.events(EventType.LEASE_RELEASED)
    assert released["payload"]["reason"] == "agent_reregistered"
    with pytest.raises(StaleEpoch):
        fleet.engine.runner.heartbeat(agent, old_epoch)


def test_a_heartbeat_with_the_current_epoch_brings_an_offline_agent_back(
    make_fleet: Callable[..., Fleet],
):
    fleet = make_fleet(stale_after=20)
    agent = fleet.register("runner-1")
    old_epoch = fleet.epoch(agent)
    fleet.clock.advance(21)
    fleet.tick()
    assert fleet.agent(agent)["status"] == AgentStatus.OFFLINE

    with pytest.raises(StaleEpoch):
        fleet.engine.runner.heartbeat(agent, old_epoch)
    answer = fleet.engine.runner.heartbeat(agent, fleet.epoch(agent))

    assert answer == Beat(AgentStatus.IDLE, old_epoch + 1)
    assert fleet.agent(agent)["status"] == AgentStatus.IDLE
    [online] = fleet.events(EventType.AGENT_ONLINE)
    assert online["agent_id"] == agent
    fleet.add("T")
    assert assigned(fleet.tick()) == [("T", agent)]


def test_re_registering_an_offline_agent_brings_it_back_online(make_fleet: Callable[..., Fleet]):
    fleet = make_fleet(stale_after=20)
    agent = fleet.register("runner-1")
    fleet.clock.advance(21)
    fleet.tick()

    fleet.register("runner-1")

    assert fleet.agent(agent)["status"] == AgentStatus.IDLE
    assert [e["agent_id"] for e in fleet.events(EventType.AGENT_ONLINE)] == [agent]


def test_a_graceful_leave_requeues_the_task_and_releases_the_leases(fleet: Fleet):
    agent, task = _running_with_lease(fleet)

    fleet.engine.arrivals.leave(agent, fleet.epoch(agent))

    assert fleet.agent(agent)["status"] == AgentStatus.OFFLINE
    assert fleet.task(task)["status"] == TaskStatus.PENDING
    assert fleet.engine.store.leases() == []
    assert [e["payload"]["reason"] for e in fleet.events(EventType.LEASE_RELEASED)] == [
        "agent_left"
    ]


# -- attempts, backoff, vetoes --------------------------------------------------------------


def test_a_pending_task_out_of_attempts_fails_at_the_next_tick_and_blocks_its_dependents(
    make_fleet: Callable[..., Fleet],
):
    """A spent task left pending (a database from before exhaustion failed at once)."""
    fleet = make_fleet()
    fleet.add("T", max_attempts=2)
    fleet.add("D", deps=("T",))
    with fleet.engine.store.transaction():
        fleet.engine.store.update_task("T", attempts=2)
    fleet = make_fleet()

    decisions = fleet.tick()

    assert decisions == [sched.FailTask("T", ErrorKind.ATTEMPTS_EXHAUSTED, "out of attempts")]
    row = fleet.task("T")
    assert (row["status"], row["error_kind"], row["attempts"]) == (
        "failed",
        "attempts_exhausted",
        2,
    )
    assert fleet.task("D")["status"] == TaskStatus.BLOCKED_UPSTREAM


@pytest.mark.parametrize("kind", [ErrorKind.AGENT_ERROR, ErrorKind.TIMEOUT, ErrorKind.INFRA])
def test_a_retryable_failure_backs_off_base_times_attempts_capped(
    make_fleet: Callable[..., Fleet], kind: ErrorKind
):
    fleet = make_fleet(backoff_base=2, backoff_cap=3)
    agent = fleet.register("runner-1")
    fleet.add("T")

    answer = fleet.run("T", ok=False, error_kind=kind)

    assert answer.backoff_until == to_iso(T0 + timedelta(seconds=2))  # 2 s x 1 attempt
    fleet.clock.advance(1.999)
    assert fleet.tick() == []
    fleet.clock.advance(0.001)
    assert assigned(fleet.tick()) == [("T", agent)]

    answer = fleet.run("T", ok=False, error_kind=kind)

    assert answer.backoff_until == to_iso(fleet.clock() + timedelta(seconds=3))  # min(4, 3)
    assert answer.attempts == 2


def test_a_non_retryable_failure_fails_the_task_at_once(fleet: Fleet):
    fleet.add("T")
    fleet.register("runner-1")

    answer = fleet.run("T", ok=False, error_kind=ErrorKind.BUDGET)

    assert (answer.status, answer.attempts) == ("failed", 1)


def test_a_vetoed_task_widens_its_scope_and_runs_only_after_the_holder_finishes(fleet: Fleet):
    holder_agent = fleet.register("runner-1")
    vetoed_agent = fleet.register("runner-2")
    fleet.engine.operator.create_tasks(
        [
            NewTask("T1", id="T1", file_scope=["a.py"]),
            NewTask("T2", id="T2", file_scope=["pkg/b.py"]),
        ]
    )
    assert assigned(fleet.tick()) == [("T1", holder_agent), ("T2", vetoed_agent)]
    assert fleet.acquire("T1", "a.py").allowed
    fleet.start("T2")

    denial = fleet.acquire("T2", "./a.py")
    answer = fleet.finish("T2", ok=False, error_kind=ErrorKind.VETO, blocked_on_path="./a.py")

    assert not denial.allowed
    assert denial.denied[0].holder_agent_name == "runner-1"
    assert denial.denied[0].holder_task_id == "T1"
    assert (answer.status, answer.backoff_until) == ("pending", None)
    row = fleet.task("T2")
    assert row["file_scope"] == ["a.py", "pkg/b.py"]
    assert row["blocked_on_path"] == "a.py"
    assert fleet.candidate_ids() == ["T2"]
    assert fleet.tick() == []  # ready, an agent is idle, but the holder still has a.py

    fleet.clock.advance(1)
    fleet.finish("T1")

    assert assigned(fleet.tick()) == [("T2", vetoed_agent)]
    assert fleet.task("T2")["attempts"] == 2


def test_a_lease_request_for_a_task_the_agent_does_not_hold_is_refused_and_writes_nothing(
    fleet: Fleet,
):
    agent = fleet.register("runner-1")
    fleet.add("T")
    before = fleet.engine.store.last_event_id()

    answer = fleet.engine.runner.acquire(agent, fleet.epoch(agent), "T", ["a.py"], "Write")

    assert not answer.allowed
    assert answer.denied[0].reason == "not_owner"
    assert fleet.engine.store.leases() == []
    assert fleet.engine.store.last_event_id() == before


# -- completion reports -------------------------------------------------------------------


def test_a_report_for_an_attempt_the_task_moved_past_is_a_duplicate_and_changes_nothing(
    fleet: Fleet,
):
    agent = fleet.register("runner-1")
    fleet.add("T")
    fleet.run("T", ok=False, error_kind=ErrorKind.AGENT_ERROR)
    fleet.clock.advance(2)
    fleet.tick()
    assert fleet.task("T")["attempts"] == 2

    answer = fleet.engine.outcomes.complete(
        "T", agent, fleet.epoch(agent), AttemptReport(attempt=1, ok=True)
    )

    assert answer.duplicate is True
    assert fleet.task("T")["status"] == TaskStatus.ASSIGNED


def test_a_report_from_an_agent_that_does_not_own_the_task_is_refused(fleet: Fleet):
    fleet.register("runner-1")
    other = fleet.register("runner-2")
    fleet.add("T")
    fleet.tick()
    assert fleet.owner("T") != other

    with pytest.raises(NotOwner):
        fleet.engine.outcomes.complete(
            "T", other, fleet.epoch(other), AttemptReport(attempt=1, ok=True)
        )
    with pytest.raises(NotOwner):
        fleet.engine.runner.start("T", other, fleet.epoch(other))


# -- deadlines ----------------------------------------------------------------------------


def test_the_server_takes_a_task_back_at_assigned_at_plus_timeout_plus_grace_and_fences_the_agent(
    make_fleet: Callable[..., Fleet],
):
    fleet = make_fleet(task_timeout=10, stale_after=1000)
    agent, task = _running_with_lease(fleet)
    epoch = fleet.epoch(agent)

    fleet.clock.advance(69.999)
    assert fleet.tick() == []
    fleet.clock.advance(0.001)
    decisions = fleet.tick()

    assert decisions[0] == sched.Requeue(task, ErrorKind.TIMEOUT, "deadline")
    assert fleet.task(task)["status"] == TaskStatus.PENDING
    assert [e["payload"]["reason"] for e in fleet.events(EventType.LEASE_RELEASED)] == ["deadline"]
    assert fleet.epoch(agent) == epoch + 1
    with pytest.raises(StaleEpoch):
        fleet.engine.runner.heartbeat(agent, epoch)


def test_an_overdue_last_attempt_fails_the_task_and_still_fences_the_agent(
    make_fleet: Callable[..., Fleet],
):
    fleet = make_fleet(task_timeout=10, stale_after=1000, max_attempts=1)
    agent, task = _running_with_lease(fleet)
    epoch = fleet.epoch(agent)

    fleet.clock.advance(70)
    decisions = fleet.tick()

    assert decisions == [sched.FailTask(task, ErrorKind.ATTEMPTS_EXHAUSTED, "deadline")]
    assert fleet.task(task)["status"] == TaskStatus.FAILED
    assert fleet.engine.store.leases() == []
    with pytest.raises(StaleEpoch):
        fleet.engine.runner.heartbeat(agent, epoch)


def test_a_fenced_agent_gets_no_new_work_until_its_runner_registers_again(
    make_fleet: Callable[..., Fleet],
):
    fleet = make_fleet(task_timeout=10, stale_after=1000)
    agent, _ = _running_with_lease(fleet)
    fleet.add("next")
    fleet.clock.advance(70)
    fleet.tick()  # deadline: the task is taken back and the agent fenced

    assert fleet.agent(agent)["status"] == AgentStatus.IDLE
    assert fleet.tick() == []  # a ready task, an idle agent, but its runner is still aborting

    fleet.register("runner-1")

    assert assigned(fleet.tick()) == [("next", agent)]


def test_cancelling_a_running_task_fences_its_agent_until_it_registers_again(fleet: Fleet):
    agent, task = _running_with_lease(fleet)
    epoch = fleet.epoch(agent)
    fleet.add("next")

    fleet.engine.operator.cancel(task)

    assert fleet.engine.store.leases() == []
    with pytest.raises(StaleEpoch):
        fleet.engine.runner.heartbeat(agent, epoch)
    assert fleet.tick() == []
    fleet.register("runner-1")
    assert assigned(fleet.tick()) == [("next", agent)]
    assert fleet.task("next")["attempts"] == 1


# -- fleet idle, restart, cost ----------------------------------------------------------------


def test_fleet_idle_is_emitted_exactly_once_per_drain(fleet: Fleet):
    fleet.register("runner-1")
    fleet.add("T1")
    assert fleet.events(EventType.FLEET_IDLE) == []

    fleet.run("T1")
    for _ in range(3):
        fleet.tick()
    assert len(fleet.events(EventType.FLEET_IDLE)) == 1

    fleet.add("T2")
    fleet.run("T2")
    for _ in range(3):
        fleet.tick()
    assert len(fleet.events(EventType.FLEET_IDLE)) == 2


def test_a_restarted_engine_reloads_live_state_from_the_same_file_and_carries_on(
    make_fleet: Callable[..., Fleet],
):
    fleet = make_fleet()
    agent, task = _running_with_lease(fleet)
    fleet.add("after", deps=(task,))
    fleet.add("ready")
    epoch = fleet.epoch(agent)
    fleet.engine.store.close()

    store = Store(fleet.db_path)
    restarted = Engine(store, fleet.engine.tree, fleet.engine.config, clock=fleet.clock)
    fleet.engine = restarted

    assert set(restarted.tasks.index.in_flight) == {task}
    assert restarted.tasks.index.in_flight[task].status is TaskStatus.RUNNING
    assert restarted.leases.holders == {"a.py": (agent, task)}
    assert restarted.agents.by_id[agent].epoch == epoch
    assert restarted.agents.by_id[agent].status is AgentStatus.BUSY
    assert fleet.candidate_ids() == ["ready"]
    assert fleet.acquire(task, "a.py").allowed  # still ours after the restart

    fleet.finish(task)

    assert fleet.task(task)["status"] == TaskStatus.SUCCEEDED
    assert fleet.engine.store.leases() == []
    assert assigned(fleet.tick()) == [("after", agent)]
    store.close()


def test_a_restarted_engine_keeps_a_backing_off_task_waiting(make_fleet: Callable[..., Fleet]):
    fleet = make_fleet(backoff_base=5)
    fleet.register("runner-1")
    fleet.add("T")
    fleet.run("T", ok=False, error_kind=ErrorKind.AGENT_ERROR)
    fleet.engine.store.close()

    store = Store(fleet.db_path)
    fleet.engine = Engine(store, fleet.engine.tree, fleet.engine.config, clock=fleet.clock)

    assert fleet.candidate_ids() == []
    fleet.clock.advance(5)
    assert fleet.candidate_ids() == ["T"]
    store.close()


def test_finished_tasks_leave_the_live_index_and_the_candidate_window_is_bounded(fleet: Fleet):
    done = [f"done-{n:03}" for n in range(40)]
    waiting = [f"wait-{n:03}" for n in range(BASE_WINDOW * 3)]
    fleet.engine.operator.create_tasks([NewTask(t, id=t, priority=5) for t in done])
    fleet.engine.operator.create_tasks([NewTask(t, id=t) for t in waiting])
    fleet.register("runner-1")
    for task_id in done:
        fleet.run(task_id)

    index = fleet.engine.tasks.index
    state = fleet.engine.ticks.snapshot(fleet.clock())

    assert not set(done) & set(index.live)
    assert len(index.ready) == len(waiting)
    assert state.live_tasks == len(waiting)
    assert len(state.candidates) == BASE_WINDOW
    assert state.more_candidates is True
    assert [t.id for t in state.candidates] == waiting[:BASE_WINDOW]


def test_a_tick_widens_the_window_when_every_task_in_it_conflicts(fleet: Fleet):
    hot = [
        NewTask(f"hot-{n:03}", id=f"hot-{n:03}", priority=5, file_scope=["a.py"])
        for n in range(BASE_WINDOW + 1)
    ]
    fleet.engine.operator.create_tasks([*hot, NewTask("cold", id="cold", file_scope=["pkg/b.py"])])
    first = fleet.register("runner-1")
    second = fleet.register("runner-2")

    assert assigned(fleet.tick()) == [("hot-000", first), ("cold", second)]


# -- graph validation ---------------------------------------------------------------------


def _counts(fleet: Fleet) -> list[tuple[Any, ...]]:
    return fleet.rows(
        "SELECT (SELECT COUNT(*) FROM tasks), (SELECT COUNT(*) FROM task_dependencies),"
        " (SELECT COUNT(*) FROM events)"
    )


INVALID_BATCHES: dict[str, tuple[str, list[NewTask]]] = {
    "cycle": (
        "cycle",
        [NewTask("a", id="a", depends_on=["b"]), NewTask("b", id="b", depends_on=["a"])],
    ),
    "self-dependency": ("cycle", [NewTask("a", id="a", depends_on=["a"])]),
    "unknown dependency": ("unknown_dependency", [NewTask("a", id="a", depends_on=["ghost"])]),
    "duplicate in batch": ("duplicate_id", [NewTask("a", id="a"), NewTask("a2", id="a")]),
    "duplicate of a stored task": ("already_loaded", [NewTask("x", id="existing")]),
    "space in id": ("invalid_id", [NewTask("x", id="bad id")]),
    "slash in id": ("invalid_id", [NewTask("x", id="a/b")]),
    "id too long": ("invalid_id", [NewTask("x", id="x" * 65)]),
    "scope outside the tree": ("invalid_path", [NewTask("x", id="x", file_scope=["../evil.py"])]),
    "scope in .git": ("invalid_path", [NewTask("x", id="x", file_scope=[".git/config"])]),
    "scope is a directory": ("invalid_path", [NewTask("x", id="x", file_scope=["pkg"])]),
    "empty batch": ("empty", []),
}


@pytest.mark.parametrize("case", INVALID_BATCHES, ids=list(INVALID_BATCHES))
def test_an_invalid_graph_is_rejected_whole_and_writes_nothing(fleet: Fleet, case: str):
    fleet.add("existing")
    problem, specs = INVALID_BATCHES[case]
    batch = [NewTask("fine", id="fine", file_scope=["a.py"]), *specs] if specs else []
    before = _counts(fleet)
    statuses = dict(fleet.engine.tasks.index.status)

    with pytest.raises(InvalidGraph) as caught:
        fleet.engine.operator.create_tasks(batch)

    assert caught.value.detail["problem"] == problem
    assert _counts(fleet) == before
    assert fleet.engine.tasks.index.status == statuses
    assert fleet.candidate_ids() == ["existing"]


def test_a_valid_batch_lands_whole_with_canonical_scopes_and_its_edges(fleet: Fleet):
    created = fleet.engine.operator.create_tasks(
        [
            NewTask("one", id="one", file_scope=["./a.py", "pkg//b.py", "a.py"]),
            NewTask("two", id="two", depends_on=["one", "one"]),
            NewTask("anonymous"),
        ]
    )

    assert created[:2] == ["one", "two"]
    assert created[2].startswith("t_")
    assert fleet.task("one")["file_scope"] == ["a.py", "pkg/b.py"]
    assert fleet.rows("SELECT task_id, depends_on_id FROM task_dependencies") == [("two", "one")]
    assert [e["task_id"] for e in fleet.events(EventType.TASK_CREATED)] == created
