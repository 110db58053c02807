"""Markdown tables from the `--json` files the benchmarks write, one row per run.

Each row carries the CPU other processes used during the run ("other"), so
runs disturbed by a busy machine can be told apart from quiet ones. Run:
`uv run python -m bench.summarize out/*.json`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def _ms(stats: dict[str, float], key: str) -> str:
    return f"{stats[key] * 1000:.1f}"


def _leases(name: str, doc: dict[str, Any]) -> list[str]:
    rows = []
    for r in doc["runs"]:
        lat = r["latency_s"]
        rows.append(
            f"| {name} | {r['client']} ({r['procs']}) | {r['agents']} | {r.get('rotations', 0)} | "
            f"{r['requests_per_s']:,.0f} | {_ms(lat, 'p50')} | {_ms(lat, 'p95')} | "
            f"{_ms(lat, 'p99')} | {r['server_busy']:.0%} | "
            f"{r.get('server_cpu_us_per_request', float('nan')):.0f} | "
            f"{r['client_cpu_s']:.1f} | {r.get('other_cpu_s', float('nan')):.1f} | "
            f"{'ok' if r['checks']['ok'] else 'FAILED'} |"
        )
    return rows


def _prefilled(run: dict[str, Any]) -> str:
    done = run.get("prefilled") or 0
    return f" after {done:,} done" if done else ""


def _dispatch(name: str, doc: dict[str, Any]) -> list[str]:
    rows = []
    for r in doc["runs"]:
        hc, hs = r["handoff_client_all_s"], r["handoff_server_all_s"]
        deciles = [d["tasks_per_s"] for d in r["deciles"]]
        cpu = [d["server_cpu_ms_per_task"] for d in r["deciles"]]
        rows.append(
            f"| {name} | {r['tasks']}/{r['agents']}{_prefilled(r)} | {r['client']} ({r['procs']}) | "
            f"{r['post_s'] * 1000:,.0f} | {r['drain_s']:.2f} | {r['tasks_per_s']:,.0f} | "
            f"{_ms(hc, 'p50')} / {_ms(hc, 'p95')} / {_ms(hc, 'p99')} | "
            f"{_ms(hs, 'p50')} / {_ms(hs, 'p99')} | {r['server_busy']:.0%} | "
            f"{min(deciles):,.0f}-{max(deciles):,.0f} | {cpu[0]:.2f} → {cpu[-1]:.2f} | "
            f"{r['client_cpu_s']:.1f} | {r.get('other_cpu_s', float('nan')):.1f} | "
            f"{'ok' if r['log_ok'] else 'FAILED'} |"
        )
    return rows


def _ceiling(name: str, doc: dict[str, Any]) -> list[str]:
    return [
        f"| {name} | {r['target']} | {r['agents']} | {r['requests_per_s']:,.0f} | "
        f"{r['server_cpu_us_per_request']:.0f} | {_ms(r['latency_s'], 'p50')} | "
        f"{_ms(r['latency_s'], 'p99')} | {r.get('other_cpu_s', float('nan')):.1f} |"
        for r in doc["runs"]
    ]


HEADERS = {
    "leases": "| file | client (procs) | agents | rotations | req/s | p50 ms | p95 ms | p99 ms | "
    "server busy | server µs/req | client cpu-s | other cpu-s | check |\n" + "|---" * 13 + "|",
    "dispatch": "| file | tasks/agents | client (procs) | POST ms | drain s | tasks/s | "
    "handoff client p50/p95/p99 ms | handoff server p50/p99 ms | server busy | "
    "deciles tasks/s | server ms/task first → last decile | client cpu-s | other cpu-s | "
    "log |\n" + "|---" * 14 + "|",
    "ceiling": "| file | target | agents | req/s | server µs/req | p50 ms | p99 ms | other cpu-s |\n"
    + "|---" * 8
    + "|",
}
ROWS = {"leases": _leases, "dispatch": _dispatch, "ceiling": _ceiling}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", type=Path, nargs="+")
    args = parser.parse_args(argv)
    tables: dict[str, list[str]] = {}
    for path in sorted(args.files):
        doc = json.loads(path.read_text())
        kind = doc["benchmark"]
        tables.setdefault(kind, []).extend(ROWS[kind](path.stem, doc))
    for kind, rows in tables.items():
        print(f"\n### {kind}\n\n{HEADERS[kind]}")
        print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
