"""Graphs posted in batches: chains equal a brute-force longest chain, the index a rebuilt one."""

from __future__ import annotations

import random
from functools import cache
from typing import Any

import pytest
import test_engine
from test_engine import Fleet

from codefleet.coord.tables.liveindex import LiveIndex
from codefleet.coord.tables.validation import NewTask

make_fleet = test_engine.make_fleet  # the engine harness's fixtures
fleet = test_engine.fleet


def random_batch(
    rng: random.Random, batch: int, ids: list[str], *, priorities: bool = False
) -> list[NewTask]:
    """1-15 tasks named `b<batch>-NN`, each depending on up to 3 earlier tasks (any batch)."""
    specs: list[NewTask] = []
    for n in range(rng.randint(1, 15)):
        task_id = f"b{batch}-{n:02}"
        earlier = ids + [str(s.id) for s in specs]
        deps = rng.sample(earlier, min(len(earlier), rng.choice([0, 1, 1, 2, 3])))
        priority = {"priority": rng.randint(1, 5)} if priorities else {}
        specs.append(NewTask(task_id, id=task_id, depends_on=deps, **priority))
    return specs


@pytest.mark.parametrize("seed", range(25))
def test_chains_after_each_batch_are_the_longest_live_chain_below_each_task(
    fleet: Fleet, seed: int
):
    rng = random.Random(seed)
    ids: list[str] = []
    for batch in range(4):
        specs = random_batch(rng, batch, ids)
        fleet.engine.operator.create_tasks(specs)
        ids += [str(s.id) for s in specs]
        index = fleet.engine.tasks.index
        assert {t: index.live[t].chain for t in ids} == longest_chains(fleet, ids), seed


def longest_chains(fleet: Fleet, ids: list[str]) -> dict[str, int]:
    index = fleet.engine.tasks.index

    @cache
    def longest(task_id: str) -> int:
        below = [longest(c) for c in index.children.get(task_id, ()) if c in index.live]
        return 1 + max(below, default=0)

    return {t: longest(t) for t in ids}


def index_state(index: LiveIndex) -> dict[str, Any]:
    """Everything the scheduler reads from the index, in comparable form."""
    return {
        "status": dict(index.status),
        "ready": list(index.ready),
        "backoff": sorted(index.backoff),
        "exhausted": set(index.exhausted),
        "in_flight": set(index.in_flight),
        "live": {t: (v.chain, v.unmet, v.ready_key, v.status) for t, v in index.live.items()},
        "parents": {t: sorted(p) for t, p in index.parents.items()},
    }


@pytest.mark.parametrize("seed", range(25))
def test_the_index_built_batch_by_batch_equals_the_index_rebuilt_from_the_rows(
    fleet: Fleet, seed: int
):
    rng = random.Random(seed)
    ids: list[str] = []
    for batch in range(5):
        specs = random_batch(rng, batch, ids, priorities=True)
        rng.shuffle(specs)  # the batch in any order, not only parents first
        fleet.engine.operator.create_tasks(specs)
        ids += [str(s.id) for s in specs]
        built = index_state(fleet.engine.tasks.index)
        fleet.engine.tasks.load()
        assert built == index_state(fleet.engine.tasks.index), (seed, batch)
        live = sorted(fleet.engine.tasks.index.live)
        if live and rng.random() < 0.5:  # a dead parent: later children are born blocked
            fleet.engine.operator.cancel(rng.choice(live))
            fleet.engine.tasks.load()  # a cancel leaves its ancestors' chains as they were
