"""Header stall: 12 connections streaming endless headers must not stall the fleet.

A real `codefleet serve` process with a token is sent, from 12 threads, one
request each whose `X-Pad` header never ends (64 KiB writes, at most
`BUDGET` bytes a connection, `ROUNDS` connections a thread, loopback only).
Each such connection must be answered 431 and closed by the server long
before its budget is spent, and while they stream, every heartbeat of an
authorized runner is answered. Before the head cap the server read each
header to its end, with parsing work growing with its square: 12 such
connections held authorized calls for up to 20 s (docs/history/performance-log.md,
"Request heads").
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from codefleet.api.client import FleetClient
from codefleet.server.thread import free_port

TOKEN = "s3cret-token-for-tests"
ATTACKERS = 12
ROUNDS = 100  # connections each attacker opens, one after another (fewer if one is not cut off)
BUDGET = 32 * 2**20  # bytes one connection may send: far past the 64 KiB cap and the
# loopback socket buffers (a few MiB), so a connection that spends it was never cut off
CHUNK = b"a" * 65_536
UP_WAIT_S = 30.0
CALL_TIMEOUT_S = 10.0  # a bound on a hang, not a speed claim


@pytest.fixture
def serve(tmp_path: Path, workdir: Path) -> Iterator[str]:
    """A `codefleet serve` process with a token; yields its URL."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODEFLEET_")}
    cmd = [
        sys.executable,
        "-m",
        "codefleet.cli",
        "serve",
        "--port",
        str(port),
        "--db",
        str(tmp_path / "db.sqlite"),
        "--workdir",
        str(workdir),
        "--run-dir",
        str(tmp_path / "runs"),
        "--stale-after",
        "3600",
        "--token",
        TOKEN,
    ]
    with (tmp_path / "serve.log").open("w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_up(url, proc)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait_up(url: str, proc: subprocess.Popen[bytes]) -> None:
    with httpx.Client(base_url=url, timeout=1.0) as http:
        for _ in range(int(UP_WAIT_S * 10)):
            assert proc.poll() is None, "the server exited while starting"
            with contextlib.suppress(httpx.HTTPError):
                if http.get("/health").status_code == 200:
                    return
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.1)  # a bounded wait for the port, not a sleep
    pytest.fail(f"the server did not answer on {url} within {UP_WAIT_S} s")


@dataclass
class Streamed:
    """What one attacker's connections got: the answer's first line, and whether cut off."""

    answers: list[bytes] = field(default_factory=list)
    spent_budget: list[bool] = field(default_factory=list)


def stream_headers(port: int, out: Streamed) -> None:
    """Connections, each streaming one header until the server closes it or `BUDGET` is spent.

    `ROUNDS` of them, or up to the first one that spent its budget (the server let it be).
    """
    while len(out.answers) < ROUNDS and not any(out.spent_budget):
        with socket.create_connection(("127.0.0.1", port), timeout=CALL_TIMEOUT_S) as sock:
            sent = 0
            with contextlib.suppress(OSError):  # the server closed its end: what we want
                sock.sendall(b"GET /state HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: ")
                while sent < BUDGET:
                    sock.sendall(CHUNK)
                    sent += len(CHUNK)
            out.spent_budget.append(sent >= BUDGET)
            answer = b""
            with contextlib.suppress(OSError):  # a reset after the answer, or no answer at all
                answer = sock.recv(4096)
            out.answers.append(answer.split(b"\r\n", 1)[0])


async def test_authorized_calls_are_answered_while_12_connections_stream_endless_headers(
    serve: str, workdir: Path
) -> None:
    port = int(serve.rsplit(":", 1)[1])
    results = [Streamed() for _ in range(ATTACKERS)]
    threads = [threading.Thread(target=stream_headers, args=(port, r)) for r in results]
    answered: list[str] = []
    async with FleetClient(serve, token=TOKEN, timeout=CALL_TIMEOUT_S) as client:
        agent = await client.register("runner-1", str(workdir), os.getpid())
        for thread in threads:
            thread.start()
        while any(thread.is_alive() for thread in threads) or not answered:
            beat = await client.heartbeat(agent["agent_id"], agent["epoch"])
            answered.append(beat["status"])
    for thread in threads:
        thread.join(CALL_TIMEOUT_S)

    assert set(answered) == {"idle"}
    assert len(answered) > 1
    assert [r.spent_budget for r in results] == [[False] * ROUNDS] * ATTACKERS
    assert {line for r in results for line in r.answers} == {
        b"HTTP/1.1 431 Request Header Fields Too Large"
    }
