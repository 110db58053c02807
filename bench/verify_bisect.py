"""`run --verify` bisection: how many runs of the command, and what each step costs.

A real server and scripted runners land N tasks (each writes its own module);
the landing at position K also writes `broken.txt`; the verify command is
`test ! -e broken.txt`, so the first failing landing is K. The tree has F
extra source files, so a step's view copy costs what it would in a project of
that size. Reported: the probes run (against ceil(log2 N) + 2), the blamed
task, the bisection's wall time and the mean per step (view copy + undo +
command), beside one `copy_tree` of the same tree alone.

Run: `uv run python -m bench.verify_bisect [--tasks N] [--broken K] [--files F] [--json]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import tempfile
import time
from pathlib import Path
from typing import Any

from codefleet.api.client import FleetClient
from codefleet.config import Settings
from codefleet.fleet.local import FleetOptions, run_fleet
from codefleet.fleet.runner import RunnerOptions
from codefleet.fleet.scripted import ScriptedExecutor, parse_script
from codefleet.fleet.views.copyview import copy_tree
from codefleet.server.thread import ServerThread


def workload(tasks: int, broken: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Tasks that land one after another (`wait_succeeded`); the `broken`th also breaks."""
    ids = [f"T{i:03d}" for i in range(1, tasks + 1)]
    graph = [{"id": i, "title": f"Make {i}", "description": "scripted"} for i in ids]
    script: dict[str, Any] = {}
    for n, task_id in enumerate(ids, start=1):
        steps: list[dict[str, Any]] = [{"wait_succeeded": ids[n - 2]}] if n > 1 else []
        steps.append({"write": {"path": f"src/{task_id}.py", "content": f"N = {n}\n"}})
        if n == broken:
            steps.append({"write": {"path": "broken.txt", "content": "oops\n"}})
        script[task_id] = steps
    return graph, script


async def one_run(args: argparse.Namespace, base: Path) -> dict[str, Any]:
    tree = base / "tree"
    for n in range(args.files):
        target = tree / "lib" / f"d{n // 50:03d}" / f"m{n % 50:02d}.py"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(f"# file {n}\n" * 40)
    (tree / "src").mkdir(parents=True, exist_ok=True)
    settings = Settings(
        _env_file=None, host="127.0.0.1", port=0, workdir=tree, db=base / "db.sqlite",  # type: ignore[call-arg]
        run_dir=base / "runs", tick_interval=0.05,
    )  # fmt: skip
    graph, raw = workload(args.tasks, args.broken)
    server = ServerThread(settings).start()
    try:
        async with FleetClient(server.url) as client:
            await client.create_tasks(graph)
        executor = ScriptedExecutor(parse_script(raw), wait_timeout=600)
        said: list[tuple[float, str]] = []
        result = await run_fleet(
            server.url,
            lambda _n: executor,
            FleetOptions(
                RunnerOptions("runner", tree, base / "runs"), verify="test ! -e broken.txt"
            ),
            say=lambda s: said.append((time.monotonic(), s)),
        )
    finally:
        server.stop()
    copy_ms = copy_tree(tree, base / "copy").ms
    assert result.verify is not None and result.verify.blame is not None
    blame = result.verify.blame
    wall = said[-1][0] - said[0][0] if len(said) > 1 else 0.0
    return {
        "tasks": args.tasks,
        "files": args.files,
        "broken": args.broken,
        "first_failing": blame.first_failing,
        "order": blame.order,
        "probes": len(blame.steps),
        "bound": math.ceil(math.log2(args.tasks)) + 2,
        "bisect_s": round(wall, 2),
        "per_step_s": round(wall / max(len(blame.steps), 1), 3),
        "command_s": round(sum(s.duration_s for s in blame.steps) / len(blame.steps), 3),
        "copy_tree_ms": round(copy_ms, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=32)
    parser.add_argument("--broken", type=int, default=21)
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cf-bisect-") as scratch:
        figures = asyncio.run(one_run(args, Path(scratch)))
    if args.json:
        print(json.dumps(figures))
        return
    for key, value in figures.items():
        print(f"{key:>14}: {value}")


if __name__ == "__main__":
    main()
