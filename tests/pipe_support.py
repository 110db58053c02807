"""`codefleet ... | tee LOG` as a shell starts it, and its exit after one Ctrl-C.

The terminal's Ctrl-C signals its whole foreground process group: the run and `tee`
alike. `start_piped_cli` makes that group (`tee`'s pid is its id); `pipeline_exit_code`
waits for the run's exit with a bound, which is a bound on a hang (a piped run once
waited for a second Ctrl-C), not a speed claim.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

PIPE_EXIT_WAIT_S = 60.0


async def start_piped_cli(
    *args: str, cwd: Path, log: Path, env: Mapping[str, str | None] | None = None
) -> tuple[asyncio.subprocess.Process, asyncio.subprocess.Process]:
    """`codefleet ARGS | tee LOG` as a shell starts it: one process group of its own, `tee`'s
    pid being the group's id (the group a terminal's Ctrl-C signals); stderr is read here.
    `env` is added to ours (a None value removes the variable)."""
    full = {
        k: v
        for k, v in {**os.environ, **(env or {})}.items()
        if v is not None and not k.startswith("CODEFLEET_")
    }
    out, into = os.pipe()
    try:
        tee = await asyncio.create_subprocess_exec(
            "tee", str(log), stdin=out, stdout=asyncio.subprocess.DEVNULL, process_group=0
        )
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "codefleet.cli",
            *args,
            cwd=cwd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=into,
            stderr=asyncio.subprocess.PIPE,
            env={**full, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"},
            process_group=tee.pid,
        )
    finally:
        os.close(out)
        os.close(into)
    return tee, proc


async def pipeline_exit_code(
    proc: asyncio.subprocess.Process, tee: asyncio.subprocess.Process
) -> int:
    """The run's exit code, waited for up to `PIPE_EXIT_WAIT_S` (a bound on a hang)."""
    try:
        return await asyncio.wait_for(proc.wait(), PIPE_EXIT_WAIT_S)
    except TimeoutError:
        os.killpg(tee.pid, signal.SIGKILL)
        await proc.wait()
        pytest.fail(f"one Ctrl-C did not stop a piped run within {PIPE_EXIT_WAIT_S} s")
    finally:
        if tee.returncode is None:
            await tee.wait()
