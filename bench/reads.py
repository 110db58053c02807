"""Reads at 10,000 tasks: `/state` and `/conflicts` latency under a lease load, and its cost.

One run: a server is loaded with `--tasks` pending tasks (disjoint scopes), then
`bench.leases`' workers run the lease load twice on it — once alone, once with a
poller that asks `GET /state` and `GET /conflicts` in turn for the whole phase
(back to back, or one pair every `--poll-every` s). Reported per run: the lease
throughput of each phase and their ratio (the cost of the poller to the fleet,
compared within one run because the machine is shared), the p50/p99/max of
each read while the load ran, the server's CPU per lease alone and per read
pair (the polled phase's server CPU beyond its leases at the alone rate, per
pair), and the server's RSS after loading (total and per 1,000 tasks) and at
the end. The shared paths are contended, so `/conflicts` has denials to list.
Before the lease phases, `--idle-reads` pairs are read on the idle server: the
first (which builds the projection) and the median of the rest, with the
server's CPU per read.

Run: `uv run python -m bench.reads --client raw --runs 3`.
"""

from __future__ import annotations

import argparse
import http.client
import statistics
import sys
import threading
import time
from collections import Counter
from typing import Any

import httpx

from bench.harness import (
    BenchError,
    Fleet,
    Server,
    add_common_args,
    fmt_ms,
    machine,
    percentiles,
    pid_cpu_seconds,
    running,
    server_from,
    write_json,
)
from bench.leases import complete_all, lease_worker

READS = ("/state", "/conflicts")


def rss_mb(pid: int) -> float:
    """Resident set size of `pid` in MB (VmRSS)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise BenchError(f"no VmRSS for pid {pid}")


def load_tasks(server: Server, total: int) -> float:
    """POST `total` independent tasks in pages of 2,000; the seconds it took."""
    began = time.monotonic()
    with httpx.Client(base_url=server.url, headers=server.headers(), timeout=300) as http:
        for first in range(0, total, 2000):
            specs = [
                {"id": f"R{i:05d}", "title": f"read task {i}", "description": "do it",
                 "file_scope": [f"scope/r{i:05d}.txt"]}
                for i in range(first, min(total, first + 2000))
            ]  # fmt: skip
            answer = http.post("/tasks", json={"tasks": specs})
            if answer.status_code != 201:
                raise BenchError(f"POST /tasks -> {answer.status_code} {answer.text[:300]}")
    return time.monotonic() - began


def idle_reads(server: Server, pairs: int, client: str) -> dict[str, Any]:
    """`pairs` of reads on the idle server: the first's latency, then the rest's, and CPU per read."""
    found: dict[str, Any] = {}
    getter = StdlibGet(server) if client == "raw" else HttpxGet(server)
    try:
        for path in READS:
            times, cpus = [], []
            for _ in range(pairs):
                cpu, began = pid_cpu_seconds(server.pid), time.perf_counter()
                status, _ = getter.get(path)
                times.append(time.perf_counter() - began)
                cpus.append(pid_cpu_seconds(server.pid) - cpu)
                if status != 200:
                    raise BenchError(f"GET {path} -> {status}")
            rest = times[1:] or times
            found[path] = {
                "first_s": times[0],
                "p50_s": statistics.median(rest),
                "cpu_per_read_s": sum(cpus[1:] or cpus) / len(rest),
            }
    finally:
        getter.close()
    return found


class StdlibGet:
    """`GET` over one keep-alive `http.client` connection: the raw client's poller.

    httpx spends tens of ms of Python reading a 6 MB body; `http.client` reads
    it in one buffered call, so the time measured is the server's.
    """

    def __init__(self, server: Server) -> None:
        self._conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        self._headers = server.headers()

    def get(self, path: str) -> tuple[int, bytes]:
        self._conn.request("GET", path, headers=self._headers)
        answer = self._conn.getresponse()
        return answer.status, answer.read()

    def close(self) -> None:
        self._conn.close()


class HttpxGet:
    def __init__(self, server: Server) -> None:
        self._http = httpx.Client(base_url=server.url, headers=server.headers(), timeout=60)

    def get(self, path: str) -> tuple[int, bytes]:
        answer = self._http.get(path)
        return answer.status_code, answer.content

    def close(self) -> None:
        self._http.close()


class Poller:
    """A thread that asks each of `READS` in turn until stopped, timing every answer."""

    def __init__(self, server: Server, every: float = 0.0, client: str = "raw") -> None:
        self.server = server
        self.every = every
        self.client = client
        self.times: dict[str, list[float]] = {path: [] for path in READS}
        self.sizes: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        getter = StdlibGet(self.server) if self.client == "raw" else HttpxGet(self.server)
        try:
            while not self._stop.is_set():
                began_pair = time.perf_counter()
                for path in READS:
                    began = time.perf_counter()
                    status, body = getter.get(path)
                    self.times[path].append(time.perf_counter() - began)
                    if status != 200:
                        raise BenchError(f"GET {path} -> {status}")
                    self.sizes[path] = len(body)
                self._stop.wait(max(0.0, self.every - (time.perf_counter() - began_pair)))
        finally:
            getter.close()

    def __enter__(self) -> Poller:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=120)


def finish_tasks(server: Server, results: list[dict[str, Any]]) -> None:
    """Complete each agent's task, so that the next phase starts with no lease held.

    Without it the second phase's agents (the same path indexes) would be refused
    every path the first phase's still hold: a load of denials, not of leases.
    """
    with httpx.Client(base_url=server.url, headers=server.headers(), timeout=60.0) as http:
        complete_all(http, results)


def lease_phase(args: argparse.Namespace, server: Server, tag: str, poll: bool) -> dict[str, Any]:
    """One lease load of `args.duration` s (its tasks then completed); `poll`: with the poller."""
    params = {
        "client": args.client, "port": server.port, "token": args.token, "seed": args.seed,
        "pool": 20, "shared": 4, "contended": 0.2, "duration": args.duration,
        "per_agent": 10**9, "rotate": 0, "name_prefix": tag,
    }  # fmt: skip
    fleet = Fleet(lease_worker, params, args.agents, args.procs)
    poller = Poller(server, args.poll_every, args.client) if poll else None
    with running(fleet):
        cpu = pid_cpu_seconds(server.pid)
        began = fleet.go()
        if poller is not None:
            server.start_profiler()  # `--profile`: the polled phase only
            with poller:
                parts, _ = fleet.results()
            server.stop_profiler()
        else:
            parts, _ = fleet.results()
        cpu = pid_cpu_seconds(server.pid) - cpu
    results = [agent for part in parts for agent in part]
    finish_tasks(server, results)
    wall = max(a["ended"] for a in results) - began
    requests = sum(len(a["latencies"]) for a in results)
    found: dict[str, Any] = {"requests": requests, "wall_s": wall, "leases_per_s": requests / wall}
    found["outcome"] = dict(sum((Counter(a["outcome"]) for a in results), Counter()))
    found["server_cpu_s"] = cpu
    found["server_cpu_per_lease_s"] = cpu / requests if requests else 0.0
    found["lease_latency_s"] = percentiles([x for a in results for x in a["latencies"]])
    if poller is not None:
        found["reads"] = {p: percentiles(t) for p, t in poller.times.items()}
        found["read_bytes"] = poller.sizes
        found["read_pairs"] = min(len(t) for t in poller.times.values())
    return found


def run_once(args: argparse.Namespace, number: int) -> dict[str, Any]:
    with server_from(args) as server:
        load_s = load_tasks(server, args.tasks)
        loaded_rss = rss_mb(server.pid)
        idle = idle_reads(server, args.idle_reads, args.client) if args.idle_reads else {}
        read_rss = rss_mb(server.pid)
        alone = lease_phase(args, server, f"alone{number}-", poll=False)
        polled = lease_phase(args, server, f"polled{number}-", poll=True)
        beyond = polled["server_cpu_s"] - polled["requests"] * alone["server_cpu_per_lease_s"]
        return {
            "idle_reads": idle,
            "server_cpu_per_read_pair_s": beyond / max(1, polled["read_pairs"]),
            "tasks": args.tasks,
            "agents": args.agents,
            "load_s": load_s,
            "rss_loaded_mb": loaded_rss,
            "rss_per_1000_tasks_mb": loaded_rss * 1000 / args.tasks,
            "rss_read_mb": read_rss,
            "rss_end_mb": rss_mb(server.pid),
            "alone": alone,
            "polled": polled,
            "lease_ratio": polled["leases_per_s"] / alone["leases_per_s"],
        }


def report(run: dict[str, Any]) -> None:
    alone, polled = run["alone"], run["polled"]
    print(
        f"tasks={run['tasks']} loaded in {run['load_s']:.1f}s; rss {run['rss_loaded_mb']:.0f} MB "
        f"({run['rss_per_1000_tasks_mb']:.1f} MB/1,000 tasks), {run['rss_read_mb']:.0f} MB after "
        f"the idle reads, {run['rss_end_mb']:.0f} MB at end"
    )
    print(
        f"  leases alone {alone['leases_per_s']:,.0f}/s, with the poller "
        f"{polled['leases_per_s']:,.0f}/s (ratio {run['lease_ratio']:.2f}); lease latency "
        f"with the poller {fmt_ms(polled['lease_latency_s'])}"
    )
    print(f"  outcomes alone {alone['outcome']}, with the poller {polled['outcome']}")
    for path, stats in polled["reads"].items():
        print(f"  {path} {fmt_ms(stats)} ({polled['read_bytes'].get(path, 0):,} bytes)")
    print(
        f"  server CPU {alone['server_cpu_per_lease_s'] * 1e6:.0f} us/lease alone, "
        f"{run['server_cpu_per_read_pair_s'] * 1e3:.1f} ms per read pair beyond the leases "
        f"({polled['read_pairs']} pairs)"
    )
    for path, idle in run["idle_reads"].items():
        print(
            f"  idle {path}: first {idle['first_s'] * 1e3:.0f} ms, then p50 "
            f"{idle['p50_s'] * 1e3:.1f} ms, server CPU {idle['cpu_per_read_s'] * 1e3:.1f} ms/read"
        )


def spread(runs: list[dict[str, Any]], pick: Any) -> str:
    values = [pick(r) for r in runs]
    return f"{min(values):.3g} / {statistics.median(values):.3g} / {max(values):.3g}"


def summary(runs: list[dict[str, Any]]) -> None:
    print(f"over {len(runs)} runs, min / median / max:")
    print(f"  lease ratio (poller / alone) {spread(runs, lambda r: r['lease_ratio'])}")
    print(f"  leases/s alone {spread(runs, lambda r: r['alone']['leases_per_s'])}")
    print(f"  leases/s polled {spread(runs, lambda r: r['polled']['leases_per_s'])}")
    for path in READS:
        for point in ("p50", "p99"):
            ms = spread(runs, lambda r, p=path, q=point: r["polled"]["reads"][p][q] * 1000)
            print(f"  {path} {point} ms {ms}")
    print(
        f"  server CPU ms per read pair {spread(runs, lambda r: r['server_cpu_per_read_pair_s'] * 1e3)}"
    )
    print(f"  rss MB per 1,000 tasks {spread(runs, lambda r: r['rss_per_1000_tasks_mb'])}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--agents", type=int, default=8)
    parser.add_argument("--duration", type=float, default=8.0, help="seconds per lease phase")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--poll-every", type=float, default=0.0, help="s per read pair (0: back to back)"
    )
    parser.add_argument(
        "--idle-reads", type=int, default=6, help="read pairs on the idle server first"
    )
    add_common_args(parser)
    args = parser.parse_args(argv)
    print(f"machine {machine()}\nserver {server_from(args).describe()}")
    runs = []
    for number in range(args.runs):
        runs.append(run_once(args, number))
        report(runs[-1])
    summary(runs)
    write_json(args.json, {"benchmark": "reads", "machine": machine(), "runs": runs})
    return 0


if __name__ == "__main__":
    sys.exit(main())
