"""The projection's `/state` tasks and `/conflicts` equal a full recomputation, byte for byte.

Same harness as `test_engine.py` (a real SQLite file, a scratch tree, an
injected clock). After every kind of transition — a graph load with
dependencies, assignment, start, a grant and a denial, success, a veto, a
retryable error with backoff, exhaustion and the blocked closure, cancel,
retry, a rolled-back transaction, a reset, a restart — the projection's
answer is compared with one recomputed from scratch on a fresh read snapshot,
as `/state` and `/conflicts` were computed before the projection existed.
Seeded random walks over the same transitions do the same, reading at random
moments so that dirty sets of many commits accumulate between reads; each walk
after the first starts from the database the last one left (a restart).
"""

from __future__ import annotations

import ast
import inspect
import random
import re
from collections.abc import Callable
from contextlib import suppress
from datetime import datetime
from typing import Any

import pytest
import test_engine
from test_engine import Fleet

from codefleet.coord.engineview import EngineReads
from codefleet.coord.storage import queries
from codefleet.coord.storage.store import Store
from codefleet.errors import DomainError
from codefleet.models import ErrorKind, EventType, TaskStatus
from codefleet.readmodel.projection import Projection
from codefleet.readmodel.wirerows import decorate, encode

make_fleet = test_engine.make_fleet  # the engine harness's fixtures
fleet = test_engine.fleet

EVERY = 1_000_000


def attach(fleet: Fleet) -> Projection:
    """A projection fed by the fleet's engine, as the server's `Reads` makes it."""
    engine = EngineReads(fleet.engine)
    projection = Projection(engine.open_reader, engine.parents)
    engine.feed(projection.committed)
    return projection


def recomputed(fleet: Fleet, now: datetime) -> dict[str, Any]:
    """`/state`'s recorded part and `/conflicts`, from every row of a fresh snapshot."""
    reader = Store(fleet.db_path, read_only=True)
    try:
        with reader.read_transaction():
            rows = reader.tasks(None, EVERY, 0)
            counts = reader.task_counts()
            tokens_in, tokens_out, cost = reader.usage_totals()
            last = reader.last_event_id()
            denials = reader.events(0, EVERY, EventType.LEASE_DENIED)
    finally:
        reader.close()
    done = {r["id"] for r in rows if r["status"] == TaskStatus.SUCCEEDED}
    index = fleet.engine.tasks.index
    tasks = [
        decorate(t, list(index.parents.get(t["id"], ())), done.__contains__, now) for t in rows
    ]
    conflicts = [
        {
            "event_id": e["id"],
            "at": e["at"],
            "path": e["payload"].get("path"),
            "task_id": e["task_id"],
            "agent_id": e["agent_id"],
            "agent_name": e["payload"].get("requester_name"),
            "holder_task_id": e["payload"].get("holder_task_id"),
            "holder_agent_id": e["payload"].get("holder_agent_id"),
            "holder_agent_name": e["payload"].get("holder_agent_name"),
            "resolved": e["task_id"] in done,
        }
        for e in denials
    ]
    counters = {
        "tasks": counts,
        "input_tokens": tokens_in,
        "output_tokens": tokens_out,
        "cost_usd": round(cost, 6),
    }
    return {"tasks": tasks, "counters": counters, "last_event_id": last, "conflicts": conflicts}


def assert_current(projection: Projection, fleet: Fleet) -> None:
    """Each of the projection's answers equals the recomputation, byte for byte."""
    now = fleet.clock()
    expected = recomputed(fleet, now)
    state = projection.state(projection.cut(), now)
    assert state.tasks == b",".join(encode(t) for t in expected["tasks"])
    assert state.counters == expected["counters"]
    assert state.last_event_id == expected["last_event_id"]
    every = expected["conflicts"]
    for resolved in (None, True, False):
        want = [c for c in every if resolved is None or c["resolved"] is resolved]
        answer = projection.conflicts(projection.cut(), now, resolved)
        assert answer == encode({"conflicts": want})


def test_after_every_kind_of_transition_the_projection_equals_the_recomputation(
    make_fleet: Callable[..., Fleet],
) -> None:
    fleet = make_fleet(backoff_base=30, max_attempts=2, stale_after=10_000, task_timeout=10_000)
    projection = attach(fleet)
    assert_current(projection, fleet)  # an empty database
    fleet.add("H", "a.py", priority=5)
    fleet.add("R", "b.py", priority=4)
    fleet.add("child", deps=("H",))
    fleet.add("grandchild", deps=("child", "R"))
    fleet.add("doomed", priority=1)
    fleet.add("below", deps=("doomed",))
    assert_current(projection, fleet)
    for name in ("runner-1", "runner-2", "runner-3"):
        fleet.register(name)
    fleet.tick()
    assert_current(projection, fleet)  # assigned
    fleet.start("H")
    fleet.start("R")
    fleet.acquire("H", "a.py")
    assert not fleet.acquire("R", "a.py").allowed
    assert_current(projection, fleet)  # running, a grant and a denial
    fleet.finish("R", ok=False, error_kind=ErrorKind.VETO, blocked_on_path="a.py")
    assert_current(projection, fleet)  # a veto: pending again, scope widened
    fleet.finish("H", input_tokens=7, output_tokens=3, cost_usd=0.125)
    assert_current(projection, fleet)  # success: the child unblocked, R's denial resolved later
    fleet.run("doomed", ok=False, error_kind=ErrorKind.AGENT_ERROR)
    assert_current(projection, fleet)  # a retryable error: backing off, not runnable yet
    fleet.clock.advance(31)
    assert_current(projection, fleet)  # its backoff ran out: runnable with no write at all
    fleet.run("doomed", ok=False, error_kind=ErrorKind.AGENT_ERROR)
    assert_current(projection, fleet)  # exhausted: failed, `below` blocked upstream
    fleet.engine.operator.retry("doomed")
    assert_current(projection, fleet)  # retried: `below` pending again
    fleet.engine.operator.cancel("doomed")
    assert_current(projection, fleet)
    fleet.run("R", cost_usd=0.5)
    assert_current(projection, fleet)  # the vetoed task succeeded: its conflict is resolved
    with pytest.raises(RuntimeError), fleet.engine.store.transaction():
        fleet.engine.store.update_task("child", status=TaskStatus.FAILED)
        raise RuntimeError("rolled back")
    assert_current(projection, fleet)
    fleet.engine.reset()
    assert_current(projection, fleet)  # everything gone
    fleet.add("again", deps=())
    assert_current(projection, fleet)


def test_a_restarted_server_projects_what_the_last_one_left(
    make_fleet: Callable[..., Fleet],
) -> None:
    first = make_fleet()
    attach(first)
    first.add("H", "a.py")
    first.add("R", "b.py")
    first.register("runner-1")
    first.register("runner-2")
    first.tick()
    first.start("H")
    first.start("R")
    first.acquire("H", "a.py")
    first.acquire("R", "a.py")
    first.finish("H")
    second = make_fleet()
    assert_current(attach(second), second)


def test_a_read_that_failed_after_its_cut_makes_the_next_one_rebuild(fleet: Fleet) -> None:
    projection = attach(fleet)
    fleet.add("A")
    assert_current(projection, fleet)
    fleet.add("B", deps=("A",))
    cut = projection.cut()
    cut.snapshot.close()
    projection.lost(cut)  # the read that took B's change never ran

    assert_current(projection, fleet)


# -- a random walk over the transitions ----------------------------------------------------

PATHS = ("a.py", "b.py", "c.py")


class Walk:
    """Random transitions on one fleet; refusals (a stale report, a bad state) are skipped."""

    def __init__(self, fleet: Fleet, rng: random.Random) -> None:
        self.fleet, self.rng, self.made = fleet, rng, 0

    def step(self) -> None:
        weighed = [
            (self.add, 3),
            (self.tick, 3),
            (self.start, 2),
            (self.acquire, 4),
            (self.finish, 2),
            (self.cancel, 1),
            (self.retry, 1),
            (self.wait, 1),
        ]
        action = self.rng.choices([a for a, _ in weighed], [w for _, w in weighed])[0]
        with suppress(DomainError):  # a refusal: the walk asked what the state does not allow
            action()

    def _pick(self, statuses: set[TaskStatus]) -> str | None:
        ids = [t for t, s in self.fleet.engine.tasks.index.status.items() if s in statuses]
        return self.rng.choice(sorted(ids)) if ids else None

    def add(self) -> None:
        existing = sorted(self.fleet.engine.tasks.index.status)
        wanted = self.rng.choice([0, 0, 0, 1, 2])
        deps = tuple(self.rng.sample(existing, min(len(existing), wanted)))
        self.made += 1
        self.fleet.add(f"t{self.made}", self.rng.choice(PATHS), deps=deps)

    def tick(self) -> None:
        self.fleet.tick()

    def start(self) -> None:
        task_id = self._pick({TaskStatus.ASSIGNED})
        if task_id:
            self.fleet.start(task_id)

    def acquire(self) -> None:
        task_id = self._pick({TaskStatus.ASSIGNED, TaskStatus.RUNNING})
        if task_id is None:
            return
        store = self.fleet.engine.store
        held = [row["path"] for row in store.leases() if row["task_id"] != task_id]
        path = self.rng.choice(held) if held and self.rng.random() < 0.6 else None
        self.fleet.acquire(task_id, path or self.rng.choice(PATHS))

    def finish(self) -> None:
        task_id = self._pick({TaskStatus.ASSIGNED, TaskStatus.RUNNING})
        if task_id is None:
            return
        outcome = self.rng.choice(["ok", "ok", "ok", "veto", "veto", "error", "budget"])
        if outcome == "ok":
            self.fleet.finish(task_id, cost_usd=self.rng.choice([0.1, 0.25]), input_tokens=3)
        elif outcome == "veto":
            path = self.rng.choice(PATHS)
            self.fleet.finish(task_id, ok=False, error_kind=ErrorKind.VETO, blocked_on_path=path)
        else:
            kind = ErrorKind.AGENT_ERROR if outcome == "error" else ErrorKind.BUDGET
            self.fleet.finish(task_id, ok=False, error_kind=kind)

    def cancel(self) -> None:
        task_id = self._pick({TaskStatus.PENDING, TaskStatus.ASSIGNED, TaskStatus.RUNNING})
        if task_id:
            self.fleet.engine.operator.cancel(task_id)

    def retry(self) -> None:
        task_id = self._pick({TaskStatus.FAILED, TaskStatus.CANCELLED})
        if task_id:
            self.fleet.engine.operator.retry(task_id)

    def wait(self) -> None:
        self.fleet.clock.advance(self.rng.choice([1, 5, 20]))


def test_random_walks_of_transitions_keep_the_projection_equal_to_the_recomputation(
    make_fleet: Callable[..., Fleet],
) -> None:
    denied = sum(_walk(make_fleet, seed) for seed in range(6))
    assert denied, "the walks should have met denials"


def _walk(make_fleet: Callable[..., Fleet], seed: int) -> int:
    """One seeded walk with a reset two-thirds in; the denials it met before the reset."""
    rng = random.Random(seed)
    fleet = make_fleet(backoff_base=10, max_attempts=2, stale_after=10_000, task_timeout=10_000)
    projection = attach(fleet)
    for name in ("runner-1", "runner-2", "runner-3"):
        fleet.register(name)
    walk = Walk(fleet, rng)
    denied = 0
    for step in range(300):
        walk.step()
        if step == 200:
            denied = len(fleet.events(EventType.LEASE_DENIED))
            fleet.engine.reset()
            for name in ("runner-4", "runner-5"):
                fleet.register(name)
        if rng.random() < 0.3:
            assert_current(projection, fleet)
    assert_current(projection, fleet)
    return denied


# -- the rule the projection rests on ---------------------------------------------------------

# SQL that writes the table, or a held row update of it (`Store._hold`, run as one UPDATE later)
TASK_WRITE = re.compile(
    r"\b(UPDATE|INSERT INTO|INSERT OR \w+ INTO|DELETE FROM)\s+tasks\b|\b_hold\(\s*\"tasks\""
)


def test_every_store_method_that_writes_a_task_row_marks_it_touched() -> None:
    """The projection learns what changed only from `Touched`: a task write that skips it goes stale."""
    writes = {
        name
        for name, value in vars(queries).items()
        if (isinstance(value, str) and TASK_WRITE.search(value))
        or (isinstance(value, tuple) and "tasks" in value)  # RESET_TABLES
    }
    writers = []
    for cls in Store.__mro__[:-1]:  # the rows, the event log, the connection (not `object`)
        source = inspect.getsource(cls)
        node = ast.parse(source).body[0]
        assert isinstance(node, ast.ClassDef), f"guard: {cls.__name__} is not a class"
        writers += _task_writers(source, node.body, writes)
    assert {"insert_tasks", "update_task", "add_usage", "reset"} <= set(writers)


def _task_writers(source: str, methods: list[ast.stmt], writes: set[str]) -> list[str]:
    """The methods among `methods` that write the tasks table; each must mark it touched."""
    writers = []
    for method in methods:
        if not isinstance(method, ast.FunctionDef):
            continue
        text = ast.get_source_segment(source, method) or ""
        named = {n.attr for n in ast.walk(method) if isinstance(n, ast.Attribute)} & writes
        if named or TASK_WRITE.search(text):
            writers.append(method.name)
            assert "self.touched.tasks" in text or "self.touched.reset" in text, (
                f"Store.{method.name} writes the tasks table without marking `touched`: "
                "the projection (and a rollback's re-read) would not know the row changed"
            )
    return writers
