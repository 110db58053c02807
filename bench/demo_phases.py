"""Where `codefleet demo --dry-run`'s time goes: the demo run in this process, each piece timed.

Wraps the demo's pieces (imports, workspace, server start and stop, the
fleet, the final check, the committer, the printing) and prints when each
started and how long it took, in ms from this script's start (the
interpreter's own start and exit are outside it). The demo's output is
discarded. Last, the CPU each thread spent during `run_fleet` (the main loop: runners,
clients, followers; the server's thread; the worker threads), from `/proc`. Run it at
real-time priority for the figures an idle machine gives:

    chrt -f 50 .venv/bin/python -m bench.demo_phases /tmp/demo-phases
"""
# ruff: noqa: E402 - the imports are what is timed, one after the other

from __future__ import annotations

import time

T0 = time.perf_counter()
MARKS: list[tuple[str, float]] = []
MARKS.append(("start", T0))

from codefleet.gcpolicy import collector_off

with collector_off(freeze=True):  # as the executable imports the command line
    import codefleet.cli.app
import codefleet.cli.start.demo

MARKS.append(("import cli (Typer, every command module)", time.perf_counter()))
demo_run = codefleet.cli.start.demo.import_demo_run()  # as the demo command does

MARKS.append(("import demo_run (server, client, fleet, ui)", time.perf_counter()))

import contextlib
import inspect
import itertools
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import uvicorn.lifespan.on

import codefleet.fleet.local
import codefleet.review.live
import codefleet.server.thread
import codefleet.transport.uvicorn_internals

SPANS: list[tuple[str, float, float]] = []


def wrap(owner: Any, attr: str, name: str) -> None:
    """Replace `owner.attr` by a wrapper that records its start and duration."""
    fn: Callable[..., Any] = getattr(owner, attr)
    if inspect.iscoroutinefunction(fn):

        async def timed_async(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return await fn(*args, **kwargs)
            finally:
                SPANS.append((name, started, time.perf_counter()))

        setattr(owner, attr, timed_async)
        return

    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            SPANS.append((name, started, time.perf_counter()))

    setattr(owner, attr, timed)


FLEET_CPU: dict[str, float] = {}


def thread_cpu() -> dict[str, float]:
    """CPU seconds so far of each live thread of this process, by name (workers together)."""
    names = {t.native_id: t.name for t in threading.enumerate()}
    tick = os.sysconf("SC_CLK_TCK")
    found: dict[str, float] = {}
    for tid in os.listdir("/proc/self/task"):
        with contextlib.suppress(FileNotFoundError):
            stat = Path(f"/proc/self/task/{tid}/stat").read_text()
            fields = stat.rsplit(")", 1)[1].split()
            name = names.get(int(tid), "other")
            name = name if name in ("MainThread", "codefleet-server") else "workers"
            found[name] = found.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return found


def measure_fleet_cpu() -> None:
    """Keep each thread's CPU during `run_fleet` in `FLEET_CPU`."""
    fleet = demo_run.run_fleet

    async def counted(*args: Any, **kwargs: Any) -> Any:
        before = thread_cpu()
        try:
            return await fleet(*args, **kwargs)
        finally:
            after = thread_cpu()
            FLEET_CPU.update({n: after[n] - before.get(n, 0.0) for n in after})

    demo_run.run_fleet = counted


def instrument() -> None:
    thread = codefleet.server.thread.ServerThread
    wrap(demo_run, "make_workspace", "workspace (copytree + git init/commit)")
    wrap(demo_run, "load_graph", "load graph")
    wrap(demo_run, "demo_committer", "open committer")
    wrap(thread, "__init__", "server: create_app + config")
    wrap(thread, "start", "server: start (thread, lifespan, bind)")
    wrap(demo_run, "_load_and_announce", "load the tasks, announce")
    wrap(demo_run, "demo_executor", "the agents (the dry run's script read)")
    wrap(demo_run, "demo_shell", "the shell (bubblewrap or unshare probed)")
    wrap(demo_run, "run_fleet", "run_fleet (fleet + final verify)")
    wrap(codefleet.fleet.local, "run_command", "  of which: the final verify command")
    wrap(codefleet.review.live.LiveCommitter, "finish", "committer.finish (after the drain)")
    wrap(demo_run, "print_result", "print_result")
    wrap(demo_run, "print_history", "print_history")
    wrap(thread, "stop", "server: stop (join)")
    server = codefleet.transport.uvicorn_internals.FleetServer
    wrap(server, "shutdown", "  uvicorn shutdown")
    wrap(server, "_drained", "  uvicorn waits for open requests")
    wrap(uvicorn.lifespan.on.LifespanOn, "shutdown", "  lifespan shutdown")


def main() -> None:
    measure_fleet_cpu()
    instrument()
    sys.argv = ["codefleet", "demo", "--dry-run", "--run-dir", sys.argv[1]]
    with (
        open(os.devnull, "w") as out,
        contextlib.redirect_stdout(out),
        contextlib.suppress(SystemExit),
    ):
        codefleet.cli.app.app()
    MARKS.append(("the command", time.perf_counter()))
    print(f"{'piece':50} {'start':>7} {'ms':>7}")
    for (_, before), (name, at) in itertools.pairwise(MARKS):
        print(f"{name:50} {1000 * (before - T0):7.0f} {1000 * (at - before):7.0f}")
    for name, started, ended in sorted(SPANS, key=lambda span: span[1]):
        print(f"  {name:48} {1000 * (started - T0):7.0f} {1000 * (ended - started):7.0f}")
    print(
        "CPU during run_fleet, ms: "
        + ", ".join(f"{n} {1000 * c:.0f}" for n, c in FLEET_CPU.items())
    )


if __name__ == "__main__":
    main()
