"""Dispatch throughput: a task graph drained by zero-work agents, end to end over HTTP.

The graph (default 2,000 tasks: chains of 8 alternating with fan-outs of a
root, 20 leaves and a join; one private file per task) is posted in one
`POST /tasks` (timed) after the agents have registered; then every agent
loops long-poll `assignment?wait=` -> `start` -> `complete ok` until the
server reports no live task, running the next task `complete`'s answer hands
over (`next`) without a poll, as the runner does (`--poll-only`: always poll,
an older runner's loop). Reported: tasks/s, the complete -> next assignment
handoff as the agent sees it (0 for a handed-over task) and `complete`'s own
round trip, the same handoff from the server's event log (all cases, and
only when a runnable task was waiting for this agent), throughput and server
CPU per task for each tenth of the run (a tick must not get dearer as
finished tasks pile up), server busy %, client CPU.

The log is also checked: every task assigned once and succeeded once, never
before all its dependencies succeeded. Run:
`uv run python -m bench.dispatch` (2,000 / 16) or `python -m bench.scale`.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from bench.harness import (
    Agent,
    BenchError,
    CpuSampler,
    Fleet,
    Server,
    add_common_args,
    build_graph,
    event_time,
    fetch_events,
    fmt_ms,
    machine,
    make_http,
    percentiles,
    running,
    server_from,
    system_busy_seconds,
    wait_quiet,
    write_json,
)


async def _drain(agent: Agent, wait: float, take_handed: bool) -> list[Any]:
    """One zero-work agent until the graph is empty: [(task, arrived, reported, completed)].

    `take_handed`: run the next task a `complete` answer hands over (`next`) without
    polling, as the runner does; else always poll (what an older runner does).
    """
    records: list[tuple[str, float, float, float]] = []
    handed: dict[str, Any] | None = None
    while True:
        task = handed or await agent.assignment(wait)
        arrived = time.monotonic()
        if task is None:
            _, health = await agent.http.call("GET", "/health")
            if health["live_tasks"] == 0:
                return records
            continue
        await agent.start(task["id"])
        reported = time.monotonic()
        answer = await agent.complete(task["id"], task["attempts"])
        records.append((task["id"], arrived, reported, time.monotonic()))
        handed = answer.get("next") if take_handed else None


async def dispatch_worker(
    params: dict[str, Any], indices: list[int], wait_go: Callable[[], Awaitable[None]]
) -> dict[str, Any]:
    pool: list[Any] = []
    agents = [
        Agent(make_http(params["client"], params["port"], params["token"], pool), f"drain-{i}")
        for i in indices
    ]
    for agent in agents:
        await agent.register()
    await wait_go()
    found = await asyncio.gather(*(_drain(a, params["wait"], params["handed"]) for a in agents))
    for agent in agents:
        await agent.http.aclose()
    for client in pool:
        await client.aclose()
    return {a.id: records for a, records in zip(agents, found, strict=True)}


# -- reading the event log ------------------------------------------------------------------


class _Replay:
    """Walks the log keeping the ready set and the idle agents, as the scheduler saw them."""

    def __init__(self, parents: dict[str, list[str]]) -> None:
        self.parents = parents
        self.ready: set[str] = set()
        self.idle: set[str] = set()
        self.succeeded: set[str] = set()
        self.assigned: Counter[str] = Counter()
        self.problems: Counter[str] = Counter()
        self.work_waiting: set[str] = set()  # successes that left a runnable task for the agent
        self.waiting_since: dict[str, tuple[float, bool]] = {}  # agent -> (succeeded at, work?)
        self.handoff_all: list[float] = []
        self.handoff_work: list[float] = []
        self._new_idle: list[tuple[str, str, float]] = []

    def feed(self, event: dict[str, Any]) -> None:
        kind = event["type"]
        if kind != "task_unblocked":
            self.close_transaction()
        at = event_time(event)
        match kind:
            case "agent_registered":
                self.idle.add(event["agent_id"])
            case "task_created":
                if not event["payload"].get("depends_on"):
                    self._became_ready(event["task_id"])
            case "task_unblocked":
                self._became_ready(event["task_id"])
            case "task_assigned":
                self._assigned(event, at)
            case "task_succeeded":
                self._succeeded(event, at)
            case "task_requeued" | "task_failed" | "task_blocked_upstream":
                self.problems[kind] += 1

    def _became_ready(self, task: str) -> None:
        self.ready.add(task)

    def close_transaction(self) -> None:
        """A success and the unblocks it caused share one commit: judge them together."""
        work = len(self.ready) >= len(self.idle)  # every idle agent gets a task next tick
        for agent, task, at in self._new_idle:
            self.waiting_since[agent] = (at, work)
            if work:
                self.work_waiting.add(task)
        self._new_idle = []

    def _assigned(self, event: dict[str, Any], at: float) -> None:
        task, agent = event["task_id"], event["agent_id"]
        self.assigned[task] += 1
        if task not in self.ready:
            self.problems["assigned_while_not_ready"] += 1
        if any(p not in self.succeeded for p in self.parents.get(task, ())):
            self.problems["assigned_before_dependencies_succeeded"] += 1
        self.ready.discard(task)
        self.idle.discard(agent)
        if agent in self.waiting_since:
            began, work = self.waiting_since.pop(agent)
            self.handoff_all.append(at - began)
            if work:
                self.handoff_work.append(at - began)

    def _succeeded(self, event: dict[str, Any], at: float) -> None:
        task, agent = event["task_id"], event["agent_id"]
        if task in self.succeeded:
            self.problems["succeeded_twice"] += 1
        self.succeeded.add(task)
        self.idle.add(agent)
        self._new_idle.append((agent, task, at))


def analyze_log(events: list[dict[str, Any]], graph: list[dict[str, Any]]) -> dict[str, Any]:
    """Server-side handoffs and the order check, from a replay of the whole log."""
    replay = _Replay({t["id"]: t["depends_on"] for t in graph})
    for event in events:
        replay.feed(event)
    replay.close_transaction()
    problems = dict(replay.problems)
    if len(replay.assigned) != len(graph) or any(n != 1 for n in replay.assigned.values()):
        problems["not_assigned_exactly_once"] = len(graph) - list(replay.assigned.values()).count(1)
    if len(replay.succeeded) != len(graph):
        problems["not_succeeded"] = len(graph) - len(replay.succeeded)
    return {
        "handoff_server_all_s": percentiles(replay.handoff_all),
        "handoff_server_work_waiting_s": percentiles(replay.handoff_work),
        "work_waiting": replay.work_waiting,
        "problems": problems,
        "ok": not problems,
    }


# -- figures --------------------------------------------------------------------------------


def handoffs(
    records: dict[str, list[tuple[str, float, float, float]]], work: set[str]
) -> tuple[list[float], list[float]]:
    """Client-side complete returned -> next assignment in hand: every case, and with work.

    A task handed over in `complete`'s answer is in hand when that answer is: its
    handoff is 0 here, and the time moved into `complete`'s round trip (`report_s`).
    """
    every, waiting = [], []
    for rows in records.values():
        for (prev, _, _, done), (_, arrived, _, _) in itertools.pairwise(rows):
            every.append(arrived - done)
            if prev in work:
                waiting.append(arrived - done)
    return every, waiting


def deciles(done: list[float], began: float, sampler: CpuSampler) -> list[dict[str, float]]:
    """Tasks/s and server CPU ms per task for each tenth of the completions."""
    done = sorted(done)
    rows = []
    edges = [began] + [done[(len(done) * k) // 10 - 1] for k in range(1, 11)]
    for k in range(10):
        lo, hi = edges[k], edges[k + 1]
        count = (len(done) * (k + 1)) // 10 - (len(done) * k) // 10
        cpu = sampler.at(hi) - sampler.at(lo)
        rows.append(
            {
                "decile": k + 1,
                "tasks_per_s": count / (hi - lo) if hi > lo else float("inf"),
                "server_cpu_ms_per_task": 1000 * cpu / count if count else float("nan"),
                "server_busy": cpu / (hi - lo) if hi > lo else float("nan"),
            }
        )
    return rows


def post_graph(server: Server, graph: list[dict[str, Any]]) -> float:
    """POST the whole graph in one request; the seconds it took."""
    posted = time.monotonic()
    answer = httpx.post(
        f"{server.url}/tasks", json={"tasks": graph}, headers=server.headers(), timeout=120
    )
    if answer.status_code != 201:
        raise BenchError(f"POST /tasks -> {answer.status_code} {answer.text[:300]}")
    return time.monotonic() - posted


def prefill(args: argparse.Namespace, server: Server, params: dict[str, Any]) -> int:
    """Post and drain `--prefill` tasks first (not measured); the last event id after it."""
    if args.prefill:
        fleet = Fleet(dispatch_worker, params, args.agents, args.procs)
        with running(fleet):
            post_graph(server, build_graph(args.prefill, prefix="P"))
            fleet.go()
            fleet.results(timeout=args.timeout)
    health = httpx.get(f"{server.url}/health", headers=server.headers(), timeout=10).json()
    return int(health["last_event_id"])


def run_once(args: argparse.Namespace) -> dict[str, Any]:
    graph = build_graph(args.tasks)
    params = {
        "client": args.client, "port": 0, "token": args.token, "wait": args.wait,
        "handed": not args.poll_only,
    }  # fmt: skip
    with server_from(args) as server:
        params["port"] = server.port
        since = prefill(args, server, params)
        fleet = Fleet(dispatch_worker, params, args.agents, args.procs)
        background = wait_quiet(args.quiet_wait) if args.quiet_wait else None
        with running(fleet), CpuSampler(server) as sampler:
            server.start_profiler()
            cpu0, busy0 = server.cpu_seconds(), system_busy_seconds()
            posted = time.monotonic()
            post_s = post_graph(server, graph)
            began = fleet.go()
            parts, client_cpu = fleet.results(timeout=args.timeout)
            server_cpu = server.cpu_seconds() - cpu0
            other_cpu = system_busy_seconds() - busy0 - server_cpu - client_cpu
            profile = server.stop_profiler()
        events = fetch_events(server, since)
    records = {agent: rows for part in parts for agent, rows in part.items()}
    done = [row[3] for rows in records.values() for row in rows]
    report_rtt = [row[3] - row[2] for rows in records.values() for row in rows]
    handed_over = sum(
        1 for rows in records.values() for a, b in itertools.pairwise(rows) if b[1] - a[3] < 1e-4
    )
    if len(done) != len(graph):
        raise BenchError(f"{len(done)} completions for {len(graph)} tasks")
    ended = max(done)
    log = analyze_log(events, graph)
    every, waiting = handoffs(records, log["work_waiting"])
    drain = ended - began
    return {
        "tasks": len(graph),
        "prefilled": args.prefill,
        "agents": args.agents,
        "procs": min(args.procs, args.agents),
        "client": args.client,
        "tick_interval": args.tick_interval,
        "post_s": post_s,
        "drain_s": drain,
        "end_to_end_s": ended - posted,
        "tasks_per_s": len(graph) / drain,
        "tasks_per_s_with_post": len(graph) / (ended - posted),
        "handoff_client_all_s": percentiles(every),
        "handoff_client_work_waiting_s": percentiles(waiting),
        "report_s": percentiles(report_rtt),
        "handed_over": handed_over,
        "poll_only": args.poll_only,
        **{k: v for k, v in log.items() if k.startswith("handoff")},
        "deciles": deciles(done, began, sampler),
        "server_cpu_s": server_cpu,
        "server_busy": server_cpu / (ended - posted),
        "client_cpu_s": client_cpu,
        "other_cpu_s": max(0.0, other_cpu),
        "background_before_cores": background,
        "log_ok": log["ok"],
        "log_problems": log["problems"],
        "profile": str(profile) if profile else None,
    }


def report(f: dict[str, Any]) -> None:
    print(
        f"{f['tasks']} tasks / {f['agents']} agents, client={f['client']} procs={f['procs']}, "
        f"{f['prefilled']} finished before: "
        f"POST {f['post_s'] * 1000:.0f} ms, drained in {f['drain_s']:.2f} s -> "
        f"{f['tasks_per_s']:,.0f} tasks/s ({f['tasks_per_s_with_post']:,.0f}/s incl. POST)"
    )
    for key in (
        "handoff_client_all_s",
        "handoff_client_work_waiting_s",
        "handoff_server_all_s",
        "handoff_server_work_waiting_s",
        "report_s",
    ):
        print(f"  {key[:-2]:<32} {fmt_ms(f[key])}")
    mode = "poll only" if f["poll_only"] else "next task taken from complete's answer"
    print(
        f"  {f['handed_over']:,} of {f['tasks']:,} tasks handed over in complete's answer ({mode})"
    )
    print(f"  server cpu per task {1000 * f['server_cpu_s'] / f['tasks']:.3f} ms")
    print(
        f"  server busy {f['server_busy']:.0%} ({f['server_cpu_s']:.2f} cpu-s), "
        f"client cpu {f['client_cpu_s']:.2f} cpu-s, other load {f['other_cpu_s']:.2f} cpu-s"
        f" (background before start {_cores(f['background_before_cores'])})"
    )
    print("  decile  tasks/s  server-ms/task  server-busy")
    for row in f["deciles"]:
        print(
            f"  {row['decile']:>6}  {row['tasks_per_s']:>7,.0f}  "
            f"{row['server_cpu_ms_per_task']:>14.2f}  {row['server_busy']:>10.0%}"
        )
    verdict = "OK" if f["log_ok"] else f"FAILED {f['log_problems']}"
    print(f"  event log check {verdict}")
    if f["profile"]:
        print(f"  profile {f['profile']}")


def _cores(value: float | None) -> str:
    return "not measured" if value is None else f"{value:.2f} cores"


def parser(tasks: int, agents: int) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tasks", type=int, default=tasks)
    p.add_argument("--agents", type=int, default=agents)
    p.add_argument("--wait", type=float, default=2.0, help="long-poll wait, seconds")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument(
        "--prefill",
        type=int,
        default=0,
        help="first post and drain this many tasks (unmeasured): the run then starts with "
        "that many finished tasks in the database and the index",
    )
    p.add_argument("--timeout", type=float, default=600.0, help="give up after this many s")
    p.add_argument(
        "--poll-only",
        action="store_true",
        help="ignore the next task a `complete` answer hands over and poll for it (an older "
        "runner's loop)",
    )
    add_common_args(p)
    return p


def main(argv: list[str] | None = None, tasks: int = 2000, agents: int = 16) -> int:
    args = parser(tasks, agents).parse_args(argv)
    print(f"machine {machine()}\nserver {server_from(args).describe()}")
    runs = []
    for _ in range(args.repeat):
        figures = run_once(args)
        report(figures)
        runs.append(figures)
    write_json(
        args.json,
        {
            "benchmark": "dispatch",
            "machine": machine(),
            "server": server_from(args).describe(),
            "runs": runs,
        },
    )
    return 0 if all(r["log_ok"] for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
