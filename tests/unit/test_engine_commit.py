"""Memory is never ahead of the database: a failed COMMIT, a rollback, a restart.

The engine over a real SQLite file. A full disk is injected at the narrowest
seam: the store's connection answers `COMMIT` with SQLite's own "database or
disk is full" error while `full` is set (every other statement runs for real).
A by-hand run with the database on a 2 MiB tmpfs is in docs/history/reliability-log.md.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from codefleet.attempt import AttemptReport
from codefleet.coord.engine import Engine, EngineConfig
from codefleet.coord.policy import scheduler as sched
from codefleet.coord.storage.store import Store
from codefleet.coord.tables.validation import NewTask
from codefleet.errors import StoreUnavailable
from codefleet.models import AgentStatus, TaskStatus
from codefleet.paths import TreeRoot

T0 = datetime(2026, 7, 31, 18, 0, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


class DiskFills:
    """The store's connection, except that COMMIT fails like a full disk while `full` is set."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        self.full = False
        self.commits_left: int | None = None  # the disk fills after this many more COMMITs

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        if sql.strip().upper() == "COMMIT":
            if self.commits_left is not None:
                self.full = self.commits_left <= 0
                self.commits_left -= 1
            if self.full:
                raise sqlite3.OperationalError("database or disk is full")
        return self.db.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.db, name)


class Harness:
    def __init__(self, db: Path, tree: Path) -> None:
        self.db, self.tree, self.clock = db, tree, Clock()
        self.engine = self.open()

    def open(self) -> Engine:
        store = Store(self.db)
        self.disk = DiskFills(store._db)
        store._db = self.disk  # type: ignore[assignment]
        root = TreeRoot(self.tree, protected=[self.db])
        return Engine(store, root, EngineConfig(stale_after=20.0), clock=self.clock)

    def restart(self) -> Engine:
        self.engine.store.close()
        self.engine = self.open()
        return self.engine

    def register(self, name: str) -> tuple[str, int]:
        answer = self.engine.arrivals.register(name, str(self.tree), 4242)
        return str(answer.agent_id), int(answer.epoch)

    def committed(self, sql: str) -> list[tuple[Any, ...]]:
        """Read through a second connection: only what was committed is visible."""
        with sqlite3.connect(self.db) as other:
            return other.execute(sql).fetchall()


@pytest.fixture
def harness(tmp_path: Path, workdir: Path) -> Iterator[Harness]:
    made = Harness(tmp_path / "fleet.sqlite", workdir)
    yield made
    made.engine.store.close()


def _running(h: Harness, task_id: str = "T", name: str = "runner-1") -> tuple[str, int]:
    h.engine.operator.create_tasks([NewTask(task_id, id=task_id, description="d")])
    agent, epoch = h.register(name)
    h.engine.ticks.tick()
    h.engine.runner.start(task_id, agent, epoch)
    return agent, epoch


def test_a_grant_whose_commit_fails_is_refused_and_never_held_in_memory(harness: Harness) -> None:
    agent, epoch = _running(harness)
    harness.disk.full = True

    with pytest.raises(StoreUnavailable, match="disk is full"):
        harness.engine.runner.acquire(agent, epoch, "T", ["a.py"], "Write")

    assert harness.engine.leases.holders == {}
    assert harness.committed("SELECT COUNT(*) FROM file_leases") == [(0,)]
    assert harness.committed("SELECT COUNT(*) FROM preimages") == [(0,)]
    harness.disk.full = False  # space is back: the server works again
    answer = harness.engine.runner.acquire(agent, epoch, "T", ["a.py"], "Write")
    assert answer.allowed
    assert harness.committed("SELECT path, task_id FROM file_leases") == [("a.py", "T")]
    assert harness.committed("SELECT COUNT(*) FROM preimages") == [(1,)]


def test_a_report_whose_commit_fails_changes_nothing_and_is_applied_when_retried(
    harness: Harness,
) -> None:
    agent, epoch = _running(harness)
    harness.engine.runner.acquire(agent, epoch, "T", ["a.py"], "Write")
    harness.disk.full = True

    with pytest.raises(StoreUnavailable):
        harness.engine.outcomes.complete("T", agent, epoch, AttemptReport(attempt=1, ok=True))

    assert harness.engine.tasks.index.in_flight["T"].status is TaskStatus.RUNNING
    assert harness.engine.agents.by_id[agent].status is AgentStatus.BUSY
    assert harness.engine.leases.holders == {"a.py": (agent, "T")}
    harness.disk.full = False
    answer = harness.engine.outcomes.complete("T", agent, epoch, AttemptReport(attempt=1, ok=True))
    assert answer.status == TaskStatus.SUCCEEDED
    assert harness.committed("SELECT status FROM tasks") == [("succeeded",)]
    assert harness.committed("SELECT COUNT(*) FROM file_leases") == [(0,)]


def test_a_rolled_back_transaction_neither_unfences_an_agent_nor_resets_stale_clocks(
    harness: Harness,
) -> None:
    fenced, fenced_epoch = _running(harness, "T", "runner-1")
    harness.engine.operator.cancel("T")  # its runner is fenced until it registers again
    quiet, _ = harness.register("runner-2")
    harness.clock.advance(15)
    harness.engine.runner.heartbeat(fenced, fenced_epoch + 1)
    harness.disk.full = True
    with pytest.raises(StoreUnavailable):
        harness.engine.operator.create_tasks([NewTask("X", id="X", description="d")])
    harness.disk.full = False

    harness.clock.advance(6)  # runner-2 has been silent 21 s: stale, rollback or not
    harness.engine.operator.create_tasks([NewTask("Y", id="Y", description="d")])
    decisions = harness.engine.ticks.tick()

    assert sched.MarkOffline(quiet) in decisions
    assert not any(isinstance(d, sched.Assign) for d in decisions)  # the fenced one gets nothing
    assert harness.engine.agents.by_id[fenced].fenced


def test_a_restart_keeps_a_fenced_agent_fenced(harness: Harness) -> None:
    fenced, _ = _running(harness, "T", "runner-1")
    harness.engine.operator.cancel("T")

    engine = harness.restart()
    engine.operator.create_tasks([NewTask("Y", id="Y", description="d")])

    assert engine.agents.by_id[fenced].fenced
    assert not any(isinstance(d, sched.Assign) for d in engine.ticks.tick())
    assert harness.committed("SELECT fenced FROM agents") == [(1,)]


def test_a_restart_does_not_give_an_agent_about_to_go_stale_a_fresh_window(
    harness: Harness,
) -> None:
    quiet, _ = harness.register("runner-1")
    harness.clock.advance(15)
    harness.engine.ticks.tick()  # the running server notes it is up

    engine = harness.restart()  # at once: no downtime to credit
    harness.clock.advance(6)

    assert sched.MarkOffline(quiet) in engine.ticks.tick()


def test_a_restart_credits_every_agent_with_the_servers_downtime(harness: Harness) -> None:
    agent, _ = harness.register("runner-1")
    harness.clock.advance(5)
    harness.engine.ticks.tick()
    harness.engine.store.close()
    harness.clock.advance(60)  # the server is down for a minute: no heartbeat could land

    engine = harness.open()
    harness.engine = engine
    assert sched.MarkOffline(agent) not in engine.ticks.tick()
    harness.clock.advance(16)  # 21 s of silence the server could have heard
    assert sched.MarkOffline(agent) in engine.ticks.tick()


def test_a_restore_whose_release_cannot_commit_stays_held_and_the_next_tick_finishes_it(
    harness: Harness,
) -> None:
    agent, epoch = _running(harness)
    harness.engine.runner.acquire(agent, epoch, "T", ["a.py"], "Write")
    (harness.tree / "a.py").write_text("edited\n")
    harness.disk.commits_left = 1  # the report commits; the release after the restore cannot

    answer = harness.engine.outcomes.complete(
        "T", agent, epoch, AttemptReport(attempt=1, ok=False, error="x")
    )

    assert answer.status == TaskStatus.PENDING
    assert (harness.tree / "a.py").read_text() == "A = 1\n"
    assert harness.engine.leases.holders == {
        "a.py": (agent, "T")
    }  # held until the release is stored
    assert harness.committed("SELECT path FROM file_leases") == [("a.py",)]
    harness.clock.advance(3)  # past its backoff, with its runner idle: still not handed out
    with pytest.raises(StoreUnavailable):
        harness.engine.ticks.tick()
    assert harness.engine.tasks.index.live["T"].status is TaskStatus.PENDING
    harness.disk.commits_left = None
    harness.disk.full = False
    harness.engine.ticks.tick()
    assert harness.engine.leases.holders == {}
    assert harness.committed("SELECT COUNT(*) FROM file_leases") == [(0,)]
