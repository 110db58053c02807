"""Landing batch size: landing checks per task and added makespan, by `landing_batch`.

A real server, the real landing worker and R scripted runners drain a conflict-free
graph of N tasks (each writes its own file). The integration check sleeps S seconds,
then fails if any task file holds the breaker's marker. Each case is one fresh run:
`landing_batch` = 1 (no batching), 2, 4, 8, 16, the same graph with no integration check
(the baseline makespan), and one breaker among the N (its first attempt writes the
marker; its second does not) at batch 8 and at batch 1, for the cost of bisection.
Reported per case: landing checks run, checks per task, the makespan (wall time of
`run_fleet`) and the added makespan (makespan - baseline).

Steps in parallel (decision 0160): `--parallel-runners 2,4` runs instead, for each R,
R runners (a landing worker beside each) with one breaker, once one step at a time
(`landing_parallel` 1) and once with up to `--parallel` steps at once; besides the
above, the landing wall time (first `landing_queued` to last `landed`) and the checks
stopped because a shorter prefix decided first.

Run: `uv run python -m bench.landing [--tasks N] [--check-s S] [--runners R]
[--work-s W] [--batches 1,2,4,8,16] [--breaker-batches 8,1] [--parallel-runners 2,4]
[--parallel P] [--no-breaker] [--json]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from codefleet.api.client import FleetClient
from codefleet.config import Settings
from codefleet.fleet.local import FleetOptions, run_fleet
from codefleet.fleet.runner import RunnerOptions
from codefleet.fleet.scripted import ScriptedExecutor, parse_script
from codefleet.models import from_iso
from codefleet.server.thread import ServerThread

MARKER = "BROKEN"
CHECK_NAME = "integration"


@dataclass(frozen=True)
class Case:
    """One run: its batch size (None: no integration check) and whether a task breaks."""

    label: str
    batch: int | None
    breaker: bool = False
    runners: int | None = None  # None: --runners
    parallel: int = 1  # landing steps at once


@dataclass(frozen=True)
class Figures:
    label: str
    batch: int | None
    breaker: bool
    checks: int
    checks_per_task: float
    reworked: int
    makespan_s: float
    added_s: float | None
    landing_s: float = 0.0  # first landing_queued to last landed
    stopped: int = 0  # checks stopped: their answer no longer mattered


@dataclass(frozen=True)
class Ran:
    """What one run measured."""

    checks: int
    stopped: int
    reworked: int
    makespan_s: float
    landing_s: float


def check_command(check_s: float) -> str:
    """Sleep, then fail when any task file holds the marker."""
    code = (
        f"import glob, sys, time; time.sleep({check_s}); "
        f"sys.exit(any('{MARKER}' in open(p).read() for p in glob.glob('out/*.txt')))"
    )
    return f'"{sys.executable}" -c "{code}"'


def workload(
    tasks: int, work_s: float, breaker: bool
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """N independent tasks; with a breaker, the middle task's first attempt writes the marker."""
    ids = [f"T{n:02d}" for n in range(1, tasks + 1)]
    graph = [{"id": t, "title": f"Make {t}", "description": "scripted"} for t in ids]
    script: dict[str, Any] = {}
    for task_id in ids:
        steps: list[dict[str, Any]] = [{"sleep": work_s}] if work_s > 0 else []
        steps.append({"write": {"path": f"out/{task_id}.txt", "content": f"{task_id}\n"}})
        script[task_id] = steps
    if breaker:
        bad = ids[len(ids) // 2]
        script[bad] = [
            {"write": {"path": f"out/{bad}.txt", "content": f"{MARKER}\n"}, "attempt": 1},
            {"write": {"path": f"out/{bad}.txt", "content": f"{bad}\n"}, "attempt": 2},
        ]
    return graph, script


async def one_run(args: argparse.Namespace, case: Case, base: Path) -> Ran:
    """Checks run and stopped, tasks reworked, the makespan and landing time of one run."""
    tree = base / "tree"
    (tree / "out").mkdir(parents=True)
    settings = Settings(
        _env_file=None, host="127.0.0.1", port=0, workdir=tree, db=base / "db.sqlite",  # type: ignore[call-arg]
        run_dir=base / "runs", tick_interval=0.05, backoff_base=0.0,
        landing_batch=case.batch or 1, landing_parallel=case.parallel,
    )  # fmt: skip
    graph, raw = workload(args.tasks, args.work_s, case.breaker)
    server = ServerThread(settings).start()
    try:
        async with FleetClient(server.url) as client:
            if case.batch is None:
                await client.create_tasks(graph)
            else:
                await client.create_tasks(graph, {CHECK_NAME: check_command(args.check_s)})
                await client.set_integration(CHECK_NAME)
            executor = ScriptedExecutor(parse_script(raw), wait_timeout=600)
            started = time.monotonic()
            result = await run_fleet(
                server.url,
                lambda _n: executor,
                FleetOptions(
                    RunnerOptions("runner", tree, base / "runs"),
                    runners=case.runners or args.runners,
                ),
            )
            makespan = time.monotonic() - started
            events = await client.all_events()
    finally:
        server.stop()
    if not result.ok:
        raise SystemExit(f"{case.label}: the run did not end green: {result.tasks}")
    finished = [e for e in events if e["type"] == "landing_check_finished"]
    stopped = sum(1 for e in finished if e["payload"].get("verdict") == "stopped")
    reworked = sum(1 for e in events if e["type"] == "integration_failed")
    return Ran(len(finished) - stopped, stopped, reworked, makespan, landing_time(events))


def landing_time(events: list[dict[str, Any]]) -> float:
    """From the first task waiting to land to the last landing, in seconds (0: none)."""
    queued = [from_iso(e["at"]) for e in events if e["type"] == "landing_queued"]
    landed = [from_iso(e["at"]) for e in events if e["type"] == "landed"]
    return (max(landed) - min(queued)).total_seconds() if queued and landed else 0.0


def cases(args: argparse.Namespace) -> list[Case]:
    if args.parallel_runners:
        batch = args.breaker_batches[0]
        return parallel_cases(args.parallel_runners, args.parallel, batch, not args.no_breaker)
    plain = [Case(f"batch {b}", b) for b in args.batches]
    broken = [Case(f"batch {b}, 1 breaker", b, True) for b in args.breaker_batches]
    return [Case("no check", None), *plain, *broken]


def parallel_cases(runners: list[int], parallel: int, batch: int, breaker: bool) -> list[Case]:
    """For each runner count: no check, then one step at a time and in parallel (with one
    breaker, unless `breaker` is false)."""
    found: list[Case] = []
    for r in runners:
        found += [
            Case(f"{r} runners, no check", None, runners=r),
            Case(f"{r} runners, 1 at a time", batch, breaker, r, 1),
            Case(f"{r} runners, {parallel} at once", batch, breaker, r, parallel),
        ]
    return found


def measure(args: argparse.Namespace) -> list[Figures]:
    found: list[Figures] = []
    baseline: float | None = None
    for case in cases(args):
        with tempfile.TemporaryDirectory(prefix="cf-landing-") as scratch:
            ran = asyncio.run(one_run(args, case, Path(scratch)))
        if case.batch is None:
            baseline = ran.makespan_s
        added = None if baseline is None else round(ran.makespan_s - baseline, 2)
        per_task = round(ran.checks / args.tasks, 2)
        figures = Figures(
            case.label,
            case.batch,
            case.breaker,
            ran.checks,
            per_task,
            ran.reworked,
            round(ran.makespan_s, 2),
            added,
            round(ran.landing_s, 2),
            ran.stopped,
        )
        found.append(figures)
        if not args.json:
            print(row(found[-1]), flush=True)
    return found


HEADER = (
    f"{'case':<26} {'checks':>6} {'stopped':>7} {'per task':>8} {'reworked':>8} "
    f"{'makespan s':>10} {'added s':>8} {'landing s':>9}"
)


def row(f: Figures) -> str:
    added = "-" if f.added_s is None else f"{f.added_s:.2f}"
    return (
        f"{f.label:<26} {f.checks:>6} {f.stopped:>7} {f.checks_per_task:>8.2f} {f.reworked:>8} "
        f"{f.makespan_s:>10.2f} {added:>8} {f.landing_s:>9.2f}"
    )


def sizes(text: str) -> list[int]:
    return [int(b) for b in text.split(",") if b]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--check-s", type=float, default=2.0, help="seconds one check takes")
    parser.add_argument("--runners", type=int, default=4)
    parser.add_argument("--work-s", type=float, default=0.0, help="seconds each task works")
    parser.add_argument(
        "--batches", type=sizes, default=[1, 2, 4, 8, 16], help="batch sizes run without one"
    )
    parser.add_argument(
        "--breaker-batches", type=sizes, default=[8, 1], help="batch sizes run with a breaker"
    )
    parser.add_argument(
        "--parallel-runners", type=sizes, default=[], help="runner counts for the parallel table"
    )
    parser.add_argument("--parallel", type=int, default=4, help="landing steps at once")
    parser.add_argument(
        "--no-breaker", action="store_true", help="the parallel table without a breaker"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not args.json:
        print(
            f"{args.tasks} tasks, {args.runners} runners, check {args.check_s} s, "
            f"work {args.work_s} s per task"
        )
        print(HEADER, flush=True)
    figures = measure(args)
    if args.json:
        print(json.dumps([asdict(f) for f in figures]))


if __name__ == "__main__":
    main()
