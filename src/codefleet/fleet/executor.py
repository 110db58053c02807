"""The seam between the runner and an agent's brain: the `Executor` protocol.

An executor runs ONE attempt of one task and returns an `Outcome`. It writes
files only through the attempt's `WriteGate` (the pre-write path), and runs
commands only as named checks through the attempt's `Checker` (None when the
operator defined no check). Two
implementations exist and are held to one contract test: `scripted` (a
deterministic script, for `--dry-run` and the coordination tests) and
`session` (a real Claude Code session through the Claude Agent SDK).

An executor must tolerate cancellation: the runner cancels it on timeout or
when its runner is fenced, and it must then stop whatever it started.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from codefleet.fleet.checks import Checker
from codefleet.fleet.prewrite import WriteGate
from codefleet.models import ErrorKind

__all__ = ["Attempt", "Executor", "Outcome"]


@dataclass(frozen=True, slots=True)
class Attempt:
    task: dict[str, Any]
    gate: WriteGate
    workdir: Path
    run_dir: Path
    runner_name: str
    checks: Checker | None = None

    @property
    def task_id(self) -> str:
        return str(self.task["id"])

    @property
    def number(self) -> int:
        return int(self.task["attempts"])


@dataclass(frozen=True, slots=True)
class Outcome:
    ok: bool
    summary: str | None = None
    error: str | None = None
    error_kind: ErrorKind | None = None
    blocked_on_path: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    session_id: str | None = None
    files_written: list[str] = field(default_factory=list)
    retry_after_s: float | None = None  # RATE_LIMITED: when the limit lifts, if it was said


class Executor(Protocol):
    async def run(self, attempt: Attempt) -> Outcome: ...
