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

Reads: an executor notes every file read through `Attempt.record_read` (in
process), and before it returns a report it hands it to
`fleet.reconcile.settle_reads` with a way to take one more turn in the same
conversation: the attempt's stale reads are found there and the task's
`on_stale_read` policy applied.

The session's end: an executor hands its report to `fleet.repair.finish_session`
with the same follow-up turn: the reads are settled there, then the task's verify
runs (`Attempt.verify`) and a failure is repaired in up to `Attempt.repair_turns`
more turns. A repair attempt (`AssignedTask.repair_session`) resumes that session.

Operator messages: before `settle_reads`, an executor hands its first turn's
report to `fleet.tools.inbox.hear_operator` with the same follow-up turn, so the
operator's messages that arrived meanwhile (`Attempt.inbox`) reach the session.

An executor must tolerate cancellation: the runner cancels it on timeout or
when its runner is fenced, and it must then stop whatever it started.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from codefleet.attempt import AssignedTask, AttemptReport
from codefleet.fleet.gate.prewrite import WriteGate
from codefleet.fleet.gate.readset import ReadLog
from codefleet.fleet.tools.ask import Asker
from codefleet.fleet.tools.attemptchecks import Checker
from codefleet.fleet.tools.commandtool import CommandRunner
from codefleet.fleet.tools.inbox import Inbox
from codefleet.models import DEFAULT_RECONCILE_ROUNDS, DEFAULT_REPAIR_TURNS

__all__ = ["Attempt", "Executor", "Repairs", "Verify"]

# The task's `verify` run on a session's report: the report, verified (or failed by it).
Verify = Callable[[AttemptReport], Awaitable[AttemptReport]]


@dataclass(slots=True)
class Repairs:
    """What the session's end did (`fleet.repair`): whether it ran the verify, the repair turns."""

    verified: bool = False  # the executor ran `Attempt.verify` (the runner does not run it again)
    turns: int = 0  # repair turns taken
    cost_usd: float = 0.0  # ... and what they cost


@dataclass(frozen=True, slots=True)
class Attempt:
    task: AssignedTask
    gate: WriteGate
    workdir: Path
    run_dir: Path
    runner_name: str
    checks: Checker | None = None
    commands: CommandRunner | None = None  # the run_command tool, when the task has it
    reconcile_rounds: int = DEFAULT_RECONCILE_ROUNDS
    reads: ReadLog = field(default_factory=ReadLog)
    inbox: Inbox = field(default_factory=Inbox)  # the operator's messages on their way
    ask: Asker | None = None  # `ask_operator` (None: this session cannot ask)
    verify: Verify | None = None  # the task's verify, run at the session's end (`fleet.repair`)
    repair_turns: int = DEFAULT_REPAIR_TURNS
    repairs: Repairs = field(default_factory=Repairs)

    @property
    def task_id(self) -> str:
        return self.task.id

    @property
    def number(self) -> int:
        return self.task.attempts

    def record_read(self, tool: str, tool_input: Any) -> None:
        """Note a read tool call that happened (local; never waits on the server)."""
        self.reads.record(self.gate.tree, tool, tool_input)


class Executor(Protocol):
    async def run(self, attempt: Attempt) -> AttemptReport: ...
