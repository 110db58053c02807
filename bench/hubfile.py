"""File leases vs part leases: N tasks, each changing its own function of one hub module.

The hub is `hub.py` with one function per task; task i reads it, thinks (a
sleep), edits `route_i`, thinks again and edits it once more: two writes per
task, none declared in a scope, so the scheduler runs them side by side and the
lease decides. The same graph runs on a fresh tree and server per granularity
(`lease_granularity` file, then part), N runners for N tasks, in process
(`fleet.local.run_fleet`) with the scripted executor, through the real gate,
server and store. Every run checks that the hub ends with every task's change.

Reported per run: makespan (s), attempts, vetoes (`lease_denied`), edits rolled
back (`file_restored`).

Run: `uv run python -m bench.hubfile --tasks 2 4 8`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.scripted_run import play
from codefleet.config import Settings
from codefleet.models import Granularity

THINK_S = 0.3


@dataclass(frozen=True, slots=True)
class Figures:
    tasks: int
    granularity: str
    makespan_s: float
    attempts: int
    vetoes: int
    rolled_back: int


def hub(tasks: int) -> str:
    body = "".join(f'\n\ndef route_{i}(request):\n    return "r{i}"\n' for i in range(tasks))
    return '"""The hub every task edits."""\n\nimport os\n' + body


def workload(tasks: int, think_s: float = THINK_S) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    graph, script = [], {}
    for i in range(tasks):
        task_id = f"T{i:02d}"
        graph.append({"id": task_id, "title": task_id, "description": f"change route_{i}"})
        script[task_id] = [
            {"read": "hub.py"},
            {"sleep": think_s},
            {"edit": {"path": "hub.py", "old": f'"r{i}"', "new": f'"r{i}-changed"'}},
            {"sleep": think_s},
            {"edit": {"path": "hub.py", "old": f'"r{i}-changed"', "new": f'"r{i}-done"'}},
        ]
    return graph, script


async def one_run(tasks: int, granularity: Granularity) -> Figures:
    graph, raw = workload(tasks)
    with tempfile.TemporaryDirectory(prefix="cf-hub-") as scratch:
        base = Path(scratch)
        tree = base / "tree"
        tree.mkdir()
        (tree / "hub.py").write_text(hub(tasks))
        settings = Settings(
            _env_file=None, host="127.0.0.1", port=0, workdir=tree, db=base / "db.sqlite",  # type: ignore[call-arg]
            run_dir=base / "runs", tick_interval=0.05, max_attempts=50, backoff_base=0.0,
            lease_granularity=granularity,
        )  # fmt: skip
        played = await play(settings, graph, raw, runners=tasks)
        text = (tree / "hub.py").read_text()
    missing = [i for i in range(tasks) if f'"r{i}-done"' not in text]
    done = played.tasks
    if missing or any(t["status"] != "succeeded" for t in done):
        raise SystemExit(f"{granularity} x{tasks}: changes lost or tasks failed: {missing}")
    kinds = Counter(e["type"] for e in played.events)
    return Figures(
        tasks=tasks,
        granularity=granularity.value,
        makespan_s=round(played.makespan_s, 2),
        attempts=sum(int(t["attempts"]) for t in done),
        vetoes=kinds["lease_denied"],
        rolled_back=kinds["file_restored"],
    )


def table(rows: list[Figures]) -> str:
    lines = ["| tasks | leases | makespan s | attempts | vetoes | rolled back |", "|---" * 6 + "|"]
    for r in rows:
        lines.append(
            f"| {r.tasks} | {r.granularity} | {r.makespan_s} | {r.attempts} | {r.vetoes} "
            f"| {r.rolled_back} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, nargs="+", default=[2, 4, 8])
    args = parser.parse_args(argv)
    rows: list[Figures] = []
    for tasks in args.tasks:
        for granularity in (Granularity.FILE, Granularity.PART):
            rows.append(asyncio.run(one_run(tasks, granularity)))
            print(rows[-1], file=sys.stderr, flush=True)
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
