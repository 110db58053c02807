"""Latency of `codefleet hook`, cold, as a person's Claude Code session pays it on every write.

Starts `codefleet serve` (the harness's `Server`), then runs the real
`codefleet hook pre-tool-use|post-tool-use|session-end` executable once per
call, a new process each time exactly as Claude Code runs a command hook, with
the hook JSON on stdin. The time is spawn → exit, interpreter start included.

Cases: `allow` (a write to a new file of the person's: one lease each call),
`again` (the same file again: your own lease), `deny` (a file a runner holds:
the person's denial), `post` (the ledger row), `end` (SessionEnd releasing the
session's leases), and `python` (the bare interpreter, `-c pass`, the floor).
Beside wall time it reports each process's own CPU time (user + system, from
`getrusage` of the finished child): on a shared 2-core machine the wall time
includes waiting for a core, the CPU time does not.

    uv run python -m bench.hook [--calls 200] [--quiet-wait 120] [--json out.json]
    sudo chrt -f 50 .venv/bin/python -m bench.hook   # ahead of other jobs on a shared machine
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from bench.harness import Server, machine, percentiles, wait_quiet

SESSION = "0aeef531-72cc-4552-9656-7482e7ecde15"


CPU: list[float] = []  # the CPU seconds of every measured process, in call order


def timed(argv: list[str], stdin: bytes = b"") -> float:
    """Seconds from spawn to exit of one process; its CPU seconds go to `CPU`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, input=stdin, capture_output=True, check=False)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    if done.returncode != 0:
        raise RuntimeError(f"{argv[1:3]} exited {done.returncode}: {done.stderr.decode()[-500:]}")
    return elapsed


def hook_call(exe: Path, server: Server, event: str, stdin: dict[str, Any]) -> float:
    """Seconds from spawn to exit of one `codefleet hook EVENT` process."""
    argv = [str(exe), "hook", event, "--server", server.url, "--tree", str(server.tmp / "tree")]
    return timed(argv, json.dumps(stdin).encode())


def write(tree: Path, path: str, session: str = SESSION) -> dict[str, Any]:
    return {
        "session_id": session,
        "cwd": str(tree),
        "hook_event_name": "PreToolUse",
        "tool_name": "Write",
        "tool_input": {"file_path": str(tree / path), "content": "x"},
    }


def fleet_holds(server: Server, path: str) -> None:
    """A runner takes a task and leases `path`, so the person's write to it is denied."""
    with httpx.Client(base_url=server.url, timeout=10) as http:
        http.post("/tasks", json={"tasks": [{"id": "T3", "title": "Add rate limiting", "description": "d"}]}).raise_for_status()  # fmt: skip
        agent = http.post("/agents/register", json={"name": "runner-2", "workdir": str(server.tmp / "tree"), "pid": 1}).json()  # fmt: skip
        headers = {"X-Agent-Epoch": str(agent["epoch"])}
        got = http.get(f"/agents/{agent['agent_id']}/assignment", params={"wait": 5}, headers=headers)  # fmt: skip
        assert got.status_code == 200, got.text
        http.post("/tasks/T3/start", json={"agent_id": agent["agent_id"]}, headers=headers)
        body = {"agent_id": agent["agent_id"], "task_id": "T3", "paths": [path], "tool": "Edit"}
        answer = http.post("/leases/acquire", json=body, headers=headers).json()
        assert answer["decision"] == "allow", answer


def measure(calls: int, exe: Path) -> dict[str, dict[str, float]]:
    figures: dict[str, dict[str, float]] = {}
    with Server() as server:
        tree = server.tmp / "tree"
        fleet_holds(server, "held.py")
        cases: dict[str, Callable[[int], float]] = {
            "python": lambda n: _bare_python(exe),
            "allow": lambda n: hook_call(exe, server, "pre-tool-use", write(tree, f"new{n}.py")),
            "again": lambda n: hook_call(exe, server, "pre-tool-use", write(tree, "new0.py")),
            "deny": lambda n: hook_call(exe, server, "pre-tool-use", write(tree, "held.py")),
            "post": lambda n: hook_call(exe, server, "post-tool-use", write(tree, "new0.py")),
            "end": lambda n: _end(exe, server, tree, n),
        }
        for name, case in cases.items():
            case(0)  # warm the page cache once; every measured call is still a new process
            CPU.clear()
            figures[name] = percentiles([case(n) for n in range(calls)], (50, 95, 99))
            figures[f"{name} cpu"] = percentiles(CPU, (50, 95, 99))
    return figures


def _bare_python(exe: Path) -> float:
    return timed([str(exe.parent / "python"), "-c", "pass"])


def _end(exe: Path, server: Server, tree: Path, n: int) -> float:
    session = f"end-{n:05d}-session"
    hook_call(exe, server, "pre-tool-use", write(tree, f"end{n}.py", session))  # one lease to free
    CPU.pop()  # that call is not the one measured
    end = {"session_id": session, "cwd": str(tree), "hook_event_name": "SessionEnd", "reason": "other"}  # fmt: skip
    return hook_call(exe, server, "session-end", end)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--quiet-wait", type=float, default=0.0, help="wait up to S s for an idle machine")  # fmt: skip
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    exe = Path(sys.executable).parent / "codefleet"
    background = wait_quiet(args.quiet_wait) if args.quiet_wait else None
    figures = measure(args.calls, exe)
    print(f"codefleet hook, {args.calls} cold calls per case (ms; background load {background})")
    for name, stats in figures.items():
        print(f"  {name:11s} " + "  ".join(f"{k}={v * 1000:6.1f}" for k, v in stats.items() if k != "n"))  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps({"machine": machine(), "background": background, "figures": figures}, indent=2))  # fmt: skip


if __name__ == "__main__":
    main()
