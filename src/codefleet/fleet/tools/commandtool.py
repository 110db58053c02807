"""The command tool of one attempt: `run_command(command, timeout_s)` under the lock.

An agent (through the session's `run_command` MCP tool) or a scripted step
runs a shell command. One run is:

1. `command_started` is recorded (the server checks the caller still owns
   the attempt; a fenced runner learns it here and runs nothing);
2. the pre-images of files OTHER in-flight tasks hold are fetched and a
   layer is built over the tree (`fleet.views.layer`) in a fresh temp directory;
3. the command runs in it (`fleet.views.shell.run_command`: the time limit, the
   output tail, the whole process group killed), sandboxed when bubblewrap is
   there, with the check environment (`check_env`);
4. what it changed is collected and sorted (`fleet.views.layerchanges`) and the "to
   apply" list goes through the leases, all or nothing (`fleet.views.layerapply`);
5. `command_finished` is recorded and the layer deleted.

The answer (`CommandResult.render`) is what the agent reads: exit code, wall
time, the output tail, and the applied / kept out / refused lists, or the
gate's denial (a veto: `gate.blocked_on` is set, so the attempt ends as a
veto, like a refused `Write`).
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from codefleet.api.client import ServerUnavailable
from codefleet.errors import DomainError
from codefleet.fleet.gate.prewrite import WriteGate
from codefleet.fleet.tools.attemptchecks import OUTPUT_CHARS, post_event
from codefleet.fleet.views.layer import (
    Layer,
    Sandbox,
    build_layer,
    layer_argv,
    shell_line,
    shell_support,
)
from codefleet.fleet.views.layerapply import COMMAND_TOOL, Applied, ShellLimits, apply_changes
from codefleet.fleet.views.layerchanges import Sorted, collect, sort_changes
from codefleet.fleet.views.runinview import decode_preimages
from codefleet.fleet.views.shell import check_env, run_command

__all__ = ["COMMAND_TOOL", "CommandResult", "CommandRunner", "ShellConfig", "host_shell"]

log = logging.getLogger(__name__)

DEFAULT_COMMAND_TIMEOUT_S: Final = 120.0
MAX_COMMAND_TIMEOUT_S: Final = 600.0
EVENT_TAIL_CHARS: Final = 2_000
EVENT_PATHS_MAX: Final = 200
ANSWER_PATHS_MAX: Final = 100  # per list in the agent's answer


@dataclass(frozen=True, slots=True)
class ShellConfig:
    """How this runner runs commands: the namespace tool, the sandbox, the limits."""

    unshare: str
    sandbox: Sandbox
    limits: ShellLimits = field(default_factory=ShellLimits)
    output_chars: int = OUTPUT_CHARS
    layer_dir: Path | None = None  # where layers are made; None: the system temp dir


@dataclass(frozen=True, slots=True)
class CommandResult:
    command: str
    exit_code: int | None = None
    timed_out: bool = False
    timeout_s: float = 0.0
    wall_s: float = 0.0
    output: str = ""
    sorted: Sorted = field(default_factory=Sorted)
    applied: Applied = field(default_factory=Applied)
    refused: str | None = None  # why it did not run at all
    sandboxed: bool = False

    def render(self) -> str:
        """What the agent is told: how it ended, what reached the tree, the output tail."""
        if self.refused is not None:
            return self.refused
        ended = (
            f"timed out after {self.timeout_s:g}s and was killed"
            if self.timed_out
            else f"exited with code {self.exit_code}"
        )
        lines = [f"Command {ended} after {self.wall_s:.2f}s: {self.command}"]
        lines += self._lists()
        lines.append("Output:" if self.output else "(no output)")
        return "\n".join(lines) + ("\n" + self.output if self.output else "")

    def _lists(self) -> list[str]:
        lines = []
        if self.applied.denied is not None:
            lines.append(f"NOTHING it changed was applied. {self.applied.denied}")
            lines.append(f"Not applied: {_join(c.path for c in self.sorted.apply)}")
        else:
            lines.append(f"Applied to the shared tree: {_join(self.applied.applied)}")
        lines.append(
            "Kept out (regenerable, ignored, or git's index a git status refreshed): "
            f"{_join(c.path for c in self.sorted.kept_out)}"
        )
        refused = [f"{c.path} ({why})" for c, why in self.sorted.refused]
        lines.append(f"Refused (never applied): {_join(refused)}")
        return lines

    def finished_event(self, attempt: int) -> dict[str, Any]:
        def paths(items: Any) -> list[str]:
            return list(items)[:EVENT_PATHS_MAX]

        return {
            "attempt": attempt,
            "phase": "finished",
            "command": self.command,
            "exit_code": self.exit_code,
            "timed_out": self.timed_out,
            "wall_s": round(self.wall_s, 3),
            "applied": paths(self.applied.applied),
            "kept_out": paths(c.path for c in self.sorted.kept_out),
            "refused": paths(c.path for c, _ in self.sorted.refused),
            "denied_on": self.applied.denied_on,
            "error": (self.refused or self.applied.denied or "")[:EVENT_TAIL_CHARS] or None,
            "sandboxed": self.sandboxed,
            "output_tail": self.output[-EVENT_TAIL_CHARS:],
        }


def host_shell(
    limits: ShellLimits, unsandboxed: bool = False, layer_dir: Path | None = None
) -> ShellConfig | None:
    """How commands run on this host: sandboxed if bubblewrap works, else (only when
    `unsandboxed` is allowed) not; None when no layer can be built or no sandbox is allowed."""
    support = shell_support()
    if support.problem is not None or support.unshare is None:
        return None
    if support.bwrap is None and not unsandboxed:
        return None
    return ShellConfig(support.unshare, Sandbox(support.bwrap), limits, layer_dir=layer_dir)


def _join(items: Any) -> str:
    """At most `ANSWER_PATHS_MAX` paths, then how many more (`npm install` keeps out thousands)."""
    listed = list(items)
    if not listed:
        return "(none)"
    more = len(listed) - ANSWER_PATHS_MAX
    shown = ", ".join(listed[:ANSWER_PATHS_MAX])
    return f"{shown} ... and {more} more" if more > 0 else shown


class CommandRunner:
    """The commands one attempt may run; see the module docstring."""

    def __init__(self, gate: WriteGate, attempt: int, config: ShellConfig) -> None:
        self.gate = gate
        self.attempt = attempt
        self.config = config
        self.results: list[CommandResult] = []

    async def run(
        self, command: str, timeout_s: float = DEFAULT_COMMAND_TIMEOUT_S
    ) -> CommandResult:
        """Run `command` in a fresh layer, then apply what it changed; never raises for
        the command's own failure, a veto or a refusal."""
        timeout = min(max(float(timeout_s), 1.0), MAX_COMMAND_TIMEOUT_S)
        if self.gate.blocked_on is not None:
            result = CommandResult(command, refused=_after_veto(self.gate.blocked_on))
        elif (problem := await self._post({"phase": "started", "command": command})) is not None:
            result = CommandResult(command, refused=problem)
        else:
            result = await self._execute(command, timeout)
            await self._post(result.finished_event(self.attempt))
        self.results.append(result)
        return result

    async def _post(self, report: dict[str, Any]) -> str | None:
        """Record a command event; a reason to stop when the server refuses or is away."""
        gate = self.gate
        send = gate.client.command_event(
            gate.task_id, gate.agent_id, gate.epoch, {"attempt": self.attempt, **report}
        )
        return await post_event(gate, send, "command")

    async def _execute(self, command: str, timeout: float) -> CommandResult:
        base = Path(tempfile.mkdtemp(prefix="codefleet-layer-", dir=self.config.layer_dir))
        sandboxed = self.config.sandbox.bwrap is not None
        step = "its layer could not be built"
        try:
            layer = await self._layer(base)
            step = "it could not be started"
            argv = layer_argv(layer, command, self.config.sandbox, self.config.unshare)
            env = check_env(self.gate.tree.root)
            ran = await run_command(
                shell_line(argv), base, timeout=timeout, cap=self.config.output_chars, env=env
            )
            step = "its changes could not be collected or applied"
            found = await asyncio.to_thread(collect, layer)
            sorted_ = await asyncio.to_thread(sort_changes, found, self.gate.tree)
            applied = await apply_changes(self.gate, layer, sorted_.apply, self.config.limits)
        except (ServerUnavailable, DomainError, OSError, ValueError) as err:
            why = f"The command failed: {step} ({type(err).__name__}: {err})."
            return CommandResult(command, refused=why, sandboxed=sandboxed)
        finally:
            await asyncio.to_thread(shutil.rmtree, base, True)
        return CommandResult(
            command,
            exit_code=ran.exit_code,
            timed_out=ran.timed_out,
            timeout_s=timeout,
            wall_s=ran.duration_s,
            output=ran.output,
            sorted=sorted_,
            applied=applied,
            sandboxed=sandboxed,
        )

    async def _layer(self, base: Path) -> Layer:
        images = decode_preimages(await self.gate.client.foreign_preimages(self.gate.task_id))
        return await asyncio.to_thread(
            build_layer, self.gate.tree.root, base, list(images.values())
        )


def _after_veto(path: str) -> str:
    return (
        f"You were already refused {path}, so this attempt is over and no command runs. "
        f"Stop now and report that you are blocked on {path}."
    )
