"""Parking off vs on: graphs with hidden conflicts, scripted agents, deterministic seeds.

Each task owns one module (`src/mNN.py`, its declared scope) and plays a
seeded script of turns: read its module, think (a sleep), write it, several
times. A `--hidden` share of the tasks also writes, at a random turn, to
another task's module that it never declared (read it, then append a line;
the other task is near it in the queue, so often running at the same time):
the hidden conflicts a graph's author did not see. The same seeded graph runs
twice on a fresh tree and server, with `CODEFLEET_LEASE_WAIT` 0 (the veto at
once) and `--lease-wait` (the write waits for the holder); runners are
in-process (`fleet.local.run_fleet`) with the scripted executor, through the
real gate, server and store.

Reported per run: makespan (s), total attempts, wasted work (vetoed attempts'
seconds, edits rolled back, turns redone: the steps of every attempt that did
not succeed), waits by outcome (granted, changed: read again and redone,
timed_out, deadlock) and time spent waiting.

Run: `uv run python -m bench.waiting --runners 3 8 16 --hidden 0.1 0.3 --seeds 1 2`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
from collections import Counter
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.scripted_run import play
from codefleet.config import Settings


@dataclass(frozen=True, slots=True)
class Figures:
    runners: int
    hidden: float
    seed: int
    lease_wait: float
    makespan_s: float
    attempts: int
    vetoes: int
    wasted_s: float  # seconds of attempts that ended in a veto
    rolled_back: int  # file_restored events: edits thrown away
    turns_redone: int  # steps of attempts that did not succeed
    waits: dict[str, int]
    waited_s: float
    succeeded: int


def workload(
    tasks: int, hidden: float, seed: int, runners: int
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The seeded graph (one module per task) and the script the agents play.

    A hidden write goes to the module of a task near it in the queue (within
    `runners` places), so likely running at the same time: a real collision."""
    rng = random.Random(seed)
    ids = [f"T{i:02d}" for i in range(tasks)]
    sneaky = set(rng.sample(ids, max(1, round(tasks * hidden))))
    graph, script = [], {}
    for i, task_id in enumerate(ids):
        own = f"src/m{i:02d}.py"
        turns = rng.randint(3, 6)
        steps: list[dict[str, Any]] = []
        secret = rng.randrange(turns) if task_id in sneaky else -1
        for turn in range(turns):
            steps += [{"read": own}, {"sleep": round(rng.uniform(0.1, 0.4), 3)}]
            steps.append({"append": {"path": own, "text": f"# {task_id} turn {turn}\n"}})
            if turn == secret:
                near = [
                    j for j in range(max(0, i - runners), min(tasks, i + runners + 1)) if j != i
                ]
                other = f"src/m{rng.choice(near):02d}.py"
                steps += [{"read": other}, {"append": {"path": other, "text": f"# {task_id}\n"}}]
        graph.append({"id": task_id, "title": task_id, "description": "scripted",
                      "file_scope": [own]})  # fmt: skip
        script[task_id] = steps
    return graph, script


async def one_run(args: argparse.Namespace, runners: int, hidden: float, seed: int, wait: float) -> Figures:  # fmt: skip
    graph, raw = workload(args.tasks, hidden, seed, runners)
    with tempfile.TemporaryDirectory(prefix="cf-wait-") as scratch:
        base = Path(scratch)
        tree = base / "tree"
        (tree / "src").mkdir(parents=True)
        for i in range(args.tasks):
            (tree / "src" / f"m{i:02d}.py").write_text(f"# module {i}\n")
        settings = Settings(
            _env_file=None, host="127.0.0.1", port=0, workdir=tree, db=base / "db.sqlite",  # type: ignore[call-arg]
            run_dir=base / "runs", lease_wait=wait, tick_interval=0.05, max_attempts=10,
        )  # fmt: skip
        played = await play(settings, graph, raw, runners)
    return figures(runners, hidden, seed, wait, played.makespan_s, played.tasks, played.events, raw)


def figures(
    runners: int, hidden: float, seed: int, wait: float, makespan: float,
    tasks: list[dict[str, Any]], events: list[dict[str, Any]], script: dict[str, Any],
) -> Figures:  # fmt: skip
    kinds = Counter(e["type"] for e in events)
    assigned: dict[str, datetime] = {}
    wasted, redone = 0.0, 0
    for e in events:
        at = datetime.fromisoformat(e["at"].replace("Z", "+00:00"))
        if e["type"] == "task_assigned":
            assigned[e["task_id"]] = at
        elif e["type"] == "task_requeued" and e["task_id"] in assigned:
            wasted += (at - assigned[e["task_id"]]).total_seconds()
            redone += _played_before_veto(events, e["task_id"], assigned[e["task_id"]], at)
    waited = [e["payload"] for e in events if e["type"] == "lease_waited"]
    return Figures(
        runners=runners, hidden=hidden, seed=seed, lease_wait=wait,
        makespan_s=round(makespan, 2), attempts=sum(int(t["attempts"]) for t in tasks),
        vetoes=kinds["lease_denied"], wasted_s=round(wasted, 2),
        rolled_back=kinds["file_restored"], turns_redone=redone,
        waits=dict(Counter(str(w["outcome"]) for w in waited)),
        waited_s=round(sum(float(w["waited_s"]) for w in waited), 2),
        succeeded=sum(1 for t in tasks if t["status"] == "succeeded"),
    )  # fmt: skip


def _played_before_veto(
    events: list[dict[str, Any]], task_id: str, start: datetime, end: datetime
) -> int:
    """Writes the attempt made before it ended: the turns its next attempt plays again."""
    return sum(
        1
        for e in events
        if e["type"] == "file_changed"
        and e["task_id"] == task_id
        and start <= datetime.fromisoformat(e["at"].replace("Z", "+00:00")) <= end
    )


def table(rows: list[Figures]) -> str:
    head = ("| runners | hidden | wait | makespan s | attempts | vetoes | wasted s | rolled back "
            "| turns redone | waits (granted/changed/timed out/deadlock) | waited s |")  # fmt: skip
    lines = [head, "|" + "---|" * 11]
    for r in rows:
        w = r.waits
        outcome = "/".join(
            str(w.get(k, 0)) for k in ("granted", "changed", "timed_out", "deadlock")
        )
        lines.append(
            f"| {r.runners} | {r.hidden:.0%} | {r.lease_wait:g} | {r.makespan_s} | {r.attempts} "
            f"| {r.vetoes} | {r.wasted_s} | {r.rolled_back} | {r.turns_redone} | {outcome} "
            f"| {r.waited_s} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=32)
    parser.add_argument("--runners", type=int, nargs="+", default=[3, 8, 16])
    parser.add_argument("--hidden", type=float, nargs="+", default=[0.1, 0.3])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--lease-wait", type=float, default=10.0)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    rows: list[Figures] = []
    for runners in args.runners:
        for hidden in args.hidden:
            for seed in args.seeds:
                for wait in (0.0, args.lease_wait):
                    rows.append(asyncio.run(one_run(args, runners, hidden, seed, wait)))
                    print(rows[-1], file=sys.stderr, flush=True)
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in rows], indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
