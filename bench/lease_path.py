"""The lease path's CPU per request in process: the real app and protocol, no sockets.

`bench.leases` measures the server over loopback TCP, where each answer's
`send` system call, the client it wakes and every other process on the two
cores move the figures by tens of µs. This drives the server's own uvicorn
protocol and configuration (`uvicorn_internals.uvicorn_config`) and app (`create_app`, real engine,
SQLite in a temporary directory) over recording transports, N connections,
one acquire per connection per round, and reports the process CPU per
request: the Python and SQLite work of the lease path and nothing else.

`--mode reacquire`: every agent re-asks for paths it already holds (the
steady state of `bench.leases` at 32 agents); `--mode first`: every ask is a
first grant of a new path (a transaction and a pre-image each, most of the
asks of `bench.leases` at 200 agents in a 6-second run). To compare
checkouts, run this file with each checkout's interpreter:
`<checkout>/.venv/bin/python bench/lease_path.py --agents 32 --mode reacquire`.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import uvloop
from uvicorn.server import ServerState

from codefleet.config import Settings
from codefleet.server.httpapp import create_app
from codefleet.testing.transport import RecordingTransport
from codefleet.transport.uvicorn_internals import uvicorn_config

SETUP_WAIT_S = 0.001  # between polls while the setup's requests (graph load) are answered


class Recording(RecordingTransport):
    """Keeps the bytes in one buffer that `answer` takes whole answers off."""

    def __init__(self) -> None:
        super().__init__()
        self.out = bytearray()

    def write(self, data: Any) -> None:
        self.out += data

    def answer(self) -> tuple[int, Any] | None:
        """The first whole answer written, taken off the buffer; None while incomplete."""
        head, sep, rest = bytes(self.out).partition(b"\r\n\r\n")
        if not sep:
            return None
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        if len(rest) < length:
            return None
        del self.out[: len(head) + 4 + length]
        return int(head.split(b" ")[1]), json.loads(rest[:length]) if length else None


def request(method: str, path: str, body: Any = None, epoch: int | None = None) -> bytes:
    data = json.dumps(body).encode() if body is not None else b""
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1:8000"]
    if body is not None:
        lines += ["Content-Type: application/json", f"Content-Length: {len(data)}"]
    if epoch is not None:
        lines.append(f"X-Agent-Epoch: {epoch}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + data


async def call(conn: Any, out: Recording, raw: bytes) -> tuple[int, Any]:
    conn.data_received(raw)
    for _ in range(10_000):
        if (got := out.answer()) is not None:
            return got
        await asyncio.sleep(SETUP_WAIT_S)
    raise RuntimeError(f"no answer to {raw[:60]!r}")


async def started_agents(conns: list[tuple[Any, Recording]], tree: Path) -> list[dict[str, Any]]:
    """One task per connection, posted, assigned and started; each agent's ids."""
    tasks = [{"id": f"L{i:05d}", "title": "t", "description": "d",
              "file_scope": [f"scope/t{i}.txt"]} for i in range(len(conns))]  # fmt: skip
    status, _ = await call(*conns[0], request("POST", "/tasks", {"tasks": tasks}))
    assert status == 201, status
    agents = []
    for i, (conn, out) in enumerate(conns):
        body = {"name": f"a{i}", "workdir": str(tree)}
        _, me = await call(conn, out, request("POST", "/agents/register", body))
        aid, epoch = me["agent_id"], me["epoch"]
        _, got = await call(
            conn, out, request("GET", f"/agents/{aid}/assignment?wait=5", None, epoch)
        )
        task = got["task"]["id"]
        status, _ = await call(
            conn, out, request("POST", f"/tasks/{task}/start", {"agent_id": aid}, epoch)
        )
        assert status == 200, status
        agents.append({"agent_id": aid, "epoch": epoch, "task_id": task})
    return agents


def acquire(agent: dict[str, Any], index: int, k: int, mode: str) -> bytes:
    path = (
        f"agents/a{index:03d}/f{k % 50:02d}.py"
        if mode == "reacquire"
        else f"agents/a{index:03d}/g{k:05d}.py"
    )
    body = {
        "agent_id": agent["agent_id"],
        "task_id": agent["task_id"],
        "paths": [path],
        "tool": "Write",
    }
    return request("POST", "/leases/acquire", body, agent["epoch"])


async def rounds_cpu(
    conns: list[tuple[Any, Recording]], payloads: list[list[bytes]]
) -> tuple[int, float]:
    """Send each round's requests on every connection at once; the requests and CPU seconds."""
    gc.collect()
    began, answered = time.process_time(), 0
    for round_ in payloads:
        for (conn, _), raw in zip(conns, round_, strict=True):
            conn.data_received(raw)
        for _, out in conns:
            while (got := out.answer()) is None:
                await asyncio.sleep(0)
            assert got[0] == 200, got
            answered += 1
    return answered, time.process_time() - began


async def measure(agents: int, rounds: int, mode: str) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="codefleet-lease-path-"))
    (tmp / "tree").mkdir()
    settings = Settings(_env_file=None, port=8000, db=tmp / "db.sqlite",  # type: ignore[call-arg]
                        workdir=tmp / "tree", run_dir=tmp / "runs")  # fmt: skip
    app = create_app(settings)
    config = uvicorn_config(app, "127.0.0.1", 8000, settings)  # the checkout's own
    config.load()
    protocol = config.http_protocol_class
    state = ServerState()
    state.default_headers = [(b"date", b"Tue, 01 Dec 2026 00:00:00 GMT"), *config.encoded_headers]
    async with app.router.lifespan_context(app):
        conns = []
        for _ in range(agents):
            conn, out = protocol(config, state, {}), Recording()  # type: ignore[call-arg]
            conn.connection_made(out)
            conns.append((conn, out))
        ids = await started_agents(conns, tmp / "tree")
        if mode == "reacquire":  # hold every own path first
            for k in range(50):
                for i, (conn, out) in enumerate(conns):
                    await call(conn, out, acquire(ids[i], i, k, mode))
        payloads = [[acquire(ids[i], i, k, mode) for i in range(agents)] for k in range(rounds)]
        answered, cpu = await rounds_cpu(conns, payloads)
    return {
        "agents": agents,
        "mode": mode,
        "requests": answered,
        "cpu_us_per_request": 1e6 * cpu / answered,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=300, help="acquires per agent")
    parser.add_argument("--mode", choices=["reacquire", "first"], default="reacquire")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    figures = [uvloop.run(measure(args.agents, args.rounds, args.mode)) for _ in range(args.runs)]
    cpu = sorted(f["cpu_us_per_request"] for f in figures)
    print(f"{args.mode} agents={args.agents} requests={figures[0]['requests']} x {args.runs}: "
          f"cpu {cpu[0]:.1f} / {cpu[len(cpu) // 2]:.1f} / {cpu[-1]:.1f} us/request (min / median / max)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
