"""One lock per tree, and commands that find it: real `codefleet serve` processes.

A second server on a tree that has one is refused whatever its database,
naming the running one (URL and pid) and never suggesting a way around; a
`serve` in a subdirectory of the served tree is refused the same way. A
command run anywhere inside the tree finds the tree's server from the record
the server writes in `.codefleet/server.json`, whatever its port, says so on
stderr, and yields to `--server`; a dead server's record is ignored (issue 38
item 9, issue 40 item 1).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
from serve_support import START_BOUND_S, stop, wait_healthy

from codefleet.server.thread import free_port

CLI = [sys.executable, "-m", "codefleet.cli"]


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("CODEFLEET_")}


def _serve(port: int, db: Path, *extra: str) -> list[str]:
    return [*CLI, "serve", "--port", str(port), "--db", str(db), *extra]


def _cli(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args],
        cwd=cwd,
        env={**_env(), **env},
        capture_output=True,
        text=True,
        timeout=START_BOUND_S,
    )


def _said(done: subprocess.CompletedProcess[str]) -> str:
    return " ".join((done.stdout + done.stderr).split())


@contextlib.contextmanager
def _running(argv: list[str], cwd: Path, port: int) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(
        argv, cwd=cwd, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_healthy(proc, port)
        yield proc
    finally:
        stop(proc)


def _answers(port: int) -> bool:
    with httpx.Client(timeout=1.0) as http:
        try:
            http.get(f"http://127.0.0.1:{port}/health")
        except httpx.TransportError:
            return False
    return True


def test_a_second_server_on_the_tree_with_another_database_is_refused_naming_the_first(
    workdir: Path, tmp_path: Path
) -> None:
    port, second_port = free_port(), free_port()
    with _running(_serve(port, tmp_path / "one.db"), workdir, port) as first:
        second = _cli(
            workdir, "serve", "--port", str(second_port), "--db", str(tmp_path / "two.db")
        )

        assert second.returncode != 0
        message = _said(second)
        assert f"http://127.0.0.1:{port}" in message
        assert f"pid {first.pid}" in message
        assert "--db" not in message  # never a way around the lock
        assert not _answers(second_port)
        assert first.poll() is None


def test_serve_in_a_subdirectory_of_a_served_tree_is_refused_naming_the_trees_server(
    workdir: Path, tmp_path: Path
) -> None:
    port = free_port()
    with _running(_serve(port, tmp_path / "one.db"), workdir, port) as first:
        by_default = _cli(workdir / "pkg", "serve", "--port", str(free_port()))
        by_flag = _cli(
            tmp_path,
            "serve",
            "--port",
            str(free_port()),
            "--workdir",
            str(workdir / "pkg"),
            "--db",
            str(tmp_path / "sub.db"),
        )

    for refused in (by_default, by_flag):
        assert refused.returncode != 0, _said(refused)
        assert f"http://127.0.0.1:{port}" in _said(refused)
        assert f"pid {first.pid}" in _said(refused)
    assert not (workdir / "pkg" / ".codefleet").exists()


def test_a_command_inside_the_tree_finds_its_server_on_any_port_and_says_which(
    workdir: Path, tmp_path: Path
) -> None:
    port = free_port()
    with _running(_serve(port, tmp_path / "one.db"), workdir, port):
        found = _cli(workdir / "pkg", "tasks", "--json")
        given = _cli(workdir / "pkg", "tasks", "--server", f"http://127.0.0.1:{free_port()}")
        by_env = _cli(workdir / "pkg", "tasks", CODEFLEET_PORT=str(free_port()))

    assert found.returncode == 0, _said(found)
    assert json.loads(found.stdout) == []
    assert f"http://127.0.0.1:{port}" in found.stderr
    assert str(workdir) in found.stderr
    for told in (given, by_env):  # --server and CODEFLEET_* win over the tree's record
        assert told.returncode != 0
        assert f"127.0.0.1:{port}" not in _said(told)


def test_a_dead_servers_record_is_ignored(workdir: Path, tmp_path: Path) -> None:
    port = free_port()
    with _running(_serve(port, tmp_path / "one.db"), workdir, port) as first:
        first.send_signal(signal.SIGKILL)  # no clean stop: the record stays, its lock does not
        first.wait()

    after = _cli(workdir, "tasks")

    assert (workdir / ".codefleet" / "server.json").read_text()  # the stale record
    assert after.returncode != 0
    assert "127.0.0.1:8099" in _said(after)
    assert f":{port}" not in _said(after)


def test_runs_new_while_serve_runs_names_the_server_and_runs_lists_the_kept_database(
    workdir: Path,
) -> None:
    port = free_port()
    with _running([*CLI, "serve", "--port", str(port)], workdir, port) as first:
        refused = _cli(workdir, "runs", "new")

        assert refused.returncode != 0
        assert f"http://127.0.0.1:{port}" in _said(refused)
        assert f"pid {first.pid}" in _said(refused)
        assert "stop it" in _said(refused)
    started_over = _cli(workdir, "runs", "new")
    listed = _cli(workdir, "runs", "--json")

    assert started_over.returncode == 0, _said(started_over)
    [kept] = (workdir / ".codefleet").glob("codefleet-*.db")
    assert kept.name in _said(_cli(workdir, "runs"))
    assert [Path(k["path"]).name for k in json.loads(listed.stdout)["kept_databases"]] == [
        kept.name
    ]
