"""Plain helpers of the real-CLI tier (fixtures live in conftest.py).

`run_attempt` bounds one executor attempt; `claude_children` and `pid_alive` read
/proc to prove that no Claude Code CLI process outlives its attempt.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path

from codefleet.attempt import AttemptReport
from codefleet.fleet.executor import Attempt, Executor

SESSION_TIMEOUT_S = 60.0


async def run_attempt(executor: Executor, attempt: Attempt) -> AttemptReport:
    """One attempt through the real CLI, bounded so a hung session fails the test."""
    async with asyncio.timeout(SESSION_TIMEOUT_S):
        return await executor.run(attempt)


def claude_children() -> list[tuple[int, str]]:
    """`(pid, exe)` of every live child of this process that is the Claude Code CLI."""
    found: list[tuple[int, str]] = []
    for task_dir in Path(f"/proc/{os.getpid()}/task").iterdir():
        with contextlib.suppress(OSError):
            for pid in (task_dir / "children").read_text().split():
                cmd = _cmdline(int(pid))
                if "claude" in cmd and _state(int(pid)) != "Z":
                    found.append((int(pid), cmd))
    return found


def pid_alive(pid: int) -> bool:
    """Is `pid` a process that has not exited (a zombie counts as exited)?"""
    return Path(f"/proc/{pid}").exists() and _state(pid) not in ("Z", "")


def _cmdline(pid: int) -> str:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
    return ""


def _state(pid: int) -> str:
    with contextlib.suppress(OSError, IndexError):
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    return ""
