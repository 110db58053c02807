"""Cost of pre-image capture on the lease path: engine.acquire with rollback on vs off.

In process, no HTTP: the difference between the two columns is what capturing
a file's pre-image (read it, store it in SQLite) adds to one first grant.

    uv run python -m bench.preimage [--files 2000] [--size 4096]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from codefleet.coord.engine import Engine, EngineConfig
from codefleet.coord.storage.store import Store
from codefleet.coord.tables.validation import NewTask
from codefleet.paths import TreeRoot


def measure(rollback: bool, files: int, size: int) -> list[float]:
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "tree"
        tree.mkdir()
        for n in range(files):
            (tree / f"f{n}.py").write_bytes(b"x" * size)
        engine = Engine(
            Store(Path(tmp) / "db.sqlite"), TreeRoot(tree), EngineConfig(rollback=rollback)
        )
        engine.operator.create_tasks([NewTask(title="t", id="t")])
        agent = engine.arrivals.register("r", str(tree), None)
        engine.ticks.tick()
        timings = []
        for n in range(files):
            started = time.perf_counter()
            answer = engine.runner.acquire(agent.agent_id, agent.epoch, "t", [f"f{n}.py"], "Edit")
            timings.append(time.perf_counter() - started)
            assert answer.allowed
        engine.store.close()
        return timings


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--size", type=int, default=4096)
    args = parser.parse_args()
    print(f"{args.files} first grants of {args.size}-byte files, engine.acquire in process")
    for rollback in (False, True):
        t = measure(rollback, args.files, args.size)
        print(
            f"rollback={'on ' if rollback else 'off'}  p50={pct(t, 0.5):.3f} ms  "
            f"p99={pct(t, 0.99):.3f} ms  mean={statistics.mean(t) * 1000:.3f} ms"
        )


if __name__ == "__main__":
    main()
