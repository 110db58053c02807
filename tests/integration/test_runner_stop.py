"""Stop means stop: a `codefleet runner` process obeys SIGTERM and SIGINT in every phase.

Real processes and real signals: a runner started while no server answers
(retrying its registration), and a runner in the middle of an attempt. Each
waits for a line the runner prints in that phase, then signals it; the
process must exit cleanly, and a runner stopped mid-attempt leaves, so the
server takes the task back at once instead of after the stale window.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from codefleet.api.client import FleetClient
from codefleet.server.thread import ServerThread, free_port

EXIT_WAIT_S = 20.0  # a bound on a hang, not a speed claim: a stopped runner exits in well under 1 s
LINE_WAIT_S = 30.0


async def start_runner(*args: str, tmp_path: Path) -> asyncio.subprocess.Process:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODEFLEET_")}
    if "--script" not in args:  # scripted agents that play no step
        (tmp_path / "no-steps.yaml").write_text("{}\n")
        args = ("--script", str(tmp_path / "no-steps.yaml"), *args)
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "codefleet.cli", "runner", "--dry-run",
        "--run-dir", str(tmp_path / "runs"), *args,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE, env=env,
    )  # fmt: skip


async def wait_for_line(proc: asyncio.subprocess.Process, needle: str) -> str:
    """Read the runner's stderr until a line contains `needle` (bounded)."""
    assert proc.stderr is not None

    async def scan() -> str:
        assert proc.stderr is not None
        while line := (await proc.stderr.readline()).decode():
            if needle in line:
                return line
        raise AssertionError(f"the runner exited without saying {needle!r}")

    return await asyncio.wait_for(scan(), LINE_WAIT_S)


async def exit_code(proc: asyncio.subprocess.Process) -> int:
    try:
        return await asyncio.wait_for(proc.wait(), EXIT_WAIT_S)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        pytest.fail(f"the runner ignored the signal for {EXIT_WAIT_S} s")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_a_runner_retrying_an_absent_server_stops_on_a_signal(
    sig: signal.Signals, workdir: Path, tmp_path: Path
) -> None:
    nobody = f"http://127.0.0.1:{free_port()}"
    proc = await start_runner("--name", "patient", "--server", nobody, "--workdir", str(workdir),
                              tmp_path=tmp_path)  # fmt: skip

    await wait_for_line(proc, "POST /agents/register")  # in the registration retry loop
    proc.send_signal(sig)

    assert await exit_code(proc) == 0


async def test_a_runner_in_the_middle_of_an_attempt_stops_on_sigterm_and_leaves(
    make_server: Callable[..., ServerThread], workdir: Path, tmp_path: Path, wait_until: Any
) -> None:
    server = make_server(stale_after=3600.0)
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump({"long": [{"write": {"path": "a.py", "content": "X\n"}},
                                               {"sleep": 3600}]}))  # fmt: skip
    async with FleetClient(server.url) as client:
        await client.create_tasks(
            [{"id": "long", "title": "a long attempt", "description": "work long"}]
        )
        proc = await start_runner("--name", "busy", "--server", server.url, "--workdir",
                                  str(workdir), "--script", str(script), tmp_path=tmp_path)  # fmt: skip
        await wait_until(lambda: _leased(client, "a.py"), timeout=LINE_WAIT_S)

        proc.send_signal(signal.SIGTERM)

        assert await exit_code(proc) == 0
        task = await client.task("long")
        [agent] = await client.agents()
    assert task["status"] == "pending"  # taken back by the leave, not by a stale window
    assert agent["status"] == "offline"
    assert (workdir / "a.py").read_text() == "A = 1\n"  # the attempt's edit was rolled back


async def _leased(client: FleetClient, path: str) -> bool:
    return any(lease["path"] == path for lease in await client.leases())
