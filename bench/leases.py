"""Lease acquisition throughput and latency with 1, 8 and 32 concurrent agents.

Each agent registers, is assigned one task (N tasks with disjoint scopes are
posted first), starts it, and then loops `POST /leases/acquire` for a fixed
time or count: by default 80 % of the requests ask for one of the agent's own
paths (a pool per agent, so both first acquisitions and re-acquisitions of a
held lease), 20 % for one of a few shared paths that every agent contends for.
With `--rotate K` an agent completes its task every K requests and takes the
next one, so its leases are released and the contended paths change hands.

Correctness: after the run the event log is replayed in id order; a
`lease_acquired` for a path while another task holds it is a violation, and a
`lease_denied` must name the task that really held the path. The replayed
holders must equal `GET /leases`; after every task is completed, both must be
empty. Run: `uv run python -m bench.leases --agents 1 8 32`.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from bench.harness import (
    Agent,
    BenchError,
    Fleet,
    Server,
    add_common_args,
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
from bench.sse import SseClients


def own_paths(index: int, pool: int) -> list[str]:
    return [f"agents/a{index:03d}/f{k:02d}.py" for k in range(pool)]


def shared_paths(count: int) -> list[str]:
    return [f"shared/s{k}.py" for k in range(count)]


async def _take_task(agent: Agent) -> dict[str, Any]:
    task = await agent.next_task(wait=2.0)
    await agent.start(task["id"])
    return task


async def _acquire_loop(
    agent: Agent, index: int, task: dict[str, Any], params: dict[str, Any]
) -> dict[str, Any]:
    rng = random.Random(params["seed"] * 1000 + index)
    own, shared = own_paths(index, params["pool"]), shared_paths(params["shared"])
    deadline = time.monotonic() + params["duration"]
    latencies: list[float] = []
    outcome: Counter[str] = Counter()
    rotations = 0
    while len(latencies) < params["per_agent"] and time.monotonic() < deadline:
        contended = rng.random() < params["contended"]
        path = rng.choice(shared if contended else own)
        began = time.perf_counter()
        answer = await agent.acquire(task["id"], [path])
        latencies.append(time.perf_counter() - began)
        outcome[f"{answer['decision']}_{'shared' if contended else 'own'}"] += 1
        if params["rotate"] and len(latencies) % params["rotate"] == 0:
            await agent.complete(task["id"], task["attempts"])
            task = await _take_task(agent)
            rotations += 1
    return {
        "name": agent.name,
        "agent_id": agent.id,
        "epoch": agent.epoch,
        "task_id": task["id"],
        "attempt": task["attempts"],
        "latencies": latencies,
        "outcome": dict(outcome),
        "rotations": rotations,
        "ended": time.monotonic(),
    }


Play = Callable[[Agent, int, dict[str, Any], dict[str, Any]], Awaitable[Any]]


async def with_agents(
    params: dict[str, Any],
    indices: list[int],
    wait_go: Callable[[], Awaitable[None]],
    play: Play,
    prefix: str = "lease-",
) -> list[Any]:
    """One agent per index, registered and started on a task each; at the go, `play` for
    every agent at once (agent, index, task, params); the connections closed after."""
    pool: list[Any] = []
    agents = [
        Agent(make_http(params["client"], params["port"], params["token"], pool), f"{prefix}{i}")
        for i in indices
    ]
    for agent in agents:
        await agent.register()
    tasks = await asyncio.gather(*(_take_task(a) for a in agents))
    await wait_go()
    found = await asyncio.gather(
        *(play(a, i, t, params) for a, i, t in zip(agents, indices, tasks, strict=True))
    )
    for agent in agents:
        await agent.http.aclose()
    for client in pool:
        await client.aclose()
    return list(found)


async def lease_worker(
    params: dict[str, Any], indices: list[int], wait_go: Callable[[], Awaitable[None]]
) -> list[dict[str, Any]]:
    prefix = params.get("name_prefix", "lease-")
    return await with_agents(params, indices, wait_go, _acquire_loop, prefix)


# -- the correctness check ----------------------------------------------------------------


def replay_leases(events: list[dict[str, Any]]) -> dict[str, Any]:
    """Replay lease events in id order; count double holders and unjustified denials."""
    holder: dict[str, str] = {}
    takers: dict[str, set[str]] = {}
    problems: Counter[str] = Counter()
    counts: Counter[str] = Counter()
    for event in events:
        kind, task, body = event["type"], event["task_id"], event["payload"]
        path = body.get("path")
        if kind == "lease_acquired":
            counts[kind] += 1
            if path in holder and holder[path] != task:
                problems["acquired_while_held_by_another_task"] += 1
            holder[path] = task
            takers.setdefault(path, set()).add(task)
        elif kind == "lease_released":
            counts[kind] += 1
            if holder.get(path) != task:
                problems["released_by_non_holder"] += 1
            holder.pop(path, None)
        elif kind == "lease_denied":
            counts[kind] += 1
            if holder.get(path) != body.get("holder_task_id") or holder.get(path) == task:
                problems["denied_without_a_real_holder"] += 1
    return {"holders": holder, "takers": takers, "problems": problems, "counts": counts}


def complete_all(http: httpx.Client, results: list[dict[str, Any]]) -> None:
    """Complete each lease agent's task (ok): its leases are released."""
    for agent in results:
        body = {"agent_id": agent["agent_id"], "attempt": agent["attempt"], "ok": True}
        headers = {"X-Agent-Epoch": str(agent["epoch"])}
        answer = http.post(f"/tasks/{agent['task_id']}/complete", json=body, headers=headers)
        if answer.status_code != 200:
            raise BenchError(f"complete {agent['task_id']}: {answer.status_code} {answer.text}")


def check_leases(
    server: Server, results: list[dict[str, Any]], shared: list[str], rotate: int
) -> dict[str, Any]:
    """Replay the log against `GET /leases`, then complete every task and replay again."""
    with httpx.Client(base_url=server.url, headers=server.headers(), timeout=60.0) as http:
        table = {row["path"]: row["task_id"] for row in http.get("/leases").json()["leases"]}
        during = replay_leases(fetch_events(server))
        complete_all(http, results)
        after_table = http.get("/leases").json()["leases"]
    after = replay_leases(fetch_events(server))
    client_denials = sum(
        n for a in results for key, n in a["outcome"].items() if key.startswith("deny")
    )
    checks = {
        "double_holders": during["problems"]["acquired_while_held_by_another_task"],
        "other_problems": sum(after["problems"].values()),
        "replay_equals_table": during["holders"] == table,
        "denials_client_equals_events": client_denials == during["counts"]["lease_denied"],
        "empty_after_completion": not after["holders"] and not after_table,
    }
    if not rotate:
        checks["one_taker_per_shared_path"] = all(
            len(during["takers"].get(p, ())) <= 1 for p in shared
        )
    checks["ok"] = (
        checks["double_holders"] == 0
        and checks["other_problems"] == 0
        and all(v for k, v in checks.items() if isinstance(v, bool))
    )
    checks["events"] = dict(after["counts"])
    return checks


# -- one measurement ------------------------------------------------------------------------


def run_once(args: argparse.Namespace, agents: int) -> dict[str, Any]:
    per_agent = max(1, args.max_requests // agents)
    rounds = per_agent // args.rotate + 2 if args.rotate else 1
    with server_from(args) as server:
        specs = [
            {
                "id": f"L{i:05d}",
                "title": f"lease task {i}",
                "description": "do it",
                "file_scope": [f"scope/t{i:05d}.txt"],
            }
            for i in range(agents * rounds)
        ]
        created = httpx.post(
            f"{server.url}/tasks", json={"tasks": specs}, headers=server.headers(), timeout=60
        )
        if created.status_code != 201:
            raise BenchError(f"POST /tasks -> {created.status_code} {created.text[:300]}")
        params = {
            "client": args.client, "port": server.port, "token": args.token, "seed": args.seed,
            "pool": args.pool, "shared": args.shared, "contended": args.contended,
            "duration": args.duration, "per_agent": per_agent, "rotate": args.rotate,
        }  # fmt: skip
        fleet = Fleet(lease_worker, params, agents, args.procs)
        background = wait_quiet(args.quiet_wait) if args.quiet_wait else None
        sse = SseClients(server.url, server.port, args.token, args.sse) if args.sse else None
        with running(fleet):
            if sse is not None:
                sse.start()
            server.start_profiler()
            cpu0, busy0 = server.cpu_seconds(), system_busy_seconds()
            began = fleet.go()
            parts, client_cpu = fleet.results()
            results = [agent for part in parts for agent in part]
            ended = max(a["ended"] for a in results)
            server_cpu = server.cpu_seconds() - cpu0
            other_cpu = system_busy_seconds() - busy0 - server_cpu - client_cpu
            profile = server.stop_profiler()
            streamed = sse.stop() if sse is not None else None
            if streamed is not None:
                other_cpu -= streamed["cpu_s"]  # the SSE clients' process (stopped after `ended`)
        checks = check_leases(server, results, shared_paths(args.shared), args.rotate)
    wall = ended - began
    latencies = [x for a in results for x in a["latencies"]]
    outcome: Counter[str] = Counter()
    for agent in results:
        outcome.update(agent["outcome"])
    return {
        "agents": agents,
        "procs": min(args.procs, agents),
        "client": args.client,
        "requests": len(latencies),
        "wall_s": wall,
        "requests_per_s": len(latencies) / wall,
        "latency_s": percentiles(latencies),
        "outcome": dict(outcome),
        "rotations": sum(a["rotations"] for a in results),
        "server_cpu_s": server_cpu,
        "server_busy": server_cpu / wall,
        "client_cpu_s": client_cpu,
        "other_cpu_s": max(0.0, other_cpu),
        "background_before_cores": background,
        "server_cpu_us_per_request": 1e6 * server_cpu / len(latencies),
        "checks": checks,
        "profile": str(profile) if profile else None,
        "sse": streamed,
    }


def report(figures: dict[str, Any]) -> None:
    print(
        f"agents={figures['agents']:>2} client={figures['client']} procs={figures['procs']} "
        f"requests={figures['requests']} in {figures['wall_s']:.2f}s -> "
        f"{figures['requests_per_s']:,.0f} req/s"
    )
    print(f"  latency {fmt_ms(figures['latency_s'])}")
    print(
        f"  server busy {figures['server_busy']:.0%} ({figures['server_cpu_s']:.2f} cpu-s, "
        f"{figures['server_cpu_us_per_request']:.0f} cpu-us/request), "
        f"client cpu {figures['client_cpu_s']:.2f} cpu-s, "
        f"other load {figures['other_cpu_s']:.2f} cpu-s, rotations {figures['rotations']}"
        f", background before start {figures['background_before_cores']}"
    )
    print(f"  outcome {figures['outcome']}")
    if figures.get("sse"):
        print(f"  sse {figures['sse']}")
    checks = figures["checks"]
    verdict = "OK" if checks["ok"] else "FAILED"
    print(f"  correctness {verdict}: {checks}")
    if figures["profile"]:
        print(f"  profile {figures['profile']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per run (max)")
    parser.add_argument("--max-requests", type=int, default=200_000, help="per run, all agents")
    parser.add_argument("--contended", type=float, default=0.2, help="share of shared-path asks")
    parser.add_argument("--shared", type=int, default=4, help="number of contended paths")
    parser.add_argument("--pool", type=int, default=50, help="own paths per agent")
    parser.add_argument("--rotate", type=int, default=0, help="complete + next task every K asks")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--sse", type=int, default=0, help="SSE clients attached during the run")
    add_common_args(parser)
    args = parser.parse_args(argv)
    print(f"machine {machine()}\nserver {server_from(args).describe()}")
    runs = []
    for agents in args.agents:
        figures = run_once(args, agents)
        report(figures)
        runs.append(figures)
    write_json(
        args.json,
        {
            "benchmark": "leases",
            "machine": machine(),
            "server": server_from(args).describe(),
            "runs": runs,
        },
    )
    return 0 if all(r["checks"]["ok"] for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
