"""One server per database: a second `codefleet serve` on a live server's database refuses.

Two real `codefleet serve` processes on one SQLite file would each take the
other's runners for stale, restore their files and grant one path twice. The
first server holds an exclusive lock beside the database for its lifetime;
the second exits non-zero before it answers anything, naming the database and
the first server's pid. Once the first is gone, the database is free again.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from serve_support import START_BOUND_S, stop, wait_healthy

from codefleet.server.thread import free_port


def _serve(db: Path, workdir: Path, port: int, tmp_path: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "codefleet.cli",
        "serve",
        "--port",
        str(port),
        "--db",
        str(db),
        "--workdir",
        str(workdir),
        "--run-dir",
        str(tmp_path / "runs"),
    ]


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("CODEFLEET_")}


@pytest.fixture
def first_server(tmp_path: Path, workdir: Path) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    port = free_port()
    proc = subprocess.Popen(
        _serve(tmp_path / "fleet.db", workdir, port, tmp_path),
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_healthy(proc, port)
        yield proc, port
    finally:
        stop(proc)


def _answers(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1.0)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_a_second_server_on_a_live_servers_database_exits_before_answering_anything(
    first_server: tuple[subprocess.Popen[bytes], Any], tmp_path: Path, workdir: Path
) -> None:
    first, first_port = first_server
    second_port = free_port()

    second = subprocess.run(
        _serve(tmp_path / "fleet.db", workdir, second_port, tmp_path),
        env=_env(),
        capture_output=True,
        text=True,
        timeout=START_BOUND_S,
    )

    assert second.returncode != 0
    message = " ".join((second.stdout + second.stderr).split())
    assert str(tmp_path / "fleet.db") in message
    assert f"pid {first.pid}" in message
    assert not _answers(second_port)
    assert first.poll() is None
    with httpx.Client(base_url=f"http://127.0.0.1:{first_port}", timeout=5.0) as http:
        assert http.get("/health").status_code == 200


def test_the_database_is_free_again_once_its_server_has_exited(
    tmp_path: Path, workdir: Path
) -> None:
    db = tmp_path / "fleet.db"
    for _ in range(2):  # the second start would be refused if the first left the lock behind
        port = free_port()
        proc = subprocess.Popen(
            _serve(db, workdir, port, tmp_path),
            env=_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_healthy(proc, port)
        finally:
            proc.send_signal(signal.SIGKILL)  # even a killed server releases the lock
            proc.wait()
