"""Running one check command: a shell in its own process group, a time limit, an output cap.

The command runs through `/bin/sh -c` in the isolated view, in a new session
(so it and everything it starts share one process group), stdin from
/dev/null, stdout and stderr merged. Only the tail of the output is kept in
memory (the cap in characters, tail kept: a test runner prints its verdict
last). On the time limit, on cancellation, and after a normal exit alike, the
whole process group gets SIGKILL, so nothing a check started outlives it.

The environment is the runner's minus CodeFleet's own settings (the server
token among them) and the Anthropic/Claude credentials: code the agents wrote
runs here, and the output goes back to the model.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

__all__ = ["SCRUBBED_PREFIXES", "CommandResult", "check_env", "run_command"]

SCRUBBED_PREFIXES: Final = ("CODEFLEET_", "ANTHROPIC_", "CLAUDE_CODE_", "CLAUDE_AGENT_SDK")
READ_CHUNK: Final = 64 * 1024
DRAIN_GRACE_S: Final = 2.0  # after the group is killed, the pipe closes at once


@dataclass(frozen=True, slots=True)
class CommandResult:
    exit_code: int | None  # None when the time limit killed it
    output: str  # at most `cap` characters: the tail, after a cut notice
    output_bytes: int  # everything the command printed
    timed_out: bool
    duration_s: float


def check_env(view: Path, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a check: the runner's, scrubbed, with PWD set to the view."""
    env = {
        k: v for k, v in (os.environ if base is None else base).items()
        if not k.startswith(SCRUBBED_PREFIXES)
    }  # fmt: skip
    env["PWD"] = str(view)
    return env


class _Tail:
    def __init__(self, cap_chars: int) -> None:
        self.keep = max(cap_chars, 1) * 4  # bytes: a UTF-8 character is at most four
        self.cap = cap_chars
        self.buffer = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        self.buffer += chunk
        if len(self.buffer) > self.keep:
            del self.buffer[: len(self.buffer) - self.keep]

    def text(self) -> str:
        text = self.buffer.decode("utf-8", errors="replace")
        if self.total <= self.cap and len(text) <= self.cap:
            return text
        kept = text[-self.cap :] if self.cap else ""
        return f"[... output cut: {self.total} bytes in all, the last {len(kept)} characters follow ...]\n{kept}"


async def _pump(stream: asyncio.StreamReader, tail: _Tail) -> None:
    while chunk := await stream.read(READ_CHUNK):
        tail.add(chunk)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


async def run_command(
    command: str, cwd: Path, *, timeout: float, cap: int, env: Mapping[str, str]
) -> CommandResult:
    """Run `command` in `cwd`; never raises for the command's own failure or timeout."""
    started = time.monotonic()
    # Our own pipe, not asyncio's: `Process.wait()` would also wait for asyncio's pipes to
    # close, which a backgrounded child holding stdout delays until the time limit.
    read_fd, write_fd = os.pipe()
    try:
        proc = await asyncio.create_subprocess_shell(
            command,
            cwd=cwd,
            env=dict(env),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=write_fd,
            stderr=write_fd,
            start_new_session=True,
        )
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)
    stream = asyncio.StreamReader()
    transport, _ = await asyncio.get_running_loop().connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(stream), os.fdopen(read_fd, "rb", 0)
    )
    tail = _Tail(cap)
    reader = asyncio.create_task(_pump(stream, tail))
    timed_out = False
    try:
        await asyncio.wait_for(proc.wait(), timeout)
    except TimeoutError:
        timed_out = True
    except BaseException:  # cancelled (the attempt's wall clock, fencing): leave nothing behind
        _kill_group(proc.pid)
        reader.cancel()
        transport.close()
        raise
    _kill_group(proc.pid)  # stragglers too: a backgrounded child would hold the pipe
    try:
        await asyncio.wait_for(reader, DRAIN_GRACE_S)
    except TimeoutError:  # something escaped the group and holds the pipe: stop reading
        pass
    finally:
        transport.close()
    code = await proc.wait()
    return CommandResult(
        exit_code=None if timed_out else code,
        output=tail.text(),
        output_bytes=tail.total,
        timed_out=timed_out,
        duration_s=time.monotonic() - started,
    )
