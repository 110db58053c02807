"""File leases vs part leases: N tasks, each changing its own function of one hub module.

The hub is `hub.py` with one function per task; task i reads it, thinks (a
sleep), edits `route_i`, thinks again and edits it once more: two writes per
task, none declared in a scope, so the scheduler runs them side by side and the
lease decides. The same graph runs on a fresh tree and server per granularity
(`lease_granularity` file, then part), N runners for N tasks, in process
(`fleet.local.run_fleet`) with the scripted executor, through the real gate,
server and store. Every run checks that the hub ends with every task's change.

With `--imports`, task i first adds its own import (`import mod_i`, below
`import os`), thinks, then edits `route_i`: the hub module's import statements,
each a part of its own (decision 0165), against the one `<imports>` block they
were before (`part, one import block`: the same parts, the first run of imports
merged into one part, as `parts.python` mapped it then).

Reported per run: makespan (s), attempts, vetoes (`lease_denied`), edits rolled
back (`file_restored`).

Run: `uv run python -m bench.hubfile --tasks 2 4 8 [--imports]`.
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
from codefleet.parts import kinds
from codefleet.parts.model import Index, Part, PartKind
from codefleet.parts.python import PYTHON

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


ONE_BLOCK = "part, one import block"  # the mode of `OneImportBlock`


class OneImportBlock:
    """Python's parts as they were before decision 0165: the import statements right after
    the header are one part, `<imports>` (a bench's stand-in mapper, never the product's)."""

    def index(self, text: str | bytes) -> Index | None:
        index = PYTHON.index(text)
        if index is None:
            return None
        at = 1 if index.parts and index.parts[0].kind is PartKind.HEADER else 0
        run = at
        while run < len(index.parts) and index.parts[run].kind is PartKind.IMPORTS:
            run += 1
        if run == at:
            return index
        block = index.parts[at:run]
        merged = Part("<imports>", PartKind.IMPORTS, block[0].first, block[-1].last,
                      "".join(p.text for p in block))  # fmt: skip
        parts = [*index.parts[:at], merged, *index.parts[run:]]
        owner = [k if k <= at else max(at, k - (run - at - 1)) for k in index.owner]
        return Index(index.lines, parts, owner, index.significant)


def workload(
    tasks: int, think_s: float = THINK_S, imports: bool = False
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    graph, script = [], {}
    for i in range(tasks):
        task_id = f"T{i:02d}"
        graph.append({"id": task_id, "title": task_id, "description": f"change route_{i}"})
        first = (
            {
                "edit": {
                    "path": "hub.py",
                    "old": "import os\n",
                    "new": f"import os\nimport mod_{i}\n",
                }
            }
            if imports
            else {"edit": {"path": "hub.py", "old": f'"r{i}"', "new": f'"r{i}-changed"'}}
        )
        old = f'"r{i}"' if imports else f'"r{i}-changed"'
        script[task_id] = [
            {"read": "hub.py"},
            {"sleep": think_s},
            first,
            {"sleep": think_s},
            {"edit": {"path": "hub.py", "old": old, "new": f'"r{i}-done"'}},
        ]
    return graph, script


async def one_run(tasks: int, mode: str, imports: bool = False) -> Figures:
    """One run of the hub graph under `mode`: a granularity, or `ONE_BLOCK`."""
    granularity = Granularity.PART if mode == ONE_BLOCK else Granularity(mode)
    mappers = kinds.MAPPERS
    if mode == ONE_BLOCK:  # the one place the bench swaps the mapper: server and runners alike
        kinds.MAPPERS = (((".py", ".pyi"), OneImportBlock()),)  # type: ignore[misc]
    try:
        return await _one_run(tasks, granularity, mode, imports)
    finally:
        kinds.MAPPERS = mappers  # type: ignore[misc]


async def _one_run(tasks: int, granularity: Granularity, mode: str, imports: bool) -> Figures:
    graph, raw = workload(tasks, imports=imports)
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
    missing = [
        i
        for i in range(tasks)
        if f'"r{i}-done"' not in text or (imports and f"import mod_{i}\n" not in text)
    ]
    done = played.tasks
    if missing or any(t["status"] != "succeeded" for t in done):
        raise SystemExit(f"{mode} x{tasks}: changes lost or tasks failed: {missing}")
    counted = Counter(e["type"] for e in played.events)
    return Figures(
        tasks=tasks,
        granularity=mode,
        makespan_s=round(played.makespan_s, 2),
        attempts=sum(int(t["attempts"]) for t in done),
        vetoes=counted["lease_denied"],
        rolled_back=counted["file_restored"],
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
    parser.add_argument(
        "--imports",
        action="store_true",
        help="each task also adds its own import; adds a run with the one import block",
    )
    args = parser.parse_args(argv)
    modes = [Granularity.FILE.value, Granularity.PART.value]
    modes += [ONE_BLOCK] if args.imports else []
    rows: list[Figures] = []
    for tasks in args.tasks:
        for mode in modes:
            rows.append(asyncio.run(one_run(tasks, mode, args.imports)))
            print(rows[-1], file=sys.stderr, flush=True)
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
