"""Commands under the lock, through the scripted tier: real runner, server, SQLite, layers.

Only the agent's brain is scripted (`command: CMD` plays the `run_command` tool).
Each command really runs in an overlay layer over the tree (sandboxed by bubblewrap
where it is installed); what it changed reaches the tree only through the leases.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from fleet_support import Drained, shell_here
from fleet_support import drain as drain_fleet
from tool_support import COMMAND_PYTHON as PYTHON

from codefleet.api.client import FleetClient
from codefleet.api.graphfile import parse_graph
from codefleet.attempt import AttemptReport
from codefleet.fleet.local import FleetOptions, run_fleet
from codefleet.fleet.runner import Runner, RunnerOptions
from codefleet.fleet.scripted import ScriptedExecutor, parse_script
from codefleet.fleet.views.layerapply import ShellLimits
from codefleet.server.thread import ServerThread

FAST = {"heartbeat_interval": 0.1, "stale_after": 5.0, "tick_interval": 0.05, "backoff_base": 0.0}


async def drain(server: ServerThread, workdir: Path, script: dict[str, Any]) -> Drained:
    """One runner, whose shell runs by default, in this host's command layer."""
    return await drain_fleet(
        server, workdir, script, runners=1, shell_default=True, shell_config=shell_here()
    )


async def payloads(client: FleetClient, kind: str) -> list[dict[str, Any]]:
    return [e["payload"] for e in await client.events(type_=kind)]


async def test_a_commands_two_changed_files_are_applied_leased_and_in_the_ledger(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    server = make_server(**FAST)
    script = {"T": [{"command": "echo 'A = 2' > a.py && mkdir -p gen && echo made > gen/out.txt"}]}
    async with FleetClient(server.url) as client:
        await client.create_tasks([{"id": "T", "title": "t", "description": "do it"}])
        result, executor = await drain(server, workdir, script)
        leased = await payloads(client, "lease_acquired")
        changed = await payloads(client, "file_changed")
        [finished] = await payloads(client, "command_finished")
        patch = await client.patch("T")

    assert result.all_succeeded
    assert (workdir / "a.py").read_text() == "A = 2\n"
    assert (workdir / "gen" / "out.txt").read_text() == "made\n"
    assert sorted((p["path"], p["tool"]) for p in leased) == [
        ("a.py", "run_command"),
        ("gen/out.txt", "run_command"),
    ]
    assert sorted((p["path"], p["tool"], bool(p.get("sha256"))) for p in changed) == [
        ("a.py", "run_command", True),
        ("gen/out.txt", "run_command", True),
    ]
    assert finished["applied"] == ["a.py", "gen/out.txt"] and finished["exit_code"] == 0
    assert sorted(f["path"] for f in patch["files"]) == ["a.py", "gen/out.txt"]
    [(_, _, answer)] = executor.command_results
    assert "Applied to the shared tree: a.py, gen/out.txt" in answer.render()


async def test_what_a_command_applied_is_rolled_back_when_the_attempt_fails(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    server = make_server(**FAST, max_attempts=1)
    script = {
        "T": [
            {"command": "echo 'A = 2' > a.py && rm pkg/b.py && echo n > new.txt"},
            {"fail": "scripted failure after the command"},
        ]
    }
    async with FleetClient(server.url) as client:
        await client.create_tasks([{"id": "T", "title": "t", "description": "do it"}])
        result, _ = await drain(server, workdir, script)
        [finished] = await payloads(client, "command_finished")
        restored = await payloads(client, "file_restored")

    assert not result.all_succeeded
    assert finished["applied"] == ["a.py", "new.txt", "pkg/b.py"]
    assert (workdir / "a.py").read_text() == "A = 1\n"
    assert (workdir / "pkg" / "b.py").read_text() == "B = 2\n"
    assert not (workdir / "new.txt").exists()
    assert sorted(p["path"] for p in restored) == ["a.py", "new.txt", "pkg/b.py"]


async def test_a_command_writing_a_held_file_is_vetoed_and_nothing_it_changed_lands(
    make_server: Callable[..., ServerThread],
    workdir: Path,
    wait_until: Callable[..., Awaitable[Any]],
) -> None:
    server = make_server(**FAST)
    script = {"T": [{"command": "echo free > free.txt && echo 'A = 3' > a.py"}]}
    async with FleetClient(server.url) as client:
        await client.create_tasks([{"id": "H", "title": "holder", "description": "do it"}])
        holder = await client.register("holder", str(workdir), None)
        agent, epoch = holder["agent_id"], holder["epoch"]
        assert await client.assignment(agent, epoch, wait=5)
        await client.start("H", agent, epoch)
        granted = await client.acquire(agent, epoch, "H", ["a.py"], "Write")
        assert granted["decision"] == "allow"
        await client.create_tasks([{"id": "T", "title": "t", "description": "do it"}])
        executor = ScriptedExecutor(parse_script(script))
        stop = asyncio.Event()
        options = RunnerOptions(
            "runner-1",
            workdir,
            workdir.parent / "runs",
            poll_wait=0.2,
            shell_default=True,
            shell_config=shell_here(),
        )
        runner = asyncio.create_task(Runner(client, executor, options).run(stop))
        requeued = await wait_until(lambda: payloads(client, "task_requeued"), timeout=10)
        stop.set()
        await runner
        [finished] = await payloads(client, "command_finished")
        task = await client.task("T")
        await client.complete("H", agent, epoch, AttemptReport(attempt=1, ok=False, error="stop"))

    assert requeued[0]["blocked_on_path"] == "a.py" and "a.py" in task["file_scope"]
    assert finished["denied_on"] == "a.py" and finished["applied"] == []
    assert not (workdir / "free.txt").exists()  # all or nothing: the free file did not land
    assert (workdir / "a.py").read_text() == "A = 1\n"
    [(_, _, answer)] = executor.command_results
    assert "a.py is held by holder for task H" in answer.render()
    assert "Stop now and report that you are blocked on a.py" in answer.render()


async def test_a_timed_out_command_has_its_whole_process_group_killed(
    make_server: Callable[..., ServerThread],
    workdir: Path,
    wait_until: Callable[..., Awaitable[Any]],
) -> None:
    server = make_server(**FAST)
    marker = f"codefleet-straggler-{os.getpid()}"
    command = f"sh -c 'sleep 300; :' {marker} & sleep 300"
    script = {"T": [{"command": {"run": command, "timeout_s": 1}}]}
    async with FleetClient(server.url) as client:
        await client.create_tasks([{"id": "T", "title": "t", "description": "do it"}])
        _, executor = await drain(server, workdir, script)
        [finished] = await payloads(client, "command_finished")

    assert finished["timed_out"] and finished.get("exit_code") is None
    [(_, _, answer)] = executor.command_results
    assert "timed out after 1s and was killed" in answer.render()
    await wait_until(lambda: not _running(marker), timeout=5)


def _running(marker: str) -> bool:
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                return True
        except OSError:
            continue
    return False


async def test_over_the_file_limit_nothing_is_applied_and_the_answer_says_so(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    server = make_server(**FAST)
    script = {"T": [{"command": "for n in 1 2 3; do echo $n > f$n.txt; done"}]}
    async with FleetClient(server.url) as client:
        await client.create_tasks([{"id": "T", "title": "t", "description": "do it"}])
        executor = ScriptedExecutor(parse_script(script))
        await run_fleet(
            server.url,
            lambda _: executor,
            FleetOptions(
                RunnerOptions(
                    "runner",
                    workdir,
                    workdir.parent / "runs",
                    shell_default=True,
                    shell_config=shell_here(ShellLimits(max_files=2)),
                )
            ),
        )
    [(_, _, answer)] = executor.command_results
    assert "over the limit of 2 (CODEFLEET_SHELL_MAX_FILES)" in answer.render()
    assert not any((workdir / f"f{n}.txt").exists() for n in (1, 2, 3))


def test_doctor_says_how_commands_would_run_here(tmp_path: Path) -> None:
    ran = subprocess.run(
        [sys.executable, "-m", "codefleet.cli", "doctor", "--json", "--workdir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    [shell] = [c for c in json.loads(ran.stdout) if c["name"] == "shell"]
    sandboxed = shutil.which("bwrap") is not None
    expected = "sandboxed by bubblewrap" if sandboxed else "NOT sandboxed (no bubblewrap)"
    assert shell["ok"] is sandboxed and expected in shell["detail"]
    assert shell["required"] is False  # only `run --shell` needs it


async def test_the_graphs_shell_key_gives_tasks_the_tool_unless_a_task_says_otherwise(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    server = make_server(**FAST, max_attempts=1)
    graph = parse_graph({"shell": True, "tasks": [
        {"id": "A", "title": "a", "description": "do it"},
        {"id": "B", "title": "b", "description": "do it", "shell": False},
        {"id": "C", "title": "c", "description": "do it", "shell_network": True},
    ]})  # fmt: skip
    port = server.url.rsplit(":", 1)[1]
    probe = (
        f"import socket; s = socket.socket(); s.settimeout(2); open('{{}}.txt', 'w').write("
        f"'connected' if s.connect_ex(('127.0.0.1', {port})) == 0 else 'no network')"
    )
    script = {task: [{"command": f'"{PYTHON}" -c "{probe.format(task)}"'}] for task in "ABC"}
    async with FleetClient(server.url) as client:
        await client.create_tasks(graph)
        executor = ScriptedExecutor(parse_script(script))
        await run_fleet(
            server.url,
            lambda _: executor,
            FleetOptions(
                RunnerOptions("runner", workdir, workdir.parent / "runs", shell_config=shell_here())
            ),
        )
        status = {t["id"]: t["status"] for t in await client.tasks()}
        [b] = [t for t in await client.tasks() if t["id"] == "B"]

    assert [g.get("shell") for g in graph] == [True, False, True]
    assert status == {"A": "succeeded", "B": "failed", "C": "succeeded"}
    assert "no run_command tool" in b["error"]
    sandboxed = shutil.which("bwrap") is not None
    assert (workdir / "A.txt").read_text() == ("no network" if sandboxed else "connected")
    assert (workdir / "C.txt").read_text() == "connected"  # shell_network: true
    assert not (workdir / "B.txt").exists()
