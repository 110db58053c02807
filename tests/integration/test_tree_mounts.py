"""One tree, two mount points: a runner whose workdir is another path to the server's tree.

The runner process runs in its own mount namespace (`unshare -m`) where the
server's tree is bind-mounted at a directory that, outside it, is empty: the
same files under another path, as on another host's NFS mount, and not a
symlink (`realpath` cannot bring the two paths together). The runner
registers by the tree's identity, its task is assigned, its write lands in
the server's tree and is leased and recorded by its tree-relative path; a
failed attempt's edit is put back by the server on its own mount, and so is
the write of a runner killed mid-attempt (the server restores alone, issue 33
item 2). `load` and a person's hook on such a mount find the tree by its
identity too. A subdirectory of the served tree bind-mounted elsewhere and served
there is refused, as `serve` in the subdirectory itself is (issue 51 item 10).
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from serve_support import START_BOUND_S, stop, wait_healthy
from tool_support import require_tool, unavailable
from typer.testing import CliRunner

from codefleet.api.client import FleetClient
from codefleet.cli.app import app
from codefleet.server.thread import ServerThread, free_port
from codefleet.statedir import tree_id_path

CLI = [sys.executable, "-m", "codefleet.cli"]


def _private_mount_works(unshare: str, tree: Path, mount: Path) -> bool:
    probe = f"mount --bind {shlex.quote(str(tree))} {shlex.quote(str(mount))}"
    done = subprocess.run(
        [unshare, "-m", "--propagation", "private", "sh", "-c", probe],
        capture_output=True,
        text=True,
        timeout=30,
    )
    return done.returncode == 0


def _in_other_mount(tree: Path, mount: Path, argv: list[str], hide: bool = False) -> list[str]:
    """`argv` run where `tree` is also at `mount`, in a mount namespace of its own; `hide`:
    and the tree's own path is an empty directory there, as on a host that mounts it only
    at `mount`."""
    unshare = require_tool("unshare", "a second mount of the tree", "util-linux")
    if not _private_mount_works(unshare, tree, mount):
        unavailable("this kernel refuses a private mount namespace (unshare -m: root needed)")
    steps = [f"mount --bind {shlex.quote(str(tree))} {shlex.quote(str(mount))}"]
    if hide:
        steps.append(f"mount -t tmpfs none {shlex.quote(str(tree))}")
    script = " && ".join([*steps, f"exec {shlex.join(argv)}"])
    return [unshare, "-m", "--propagation", "private", "sh", "-c", script]


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("CODEFLEET_")}


async def test_a_runner_on_another_mount_of_the_tree_works_by_tree_relative_paths(
    server: ServerThread, workdir: Path, tmp_path: Path
) -> None:
    mount = tmp_path / "mnt" / "repo"  # empty here; the tree, in the runner's namespace
    mount.mkdir(parents=True)
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump({
        "W": [{"write": {"path": "a.py", "content": "A = 'from the other mount'\n"}}],
        "F": [{"write": {"path": "pkg/b.py", "content": "B = 'never kept'\n"}},
              {"fail": "this attempt fails"}],
    }))  # fmt: skip
    async with FleetClient(server.url) as client:
        await client.create_tasks(
            [
                {"id": "W", "title": "write a", "description": "d", "file_scope": ["a.py"]},
                {
                    "id": "F",
                    "title": "fail b",
                    "description": "d",
                    "file_scope": ["pkg/b.py"],
                    "max_attempts": 1,
                },
            ]
        )
    runner = [
        *CLI,
        "runner",
        "--name",
        "far",
        "--dry-run",
        "--script",
        str(script),
        "--server",
        server.url,
        "--workdir",
        str(mount),
        "--run-dir",
        str(tmp_path / "runs"),
        "--exit-when-drained",
    ]

    done = subprocess.run(
        _in_other_mount(workdir, mount, runner),
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(),
    )

    assert done.returncode == 0, done.stderr
    assert list(mount.iterdir()) == []  # the bind mount was the runner's alone
    assert (workdir / "a.py").read_text() == "A = 'from the other mount'\n"
    assert (workdir / "pkg" / "b.py").read_text() == "B = 2\n"  # restored by the server
    async with FleetClient(server.url) as client:
        [agent] = await client.agents()
        written = await client.task("W")
        leased = await client.events(type_="lease_acquired")
        statuses = {t["id"]: t["status"] for t in await client.tasks()}
    assert agent["workdir"] == str(mount)
    assert statuses == {"W": "succeeded", "F": "failed"}
    assert [c["path"] for c in written["file_changes"]] == ["a.py"]
    assert sorted(e["payload"]["path"] for e in leased) == ["a.py", "pkg/b.py"]


def test_load_on_another_mount_looks_up_the_checks_programs_in_its_own_mount(
    server: ServerThread, workdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mount = tmp_path / "mnt" / "repo"  # this host's mount: the identity, and the script
    tree_id_path(mount).parent.mkdir(parents=True)
    shutil.copy(tree_id_path(workdir), tree_id_path(mount))
    (mount / "check.sh").write_text("#!/bin/sh\ntrue\n")
    (mount / "check.sh").chmod(0o755)
    graph = tmp_path / "graph.yaml"
    graph.write_text(
        "checks: {here: ./check.sh}\ntasks:\n  - {id: T, title: t, verify: here, description: d}\n"
    )
    monkeypatch.chdir(mount)
    clean = {k: None for k in os.environ if k.startswith("CODEFLEET_")}

    loaded = CliRunner().invoke(app, ["load", str(graph), "--server", server.url], env=clean)  # type: ignore[arg-type]

    assert loaded.exit_code == 0, loaded.output
    assert "warning" not in loaded.output  # the server's path has no check.sh; this mount has


def test_a_persons_hook_joined_on_the_servers_host_finds_the_tree_on_another_mount(
    server: ServerThread, workdir: Path, tmp_path: Path
) -> None:
    """`.claude/settings.local.json` is in the shared tree: a session on another host runs the
    hook command `join` wrote on this one, whose `--tree` path does not exist there."""
    clean = {k: None for k in os.environ if k.startswith("CODEFLEET_")}
    joined = CliRunner().invoke(
        app, ["join", "--server", server.url, "--workdir", str(workdir)], env=clean
    )  # type: ignore[arg-type]
    assert joined.exit_code == 0, joined.output
    settings = json.loads((workdir / ".claude" / "settings.local.json").read_text())
    [[command]] = [[h["command"] for h in e["hooks"]] for e in settings["hooks"]["PreToolUse"]]
    asyncio.run(_hold(server, workdir, "a.py"))
    mount = tmp_path / "mnt" / "repo"
    mount.mkdir(parents=True)
    call = {
        "session_id": "s-1",
        "cwd": str(mount),
        "hook_event_name": "PreToolUse",
        "tool_name": "Write",
        "tool_input": {"file_path": str(mount / "a.py")},
    }

    done = subprocess.run(
        _in_other_mount(workdir, mount, shlex.split(command), hide=True),
        input=json.dumps(call),
        capture_output=True,
        text=True,
        timeout=60,
        env={**_env(), "USER": "ada"},
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout, "the write was let through: the hook did not find the tree"
    reason = json.loads(done.stdout)["hookSpecificOutput"]["permissionDecisionReason"]
    assert "a.py is being edited by runner-2 for task T3" in reason


async def _hold(server: ServerThread, workdir: Path, path: str) -> None:
    """A fleet task (T3 of runner-2) holds `path`."""
    async with FleetClient(server.url) as client:
        agent = await client.register("runner-2", str(workdir), 4242)
        await client.create_tasks([{"id": "T3", "title": "t", "description": "d"}])
        assert await client.assignment(agent["agent_id"], agent["epoch"], wait=5) is not None
        await client.start("T3", agent["agent_id"], agent["epoch"])
        await client.acquire(agent["agent_id"], agent["epoch"], "T3", [path], "Edit")


async def test_a_killed_runner_on_another_mount_has_its_write_put_back_by_the_server_alone(
    make_server: Callable[..., ServerThread], workdir: Path, tmp_path: Path, wait_until: Any
) -> None:
    server = make_server(stale_after=1.0, heartbeat_interval=0.2)
    mount = tmp_path / "mnt" / "repo"
    mount.mkdir(parents=True)
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump({"long": [{"write": {"path": "a.py", "content": "X\n"}},
                                               {"sleep": 3600}]}))  # fmt: skip
    runner = [
        *CLI,
        "runner",
        "--name",
        "doomed",
        "--dry-run",
        "--script",
        str(script),
        "--server",
        server.url,
        "--workdir",
        str(mount),
        "--run-dir",
        str(tmp_path / "runs"),
    ]
    async with FleetClient(server.url) as client:
        await client.create_tasks(
            [{"id": "long", "title": "t", "description": "d", "max_attempts": 1}]
        )
        proc = await asyncio.create_subprocess_exec(
            *_in_other_mount(workdir, mount, runner),
            env=_env(),
            start_new_session=True,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        await wait_until(lambda: (workdir / "a.py").read_text() == "X\n", timeout=60)

        os.killpg(proc.pid, signal.SIGKILL)  # the runner and its namespace: no leave, no goodbye
        await proc.wait()
        await wait_until(lambda: (workdir / "a.py").read_text() == "A = 1\n", timeout=60)
        await wait_until(lambda: _no_leases(client), timeout=60)
        task = await client.task("long")
    assert (task["status"], task["error_kind"]) == ("failed", "attempts_exhausted")


async def _no_leases(client: FleetClient) -> bool:
    return await client.leases() == []


def test_serving_a_bind_mounted_subdirectory_of_a_served_tree_is_refused_naming_its_server(
    workdir: Path, tmp_path: Path
) -> None:
    port = free_port()
    first = subprocess.Popen(
        [*CLI, "serve", "--port", str(port), "--db", str(tmp_path / "one.db")],
        cwd=workdir,
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    mount = tmp_path / "mnt" / "pkg"  # the tree's pkg/, seen here with nothing above it
    mount.mkdir(parents=True)
    second = [*CLI, "serve", "--port", str(free_port()), "--workdir", str(mount)]
    try:
        wait_healthy(first, port)
        done = subprocess.run(
            _in_other_mount(workdir / "pkg", mount, [*second, "--db", str(tmp_path / "two.db")]),
            capture_output=True,
            text=True,
            timeout=START_BOUND_S,
            env=_env(),
        )
    finally:
        stop(first)

    said = " ".join(done.stderr.split())
    assert done.returncode != 0, said
    assert f"inside the tree {workdir}" in said and f"pid {first.pid}" in said
    assert not (workdir / "pkg" / ".codefleet").exists()
