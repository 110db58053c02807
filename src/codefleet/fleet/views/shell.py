"""Running one check command: a shell in its own process group, a time limit, an output cap.

The command runs through `/bin/sh -c` in the isolated view, in a new session
(so it and everything it starts share one process group), stdin from
/dev/null, stdout and stderr merged. Only the tail of the output is kept in
memory (the cap in characters, tail kept: a test runner prints its verdict
last). On the time limit, on cancellation, and after a normal exit alike, the
whole process group gets SIGKILL, so nothing a check started outlives it.

Nor does it outlive this process: the shell first starts a watcher in the
group that reads a pipe whose only write end this process holds (`WATCH`).
When this process dies, even by SIGKILL, the kernel closes that end, the read
ends and the watcher kills the group (docs/decisions/0152-a-landing-claim-lapses-with-its-worker.md).
A process that leaves the group (`setsid`) escapes both, as it escapes the time limit.

The environment (`check_env`, used by the checks and by `run --verify`) is the
runner's minus CodeFleet's own settings (the server token among them), the
Anthropic/Claude credentials, and CodeFleet's own virtualenv: code the agents
wrote runs here, with the target project's tools, and the output goes back to
the model.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

__all__ = ["SCRUBBED_PREFIXES", "CommandResult", "check_env", "run_command"]

SCRUBBED_PREFIXES: Final = ("CODEFLEET_", "ANTHROPIC_", "CLAUDE_CODE_", "CLAUDE_AGENT_SDK")
# What makes CodeFleet's own Python environment a command's (see `check_env`).
OWN_RUN_VARS: Final = frozenset(
    {"VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "UV", "UV_RUN_RECURSION_DEPTH"}
)
READ_CHUNK: Final = 64 * 1024
# Run first by the command's shell, whose stdin is the life pipe: keep the pipe on fd 9,
# give the command /dev/null, and leave a watcher in the group that kills the group
# (`kill -9 0`) once the pipe's write end, held only by this process, is closed.
# One line, so the shell's messages still name the command's own line numbers.
WATCH: Final = "exec 9<&0 </dev/null; { read -r _ <&9; kill -9 0; } >/dev/null 2>&1 & exec 9<&-; "
DRAIN_GRACE_S: Final = 2.0  # after the group is killed, the pipe closes at once


@dataclass(frozen=True, slots=True)
class CommandResult:
    exit_code: int | None  # None when the time limit killed it
    output: str  # at most `cap` characters: the tail, after a cut notice
    output_bytes: int  # everything the command printed
    timed_out: bool
    duration_s: float


def check_env(
    view: Path,
    base: Mapping[str, str] | None = None,
    *,
    own_prefix: str | None = None,
) -> dict[str, str]:
    """The environment of a check or verify command: the target's, not CodeFleet's.

    The runner's environment minus CodeFleet's settings and the Anthropic/Claude
    credentials, and minus what makes CodeFleet's own Python environment the
    command's: `VIRTUAL_ENV`, that environment's `bin` on `PATH`, `PYTHONPATH`,
    `PYTHONHOME` and the variables `uv run` sets for CodeFleet's run (`UV`,
    `UV_RUN_RECURSION_DEPTH`, `UV_PROJECT*`). uv's user configuration (cache,
    index, offline) stays. PWD is the directory the command runs in.
    """
    source = os.environ if base is None else base
    own_bins = {
        os.path.join(prefix, "bin")
        for prefix in (
            _own_prefix() if own_prefix is None else own_prefix,
            source.get("VIRTUAL_ENV"),
        )
        if prefix
    }
    env = {
        k: v
        for k, v in source.items()
        if not k.startswith(SCRUBBED_PREFIXES)
        and k not in OWN_RUN_VARS
        and not k.startswith("UV_PROJECT")
    }
    if "PATH" in env:
        kept = [d for d in env["PATH"].split(os.pathsep) if os.path.normpath(d) not in own_bins]
        env["PATH"] = os.pathsep.join(kept)
    env["PWD"] = str(view)
    return env


def _own_prefix() -> str:
    """CodeFleet's own virtual environment, when it runs in one ('' otherwise)."""
    return sys.prefix if sys.prefix != sys.base_prefix else ""


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
    life_fd, alive_fd = os.pipe()  # `WATCH` reads life_fd; alive_fd closes when we die
    # Our own pipe, not asyncio's: `Process.wait()` would also wait for asyncio's pipes to
    # close, which a backgrounded child holding stdout delays until the time limit.
    read_fd, write_fd = os.pipe()
    try:
        proc = await asyncio.create_subprocess_shell(
            WATCH + command,
            cwd=cwd,
            env=dict(env),
            stdin=life_fd,
            stdout=write_fd,
            stderr=write_fd,
            start_new_session=True,
        )
    except BaseException:
        os.close(read_fd)
        os.close(alive_fd)
        raise
    finally:
        os.close(write_fd)
        os.close(life_fd)
    try:
        return await _collect(proc, read_fd, timeout, cap, started)
    finally:
        os.close(alive_fd)  # the group is dead by now; were it not, the watcher would kill it


async def _collect(
    proc: asyncio.subprocess.Process, read_fd: int, timeout: float, cap: int, started: float
) -> CommandResult:
    """Wait for the command within `timeout`, keep its output's tail, kill its group."""
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
