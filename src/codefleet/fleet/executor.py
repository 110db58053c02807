"""The seam between the runner and an agent's brain: the `Executor` protocol.

An executor runs ONE attempt of one task and returns its `AttemptReport`
(stamped with `attempt.number`; the runner adds `duration_ms`). It writes
files only through the attempt's `WriteGate` (the pre-write path), and runs
commands only as named checks through the attempt's `Checker` (None when the
operator defined no check) and, when the task has the shell, through its
`CommandRunner` (whose changes reach the tree only through the leases). Two
implementations exist and are held to one contract test: `scripted` (a
deterministic script, for `--dry-run` and the coordination tests) and
`session` (a real Claude Code session through the Claude Agent SDK).

An executor must tolerate cancellation: the runner cancels it on timeout or
when its runner is fenced, and it must then stop whatever it started.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from codefleet.attempt import AssignedTask, AttemptReport
from codefleet.fleet.checks import Checker
from codefleet.fleet.commands import CommandRunner
from codefleet.fleet.prewrite import WriteGate

__all__ = ["Attempt", "Executor"]


@dataclass(frozen=True, slots=True)
class Attempt:
    task: AssignedTask
    gate: WriteGate
    workdir: Path
    run_dir: Path
    runner_name: str
    checks: Checker | None = None
    commands: CommandRunner | None = None  # the run_command tool, when the task has it

    @property
    def task_id(self) -> str:
        return self.task.id

    @property
    def number(self) -> int:
        return self.task.attempts


class Executor(Protocol):
    async def run(self, attempt: Attempt) -> AttemptReport: ...
