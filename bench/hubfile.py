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

With `--language typescript` or `go` the hub is `hub.ts` or `hub.go` (`Hub`), one
function per task in that language, its imports in that language's syntax
(`import * as mod_i from "./mod_i";`, `import "mod_i"`); `part, one import block`
is Python's only.

Reported per run: makespan (s), attempts, vetoes (`lease_denied`), edits rolled
back (`file_restored`).

Run: `uv run python -m bench.hubfile --tasks 2 4 8 [--imports] [--language go]`.
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


@dataclass(frozen=True, slots=True)
class Hub:
    """A hub module in one language: its file, its text, and the line each task's import follows."""

    path: str
    header: str  # up to and including the first import statement: each task adds its own below
    function: str  # one task's function, `{i}` its number; its body returns "r{i}"
    new_import: str  # the import statement task i adds, `{i}` its number

    def text(self, tasks: int) -> str:
        return self.header + "".join(self.function.format(i=i) for i in range(tasks))


HUBS = {
    "python": Hub(
        "hub.py",
        '"""The hub every task edits."""\n\nimport os\n',
        '\n\ndef route_{i}(request):\n    return "r{i}"\n',
        "import mod_{i}\n",
    ),
    "typescript": Hub(
        "hub.ts",
        '// The hub every task edits.\n\nimport * as os from "node:os";\n',
        '\nexport function route_{i}(request: string): string {{\n  return "r{i}";\n}}\n',
        'import * as mod_{i} from "./mod_{i}";\n',
    ),
    "go": Hub(
        "hub.go",
        '// Package hub is the hub every task edits.\npackage hub\n\nimport "os"\n',
        '\nfunc Route{i}(request string) string {{\n\treturn "r{i}"\n}}\n',
        'import "mod_{i}"\n',
    ),
}


def hub(tasks: int) -> str:
    return HUBS["python"].text(tasks)


ONE_BLOCK = "part, one import block"  # the mode of `OneImportBlock`


class OneImportBlock:
    """Python's parts as they were before decision 0165: the import statements right after
    the header are one part, `<imports>` (a bench's stand-in mapper, never the product's)."""

    @property
    def max_bytes(self) -> int:
        return PYTHON.max_bytes

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
    tasks: int, think_s: float = THINK_S, imports: bool = False, language: str = "python"
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    graph, script = [], {}
    spec = HUBS[language]
    anchor = spec.header.splitlines(keepends=True)[-1]  # the first import statement
    for i in range(tasks):
        task_id = f"T{i:02d}"
        graph.append({"id": task_id, "title": task_id, "description": f"change route_{i}"})
        first = (
            {
                "edit": {
                    "path": spec.path,
                    "old": anchor,
                    "new": anchor + spec.new_import.format(i=i),
                }
            }
            if imports
            else {"edit": {"path": spec.path, "old": f'"r{i}"', "new": f'"r{i}-changed"'}}
        )
        old = f'"r{i}"' if imports else f'"r{i}-changed"'
        script[task_id] = [
            {"read": spec.path},
            {"sleep": think_s},
            first,
            {"sleep": think_s},
            {"edit": {"path": spec.path, "old": old, "new": f'"r{i}-done"'}},
        ]
    return graph, script


async def one_run(
    tasks: int, mode: str, imports: bool = False, language: str = "python"
) -> Figures:
    """One run of the hub graph in `language` under `mode`: a granularity, or `ONE_BLOCK`."""
    granularity = Granularity.PART if mode == ONE_BLOCK else Granularity(mode)
    mappers = kinds.MAPPERS
    if mode == ONE_BLOCK:  # the one place the bench swaps the mapper: server and runners alike
        kinds.MAPPERS = (((".py", ".pyi"), OneImportBlock()),)  # type: ignore[misc]
    try:
        return await _one_run(tasks, granularity, mode, imports, language)
    finally:
        kinds.MAPPERS = mappers  # type: ignore[misc]


async def _one_run(
    tasks: int, granularity: Granularity, mode: str, imports: bool, language: str
) -> Figures:
    spec = HUBS[language]
    graph, raw = workload(tasks, imports=imports, language=language)
    with tempfile.TemporaryDirectory(prefix="cf-hub-") as scratch:
        base = Path(scratch)
        tree = base / "tree"
        tree.mkdir()
        (tree / spec.path).write_text(spec.text(tasks))
        settings = Settings(
            _env_file=None, host="127.0.0.1", port=0, workdir=tree, db=base / "db.sqlite",  # type: ignore[call-arg]
            run_dir=base / "runs", tick_interval=0.05, max_attempts=50, backoff_base=0.0,
            lease_granularity=granularity,
        )  # fmt: skip
        played = await play(settings, graph, raw, runners=tasks)
        text = (tree / spec.path).read_text()
    missing = [
        i
        for i in range(tasks)
        if f'"r{i}-done"' not in text or (imports and spec.new_import.format(i=i) not in text)
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
    parser.add_argument(
        "--language",
        choices=sorted(HUBS),
        default="python",
        help="the hub's language: one function per task, imports in its syntax",
    )
    args = parser.parse_args(argv)
    modes = [Granularity.FILE.value, Granularity.PART.value]
    modes += [ONE_BLOCK] if args.imports and args.language == "python" else []
    rows: list[Figures] = []
    for tasks in args.tasks:
        for mode in modes:
            rows.append(asyncio.run(one_run(tasks, mode, args.imports, args.language)))
            print(rows[-1], file=sys.stderr, flush=True)
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
