"""The runner's pre-write path, timed: `WriteGate.check` from the hook's entry to its verdict.

This is what the SDK executor's PreToolUse hook does for every write of a
runner's Claude Code session (`session.attempthooks.make_pre_tool_use` times the same
span into the session record), without the CLI: N "CLIs" (one runner client,
agent and started task each, like `codefleet demo --offline`'s runners), each
asking for a lease on one of its own files per call, back to back (closed
loop: the worst case for contention; real sessions pause between writes).

`--server thread` (default) runs the server in a thread of this process, as
the demo does; `--server process` runs `codefleet serve` beside it, as
`codefleet run` does. The breakdown per call: `canonical` (the local path
check), `acquire` (the client call), and, with the server in this process,
`server` (the ASGI app, request in → response out) and `engine` (the engine's
`acquire`), the rest being the client (httpx), uvicorn's protocol and the
event loop. `--raw` also times the same request over a bare keep-alive
socket, for the client's share. `--tls` serves https with a self-signed
certificate (made with `openssl`, trusted through `SSL_CERT_FILE`): the
runner's plain keep-alive lane is then off and the call goes through httpx.

    uv run python -m bench.prewrite --clis 1 --calls 400
    uv run python -m bench.prewrite --clis 3 --calls 400 --server process
    uv run python -m bench.prewrite --clis 1 --calls 400 --tls
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import statistics
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench.harness import RawHttp, Server, free_port, percentiles
from codefleet.api.client import FleetClient
from codefleet.config import Settings
from codefleet.fleet.gate.prewrite import WriteGate
from codefleet.paths import TreeRoot
from codefleet.server.thread import ServerThread

FILES_PER_CLI = 20


class Spans:
    """Durations (ms) by name, appended by the wrappers below."""

    def __init__(self) -> None:
        self.ms: dict[str, list[float]] = {}

    def add(self, name: str, started: float) -> None:
        self.ms.setdefault(name, []).append((time.perf_counter() - started) * 1000.0)


def timed_sync(spans: Spans, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            spans.add(name, started)

    return wrapper


def timed_async(spans: Spans, name: str, fn: Callable[..., Awaitable[Any]]) -> Callable[..., Any]:
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return await fn(*args, **kwargs)
        finally:
            spans.add(name, started)

    return wrapper


class TimedApp:
    """The ASGI app, timed from the request's scope to the end of its response."""

    def __init__(self, app: Any, spans: Spans) -> None:
        self.app, self.spans = app, spans

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        started = time.perf_counter()
        try:
            await self.app(scope, receive, send)
        finally:
            if scope.get("type") == "http" and scope.get("path") == "/leases/acquire":
                self.spans.add("server", started)


async def setup_gates(url: str, token: str, tree: Path, clis: int) -> list[WriteGate]:
    """One runner client, agent and started task per CLI; each task owns cli<N>/."""
    async with FleetClient(url, token=token) as admin:
        specs = [
            {"id": f"T{n}", "title": f"cli {n}", "description": "bench", "file_scope": [f"cli{n}/"]}
            for n in range(1, clis + 1)
        ]
        await admin.create_tasks(specs)
    gates = []
    for n in range(1, clis + 1):
        (tree / f"cli{n}").mkdir(parents=True, exist_ok=True)
        client = FleetClient(url, token=token)
        agent = await client.register(f"runner-{n}", str(tree), None)
        agent_id, epoch = agent["agent_id"], agent["epoch"]
        task = None
        while task is None:
            task = await client.assignment(agent_id, epoch, wait=5)
        await client.start(task.id, agent_id, epoch)
        gates.append(WriteGate(client, TreeRoot(tree), agent_id, epoch, task.id))
    return gates


async def one_cli(gate: WriteGate, n: int, calls: int, spans: Spans) -> list[float]:
    tree = gate.tree.root
    latencies = []
    for k in range(calls):
        path = str(tree / f"cli{n}" / f"f{k % FILES_PER_CLI}.py")
        started = time.perf_counter()
        verdict = await gate.check("Write", {"file_path": path, "content": "x"})
        latencies.append((time.perf_counter() - started) * 1000.0)
        if not verdict.allowed:
            raise SystemExit(f"cli {n}: denied {path}: {verdict.reason}")
    return latencies


def instrument(gates: list[WriteGate], spans: Spans) -> None:
    for gate in gates:
        tree = gate.tree
        object.__setattr__(tree, "canonical", timed_sync(spans, "canonical", tree.canonical))
        client = gate.client
        client.acquire = timed_async(spans, "acquire", client.acquire)  # type: ignore[method-assign]


async def raw_calls(url: str, token: str, gate: WriteGate, calls: int) -> list[float]:
    """The same acquire over one bare keep-alive HTTP/1.1 connection (no httpx)."""
    port = int(url.rsplit(":", 1)[1])
    raw = RawHttp(port, {"Authorization": f"Bearer {token}"})
    body = {"agent_id": gate.agent_id, "task_id": gate.task_id, "paths": ["cli1/f0.py"]}
    headers = {"X-Agent-Epoch": str(gate.epoch)}
    out = []
    for _ in range(calls):
        started = time.perf_counter()
        status, answer = await raw.call(
            "POST", "/leases/acquire", {**body, "tool": "Write"}, headers
        )
        out.append((time.perf_counter() - started) * 1000.0)
        assert status == 200 and answer["decision"] == "allow", answer
    await raw.aclose()
    return out


async def drive(
    url: str, token: str, tree: Path, args: argparse.Namespace, spans: Spans
) -> dict[str, Any]:
    gates = await setup_gates(url, token, tree, args.clis)
    for gate in gates:  # warm-up: connections opened, code paths hot
        await one_cli(gate, gates.index(gate) + 1, FILES_PER_CLI, Spans())
    instrument(gates, spans)
    cpu = time.process_time()
    wall = time.perf_counter()
    per_cli = await asyncio.gather(
        *(one_cli(g, n, args.calls, spans) for n, g in enumerate(gates, 1))
    )
    wall = time.perf_counter() - wall
    cpu = time.process_time() - cpu
    latencies = [x for cli in per_cli for x in cli]
    figures: dict[str, Any] = {
        "hook": percentiles(latencies),
        "calls": len(latencies),
        "process_cpu_ms_per_call": 1000 * cpu / len(latencies),
        "wall_s": wall,
    }
    for name, values in spans.ms.items():
        figures[name] = percentiles(values) | {"mean": statistics.fmean(values)}
    if args.raw:
        figures["raw_acquire"] = percentiles(await raw_calls(url, token, gates[0], args.calls))
    for gate in gates:
        await gate.client.aclose()
    return figures


def self_signed(where: Path) -> dict[str, Path]:
    """A certificate for 127.0.0.1 and its key, trusted by this process's clients from now."""
    cert, key = where / "cert.pem", where / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-days", "1", "-subj", "/CN=bench", "-keyout", str(key), "-out", str(cert),
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    os.environ["SSL_CERT_FILE"] = str(cert)
    return {"tls_cert": cert, "tls_key": key}


def run_thread(args: argparse.Namespace) -> dict[str, Any]:
    spans = Spans()
    with tempfile.TemporaryDirectory(prefix="cf-prewrite-") as tmp:
        root = Path(tmp)
        (root / "tree").mkdir()
        tls = self_signed(root) if args.tls else {}
        settings = Settings(
            host="127.0.0.1", port=free_port(), db=root / "bench.db", workdir=root / "tree",
            run_dir=root / "runs", token=secrets.token_urlsafe(16), **tls,
        )  # fmt: skip
        server = ServerThread(settings)
        engine = server.app.state.engine
        engine.acquire = timed_sync(spans, "engine", engine.runner.acquire)
        server._server.config.app = TimedApp(server._server.config.app, spans)
        with server:
            assert settings.token is not None
            return asyncio.run(drive(server.url, settings.token, settings.workdir, args, spans))


def run_process(args: argparse.Namespace) -> dict[str, Any]:
    server = Server(token=secrets.token_urlsafe(16))
    with server:
        assert server.token is not None
        return asyncio.run(drive(server.url, server.token, server.tmp / "tree", args, Spans()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clis", type=int, default=1)
    parser.add_argument("--calls", type=int, default=400, help="per CLI")
    parser.add_argument("--server", choices=["thread", "process"], default="thread")
    parser.add_argument("--raw", action="store_true")
    parser.add_argument("--tls", action="store_true", help="https (server in a thread only)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    figures = (run_thread if args.server == "thread" else run_process)(args)
    scheme = "https" if args.tls else "http"
    print(f"{args.clis} CLI(s), server in a {args.server}, {scheme}, {figures['calls']} calls")
    for name in ("hook", "acquire", "server", "engine", "canonical", "raw_acquire"):
        if name in figures:
            f = figures[name]
            print(
                f"  {name:11} p50 {f['p50']:6.2f} ms  p95 {f['p95']:6.2f} ms  p99 {f['p99']:6.2f} ms"
            )
    print(f"  process CPU per call {figures['process_cpu_ms_per_call']:.2f} ms")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
