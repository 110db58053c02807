"""Every read says a task is `runnable` exactly when the engine's live index would assign it.

The engine counts only *charged* attempts against `max_attempts` (a usage
limit's attempt is not charged); the reads once used `attempts < max_attempts`
and said `runnable: false` for a task the next tick assigned. The rule is now
one function (`coord.policy.readiness`); these tests hold every read to the live
index's `place_pending` answer: after a rate-limited last attempt over the
real engine, and over seeded random walks and random task states.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import test_engine
import test_projection
from test_engine import T0, Fleet, assigned

from codefleet.coord.engineview import EngineReads
from codefleet.coord.tables.liveindex import LiveIndex, LiveTask
from codefleet.models import ErrorKind, TaskStatus, to_iso
from codefleet.readmodel.readapi import Reads
from codefleet.readmodel.wirerows import decorate

make_fleet = test_engine.make_fleet  # the engine harness's fixtures
fleet = test_engine.fleet

LIMITED = {"ok": False, "error_kind": ErrorKind.RATE_LIMITED, "error": "HTTP 429"}
EVERY = 1_000_000


def reads_of(fleet: Fleet) -> Reads:
    return Reads(EngineReads(fleet.engine), stale_after=10_000)


def runnable_by_read(reads: Reads, fleet: Fleet) -> dict[str, dict[str, bool]]:
    """Each read's `runnable` per task: `GET /tasks`, `GET /tasks/{id}`, `/state` (projection)."""
    listed = {t["id"]: t["runnable"] for t in reads.tasks(None, EVERY, 0)}
    one = {task_id: reads.task(task_id)["runnable"] for task_id in listed}
    state = json.loads(b"".join(asyncio.run(reads.state_json())))
    projected = {t["id"]: t["runnable"] for t in state["tasks"]}
    return {"GET /tasks": listed, "GET /tasks/{id}": one, "GET /state": projected}


def index_answer(fleet: Fleet, task_id: str) -> bool:
    """Would the live index assign the task now: `place_pending` on a copy, then due backoffs."""
    live = fleet.engine.tasks.index.live.get(task_id)
    if live is None or live.status is not TaskStatus.PENDING:
        return False
    copy = LiveTask(
        live.id,
        live.priority,
        live.scope,
        live.status,
        live.attempts,
        live.max_attempts,
        live.created_at,
        backoff_until=live.backoff_until,
        uncharged=live.uncharged,
        unmet=live.unmet,
    )
    index = LiveIndex(live={task_id: copy}, status={task_id: copy.status})
    index.place_pending(copy)
    index.promote_backoff(fleet.clock())
    return copy.ready_key is not None


def test_after_a_rate_limited_last_attempt_every_read_says_runnable_and_the_next_tick_assigns(
    fleet: Fleet,
) -> None:
    fleet.add("T1", max_attempts=1)
    agent = fleet.register("runner-1")
    reads = reads_of(fleet)
    fleet.run("T1", **LIMITED, retry_after_s=10)
    fleet.clock.advance(10)  # the fleet's pause ran out

    answers = runnable_by_read(reads, fleet)

    assert answers == {read: {"T1": True} for read in answers}
    assert assigned(fleet.tick()) == [("T1", agent)]
    reads.close()


class LimitedWalk(test_projection.Walk):
    """The projection's random walk, with usage-limited attempts among the outcomes."""

    def finish(self) -> None:
        task_id = self._pick({TaskStatus.ASSIGNED, TaskStatus.RUNNING})
        if task_id is not None and self.rng.random() < 0.3:
            self.fleet.finish(task_id, **LIMITED, retry_after_s=self.rng.choice([1, 5]))
        else:
            super().finish()


def test_over_random_walks_each_read_agrees_with_the_live_index(
    make_fleet: Callable[..., Fleet],
) -> None:
    limited = 0
    for seed in range(4):
        rng = random.Random(seed)
        fleet = make_fleet(backoff_base=10, max_attempts=2, stale_after=10_000, task_timeout=10_000)
        for name in ("runner-1", "runner-2", "runner-3"):
            fleet.register(name)
        reads = reads_of(fleet)
        walk = LimitedWalk(fleet, rng)
        for _ in range(150):
            walk.step()
            if rng.random() < 0.25:
                _assert_reads_agree(reads, fleet)
        _assert_reads_agree(reads, fleet)
        limited += sum(1 for e in fleet.events() if e["payload"].get("charged") is False)
        reads.close()
    assert limited, "the walks should have met usage-limited attempts"


def _assert_reads_agree(reads: Reads, fleet: Fleet) -> None:
    for read, answers in runnable_by_read(reads, fleet).items():
        for task_id, said in answers.items():
            assert said == index_answer(fleet, task_id), (read, task_id, fleet.task(task_id))


def test_over_random_task_states_decorate_agrees_with_place_pending() -> None:
    rng = random.Random(26)
    now = T0
    for _ in range(2_000):
        max_attempts = rng.randint(1, 3)
        attempts = rng.randint(0, 5)
        task = LiveTask(
            "t",
            0,
            frozenset(),
            TaskStatus.PENDING,
            attempts,
            max_attempts,
            to_iso(T0),
            backoff_until=rng.choice(
                [None, now - timedelta(seconds=1), now, now + timedelta(seconds=1)]
            ),
            uncharged=rng.randint(0, attempts),
            unmet=rng.choice([0, 0, 1]),
        )
        row = _row_of(task)
        parents = [f"p{n}" for n in range(task.unmet)]
        said = decorate(row, parents, lambda _: False, now)["runnable"]
        index = LiveIndex(live={"t": task}, status={"t": task.status})
        index.place_pending(task)
        index.promote_backoff(now)
        assert said == (task.ready_key is not None), task


def _row_of(task: LiveTask) -> dict[str, Any]:
    return {
        "id": task.id,
        "status": task.status.value,
        "attempts": task.attempts,
        "uncharged_attempts": task.uncharged,
        "max_attempts": task.max_attempts,
        "backoff_until": to_iso(task.backoff_until) if task.backoff_until else None,
    }
