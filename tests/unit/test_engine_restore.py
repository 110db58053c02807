"""Take-backs survive a crash in the middle of their file I/O, and one bad file stays one task's.

The engine over a real SQLite file and a real scratch tree, with an injected
clock and no event loop. A "crash" is a `BaseException` raised from inside the
file I/O (after some files were already put back): whatever the engine had not
committed by then is gone, exactly as when the process is killed; the test
then "restarts" by opening a new `Store` and `Engine` on the same file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from codefleet.attempt import AttemptReport
from codefleet.coord.engine import Engine, EngineConfig
from codefleet.coord.storage.store import Store
from codefleet.coord.tables import preimages as engine_files
from codefleet.coord.tables.validation import NewTask
from codefleet.errors import InvalidState, StaleEpoch
from codefleet.models import AgentStatus, ErrorKind, EventType, TaskStatus
from codefleet.paths import TreeRoot
from codefleet.rollback import PreImage

T0 = datetime(2026, 7, 31, 18, 0, 0, tzinfo=UTC)
FILES = [f"src/m{n:02d}.py" for n in range(30)]


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


class ServerKilled(BaseException):
    """The process dies here: nothing after this point runs, nothing uncommitted survives."""


class Harness:
    def __init__(self, db: Path, tree: Path, clock: Clock) -> None:
        self.db, self.tree, self.clock = db, tree, clock
        self.engine = self.open()

    def open(self) -> Engine:
        store = Store(self.db)
        root = TreeRoot(self.tree, protected=[self.db])
        return Engine(store, root, EngineConfig(stale_after=20.0), clock=self.clock)

    def restart(self) -> Engine:
        self.engine.store.close()
        self.engine = self.open()
        return self.engine

    def register(self, name: str) -> tuple[str, int]:
        answer = self.engine.arrivals.register(name, str(self.tree), 4242)
        return str(answer.agent_id), int(answer.epoch)

    def events(self, kind: EventType) -> list[dict[str, Any]]:
        return self.engine.store.events(0, 100_000, kind.value)


@pytest.fixture
def harness(tmp_path: Path, workdir: Path) -> Iterator[Harness]:
    for rel in FILES:
        (workdir / rel).parent.mkdir(parents=True, exist_ok=True)
        (workdir / rel).write_text(f"# {rel}: original\n")
    made = Harness(tmp_path / "fleet.sqlite", workdir, Clock())
    yield made
    made.engine.store.close()


def _running_with_edits(h: Harness, task_id: str = "T") -> tuple[str, int]:
    """A runner leased and edited every file of FILES for `task_id`, which is running."""
    h.engine.operator.create_tasks([NewTask(task_id, id=task_id, description="edit them all")])
    agent, epoch = h.register("runner-1")
    h.engine.ticks.tick()
    h.engine.runner.start(task_id, agent, epoch)
    for rel in FILES:
        assert h.engine.runner.acquire(agent, epoch, task_id, [rel], "Edit").allowed
        (h.tree / rel).write_text(f"# {rel}: edited by {task_id}\n")
    return agent, epoch


def _crash_after(count: int) -> Callable[[Path, PreImage], bool]:
    real = engine_files.restore
    done: list[str] = []

    def restore(root: Path, image: PreImage) -> bool:
        if len(done) == count:
            raise ServerKilled(f"killed after restoring {count} files")
        done.append(image.path)
        return real(root, image)

    return restore


def _texts(h: Harness) -> list[str]:
    return [(h.tree / rel).read_text() for rel in FILES]


def test_a_server_killed_mid_take_back_never_lets_the_fenced_runner_succeed_with_lost_edits(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent, epoch = _running_with_edits(harness)
    harness.clock.advance(21)  # the runner stopped heartbeating: stale, its work is taken back
    monkeypatch.setattr(engine_files, "restore", _crash_after(10))

    with pytest.raises(ServerKilled):
        harness.engine.ticks.tick()
    monkeypatch.undo()
    engine = harness.restart()

    # The runner that was being taken back carries on as if nothing happened: it must be
    # fenced, or its task "succeeds" with the files the crash had already put back.
    with pytest.raises(StaleEpoch):
        engine.outcomes.complete("T", agent, epoch, AttemptReport(attempt=1, ok=True))
    with pytest.raises(StaleEpoch):
        engine.runner.heartbeat(agent, epoch)
    # The restart finished the take-back before serving anyone: every file is back,
    # every lease released, the task waiting for its next attempt.
    assert _texts(harness) == [f"# {rel}: original\n" for rel in FILES]
    assert engine.store.leases() == []
    assert engine.store.task("T")["status"] == TaskStatus.PENDING  # type: ignore[index]


def test_a_failed_report_commits_its_restore_intent_before_touching_a_file(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent, epoch = _running_with_edits(harness)
    monkeypatch.setattr(engine_files, "restore", _crash_after(5))

    with pytest.raises(ServerKilled):
        harness.engine.outcomes.complete(
            "T", agent, epoch, AttemptReport(attempt=1, ok=False, error="boom")
        )
    monkeypatch.undo()
    engine = harness.restart()

    assert _texts(harness) == [f"# {rel}: original\n" for rel in FILES]
    assert engine.store.leases() == []
    assert engine.store.task("T")["status"] == TaskStatus.PENDING  # type: ignore[index]
    requested = harness.events(EventType.RESTORE_REQUESTED)
    assert [e["payload"]["paths"] for e in requested] == [sorted(FILES)]


# -- one unrestorable file ------------------------------------------------------------------


def test_an_unrestorable_file_fails_only_its_task_keeps_its_lease_and_the_fleet_runs_on(
    harness: Harness,
) -> None:
    engine = harness.engine
    engine.operator.create_tasks(
        [
            NewTask("bad", id="bad", description="d", file_scope=["a.py"]),
            NewTask("child", id="child", description="d", depends_on=["bad"]),
            NewTask("other", id="other", description="d", file_scope=["pkg/b.py"]),
        ]
    )
    agent, epoch = harness.register("runner-1")
    engine.ticks.tick()
    engine.runner.start("bad", agent, epoch)
    assert engine.runner.acquire(agent, epoch, "bad", ["a.py", FILES[0]], "Edit").allowed
    (harness.tree / FILES[0]).write_text("edited\n")
    (harness.tree / "a.py").unlink()
    (harness.tree / "a.py").mkdir()  # the leased file became a directory: it cannot be restored

    answer = engine.outcomes.complete(
        "bad", agent, epoch, AttemptReport(attempt=1, ok=False, error="boom")
    )

    row = engine.store.task("bad")
    assert row is not None
    assert answer.status == TaskStatus.FAILED
    assert (row["status"], row["error_kind"]) == (TaskStatus.FAILED, ErrorKind.INFRA)
    assert "a.py" in row["error"]
    assert engine.store.task("child")["status"] == TaskStatus.BLOCKED_UPSTREAM  # type: ignore[index]
    assert [x["path"] for x in engine.store.leases()] == ["a.py"]  # never released over it
    assert (harness.tree / FILES[0]).read_text() == f"# {FILES[0]}: original\n"
    [failed] = harness.events(EventType.RESTORE_FAILED)
    assert failed["task_id"] == "bad" and failed["payload"]["path"] == "a.py"
    assert "directory" in failed["payload"]["error"]
    # the rest of the fleet keeps running: the next tick assigns the other task
    engine.ticks.tick()
    assert engine.store.task("other")["status"] == TaskStatus.ASSIGNED  # type: ignore[index]
    assert engine.agents.by_id[agent].status is AgentStatus.BUSY


def test_a_task_with_an_unrestorable_file_is_retried_only_once_the_file_can_be_restored(
    harness: Harness,
) -> None:
    engine = harness.engine
    engine.operator.create_tasks([NewTask("bad", id="bad", description="d", max_attempts=1)])
    agent, epoch = harness.register("runner-1")
    engine.ticks.tick()
    engine.runner.start("bad", agent, epoch)
    engine.runner.acquire(agent, epoch, "bad", ["pkg/b.py"], "Edit")
    (harness.tree / "pkg" / "b.py").unlink()
    (harness.tree / "pkg").rmdir()
    (harness.tree / "pkg").write_text("a file where a directory was\n")  # a path component
    engine.outcomes.complete("bad", agent, epoch, AttemptReport(attempt=1, ok=False, error="boom"))

    with pytest.raises(InvalidState, match=r"pkg/b\.py"):
        engine.operator.retry("bad")
    (harness.tree / "pkg").unlink()  # the operator repairs the tree
    engine.operator.retry("bad")

    assert (harness.tree / "pkg" / "b.py").read_text() == "B = 2\n"
    assert engine.store.leases() == []
    assert engine.store.task("bad")["status"] == TaskStatus.PENDING  # type: ignore[index]


def test_a_restart_retries_an_unrestorable_file_and_releases_it_once_restored(
    harness: Harness,
) -> None:
    engine = harness.engine
    engine.operator.create_tasks([NewTask("bad", id="bad", description="d")])
    agent, epoch = harness.register("runner-1")
    engine.ticks.tick()
    engine.runner.start("bad", agent, epoch)
    engine.runner.acquire(agent, epoch, "bad", ["a.py"], "Edit")
    (harness.tree / "a.py").unlink()
    (harness.tree / "a.py").mkdir()
    engine.outcomes.complete("bad", agent, epoch, AttemptReport(attempt=1, ok=False, error="boom"))
    assert [x["path"] for x in engine.store.leases()] == ["a.py"]

    (harness.tree / "a.py").rmdir()
    engine = harness.restart()

    assert engine.store.leases() == []
    assert (harness.tree / "a.py").read_text() == "A = 1\n"
    assert engine.leases.holders == {}
