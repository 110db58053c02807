"""The check watcher's price: one check command run with and without `shell.WATCH`.

`fleet.views.shell.run_command` starts every check, verify and `run --verify`
command behind a watcher that kills the command's process group when the
process running it dies (docs/decisions/0152-a-landing-claim-lapses-with-its-worker.md).
This times `run_command("true")` (spawn, wait, kill the group, drain) with the
watcher and with `WATCH` emptied, interleaved in rounds so both see the same
machine load. Figures: docs/performance-checks.md, `bench/checkwatch.py`.

Run: `uv run python -m bench.checkwatch [--runs N] [--rounds N] [--json]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

from codefleet.fleet.views import shell


async def _times(runs: int) -> list[float]:
    took = []
    for _ in range(runs):
        started = time.perf_counter()
        ran = await shell.run_command(
            "true", Path(tempfile.gettempdir()), timeout=10, cap=1000, env={"PATH": "/usr/bin:/bin"}
        )
        took.append((time.perf_counter() - started) * 1000.0)
        assert ran.exit_code == 0, ran
    return took


async def measure(runs: int, rounds: int) -> dict[str, dict[str, float]]:
    """Median and p90 (ms) of `run_command("true")`, without and with the watcher."""
    watch, found = shell.WATCH, {"without": [], "with": []}  # type: dict[str, list[float]]
    try:
        for _ in range(rounds):
            for name, prefix in (("without", ""), ("with", watch)):
                shell.WATCH = prefix  # type: ignore[misc]
                found[name] += await _times(runs)
    finally:
        shell.WATCH = watch  # type: ignore[misc]
    return {
        name: {
            "median_ms": round(statistics.median(xs), 2),
            "p90_ms": round(sorted(xs)[int(len(xs) * 0.9)], 2),
            "n": len(xs),
        }
        for name, xs in found.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = asyncio.run(measure(args.runs, args.rounds))
    if args.json:
        print(json.dumps(result))
        return
    for name, figures in result.items():
        print(f"{name} the watcher: median {figures['median_ms']} ms, p90 {figures['p90_ms']} ms "
              f"(n={figures['n']})")  # fmt: skip


if __name__ == "__main__":
    main()
