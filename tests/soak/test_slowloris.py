"""Slow-loris: 1,500 half-sent requests must not stall the fleet.

A real `codefleet serve` process, started with the file-descriptor limit most
machines give a process (1,024, soft and hard, so it cannot raise its own),
is sent 1,500 connections that each open a request and never finish its head.
While they are all open, a runner's calls must still be answered: register,
an assignment, start, a lease, a heartbeat. Before the connection cap and the
read deadline, the server ran out of descriptors at about 1,000 such
connections and every acquire and heartbeat failed.

Also shown: a connection that stops mid-head is closed by the server after
its read deadline (`--read-timeout`), and nothing is held against the runner.
"""

from __future__ import annotations

import contextlib
import os
import resource
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from codefleet.api.client import FleetClient
from codefleet.server.thread import free_port

LORIS = 1500
CHILD_NOFILE = 1024  # the usual default soft (and often hard) limit
UP_WAIT_S = 30.0
CALL_TIMEOUT_S = 10.0  # a bound on a hang, not a speed claim
HALF_HEAD = b"POST /leases/acquire HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: appl"


def _limit_descriptors() -> None:  # runs in the child, before exec
    resource.setrlimit(resource.RLIMIT_NOFILE, (CHILD_NOFILE, CHILD_NOFILE))


@pytest.fixture
def serve(tmp_path: Path, workdir: Path) -> Iterator[Callable[[float], str]]:
    """`serve(read_timeout)`: a `codefleet serve` process limited to 1,024 descriptors."""
    procs: list[subprocess.Popen[bytes]] = []
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODEFLEET_")}

    def start(read_timeout: float) -> str:
        port = free_port()
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
            "--read-timeout",
            str(read_timeout),
        ]
        with (tmp_path / "serve.log").open("w") as log:
            procs.append(
                subprocess.Popen(
                    cmd,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    preexec_fn=_limit_descriptors,
                )
            )
        url = f"http://127.0.0.1:{port}"
        _wait_up(url, procs[-1])
        return url

    yield start
    for proc in procs:
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


@pytest.fixture
def descriptors() -> Iterator[None]:
    """This process holds the 1,500 client ends: raise its soft limit (not the server's)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = LORIS + 500
    if hard != resource.RLIM_INFINITY and hard < need:
        pytest.fail(f"this test needs {need} file descriptors; the hard limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, need), hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def half_sent(url: str, count: int) -> list[socket.socket]:
    port = int(url.rsplit(":", 1)[1])
    opened: list[socket.socket] = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=CALL_TIMEOUT_S)
        sock.sendall(HALF_HEAD)
        opened.append(sock)
    return opened


async def test_the_fleet_keeps_working_while_1500_half_sent_requests_are_open(
    serve: Callable[[float], str], descriptors: None, workdir: Path
) -> None:
    url = serve(3600.0)  # no deadline in play: the connection cap alone must hold
    loris = half_sent(url, LORIS)
    try:
        async with FleetClient(url, timeout=CALL_TIMEOUT_S) as client:
            agent = await client.register("runner-1", str(workdir), os.getpid())
            agent_id, epoch = agent["agent_id"], agent["epoch"]
            await client.create_tasks([{"id": "T", "title": "t", "description": "do it"}])
            assert await client.assignment(agent_id, epoch, wait=5)
            await client.start("T", agent_id, epoch)
            answer = await client.acquire(agent_id, epoch, "T", ["a.py"], "Write")
            beat = await client.heartbeat(agent_id, epoch)
    finally:
        for sock in loris:
            sock.close()

    assert answer["decision"] == "allow"
    assert beat == {"status": "busy", "epoch": epoch}


def test_a_connection_that_stops_mid_head_is_closed_after_the_read_deadline(
    serve: Callable[[float], str],
) -> None:
    [sock] = half_sent(serve(2.0), 1)
    with sock:
        sock.settimeout(30.0)  # a bound on a hang: the server's deadline here is 2 s
        assert sock.recv(1024) == b""  # closed by the server, nothing answered
