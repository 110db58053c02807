"""Held row updates: the rows end as if every update had run at once, in order."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from codefleet.coord.storage.store import Store

TASK_SETS = ["status", "error", "duration_ms", "input_tokens", "cost_usd", "attempts"]
AGENT_SETS = ["status", "current_task_id", "tasks_succeeded", "input_tokens", "cost_usd"]


def _store(path: Path) -> Store:
    store = Store(path)
    with store.transaction():
        for n in range(2):
            store.insert_tasks(
                [
                    {
                        "id": f"t{n}",
                        "seq": n + 1,
                        "title": "t",
                        "description": "",
                        "status": "pending",
                        "priority": 3,
                        "file_scope": [],
                        "max_attempts": 3,
                        "created_at": "x",
                        "updated_at": "x",
                    }
                ],
                [],
            )
            store.insert_agent(
                {
                    "id": f"a{n}",
                    "name": f"a{n}",
                    "status": "idle",
                    "epoch": 1,
                    "workdir": "w",
                    "pid": None,
                    "host": None,
                    "idle_since": "x",
                    "registered_at": "x",
                    "last_heartbeat_at": "x",
                    "updated_at": "x",
                }
            )
    return store


def _value(rng: random.Random, column: str) -> Any:
    if column in ("status", "error", "current_task_id"):
        return rng.choice(["idle", "busy", "pending", None]) if column != "status" else "idle"
    return rng.randint(0, 9) + (0.5 if column == "cost_usd" else 0)


def _step(store: Store, rng: random.Random) -> None:
    n = rng.randint(0, 1)
    match rng.randint(0, 2):
        case 0:
            cols = rng.sample(TASK_SETS, rng.randint(1, 3))
            store.update_task(f"t{n}", **{c: _value(rng, c) for c in cols})
        case 1:
            cols = rng.sample(AGENT_SETS, rng.randint(1, 3))
            store.update_agent(f"a{n}", **{c: _value(rng, c) for c in cols})
        case _:
            used = rng.randint(0, 9), rng.randint(0, 9), rng.randint(0, 9) / 4
            store.add_usage(f"t{n}", f"a{n}", *used, succeeded=rng.random() < 0.5)


@pytest.mark.parametrize("seed", range(30))
def test_held_updates_end_as_the_same_updates_run_one_by_one(tmp_path: Path, seed: int):
    held, each = _store(tmp_path / "held.sqlite"), _store(tmp_path / "each.sqlite")
    steps = random.Random(seed).randint(1, 12)
    for store, at_once in ((held, False), (each, True)):
        rng = random.Random(seed)
        with store.transaction():
            for _ in range(steps):
                _step(store, rng)
                if at_once:
                    store.last_event_id()  # any statement runs what is held first
    tables = ("SELECT * FROM tasks ORDER BY id", "SELECT * FROM agents ORDER BY id")
    for sql in tables:
        assert [tuple(r) for r in held._db.execute(sql)] == [
            tuple(r) for r in each._db.execute(sql)
        ]


def test_a_rolled_back_transaction_runs_nothing_it_held(tmp_path: Path):
    store = _store(tmp_path / "s.sqlite")
    with pytest.raises(RuntimeError), store.transaction():
        store.update_task("t0", status="running")
        raise RuntimeError("the transition failed")
    assert store.task("t0")["status"] == "pending"  # type: ignore[index]
    with store.transaction():
        store.update_task("t1", error="kept")
    assert store.task("t1")["error"] == "kept"  # type: ignore[index]
