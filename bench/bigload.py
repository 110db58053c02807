"""A big graph load against a server with a live runner: does the server still hear it?

One agent registers and heartbeats every `--beat` seconds (as a runner does,
5 s by default there; faster here so the latency is sampled finely) while one
`POST /tasks` carries `--tasks` tasks of `--paths` scope paths each. Reported:
the load's wall time, how many heartbeats were answered while it was in
progress, the heartbeat latency (p50, max), whether the agent was marked
stale (`agent_offline`, a bumped epoch) and the server's own count of loop
stall seconds (`loop_stalled_s` in `/health`, absent before it existed).

Run: `uv run python -m bench.bigload --tasks 25000 --paths 33` (the issue's
30 MiB graph; over the per-batch scope cap it is refused with a 413, so also
try `--tasks 3000 --paths 33`). `--server-bin` serves from another checkout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from bench.harness import Server, fetch_events, machine, percentiles, write_json


def graph(tasks: int, paths: int) -> bytes:
    body = {
        "tasks": [
            {
                "id": f"B{i:05d}",
                "title": "big",
                "description": "one of many",
                "file_scope": [f"big/m{i:05d}/f{j:02d}.py" for j in range(paths)],
            }
            for i in range(tasks)
        ]
    }
    return json.dumps(body).encode()


async def measure(server: Server, tasks: int, paths: int, beat: float) -> dict[str, Any]:
    body = graph(tasks, paths)
    async with httpx.AsyncClient(base_url=server.url, timeout=600) as http:
        agent = (
            await http.post(
                "/agents/register", json={"name": "runner-1", "workdir": str(server.tmp / "tree")}
            )
        ).json()
        headers = {"X-Agent-Epoch": str(agent["epoch"])}
        latencies: list[float] = []
        during = 0
        refused = 0
        started = time.monotonic()
        load = asyncio.create_task(
            http.post("/tasks", content=body, headers={"Content-Type": "application/json"})
        )
        while not load.done():
            sent = time.monotonic()
            answer = await http.post(f"/agents/{agent['agent_id']}/heartbeat", json={},
                                     headers=headers)  # fmt: skip
            latencies.append(time.monotonic() - sent)
            refused += answer.status_code != 200
            during += not load.done()
            await asyncio.wait({load}, timeout=beat)
        response = await load
        took = time.monotonic() - started
        health = (await http.get("/health")).json()
        agents = (await http.get("/agents")).json()["agents"]
    offline = [e for e in fetch_events(server) if e["type"] == "agent_offline"]
    return {
        "tasks": tasks,
        "paths": paths,
        "body_mib": round(len(body) / 2**20, 1),
        "status": response.status_code,
        "load_s": round(took, 2),
        "heartbeats_during_load": during,
        "heartbeats_refused": refused,
        "heartbeat_ms": {"p50": round(percentiles(latencies, (50,))["p50"] * 1000, 1)}
        | {"max": round(max(latencies) * 1000, 1)},
        "marked_stale": bool(offline) or agents[0]["epoch"] != agent["epoch"],
        "loop_stalled_s": health.get("loop_stalled_s"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=3000)
    parser.add_argument("--paths", type=int, default=33)
    parser.add_argument("--beat", type=float, default=0.5, help="heartbeat interval, seconds")
    parser.add_argument("--stale-after", type=float, default=20.0)
    parser.add_argument("--server-bin", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    server = Server(stale_after=args.stale_after, server_bin=args.server_bin)
    with server:
        figures = asyncio.run(measure(server, args.tasks, args.paths, args.beat))
    figures |= {"stale_after_s": args.stale_after, "server": server.describe(),
                "machine": machine()}  # fmt: skip
    print(json.dumps(figures, indent=2))
    write_json(args.json, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
