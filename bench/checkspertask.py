"""Checks per landed task on a real library's suite (issue 53, (a)): before and after.

The tree is `bench.libsuite`'s: a real library (its sdist fetched from the
package registry), its environment synced, in git. Six small tasks, each
appending a small function to one of its modules and a test of it to that
module's test file, are drained by scripted agents on a real server with its
runners and landing worker in this process. Each agent runs the check once
itself (`run_check`), each task has `verify: suite`, and `suite` is the landing's
integration check: the library's suite as `uv run --project . pytest -q`.

Cases, each a fresh tree, server and lock cache:

- `before`: what the code did before issue 53: every task runs its verify at
  the session's end (`verify_before_landing`), the check's results are never
  reused (`reuse: false`) and every `uv run` resolves (`uv_lock_cache` off);
- `after, no lock cache`: the defaults but `uv_lock_cache` off (issue 53's
  other items alone);
- `after`: the defaults.

Reported: checks run per task (agents', verifies and landing checks, counted by
their `check_finished` / `landing_check_finished` events; reused and deferred
ones are not run, and the landing checks not run are counted apart: `view:
reused`, an earlier step's pass or the task's own, decision 0177), check-seconds per landed task (those checks' own durations
added up, divided by the tasks that landed), the makespan (wall time of
`run_fleet`), and how many `uv run` starts skipped the resolution.

`--lock none` (the default) is the library as its sdist ships it, without a
`uv.lock` (every `uv run` in a throwaway view resolves against the package
index); `--lock committed` commits the lock uv made.

    uv run python -m bench.checkspertask [--lock none|committed] [--runners N] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from bench.libsuite import LIBRARY, SUITE, fetch, prepare
from codefleet.api.client import FleetClient
from codefleet.api.graphfile import load_graph
from codefleet.config import Settings
from codefleet.fleet.local import FleetOptions, run_fleet
from codefleet.fleet.runner import RunnerOptions
from codefleet.fleet.scripted import ScriptedExecutor, parse_script
from codefleet.server.thread import ServerThread

MODULES = ("strutils", "iterutils", "dictutils", "listutils", "mathutils", "setutils")
RUN = frozenset({"check_finished", "landing_check_finished"})
REUSED = "reused"  # a landing check's `view` when it was not run


@dataclass(frozen=True)
class Case:
    label: str
    verify_before_landing: bool
    reuse: bool
    uv_lock_cache: bool


CASES = (
    Case("before", verify_before_landing=True, reuse=False, uv_lock_cache=False),
    Case("after, no lock cache", verify_before_landing=False, reuse=True, uv_lock_cache=False),
    Case("after", verify_before_landing=False, reuse=True, uv_lock_cache=True),
)


@dataclass(frozen=True)
class Figures:
    label: str
    landed: int
    checks: int
    agent: int  # run_check runs
    verify: int  # verifies run at the session's end
    landing: int  # landing checks run
    landing_reused: int  # landing checks not run: they stand for a pass on the same content
    checks_per_task: float
    check_s_per_landed: float
    makespan_s: float
    frozen: int  # `uv run` starts that skipped the resolution


def task_steps(n: int, module: str) -> list[dict[str, Any]]:
    """Append a function to `module` and its test to the module's tests; run the check."""
    name = f"bench_double_{n}"
    code = f"\n\ndef {name}(x):\n    return 2 * x\n"
    test = (
        f"\n\ndef test_{name}():\n    from {LIBRARY}.{module} import {name}\n\n"
        f"    assert {name}(21) == 42\n"
    )
    return [
        {"append": {"path": f"{LIBRARY}/{module}.py", "text": code}},
        {"append": {"path": f"tests/test_{module}.py", "text": test}},
        {"check": "suite"},
        {"expect_check": "pass"},
    ]


def graph_file(base: Path, reuse: bool) -> Path:
    """The graph as a person writes it: the check, the integration key, six tasks."""
    check: dict[str, Any] = {"run": SUITE} if reuse else {"run": SUITE, "reuse": False}
    tasks = [
        {
            "id": f"T{n}",
            "title": f"Add a helper to {m}",
            "description": "scripted",
            "verify": "suite",
        }
        for n, m in enumerate(MODULES, 1)
    ]
    path = base / "graph.yaml"
    path.write_text(
        yaml.safe_dump({"checks": {"suite": check}, "integration": "suite", "tasks": tasks})
    )
    return path


async def one_run(case: Case, base: Path, archive: Path, lock: bool, runners: int) -> Figures:
    """One fresh tree, server and lock cache under `base`: the figures of `case`."""
    tree = prepare(base, archive, lock=lock)
    settings = Settings(
        _env_file=None, host="127.0.0.1", port=0, workdir=tree, db=base / "db.sqlite",  # type: ignore[call-arg]
        run_dir=base / "runs", tick_interval=0.05, backoff_base=0.0, check_timeout=600,
        verify_before_landing=case.verify_before_landing,
    )  # fmt: skip
    graph = load_graph(graph_file(base, case.reuse))
    script = {f"T{n}": task_steps(n, m) for n, m in enumerate(MODULES, 1)}
    server = ServerThread(settings).start()
    try:
        async with FleetClient(server.url) as client:
            await client.create_tasks(graph)
            executor = ScriptedExecutor(parse_script(script), wait_timeout=600)
            runner = RunnerOptions(
                "runner", tree, base / "runs", check_timeout=600, uv_lock_cache=case.uv_lock_cache
            )
            started = time.monotonic()
            result = await run_fleet(
                server.url, lambda _n: executor, FleetOptions(runner, runners=runners)
            )
            makespan = time.monotonic() - started
            events = await client.all_events()
    finally:
        server.stop()
    if not result.ok:
        raise SystemExit(f"{case.label}: the run did not end green: {result.tasks}")
    return figures(case.label, events, makespan)


def figures(label: str, events: list[dict[str, Any]], makespan: float) -> Figures:
    ran = [e for e in events if e["type"] in RUN and e["payload"].get("view") != REUSED]
    reused = sum(1 for e in events if e["type"] in RUN and e["payload"].get("view") == REUSED)
    purposes = [e["payload"].get("purpose") for e in ran if e["type"] == "check_finished"]
    landed = sum(1 for e in events if e["type"] == "task_succeeded")
    seconds = sum(int(e["payload"].get("duration_ms") or 0) for e in ran) / 1000.0
    return Figures(
        label,
        landed,
        len(ran),
        purposes.count("tool"),
        purposes.count("verify"),
        len(ran) - len(purposes),
        reused,
        round(len(ran) / len(MODULES), 2),
        round(seconds / max(landed, 1), 2),
        round(makespan, 2),
        sum(1 for e in ran if e["payload"].get("resolution") == "skipped"),
    )


HEADER = (
    f"{'case':<22} {'checks':>6} {'agent':>5} {'verify':>6} {'landing':>7} {'reused':>6} "
    f"{'per task':>8} "
    f"{'check-s/landed':>14} {'makespan s':>10} {'frozen':>6}"
)


def row(f: Figures) -> str:
    return (
        f"{f.label:<22} {f.checks:>6} {f.agent:>5} {f.verify:>6} {f.landing:>7} "
        f"{f.landing_reused:>6} "
        f"{f.checks_per_task:>8.2f} {f.check_s_per_landed:>14.2f} {f.makespan_s:>10.2f} "
        f"{f.frozen:>6}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lock", choices=("none", "committed"), default="none")
    parser.add_argument("--runners", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    found: list[Figures] = []
    with tempfile.TemporaryDirectory(prefix="cf-checkspertask-") as scratch:
        archive = fetch(Path(scratch) / "sdist")
        if not args.json:
            print(f"{len(MODULES)} tasks, {args.runners} runners, lock {args.lock}: {SUITE}")
            print(HEADER, flush=True)
        for n, case in enumerate(CASES):
            base = Path(scratch) / f"case{n}"
            base.mkdir()
            found.append(
                asyncio.run(one_run(case, base, archive, args.lock == "committed", args.runners))
            )
            if not args.json:
                print(row(found[-1]), flush=True)
    if args.json:
        print(json.dumps([asdict(f) for f in found]))


if __name__ == "__main__":
    main()
