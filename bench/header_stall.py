"""Authorized calls while local connections stream huge request headers (issue 24, item 1).

Starts `codefleet serve` with a bearer token (the harness's `Server`), registers
a runner, then for `--duration` seconds launches one heartbeat every 50 ms
(open loop, each on an idle keep-alive connection, its latency counted from
its scheduled launch) while `--attackers` connections in a
separate process each send `GET /state` with a header value that never ends:
64 KiB writes, up to `--header-mb` MB per connection. A connection the server
closes (after answering 431, or without an answer) is opened again at once,
so the pressure lasts the whole run. With no token, no Host trick, nothing but
bytes, this is what any local process can do.

Reported: heartbeat p50/p99/max, how many calls failed, and per attacker the
connections it opened, the bytes its sockets accepted (the kernel's buffers
included, so more than the server read), and the answers it got.

    uv run python -m bench.header_stall --attackers 1 [--duration 40] [--header-mb 80]
    uv run python -m bench.header_stall --attackers 12 --server-bin <checkout>/.venv/bin/codefleet
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing as mp
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bench.harness import HOST, Agent, Server, machine, make_http, percentiles, write_json

TOKEN = "bench-header-stall"
CHUNK = b"a" * 65_536
SEND_TIMEOUT_S = 30.0  # a bound on one blocked send, not a measurement


def _stream_one(port: int, budget: int, until: float, tally: dict[str, int]) -> None:
    """One connection: a request line, then one header's value until `budget` bytes or closed."""
    with socket.create_connection((HOST, port), timeout=SEND_TIMEOUT_S) as sock:
        tally["connections"] += 1
        sent = 0
        with contextlib.suppress(OSError):
            sock.sendall(f"GET /state HTTP/1.1\r\nHost: {HOST}:{port}\r\nX-Pad: ".encode())
            while sent < budget and time.monotonic() < until:
                sock.sendall(CHUNK)
                sent += len(CHUNK)
        tally["bytes"] += sent
        answer = b""
        with contextlib.suppress(OSError):  # what the server said before it closed, if anything
            sock.settimeout(max(0.1, until - time.monotonic()))
            answer = sock.recv(4096)  # waits for the server's close (or the run's end)
        status = answer[9:12].decode("latin-1") if answer.startswith(b"HTTP/1.1 ") else "none"
        tally[f"answer_{status}"] = tally.get(f"answer_{status}", 0) + 1


def _attacker(port: int, budget: int, until: float, tallies: list[dict[str, int]], i: int) -> None:
    while time.monotonic() < until:
        with contextlib.suppress(OSError):
            _stream_one(port, budget, until, tallies[i])


def _attack(port: int, n: int, budget: int, duration: float, ready: Any, out: Any) -> None:
    """The attackers' process: `n` threads, each streaming headers until `duration` ends."""
    tallies = [{"connections": 0, "bytes": 0} for _ in range(n)]
    until = time.monotonic() + duration
    threads = [threading.Thread(target=_attacker, args=(port, budget, until, tallies, i))
               for i in range(n)]  # fmt: skip
    for thread in threads:
        thread.start()
    ready.set()
    for thread in threads:
        thread.join()
    out.put(tallies)


async def _heartbeats(server: Server, duration: float, every: float) -> dict[str, Any]:
    """A heartbeat launched every `every` s (open loop), each on an idle keep-alive connection.

    A call's latency runs from its scheduled launch to its answer, so a stall counts for
    every call it holds up, as it does for a fleet of runners, not once.
    """
    agent = Agent(make_http("raw", server.port, TOKEN, []), "runner-1")
    await agent.register()
    idle: list[Any] = [agent.http]
    latencies: list[float] = []
    failed: list[str] = []

    async def one(scheduled: float) -> None:
        http = idle.pop() if idle else make_http("raw", server.port, TOKEN, [])
        try:
            path = f"/agents/{agent.id}/heartbeat"
            status, _ = await http.call("POST", path, {}, agent._epoch())
            if status != 200:
                failed.append(str(status))
        except (OSError, asyncio.IncompleteReadError) as err:
            failed.append(type(err).__name__)
        latencies.append(time.monotonic() - scheduled)
        idle.append(http)

    start = time.monotonic()
    calls: list[asyncio.Task[None]] = []
    for i in range(int(duration / every)):
        scheduled = start + i * every
        await asyncio.sleep(max(0.0, scheduled - time.monotonic()))
        calls.append(asyncio.create_task(one(scheduled)))
    await asyncio.gather(*calls)
    for http in idle:
        await http.aclose()
    stats = percentiles(latencies, (50, 99))
    return {
        "calls": len(latencies),
        "failed": failed,
        "connections_used": len(idle),
        "heartbeat_ms": {k: round(v * 1000, 1) for k, v in stats.items() if k != "n"},
    }


def measure(server: Server, attackers: int, header_mb: float, duration: float) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    ready, out = ctx.Event(), ctx.Queue()
    budget = int(header_mb * 1_000_000)
    proc = ctx.Process(target=_attack, args=(server.port, attackers, budget, duration, ready, out))
    if attackers:
        proc.start()
        ready.wait(30)
    figures = asyncio.run(_heartbeats(server, duration, every=0.05))
    tallies = out.get(timeout=duration + 120) if attackers else []
    if attackers:
        proc.join(60)
    return figures | {"attackers": tallies}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attackers", type=int, default=1)
    parser.add_argument("--header-mb", type=float, default=80.0, help="bytes per connection, MB")
    parser.add_argument("--duration", type=float, default=40.0, help="seconds under attack")
    parser.add_argument("--stale-after", type=float, default=300.0)
    parser.add_argument("--server-bin", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    server = Server(token=TOKEN, stale_after=args.stale_after, server_bin=args.server_bin)
    with server:
        figures = measure(server, args.attackers, args.header_mb, args.duration)
        rss = _rss_mib(server.pid)
    figures |= {"attacker_count": args.attackers, "header_mb": args.header_mb,
                "duration_s": args.duration, "server_rss_mib_at_end": rss,
                "server": server.describe(), "machine": machine()}  # fmt: skip
    print(json.dumps(figures, indent=2))
    write_json(args.json, figures)
    return 0


def _rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        kib = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
    return round(kib / 1024, 1)


if __name__ == "__main__":
    sys.exit(main())
