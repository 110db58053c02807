"""Lease latency of 32 agents while tasks writing parts of one big module land and restore.

A `codefleet serve` subprocess (bench.harness) over a tree with `big.py`, a generated
module of the size asked for. Two loads at once, for `--duration` seconds:

- 32 lease agents (bench.leases' agents, in `--procs` processes) each loop
  `POST /leases/acquire` on their own small files: the latency measured;
- `--writers` part writers (this process), each a task at a time: the keys its
  `Edit` of its own function of `big.py` takes, worked out as the runner's gate does
  (`writeparts.write_keys`: parts, or the whole file past the size bound), acquired
  (asked again while refused), the file edited and the write recorded, its check's
  view fetched (`foreign-preimages`), then the task completed, landing its patch and
  failing (its parts put back) in turn.

Each size is run `--runs` times, sizes interleaved; reported per size: the lease
latency p50 / p99 / max per run, the min / median of the runs' p99, the tasks
landed and put back, and the ratio of each size's median p99 to the first size's.
To compare two checkouts, run this file in each (`uv run python -m bench.bigmodule`)
in the same session.

Run: `uv run python -m bench.bigmodule --sizes 3 60 300 --runs 5`; `--language typescript`
writes `big.ts` instead (issue 55: the same load on a tree-sitter mapper).

`--ops` measures instead, in process, where the server's time goes for each size:
the CPU ms of one `ast.parse`, and of the put-backs (`parts.putback.put_back_parts`) of
a restore, a check's view and a landed task's patch ends, four tasks holding one
function each, every operation on a new current text (another write came in).
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import itertools
import re
import statistics
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

from bench.harness import (
    Agent,
    BenchError,
    Fleet,
    Server,
    add_common_args,
    fetch_events,
    machine,
    make_http,
    percentiles,
    running,
    server_from,
)
from bench.leases import own_paths, with_agents
from codefleet.parts.putback import put_back_parts
from codefleet.toolcalls.writeparts import write_keys

MODULES = {"python": "big.py", "typescript": "big.ts"}  # `--language`: the module's file
RETRY_S = 0.02  # between asks while the module is refused (held or being written)


def module(kilobytes: int, language: str = "python") -> str:
    """A module of about `kilobytes` KB: functions (one per writer is `writer_<w>`)."""
    head, function, writer = SOURCES[language]
    body, n = [], 0
    while len(head) + sum(map(len, body)) < kilobytes * 1000:
        body.append(function.format(n=n))
        n += 1
    for w in range(64):  # writers' functions in the middle of the module
        body.insert(len(body) // 2, writer.format(w=w))
    return head + "".join(body)


# language -> (the module's head, function n, writer w's function)
SOURCES = {
    "python": (
        '"""Generated for bench.bigmodule."""\n\nimport os\n',
        "\n\ndef func_{n}(x, y={n}):\n    # step {n}\n    if x > {n}:\n        return x + y\n"
        "    z = dict(a=x, b=y, c={n})\n    return os.fspath(str(z))\n",
        '\n\ndef writer_{w}(x):\n    return "w{w}-0"\n',
    ),
    "typescript": (
        '// Generated for bench.bigmodule.\nimport * as os from "os";\n',
        "\nexport function func_{n}(x: number, y = {n}): string {{\n  // step {n}\n"
        "  if (x > {n}) {{\n    return String(x + y);\n  }}\n"
        "  const z = {{ a: x, b: y, c: {n} }};\n  return os.EOL + JSON.stringify(z);\n}}\n",
        '\nexport function writer_{w}(x: number): string {{\n  return "w{w}-0";\n}}\n',
    ),
}


def next_edit(text: str, writer: int) -> dict[str, str]:
    """The `Edit` that moves writer `writer`'s marker one step on."""
    found = re.search(rf'"w{writer}-(\d+)"', text)
    if found is None:
        raise BenchError(f"writer_{writer}'s marker is gone from the module")
    step = int(found.group(1)) + 1
    return {"old_string": found.group(0), "new_string": f'"w{writer}-{step}"'}


async def _paced(agent: Agent, index: int, task_id: str, params: dict[str, Any]) -> list[float]:
    """Ask for one of the agent's own files every `period` s; each latency counted from the
    moment the ask was due, so a stalled server costs every ask it held up."""
    paths, period = own_paths(index, 50), params["period"]
    began = time.monotonic() + period * (index % 32) / 32  # the agents spread over a period
    latencies: list[float] = []
    for k in itertools.count():
        due = began + k * period
        if due > began + params["duration"]:
            return latencies
        await asyncio.sleep(max(0.0, due - time.monotonic()))
        await agent.acquire(task_id, [paths[k % len(paths)]])
        latencies.append(time.monotonic() - due)
    return latencies


async def lease_agents(
    params: dict[str, Any], indices: list[int], wait_go: Callable[[], Awaitable[None]]
) -> list[list[float]]:
    """The lease agents of one load process: their latencies."""

    async def paced(agent: Agent, index: int, task: dict[str, Any], at: dict[str, Any]) -> Any:
        return await _paced(agent, index, task["id"], at)

    return await with_agents(params, indices, wait_go, paced)


async def _acquire_until_granted(agent: Agent, task_id: str, keys: list[str], end: float) -> bool:
    while time.monotonic() < end:
        answer = await agent.acquire(task_id, keys, tool="Edit")
        if answer["decision"] == "allow":
            return True
        await asyncio.sleep(RETRY_S)
    return False


async def _one_write(
    agent: Agent, tree: Path, path: str, writer: int, task: dict[str, Any], end: float
) -> bool:
    """Take the keys of one edit, make it, record it, fetch a view; False: out of time."""
    edit = next_edit((tree / path).read_text(), writer)
    keys = write_keys(tree, path, "Edit", edit)
    if not await _acquire_until_granted(agent, task["id"], keys, end):
        return False
    target = tree / path
    edit = next_edit(target.read_text(), writer)  # as the tool reads it, once granted
    target.write_text(target.read_text().replace(edit["old_string"], edit["new_string"], 1))
    change = {"agent_id": agent.id, "task_id": task["id"], "path": path, "tool": "Edit"}
    await agent._ok("POST", "/changes", change)
    await agent._ok("GET", f"/tasks/{task['id']}/foreign-preimages")
    return True


async def writer_loop(
    agent: Agent, tree: Path, path: str, writer: int, every: float, end: float
) -> Counter[str]:
    """A task every `every` s (or as soon as the last is done) until `end`: land one, fail
    the next (its parts put back), and so on."""
    done: Counter[str] = Counter()
    due = time.monotonic() + every * writer / 4
    while due < end and time.monotonic() < end:
        await asyncio.sleep(max(0.0, due - time.monotonic()))
        due = max(due + every, time.monotonic())
        task = await agent.next_task(wait=1.0)
        await agent.start(task["id"])
        wrote = await _one_write(agent, tree, path, writer, task, end)
        ok = wrote and done["tasks"] % 2 == 0
        body = {"agent_id": agent.id, "attempt": task["attempts"], "ok": ok}
        if not ok:
            body |= {"error": "bench: rolled back", "error_kind": "agent_error"}
        await agent._ok("POST", f"/tasks/{task['id']}/complete", body)
        done["tasks"] += 1
        done["landed" if ok else "failed" if wrote else "out_of_time"] += 1
    return done


async def writers(
    server: Server, tree: Path, path: str, count: int, every: float, duration: float
) -> Counter[str]:
    pool: list[Any] = []
    agents = [
        Agent(make_http("httpx", server.port, server.token, pool), f"writer-{w}")
        for w in range(count)
    ]
    for agent in agents:
        await agent.register()
    end = time.monotonic() + duration
    found = await asyncio.gather(
        *(writer_loop(a, tree, path, w, every, end) for w, a in enumerate(agents))
    )
    for agent in agents:
        await agent.http.aclose()
    for client in pool:
        await client.aclose()
    return sum(found, Counter())


def cpu_ms(call: Callable[[], object], runs: int = 5) -> float:
    timings = []
    for _ in range(runs):
        began = time.process_time()
        call()
        timings.append(time.process_time() - began)
    return statistics.median(timings) * 1000


def operations(kilobytes: int) -> str:
    """One row of `--ops`: CPU ms of a parse, a restore, a view and a patch's two ends."""
    text = module(kilobytes)
    pre, held = text.encode(), [frozenset({f"writer_{w}"}) for w in range(4)]
    others = [(pre, held[w]) for w in (1, 2, 3)]
    step = itertools.count(1)

    def now() -> bytes:  # each operation on a new current text
        n, current = next(step), text
        for w in range(4):
            current = current.replace(f'"w{w}-0"', f'"w{w}-{n}"')
        return current.encode()

    def patch() -> None:
        after = now()
        put_back_parts(after, others)
        put_back_parts(after, [*others, (pre, held[0])])

    figures = [
        cpu_ms(lambda: ast.parse(text)),
        cpu_ms(lambda: put_back_parts(now(), [(pre, held[0])])),
        cpu_ms(lambda: put_back_parts(now(), others)),
        cpu_ms(patch),
    ]
    return f"| {len(text) // 1000} KB | " + " | ".join(f"{f:,.0f}" for f in figures) + " |"


def post_tasks(server: Server, prefix: str, count: int) -> None:
    specs = [{"id": f"{prefix}{i:05d}", "title": f"{prefix} {i}", "description": "do it",
              "file_scope": [f"scope/{prefix.lower()}{i:05d}.txt"]} for i in range(count)]  # fmt: skip
    answer = httpx.post(
        f"{server.url}/tasks", json={"tasks": specs}, headers=server.headers(), timeout=60
    )
    if answer.status_code != 201:
        raise BenchError(f"POST /tasks -> {answer.status_code} {answer.text[:300]}")


def run_once(args: argparse.Namespace, kilobytes: int) -> dict[str, Any]:
    with server_from(args) as server:
        tree, path = server.tmp / "tree", MODULES[args.language]
        text = module(kilobytes, args.language)
        (tree / path).write_text(text)
        post_tasks(server, "L", args.agents)
        params = {"client": args.client, "port": server.port, "token": args.token,
                  "duration": args.duration, "period": args.period}  # fmt: skip
        fleet = Fleet(lease_agents, params, args.agents, args.procs)
        with running(fleet):  # the lease agents hold the L tasks before the W tasks exist
            post_tasks(server, "W", args.writers * 2000)
            fleet.go()
            done = asyncio.run(
                writers(server, tree, path, args.writers, args.task_every, args.duration)
            )
            parts, _ = fleet.results()
        kinds = Counter(e["type"] for e in fetch_events(server))
    latencies = [x for part in parts for agent in part for x in agent]
    return {
        "kilobytes": len(text) // 1000,
        "lease": percentiles(latencies),
        "landed": done["landed"],
        "failed": done["failed"],
        "restored": kinds["file_restored"],
        "restore_failed": kinds["restore_failed"],
    }


def summary(rows: list[dict[str, Any]]) -> str:
    by_size: dict[int, list[dict[str, Any]]] = {}
    for row in rows:
        by_size.setdefault(row["kilobytes"], []).append(row)
    lines = [
        "| module | runs | lease p50 ms (median) | lease p99 ms min / median | max ms (median) "
        "| landed / failed per run | p99 ratio |",
        "|---" * 7 + "|",
    ]
    base = None
    for size, runs in by_size.items():
        p99 = [r["lease"]["p99"] * 1000 for r in runs]
        p50 = statistics.median(r["lease"]["p50"] * 1000 for r in runs)
        peak = statistics.median(r["lease"]["max"] * 1000 for r in runs)
        base = base or statistics.median(p99)
        landed = statistics.median(r["landed"] for r in runs)
        failed = statistics.median(r["failed"] for r in runs)
        lines.append(
            f"| {size} KB | {len(runs)} | {p50:.1f} | {min(p99):.1f} / {statistics.median(p99):.1f} "
            f"| {peak:.0f} | {landed:.0f} / {failed:.0f} | {statistics.median(p99) / base:.2f}x |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[3, 300], help="module KB")
    parser.add_argument("--runs", type=int, default=3, help="runs per size, interleaved")
    parser.add_argument("--agents", type=int, default=32, help="lease agents")
    parser.add_argument("--writers", type=int, default=4, help="tasks writing parts at once")
    parser.add_argument("--period", type=float, default=0.1, help="s between an agent's asks")
    parser.add_argument("--task-every", type=float, default=0.5, help="s between a writer's tasks")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per run")
    parser.add_argument("--ops", action="store_true", help="CPU ms per operation, in process")
    parser.add_argument("--language", choices=sorted(MODULES), default="python")
    add_common_args(parser)
    parser.set_defaults(client="raw")  # the server's latency, not httpx's CPU on 2 cores
    args = parser.parse_args(argv)
    if args.ops:
        print("| module | ast.parse | restore | view (3 others) | patch ends (3 others) |")
        print("|---" * 5 + "|")
        for kilobytes in args.sizes:
            print(operations(kilobytes))
        return 0
    print(f"machine {machine()}\nserver {server_from(args).describe()}", flush=True)
    rows = []
    for _ in range(args.runs):
        for kilobytes in args.sizes:
            rows.append(run_once(args, kilobytes))
            row = rows[-1]
            lease = row["lease"]
            print(
                f"{row['kilobytes']} KB: lease p50 {lease['p50'] * 1000:.1f} p99 "
                f"{lease['p99'] * 1000:.1f} max {lease['max'] * 1000:.0f} ms (n={int(lease['n'])}), "
                f"landed {row['landed']} failed {row['failed']} restored {row['restored']} "
                f"restore_failed {row['restore_failed']}",
                file=sys.stderr,
                flush=True,
            )
    print(summary(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
