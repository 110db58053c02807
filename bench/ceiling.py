"""The HTTP ceiling of this machine: how many requests/s the stack allows before any engine work.

Two yardsticks for the lease and dispatch figures, measured with the same
load generator: `GET /health` on a real `codefleet serve` (the whole FastAPI
stack and middleware, one trivial SQLite read), and a bare ASGI app under the
same uvicorn (uvloop + httptools) that answers a constant JSON body (the floor
of Python HTTP on this machine). Run: `uv run python -m bench.ceiling --client raw`.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from bench.harness import (
    HOST,
    BenchError,
    Fleet,
    add_common_args,
    fmt_ms,
    free_port,
    machine,
    make_http,
    percentiles,
    pid_cpu_seconds,
    running,
    server_from,
    system_busy_seconds,
    wait_http,
    wait_quiet,
    write_json,
)

BARE_APP = """
import uvicorn

BODY = b'{"status":"ok"}'
HEADERS = [(b"content-type", b"application/json"), (b"content-length", b"15")]


async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
    await send({"type": "http.response.body", "body": BODY})


uvicorn.run(app, host="127.0.0.1", port={port}, log_level="warning")
"""


async def _hammer(http: Any, path: str, duration: float, count: int) -> list[float]:
    latencies: list[float] = []
    deadline = time.monotonic() + duration
    while len(latencies) < count and time.monotonic() < deadline:
        began = time.perf_counter()
        status, _ = await http.call("GET", path)
        latencies.append(time.perf_counter() - began)
        if status != 200:
            raise BenchError(f"GET {path} -> {status}")
    return latencies


async def ceiling_worker(
    params: dict[str, Any], indices: list[int], wait_go: Callable[[], Awaitable[None]]
) -> list[list[float]]:
    pool: list[Any] = []
    https = [make_http(params["client"], params["port"], params["token"], pool) for _ in indices]
    await wait_go()
    found = await asyncio.gather(
        *(_hammer(h, params["path"], params["duration"], params["per_agent"]) for h in https)
    )
    for http in https:
        await http.aclose()
    for client in pool:
        await client.aclose()
    return list(found)


def _measure(args: argparse.Namespace, port: int, pid: int, agents: int, path: str) -> Any:
    params = {
        "client": args.client, "port": port, "token": args.token, "path": path,
        "duration": args.duration, "per_agent": max(1, args.max_requests // agents),
    }  # fmt: skip
    fleet = Fleet(ceiling_worker, params, agents, args.procs)
    if args.quiet_wait:
        wait_quiet(args.quiet_wait)
    with running(fleet):
        cpu0, busy0 = pid_cpu_seconds(pid), system_busy_seconds()
        began = fleet.go()
        parts, client_cpu = fleet.results()
        wall = time.monotonic() - began
        server_cpu = pid_cpu_seconds(pid) - cpu0
        other = system_busy_seconds() - busy0 - server_cpu - client_cpu
    latencies = [x for part in parts for agent in part for x in agent]
    return {
        "agents": agents,
        "requests": len(latencies),
        "requests_per_s": len(latencies) / wall,
        "latency_s": percentiles(latencies),
        "server_busy": server_cpu / wall,
        "server_cpu_us_per_request": 1e6 * server_cpu / len(latencies),
        "client_cpu_s": client_cpu,
        "other_cpu_s": max(0.0, other),
    }


def _bare(args: argparse.Namespace, agents: int) -> dict[str, Any]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", BARE_APP.replace("{port}", str(port))])
    try:
        wait_http(f"http://{HOST}:{port}/", proc)
        return {"target": "bare uvicorn", **_measure(args, port, proc.pid, agents, "/")}
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _health(args: argparse.Namespace, agents: int) -> dict[str, Any]:
    with server_from(args) as server:
        figures = _measure(args, server.port, server.pid, agents, "/health")
    return {"target": "codefleet GET /health", **figures}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--max-requests", type=int, default=200_000)
    add_common_args(parser)
    args = parser.parse_args(argv)
    print(f"machine {machine()}\nserver {server_from(args).describe()}")
    runs = []
    for agents in args.agents:
        for measure in (_bare, _health):
            f = measure(args, agents)
            runs.append(f)
            print(
                f"{f['target']:<22} agents={agents:>2} client={args.client}: "
                f"{f['requests_per_s']:,.0f} req/s, server {f['server_cpu_us_per_request']:.0f} "
                f"cpu-us/req, busy {f['server_busy']:.0%}, client {f['client_cpu_s']:.2f} cpu-s, "
                f"other {f['other_cpu_s']:.2f} cpu-s\n  latency {fmt_ms(f['latency_s'])}"
            )
    write_json(
        args.json,
        {
            "benchmark": "ceiling",
            "machine": machine(),
            "server": server_from(args).describe(),
            "runs": runs,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
