"""Runners in clones against runners in the shared tree: what a clone costs, in one run.

For each fleet size N (default 4, 16, 64) the same generated graph is drained
twice, each time against a fresh `codefleet serve` process over a fresh copy
of one generated git repository: once by N scripted runners in the server's
tree, once by N scripted runners each in its own clone of the landed line
(`FleetOptions(clones=...)`; in-process asyncio runners, the real gate, the
real `git`). The graph: N x `--tasks-per-runner` tasks, each editing its own
module; every `--hot-every`th task then appends to a hot file it shares with
`--hot-share` - 1 neighbours, so a hot file's later holders park (`serve
--lease-wait`) while an earlier one holds it and, in a clone, must fetch its
landed version at the grant. No integration check: a task lands when it succeeds (the landing
worker runs beside the runners, as `run` starts it).

Per mode and N: leases (`lease_acquired`), landings (`task_succeeded`), the
server's CPU over the drain (its own, and its reaped children's: `git
http-backend` and the line's commits, from /proc/PID/stat), CPU ms per lease
and per landing, the makespan (wall time of `run_fleet`), fetches and git
processes per task and their traffic (`bench.clonecount`), and the time from
a grant to the write when the clone was behind on the file (`Clone.level`
calls that took the file from the line). Compare the two modes within one run.

Run: `uv run python -m bench.clones [--runners 4,16,64] [--tasks-per-runner 2]
[--hot-every 2] [--hot-share 4] [--work-s 0.1] [--json PATH]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

from bench.clonecount import STEPS, CloneProbe, GitMeter, MeterCounts
from bench.harness import BenchError, Server, machine, percentiles, pid_cpu_split, wait_quiet
from codefleet.api.client import FleetClient
from codefleet.fleet.local import FleetOptions, FleetResult, run_fleet
from codefleet.fleet.runner import RunnerOptions
from codefleet.fleet.scripted import ScriptedExecutor, parse_script

MODES: Final = ("tree", "clones")
LEASE_WAIT_S: Final = 120.0  # a hot file's next holder parks for it rather than being vetoed
LINE_WAIT_S: Final = 120.0
IDENTITY: Final = {"user.name": "Bench", "user.email": "bench@example.invalid"}
MODULE_LINES: Final = 40


@dataclass(frozen=True)
class Shape:
    """The generated graph: tasks, modules in the repository, hot files and who touches them."""

    tasks: int
    files: int
    hot_every: int  # every Kth task is a hot one
    hot_share: int  # how many hot tasks, one after another in the graph, share one hot file
    work_s: float

    @property
    def hot_files(self) -> int:
        hot = self.tasks // self.hot_every if self.hot_every > 0 else 0
        return -(-hot // self.hot_share)

    def hot_file(self, n: int) -> str | None:
        """The hot file task n appends to, if it is a hot task: neighbours share one, so
        they run at once and all but the first holder wait for it and are behind."""
        if self.hot_every <= 0 or n % self.hot_every != self.hot_every - 1:
            return None
        return f"hot/h{(n // self.hot_every) // self.hot_share}.py"


@dataclass(frozen=True)
class Figures:
    runners: int
    mode: str
    tasks: int
    attempts: int
    leases: int
    landings: int
    denied: int
    rereads: int
    server_cpu_s: float  # its own and its reaped children's
    server_git_cpu_s: float  # the reaped children's alone (git http-backend, the line's git)
    cpu_ms_per_lease: float
    cpu_ms_per_landing: float
    makespan_s: float
    runner_cpu_s: float  # this process (the runners) and its git processes
    fetches_per_task: float
    fetches: dict[str, int]  # by step: open, reset, level, catch_up
    gits_per_attempt: float  # git processes a clone runner started, per attempt
    gits: dict[str, int]  # by step
    git_requests_per_task: float
    kb_per_task: float  # the clones' git traffic, both ways, HTTP heads included
    kb: dict[str, float]  # per task, by step
    behind: int  # grants that took the file from the line
    level_behind_ms: dict[str, float]  # p50 / p95 / max of those grants' `level`
    level_level_ms: float  # p50 of a `level` that found the file already level


def module_text(n: int) -> str:
    body = "".join(f"def f{n}_{k}(x):\n    return x + {k}\n\n\n" for k in range(MODULE_LINES // 4))
    return f'"""Module {n}."""\n\nVALUE = 0\n\n\n{body}'


def seed_tree(shape: Shape, tree: Path) -> None:
    """The repository both modes start from: `files` modules and the hot files, committed."""
    (tree / "src" / "pkg").mkdir(parents=True)
    (tree / "hot").mkdir()
    for n in range(shape.files):
        (tree / "src" / "pkg" / f"m{n:03d}.py").write_text(module_text(n))
    for k in range(shape.hot_files):
        (tree / "hot" / f"h{k}.py").write_text(f'"""Hot file {k}: every hot task appends."""\n')
    git(tree, "init", "--quiet", "--initial-branch=main")
    for key, value in IDENTITY.items():
        git(tree, "config", key, value)
    git(tree, "add", "--all")
    git(tree, "commit", "--quiet", "-m", "start")


def git(tree: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=tree, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise BenchError(f"git {args[0]} in {tree}: {done.stderr.strip()}")
    return done.stdout


def workload(shape: Shape) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The graph (no scopes: the leases decide) and its script."""
    graph, script = [], {}
    for n in range(shape.tasks):
        task_id = f"T{n:03d}"
        graph.append({"id": task_id, "title": f"Change module {n}", "description": "scripted"})
        steps: list[dict[str, Any]] = [{"sleep": shape.work_s}] if shape.work_s > 0 else []
        old, new = "VALUE = 0", f"VALUE = {n}"
        steps.append({"edit": {"path": f"src/pkg/m{n:03d}.py", "old": old, "new": new}})
        hot = shape.hot_file(n)
        if hot is not None:
            steps.append({"append": {"path": hot, "text": f"T{n:03d} = {n}\n"}})
        script[task_id] = steps
    return graph, script


def check_tree(shape: Shape, tree: Path) -> None:
    """Every task's change is in the server's tree, each hot line exactly once."""
    for n in range(shape.tasks):
        if f"VALUE = {n}\n" not in (tree / "src" / "pkg" / f"m{n:03d}.py").read_text():
            raise BenchError(f"module {n} lacks its task's change")
        hot = shape.hot_file(n)
        if hot is not None and (tree / hot).read_text().count(f"T{n:03d} = {n}\n") != 1:
            raise BenchError(f"{hot} does not hold task {n}'s line exactly once")


def own_cpu() -> float:
    """CPU seconds of this process and of the children it waited for (the clones' git)."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


async def line_caught_up(client: FleetClient, events: list[dict[str, Any]]) -> None:
    """Until the line has committed every landing (the server's git work ends the drain)."""
    succeeded = [int(e["id"]) for e in events if e["type"] == "task_succeeded"]
    last = max(succeeded, default=0)
    deadline = time.monotonic() + LINE_WAIT_S
    while int((await client.landed()).get("cursor") or 0) < last:
        if time.monotonic() > deadline:
            raise BenchError(f"the landed line did not reach event {last} in {LINE_WAIT_S:.0f} s")
        await asyncio.sleep(0.05)  # polling the line's cursor; it has no event of its own


@dataclass
class Drained:
    """What one drain leaves to be read: the fleet's result, the record, the meters."""

    result: FleetResult
    events: list[dict[str, Any]]
    makespan_s: float
    server_cpu: tuple[float, float]  # own, children
    runner_cpu_s: float
    rereads: int


async def drain(
    server: Server, shape: Shape, mode: str, runners: int, probe: CloneProbe
) -> Drained:
    """The graph drained by `runners` runners in `mode`, metered from the first call to the
    line's last commit."""
    graph, script = workload(shape)
    executor = ScriptedExecutor(parse_script(script), wait_timeout=LEASE_WAIT_S)
    tree = server.tmp / "tree"
    options = FleetOptions(
        RunnerOptions("runner", tree, server.tmp / "runs-fleet"),
        runners=runners,
        clones=server.tmp / "clones" if mode == "clones" else None,
        simulated=True,
    )
    # each runner would have its own threads in its own process: do not queue 64 runners'
    # git steps behind the default executor's few threads
    asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(runners + 8))
    async with FleetClient(server.url) as client:
        await client.create_tasks(graph)
        cpu0, mine0, started = pid_cpu_split(server.pid), own_cpu(), time.monotonic()
        with probe.installed():
            result = await run_fleet(server.url, lambda _n: executor, options)
        makespan = time.monotonic() - started
        events = await client.all_events()
        await line_caught_up(client, events)
        cpu1, mine1 = pid_cpu_split(server.pid), own_cpu()
    spent = (cpu1[0] - cpu0[0], cpu1[1] - cpu0[1])
    return Drained(result, events, makespan, spent, mine1 - mine0, len(executor.rereads))


def one_run(args: argparse.Namespace, mode: str, runners: int) -> Figures:
    """One fresh server, one drain; the figures."""
    tasks = runners * args.tasks_per_runner
    shape = Shape(tasks, max(args.files, tasks), args.hot_every, args.hot_share, args.work_s)
    serve_args = ("--lease-wait", str(LEASE_WAIT_S), "--backoff-base", "0")
    server = Server(
        tick_interval=0.05, stale_after=120.0, serve_args=serve_args,
        seed=lambda tree: seed_tree(shape, tree), keep=args.keep,
    )  # fmt: skip
    server.start()
    meter = GitMeter(server.port).start() if mode == "clones" else None
    probe = CloneProbe(server.url, meter)
    try:
        if args.quiet_wait > 0:
            wait_quiet(args.quiet_wait)
        drained = asyncio.run(drain(server, shape, mode, runners, probe))
        if not drained.result.ok:
            raise BenchError(f"{mode} x{runners}: the run did not end green: {drained.result}")
        check_tree(shape, server.tmp / "tree")
        counts = meter.counts() if meter is not None else {}
    finally:
        if meter is not None:
            meter.stop()
        server.stop()
    return figures(mode, runners, tasks, drained, probe, counts)


def figures(
    mode: str,
    runners: int,
    tasks: int,
    drained: Drained,
    probe: CloneProbe,
    counts: dict[str, MeterCounts],
) -> Figures:
    kinds = [e["type"] for e in drained.events]
    leases, landings = kinds.count("lease_acquired"), kinds.count("task_succeeded")
    attempts = kinds.count("task_started")
    own, children = drained.server_cpu
    cpu = own + children
    behind = [s for s, taken in probe.levels if taken]
    level = [s for s, taken in probe.levels if not taken]
    spread = percentiles(behind, (50, 95))
    return Figures(
        runners=runners, mode=mode, tasks=tasks, attempts=attempts, leases=leases,
        landings=landings, denied=kinds.count("lease_denied"), rereads=drained.rereads,
        server_cpu_s=round(cpu, 2), server_git_cpu_s=round(children, 2),
        cpu_ms_per_lease=round(1000 * cpu / max(leases, 1), 1),
        cpu_ms_per_landing=round(1000 * cpu / max(landings, 1), 1),
        makespan_s=round(drained.makespan_s, 2), runner_cpu_s=round(drained.runner_cpu_s, 2),
        fetches_per_task=round(sum(probe.fetches.values()) / tasks, 2),
        fetches=dict(sorted(probe.fetches.items())),
        gits_per_attempt=round(sum(probe.gits.values()) / max(attempts, 1), 1),
        gits=dict(sorted(probe.gits.items())),
        git_requests_per_task=round(sum(c.requests for c in counts.values()) / tasks, 1),
        kb_per_task=round(sum(c.bytes for c in counts.values()) / 1024 / tasks, 1),
        kb={step: round(c.bytes / 1024 / tasks, 1) for step, c in counts.items() if c.bytes},
        behind=len(behind),
        level_behind_ms={k: round(v * 1000, 1) for k, v in spread.items() if k != "n"},
        level_level_ms=round(1000 * percentiles(level, (50,))["p50"], 2),
    )  # fmt: skip


HEADER: Final = (
    "| N | runners in | tasks | leases | landings | server CPU s (git's) | CPU ms / lease "
    "| CPU ms / landing | makespan s | runner CPU s | fetches / task (open, reset, level, "
    "catch_up) | KB / task (open, reset, level, catch_up) | git procs / attempt | behind "
    "| grant-to-write when behind p50 / p95 ms |"
)


def row(f: Figures) -> str:
    fetches = ", ".join(str(f.fetches.get(step, 0)) for step in STEPS)
    kb = ", ".join(f"{f.kb.get(step, 0):.1f}" for step in STEPS)
    lag = f.level_behind_ms
    level = "-" if not f.behind else f"{lag['p50']:.0f} / {lag['p95']:.0f}"
    return (
        f"| {f.runners} | {f.mode} | {f.tasks} | {f.leases} | {f.landings} | "
        f"{f.server_cpu_s:.2f} ({f.server_git_cpu_s:.2f}) | {f.cpu_ms_per_lease:.1f} | "
        f"{f.cpu_ms_per_landing:.1f} | {f.makespan_s:.2f} | {f.runner_cpu_s:.2f} | "
        f"{f.fetches_per_task:.2f} ({fetches}) | {f.kb_per_task:.1f} ({kb}) | "
        f"{f.gits_per_attempt:.1f} | {f.behind} | {level} |"
    )


def ratios(tree: Figures, clones: Figures) -> str:
    """Clones over tree, within the one run."""

    def over(a: float, b: float) -> str:
        return f"{a / b:.1f}x" if b else "-"

    return (
        f"N={tree.runners}: clones/tree server CPU per landing "
        f"{over(clones.cpu_ms_per_landing, tree.cpu_ms_per_landing)}, per lease "
        f"{over(clones.cpu_ms_per_lease, tree.cpu_ms_per_lease)}, makespan "
        f"{over(clones.makespan_s, tree.makespan_s)}, runner CPU "
        f"{over(clones.runner_cpu_s, tree.runner_cpu_s)}"
    )


def measure(args: argparse.Namespace) -> list[Figures]:
    found: list[Figures] = []
    for runners in args.runners:
        pair = [one_run(args, mode, runners) for mode in MODES]
        for f in pair:
            print(row(f), flush=True)
        found.extend(pair)
    return found


def sizes(text: str) -> list[int]:
    return [int(n) for n in text.split(",") if n]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runners", type=sizes, default=[4, 16, 64], help="fleet sizes")
    parser.add_argument("--tasks-per-runner", type=int, default=2)
    parser.add_argument("--files", type=int, default=200, help="modules in the repository")
    parser.add_argument("--hot-every", type=int, default=2, help="every Kth task is a hot one")
    parser.add_argument("--hot-share", type=int, default=4, help="hot tasks per hot file")
    parser.add_argument("--work-s", type=float, default=0.1, help="each task's think time")
    parser.add_argument("--quiet-wait", type=float, default=0.0, help="wait up to S for idle")
    parser.add_argument("--keep", action="store_true", help="keep each server's directory")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()
    started = time.monotonic()
    print(f"machine: {machine()}", flush=True)
    print(HEADER + "\n|" + "---|" * HEADER.count(" | ") + "---|", flush=True)
    found = measure(args)
    for tree, clones in zip(found[::2], found[1::2], strict=True):
        print(ratios(tree, clones))
    print(f"whole run: {time.monotonic() - started:.0f} s")
    if args.json is not None:
        args.json.write_text(json.dumps([asdict(f) for f in found], indent=2) + "\n")


if __name__ == "__main__":
    main()
