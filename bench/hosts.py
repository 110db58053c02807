"""Runners on another host: the hook's cost per write and the dispatch rate, with added round trip.

    uv run python -m bench.hosts --rtt 0,20,50,100

Two "hosts" made of network namespaces joined by one veth pair
(`codefleet.testing.hosts`, as the two-host test makes them): `codefleet
serve` runs on the server host, bound to its address with a token; on the
runner host every process sees the tree bind-mounted at another path. For the
`local` row the runner host speaks straight to the server's address; for each
`--rtt` value the round trip between the hosts is lengthened by that many ms.

That delay comes from `tc netem` on both ends of the pair when the kernel has
it; where it does not (this machine's kernel has no `sch_netem` and loads no
modules) from a userspace relay on the runner host (`codefleet.testing.delay`:
each direction held RTT/2, order kept), and the bench prints which it used.
The relay's `0` row is the relay's own cost.

A first `local` row warms the server up and is not reported. Per row: the hook's cost per write — `WriteGate.check`, the pre-write lease
call exactly as a runner's hook makes it, timed in a probe process on the
runner host, each call a new file (`--calls`) — p50 / p99; the round trip a
`GET /health` takes from there; and the dispatch rate: `--tasks` short scripted
tasks (no writes) drained by `--runners` real `codefleet runner --dry-run`
processes on the runner host, tasks per second from the batch's creation to
its last success, by the server's event clock.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.harness import machine, percentiles, write_json
from codefleet.api.client import FleetClient
from codefleet.attempt import AttemptReport
from codefleet.fleet.gate.prewrite import WriteGate
from codefleet.paths import TreeRoot
from codefleet.statedir import read_tree_id
from codefleet.testing.hosts import Host, HostPair, entered, two_hosts, with_tree_at

PORT = 8099
CODEFLEET = str(Path(sys.executable).parent / "codefleet")
HEALTH_CALLS = 20
WARMUP_CALLS = 5
BOUND_S = 300.0  # no step of one row may take longer


class BenchFailed(RuntimeError):
    """A process died or a step did not finish within its bound."""


@dataclass(frozen=True, slots=True)
class Link:
    """How one row reaches the server: its URL from the runner host, and what adds the delay."""

    label: str
    url: str
    via: str  # "direct", "netem" or "relay"


@dataclass(frozen=True, slots=True)
class Bench:
    """One run: the two hosts, its scratch directory, the token, the options, the delay's kind."""

    pair: HostPair
    base: Path
    token: str
    args: argparse.Namespace
    via: str  # "netem" or "relay"

    @property
    def tree(self) -> Path:
        return self.base / "tree"

    @property
    def mount(self) -> Path:
        return self.base / "runner-host" / "tree"

    @property
    def script(self) -> Path:
        """The dispatch runners' script: no steps, so each task succeeds at once, writing nothing."""
        return self.base / "runner-host" / "script.yaml"

    @property
    def server_url(self) -> str:
        return f"http://{self.pair.server.address}:{PORT}"

    def on_runner_host(self, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        command = self.pair.runner.command(with_tree_at(self.tree, self.mount, argv))
        return _start(command, self.base / "logs" / f"{name}.log")


def _start(argv: list[str], log: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODEFLEET_")}
    with log.open("wb") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)


def _tail(log: Path, lines: int = 15) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


# -- the delay ----------------------------------------------------------------------------


def _tc(host: Host, *args: str) -> str | None:
    """`tc qdisc ARGS` on `host`'s end of the pair; the first line of its complaint, or None."""
    argv = host.command(["tc", "qdisc", args[0], "dev", host.device, "root", *args[1:]])
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    except FileNotFoundError:
        return "no `tc` command"
    if done.returncode == 0:
        return None
    return (done.stderr.strip() or f"tc exited {done.returncode}").splitlines()[0]


def netem(pair: HostPair, rtt_ms: float) -> str | None:
    """Delay both ends of the pair by half the round trip; why it could not, or None."""
    for host in (pair.server, pair.runner):
        refused = _tc(host, "replace", "netem", "delay", f"{rtt_ms / 2}ms")
        if refused is not None:
            return refused
    return None


def clear_netem(pair: HostPair) -> None:
    for host in (pair.server, pair.runner):
        _tc(host, "del")


def start_relay(bench: Bench, rtt_ms: float) -> tuple[subprocess.Popen[bytes], str]:
    """The delaying relay on the runner host's loopback; its process and URL."""
    target = f"{bench.pair.server.address}:{PORT}"
    argv = [sys.executable, "-m", "codefleet.testing.delay", "--listen", "127.0.0.1:0"]
    argv += ["--to", target, "--rtt-ms", str(rtt_ms)]
    proc = subprocess.Popen(bench.pair.runner.command(argv), stdout=subprocess.PIPE)
    assert proc.stdout is not None
    line = proc.stdout.readline().decode().strip()  # "listening 127.0.0.1:PORT"
    if not line.startswith("listening "):
        proc.kill()
        raise BenchFailed(f"the relay did not start: {line!r}")
    return proc, f"http://{line.split()[1]}"


# -- the probe: the hook's cost, from the runner host -------------------------------------


async def probe(url: str, token: str, tree: Path, name: str, calls: int) -> dict[str, Any]:
    """Register, take the one task waiting, time `calls` pre-write checks and the round trip."""
    async with FleetClient(url, token=token) as client:
        health = []
        for _ in range(HEALTH_CALLS):
            started = time.perf_counter()
            await client.health()
            health.append((time.perf_counter() - started) * 1000.0)
        agent = await client.register(name, str(tree), os.getpid(), tree_id=read_tree_id(tree))
        agent_id, epoch = agent["agent_id"], agent["epoch"]
        task = None
        while task is None:
            task = await client.assignment(agent_id, epoch, wait=5)
        await client.start(task.id, agent_id, epoch)
        gate = WriteGate(client, TreeRoot(tree), agent_id, epoch, task.id)
        hook = []
        for k in range(WARMUP_CALLS + calls):
            target = tree / task.id / f"f{k}.txt"
            started = time.perf_counter()
            verdict = await gate.check("Write", {"file_path": str(target), "content": "x"})
            if k >= WARMUP_CALLS:
                hook.append((time.perf_counter() - started) * 1000.0)
            if not verdict.allowed:
                raise BenchFailed(f"{target} refused: {verdict.reason}")
        report = AttemptReport(attempt=task.attempts, ok=True, summary="probe")
        await client.complete(task.id, agent_id, epoch, report)
        await client.leave(agent_id, epoch)
    return {"hook_ms": percentiles(hook), "health_ms": percentiles(health)}


async def hook_cost(bench: Bench, operator: FleetClient, link: Link) -> dict[str, Any]:
    task_id = f"probe-{link.label}"
    spec = {"id": task_id, "title": task_id, "description": "the probe's writes"}
    await operator.create_tasks([{**spec, "file_scope": [f"{task_id}/"]}])
    out = bench.base / f"{task_id}.json"
    argv = [sys.executable, "-m", "bench.hosts", "probe", "--url", link.url, "--token", bench.token]
    argv += ["--tree", str(bench.mount), "--name", task_id, "--calls", str(bench.args.calls)]
    proc = bench.on_runner_host(task_id, [*argv, "--out", str(out)])
    await _bounded(lambda: proc.poll() is not None, f"the probe {task_id}")
    if proc.returncode != 0:
        raise BenchFailed(f"the probe failed:\n{_tail(bench.base / 'logs' / f'{task_id}.log')}")
    figures: dict[str, Any] = json.loads(out.read_text())
    return figures


# -- the dispatch rate --------------------------------------------------------------------


async def dispatch_rate(bench: Bench, operator: FleetClient, link: Link) -> float:
    """Tasks per second: a batch of no-write tasks drained by real runners on the runner host."""
    names = [f"{link.label}-{n}" for n in range(1, bench.args.runners + 1)]
    procs = []
    for name in names:
        argv = [CODEFLEET, "runner", "--name", name, "--server", link.url, "--token", bench.token]
        argv += ["--workdir", str(bench.mount), "--dry-run", "--script", str(bench.script)]
        argv += ["--run-dir", str(bench.base / "runner-host" / "runs")]
        procs.append(bench.on_runner_host(name, argv))
    try:
        await _bounded(lambda: _idle(bench, operator, names, procs), f"{len(names)} runners")
        ids = [f"d-{link.label}-{n}" for n in range(bench.args.tasks)]
        await operator.create_tasks(
            [{"id": i, "title": i, "description": "no writes"} for i in ids]
        )
        await _bounded(lambda: _all_succeeded(operator, ids), f"{len(ids)} tasks draining")
    finally:
        for proc in procs:
            _stop(proc)
    return await _rate(operator, set(ids))


async def _idle(bench: Bench, operator: FleetClient, names: list[str], procs: list[Any]) -> bool:
    for name, proc in zip(names, procs, strict=True):
        if proc.poll() is not None:
            raise BenchFailed(f"{name} exited:\n{_tail(bench.base / 'logs' / f'{name}.log')}")
    agents = {a["name"]: a["status"] for a in await operator.agents()}
    return all(agents.get(name) == "idle" for name in names)


async def _all_succeeded(operator: FleetClient, ids: list[str]) -> bool:
    done = {t["id"] for t in await operator.tasks(status="succeeded")}
    return done.issuperset(ids)


async def _rate(operator: FleetClient, ids: set[str]) -> float:
    events = [e for e in await operator.all_events() if e["task_id"] in ids]
    created = min(_at(e) for e in events if e["type"] == "task_created")
    finished = max(_at(e) for e in events if e["type"] == "task_succeeded")
    return len(ids) / (finished - created)


def _at(event: dict[str, Any]) -> float:
    return datetime.fromisoformat(event["at"].replace("Z", "+00:00")).timestamp()


async def _bounded(condition: Any, what: str) -> None:
    deadline = time.monotonic() + BOUND_S
    while not await _value(condition()):
        if time.monotonic() > deadline:
            raise BenchFailed(f"{what}: not done within {BOUND_S:.0f} s")
        await asyncio.sleep(0.05)


async def _value(value: Any) -> Any:
    return await value if asyncio.iscoroutine(value) else value


# -- the rows -----------------------------------------------------------------------------


async def one_row(
    bench: Bench, operator: FleetClient, rtt_ms: float | None, label: str = "local"
) -> dict[str, Any]:
    """One table row: `rtt_ms` None is the local row (no delay added)."""
    relay = None
    if rtt_ms is None:
        link = Link(label, bench.server_url, "direct")
    elif bench.via == "netem":
        link = Link(f"rtt{rtt_ms:g}", bench.server_url, "netem")
        refused = netem(bench.pair, rtt_ms)
        if refused is not None:
            raise BenchFailed(f"tc netem: {refused}")
    else:
        relay, url = start_relay(bench, rtt_ms)
        link = Link(f"rtt{rtt_ms:g}", url, "relay")
    try:
        figures = await hook_cost(bench, operator, link)
        figures["dispatch_tasks_per_s"] = await dispatch_rate(bench, operator, link)
    finally:
        if relay is not None:
            _stop(relay)
        if link.via == "netem":
            clear_netem(bench.pair)
    return {"row": link.label, "added_rtt_ms": rtt_ms or 0.0, "via": link.via, **figures}


async def run_rows(bench: Bench, rtts: list[float]) -> list[dict[str, Any]]:
    async with FleetClient(bench.server_url, token=bench.token) as operator:
        await _bounded(lambda: _up(operator), "the server starting")
        await one_row(bench, operator, None, "warmup")  # not reported: a cold server's first row
        rows = []
        for rtt in [None, *rtts]:
            rows.append(await one_row(bench, operator, rtt))
            print(_line(rows[-1]), flush=True)
        return rows


async def _up(operator: FleetClient) -> bool:
    try:
        await operator.health()
    except Exception:  # not listening yet: asked again until the bound
        return False
    return True


def choose_delay(pair: HostPair) -> str:
    """`netem` when the kernel has it, else `relay`; says which, and why not netem."""
    reason = netem(pair, 1.0)
    clear_netem(pair)
    if reason is None:
        print("delay: tc netem on both ends of the pair", flush=True)
        return "netem"
    print(f"delay: userspace relay (tc netem unavailable: {reason})", flush=True)
    return "relay"


def serve(bench: Bench) -> subprocess.Popen[bytes]:
    argv = [CODEFLEET, "serve", "--host", bench.pair.server.address, "--port", str(PORT)]
    argv += ["--token", bench.token, "--workdir", str(bench.tree)]
    argv += ["--db", str(bench.base / "server.db"), "--run-dir", str(bench.base / "runs")]
    return _start(bench.pair.server.command(argv), bench.base / "logs" / "server.log")


HEADER = f"{'row':8} {'via':7} {'RTT p50':>9} {'hook p50':>9} {'hook p99':>9} {'dispatch':>13}"


def _line(row: dict[str, Any]) -> str:
    hook, health = row["hook_ms"], row["health_ms"]
    return (
        f"{row['row']:8} {row['via']:7} {health['p50']:7.1f}ms {hook['p50']:7.1f}ms "
        f"{hook['p99']:7.1f}ms {row['dispatch_tasks_per_s']:7.1f} task/s"
    )


def measure(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="cf-hosts-") as tmp, two_hosts() as pair:
        base = Path(tmp)
        for folder in ("tree", "logs", "runner-host"):
            (base / folder).mkdir()
        bench = Bench(pair, base, secrets.token_urlsafe(16), args, args.via or choose_delay(pair))
        bench.script.write_text("{}\n")
        server = serve(bench)
        try:
            print(HEADER, flush=True)
            with entered(pair.server):
                rows = asyncio.run(run_rows(bench, args.rtt))
        finally:
            _stop(server)
    return {"machine": machine(), "via": bench.via, "calls": args.calls, "tasks": args.tasks,
            "runners": args.runners, "rows": rows}  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["probe"]:  # the child that times the hook on the runner host
        probe_main(argv[1:])
        return
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rtt", type=lambda s: [float(x) for x in s.split(",")], default=[0.0])
    parser.add_argument("--calls", type=int, default=100, help="pre-write checks per row")
    parser.add_argument("--tasks", type=int, default=120, help="tasks per dispatch batch")
    parser.add_argument("--runners", type=int, default=3)
    parser.add_argument("--via", choices=["netem", "relay"], help="default: netem if it works")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    write_json(args.json, measure(args))


def probe_main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench.hosts probe")
    for flag in ("--url", "--token", "--name"):
        parser.add_argument(flag, required=True)
    parser.add_argument("--tree", type=Path, required=True)
    parser.add_argument("--calls", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    figures = asyncio.run(probe(args.url, args.token, args.tree, args.name, args.calls))
    args.out.write_text(json.dumps(figures))


if __name__ == "__main__":
    main()
