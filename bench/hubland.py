"""A hub module under landing: makespan with a landing check ÷ makespan without, by stacking.

Most tasks of the graph change their own function of one hub module (`hub.py`);
the rest write their own file. Each task reads the hub, thinks, edits its
function, thinks, edits it again (scripted, through the real gate, server, store,
runners and landing worker). Each configuration (runners, lease granularity)
runs four times on a fresh tree and server: with no integration check (the
baseline); with the integration check `import` (which sleeps `--check-s`, then
imports the hub) as before issue 53 (`--no-landing-stack`, `--landing-parallel
1`: a file waiting to land is not passed on, one landing step at a time); with
stacking alone; and with the defaults (stacking, steps in parallel).

Reported per run: makespan (s), its ratio to the baseline, attempts, vetoes
(`lease_denied`), stacks (`lease_acquired` with `stacked_on`), landing checks
run. Every run checks that the hub ends with every task's change.

Run: `uv run python -m bench.hubland [--tasks 10] [--hub 8] [--runners 2 4]
[--check-s 1.0] [--think-s 0.5]`.
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

from bench import hubfile
from bench.scripted_run import play
from codefleet.config import Settings
from codefleet.models import Granularity

PY = f'"{sys.executable}"'
# case -> (an integration check?, stacking, landing steps at once)
CASES = {
    "none": (False, True, 4),
    "before": (True, False, 1),  # before issue 53: one step at a time, no stacking
    "stacking": (True, True, 1),
    "after": (True, True, 4),  # the defaults: stacking, steps in parallel
}


@dataclass(frozen=True, slots=True)
class Figures:
    runners: int
    granularity: str
    case: str
    makespan_s: float
    attempts: int
    vetoes: int
    stacks: int
    checks: int


def workload(
    tasks: int, on_hub: int, think_s: float
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """`hubfile`'s tasks on the hub for the first `on_hub`, then tasks on their own file."""
    graph, script = hubfile.workload(on_hub, think_s)
    for i in range(on_hub, tasks):
        task_id = f"T{i:02d}"
        graph.append({"id": task_id, "title": task_id, "description": f"write own_{i}.py"})
        script[task_id] = [
            {"sleep": think_s},
            {"write": {"path": f"own_{i}.py", "content": f"X = {i}\n"}},
            {"sleep": think_s},
        ]
    return graph, script


async def one_run(
    args: argparse.Namespace, runners: int, granularity: Granularity, case: str
) -> Figures:
    graph, raw = workload(args.tasks, args.hub, args.think_s)
    check = f'sleep {args.check_s} && {PY} -c "import hub"'
    with tempfile.TemporaryDirectory(prefix="cf-hubland-") as scratch:
        base = Path(scratch)
        tree = base / "tree"
        tree.mkdir()
        (tree / "hub.py").write_text(hubfile.hub(args.hub))
        settings = Settings(
            _env_file=None, host="127.0.0.1", port=0, workdir=tree, db=base / "db.sqlite",  # type: ignore[call-arg]
            run_dir=base / "runs", tick_interval=0.05, max_attempts=50, backoff_base=0.0,
            lease_granularity=granularity, landing_stack=CASES[case][1],
            landing_parallel=CASES[case][2],
        )  # fmt: skip
        integration = "import" if CASES[case][0] else None
        played = await play(settings, graph, raw, runners, {"import": check}, integration)
        text = (tree / "hub.py").read_text()
    missing = [i for i in range(args.hub) if f'"r{i}-done"' not in text]
    if missing or any(t["status"] != "succeeded" for t in played.tasks):
        raise SystemExit(f"{granularity} {case}: changes lost or tasks failed: {missing}")
    kinds = Counter(e["type"] for e in played.events)
    return Figures(
        runners=runners,
        granularity=granularity.value,
        case=case,
        makespan_s=round(played.makespan_s, 2),
        attempts=sum(int(t["attempts"]) for t in played.tasks),
        vetoes=kinds["lease_denied"],
        stacks=sum(1 for e in played.events if e["payload"].get("stacked_on")),
        checks=kinds["landing_check_finished"],
    )


def table(rows: list[Figures]) -> str:
    head = "| runners | leases | landing check | makespan s | ÷ none | attempts | vetoes | stacks | checks |"
    lines = [head, "|---" * 9 + "|"]
    baseline = {(r.runners, r.granularity): r.makespan_s for r in rows if r.case == "none"}
    for r in rows:
        ratio = r.makespan_s / baseline[(r.runners, r.granularity)]
        what = {
            "none": "none",
            "before": "yes: one step at a time, no stacking (before)",
            "stacking": "yes: stacking, one step at a time",
            "after": "yes: stacking, steps in parallel (after)",
        }[r.case]
        lines.append(
            f"| {r.runners} | {r.granularity} | {what} | {r.makespan_s} | {ratio:.2f} "
            f"| {r.attempts} | {r.vetoes} | {r.stacks} | {r.checks} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--hub", type=int, default=8, help="how many of them edit hub.py")
    parser.add_argument("--runners", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--check-s", type=float, default=1.0, help="the check's own time")
    parser.add_argument("--think-s", type=float, default=0.5, help="each of a task's two pauses")
    parser.add_argument("--granularity", nargs="+", default=["file", "part"])
    args = parser.parse_args(argv)
    rows: list[Figures] = []
    for runners in args.runners:
        for granularity in map(Granularity, args.granularity):
            for case in CASES:
                rows.append(asyncio.run(one_run(args, runners, granularity, case)))
                print(rows[-1], file=sys.stderr, flush=True)
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
