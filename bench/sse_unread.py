"""Server memory held by event-stream clients that never read (issue 24, the SSE item).

Starts `codefleet serve` (the harness's `Server`), loads `--tasks` tasks (one
`task_created` event each, so every stream has a replay to send), then opens
`--clients` raw connections that each ask for `/events/stream?since=0` with a
4 KiB receive buffer and read nothing. After `--settle` seconds the server's
resident memory is read from /proc; then each client reads its answer's
status line (200: a stream, 503: refused by the stream cap).

    uv run python -m bench.sse_unread [--clients 2000] [--tasks 2000] [--server-bin ...]
"""

from __future__ import annotations

import argparse
import json
import resource
import socket
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from bench.harness import HOST, Server, machine, write_json


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        kib = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
    return round(kib / 1024, 1)


def unread_streams(port: int, n: int) -> list[socket.socket]:
    opened: list[socket.socket] = []
    for _ in range(n):
        sock = socket.create_connection((HOST, port))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.sendall(f"GET /events/stream?since=0 HTTP/1.1\r\nHost: {HOST}:{port}\r\n\r\n".encode())
        opened.append(sock)
    return opened


def statuses(socks: list[socket.socket]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for sock in socks:
        sock.settimeout(5.0)
        try:
            line = sock.recv(64).split(b"\r\n", 1)[0]
            status = line.split(b" ")[1].decode() if line.startswith(b"HTTP/") else "none"
        except OSError:
            status = "error"
        counts[status] = counts.get(status, 0) + 1
    return counts


def measure(server: Server, clients: int, tasks: int, settle: float) -> dict[str, Any]:
    body = {"tasks": [{"id": f"T{i:05d}", "title": "t" * 100, "description": "d" * 200}
                      for i in range(tasks)]}  # fmt: skip
    httpx.post(server.url + "/tasks", json=body, timeout=120).raise_for_status()
    before = rss_mib(server.pid)
    socks = unread_streams(server.port, clients)
    time.sleep(settle)  # a benchmark's fixed settling time: the streams write what they can
    after = rss_mib(server.pid)
    answers = statuses(socks)
    for sock in socks:
        sock.close()
    return {
        "clients": clients,
        "tasks": tasks,
        "rss_mib_before": before,
        "rss_mib_with_clients": after,
        "kib_per_client": round((after - before) * 1024 / clients, 1),
        "answers": answers,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=2000)
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--settle", type=float, default=15.0, help="seconds before reading RSS")
    parser.add_argument("--server-bin", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, args.clients + 500)), hard))
    with Server(server_bin=args.server_bin) as server:
        figures = measure(server, args.clients, args.tasks, args.settle)
        figures |= {"server": server.describe(), "machine": machine()}
    print(json.dumps(figures, indent=2))
    write_json(args.json, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
