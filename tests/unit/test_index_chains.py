"""Critical-path lengths after graphs posted in batches equal a brute-force longest chain."""

from __future__ import annotations

import random
from functools import cache

import pytest
import test_engine
from test_engine import Fleet

from codefleet.coord.graph import NewTask

make_fleet = test_engine.make_fleet  # the engine harness's fixtures
fleet = test_engine.fleet


@pytest.mark.parametrize("seed", range(25))
def test_chains_after_each_batch_are_the_longest_live_chain_below_each_task(
    fleet: Fleet, seed: int
):
    rng = random.Random(seed)
    ids: list[str] = []
    for batch in range(4):
        specs = []
        for n in range(rng.randint(1, 15)):
            task_id = f"b{batch}-{n:02}"
            earlier = ids + [s.id for s in specs if s.id]
            deps = rng.sample(earlier, min(len(earlier), rng.choice([0, 1, 1, 2, 3])))
            specs.append(NewTask(task_id, id=task_id, depends_on=deps))
        fleet.engine.create_tasks(specs)
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
