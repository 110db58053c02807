"""A hostile command against its sandbox: real layer, real bubblewrap, real server and leases.

Each attack (issue 38) runs as `run_command` would run it for an attempt, while
another task holds `held.txt`; what the command did may reach the tree only
through the leases, and (sandboxed) nothing outside the tree is writable.
"""

from __future__ import annotations

import os
import stat
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from tool_support import unavailable

from codefleet.api.client import FleetClient
from codefleet.fleet.gate.prewrite import WriteGate
from codefleet.fleet.tools.commandtool import CommandResult, CommandRunner, ShellConfig
from codefleet.fleet.views.layer import Sandbox, shell_support
from codefleet.paths import TreeRoot
from codefleet.server.thread import ServerThread

FAST = {"heartbeat_interval": 0.1, "stale_after": 5.0, "tick_interval": 0.05, "backoff_base": 0.0}
HELD = "held.txt"
# Undo every mount the sandbox made (the layer, the private /tmp), make / writable again.
UNMOUNT_ALL = (
    "T=$PWD; cd /; umount -l $T; umount -l /tmp; umount -l $T; mount -o remount,bind,rw /; "
    "echo X > $T/held.txt; echo X > {outside}"
)
UNMOUNT_TREE = "T=$PWD; cd /; umount -l $T; echo X > $T/held.txt"


def shell(sandboxed: bool) -> ShellConfig:
    support = shell_support()
    assert support.unshare is not None and support.problem is None, support.describe
    if sandboxed and support.bwrap is None:
        unavailable("bubblewrap is not installed here (apt-get install bubblewrap)")
    return ShellConfig(support.unshare, Sandbox(support.bwrap if sandboxed else None))


@asynccontextmanager
async def commands_beside_a_holder(
    server: ServerThread, workdir: Path, config: ShellConfig, held: str = HELD
) -> AsyncIterator[CommandRunner]:
    """Task H holds `held` (written "held"); yields task T's command runner."""
    async with FleetClient(server.url) as client:
        gates = []
        for task in ("H", "T"):
            await client.create_tasks([{"id": task, "title": task, "description": "do it"}])
            agent = await client.register(f"agent-{task}", str(workdir), None)
            assert await client.assignment(agent["agent_id"], agent["epoch"], wait=5)
            await client.start(task, agent["agent_id"], agent["epoch"])
            gates.append(
                WriteGate(client, TreeRoot(workdir), agent["agent_id"], agent["epoch"], task)
            )
        assert (await gates[0].acquire("Write", [held])).allowed
        (workdir / held).write_text("held\n")
        yield CommandRunner(gates[1], 1, config)


def nothing_applied(result: CommandResult) -> bool:
    return result.applied.applied == () and result.refused is None


@pytest.mark.parametrize("sandboxed", [True, False], ids=["bwrap", "unsandboxed"])
async def test_a_command_that_unmounts_its_layer_still_cannot_write_a_held_file(
    make_server: Callable[..., ServerThread], workdir: Path, sandboxed: bool
) -> None:
    async with commands_beside_a_holder(make_server(**FAST), workdir, shell(sandboxed)) as run:
        result = await run.run(UNMOUNT_TREE)

    assert (workdir / HELD).read_text() == "held\n"
    assert nothing_applied(result) and result.applied.denied_on == HELD, result.render()


async def test_a_sandboxed_command_undoing_every_mount_writes_neither_the_tree_nor_outside(
    make_server: Callable[..., ServerThread], workdir: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    attack = UNMOUNT_ALL.format(outside=outside)
    async with commands_beside_a_holder(make_server(**FAST), workdir, shell(True)) as run:
        whoami = await run.run("id -u; grep CapEff /proc/self/status")
        result = await run.run(attack)  # a veto: the attempt runs nothing after it

    assert (workdir / HELD).read_text() == "held\n"
    assert not outside.exists()
    assert nothing_applied(result) and result.applied.denied_on == HELD, result.render()
    uid, caps = whoami.output.split("\n", 1)
    assert uid != "0" and caps.split() == ["CapEff:", "0000000000000000"], whoami.output


@pytest.mark.parametrize("sandboxed", [True, False], ids=["bwrap", "unsandboxed"])
async def test_a_setuid_file_a_command_makes_lands_with_only_its_execute_bit(
    make_server: Callable[..., ServerThread], workdir: Path, sandboxed: bool
) -> None:
    async with commands_beside_a_holder(make_server(**FAST), workdir, shell(sandboxed)) as run:
        result = await run.run("cp /bin/dash x && chmod 6755 x && echo y > y && chmod 1600 y")

    assert result.applied.applied == ("x", "y"), result.render()
    assert stat.S_IMODE(os.stat(workdir / "x").st_mode) == 0o755
    assert stat.S_IMODE(os.stat(workdir / "y").st_mode) == 0o644


async def test_applying_a_change_leaves_another_tasks_file_of_the_temp_name_alone(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    config = shell(shell_support().bwrap is not None)
    temp_named = ".a.py.codefleet-command"
    async with commands_beside_a_holder(make_server(**FAST), workdir, config, temp_named) as run:
        result = await run.run("echo 'A = 9' > a.py")

    assert result.applied.applied == ("a.py",), result.render()
    assert (workdir / "a.py").read_text() == "A = 9\n"
    assert (workdir / temp_named).read_text() == "held\n"


async def test_a_file_a_command_creates_is_applied_owned_by_the_runners_user(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    config = shell(shell_support().bwrap is not None)
    async with commands_beside_a_holder(make_server(**FAST), workdir, config) as run:
        result = await run.run("mkdir -p gen && echo made > gen/new.txt")

    assert result.applied.applied == ("gen/new.txt",), result.render()
    made = os.stat(workdir / "gen" / "new.txt")
    assert (made.st_uid, made.st_gid) == (os.getuid(), os.getgid())
