"""What one SDK session leaves on disk: the runner's CLI stderr log and the attempt record.

Every attempt appends to `run_dir/runners/<runner>.stderr.log` (a header line,
then the CLI's stderr) and writes `run_dir/sessions/<task>-attempt<n>.json`:
the CLI's `init` frame (tools, model, permission mode, cwd, MCP servers: the
proof the session was hermetic), the result, the outcome, the hook timings,
the refusals and the checks the agent ran. Plain file I/O, no SDK import;
`session` fills in the evidence.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import IO, Any, Literal

from codefleet.attempt import AttemptReport
from codefleet.fleet.executor import Attempt
from codefleet.models import to_iso, utcnow
from codefleet.session.outcome import SessionResult, timing_summary

__all__ = ["StderrFile", "record_path", "save_record", "stderr_path"]

log = logging.getLogger(__name__)


def stderr_path(attempt: Attempt) -> Path:
    return attempt.run_dir / "runners" / f"{attempt.runner_name}.stderr.log"


class StderrFile:
    """The runner's CLI stderr log, appended to per attempt; late lines are dropped."""

    def __init__(self, path: Path, attempt: Attempt) -> None:
        self.path = path
        self.header = f"--- {to_iso(utcnow())} {attempt.task_id} attempt {attempt.number}\n"
        self._handle: IO[str] | None = None

    def __enter__(self) -> StderrFile:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._handle = self.path.open("a", encoding="utf-8")
        self._handle.write(self.header)
        return self

    def __exit__(self, *_: object) -> None:
        handle, self._handle = self._handle, None
        if handle is not None:
            handle.close()

    def write(self, line: str) -> None:
        if self._handle is not None:
            self._handle.write(line.rstrip("\n") + "\n")


def record_path(attempt: Attempt) -> Path:
    """Where the attempt's session record is written."""
    return attempt.run_dir / "sessions" / f"{attempt.task_id}-attempt{attempt.number}.json"


def save_record(
    attempt: Attempt,
    evidence: dict[str, Any],
    hook_ms: list[float],
    result: SessionResult | None,
    outcome: AttemptReport | None,
    started: datetime,
) -> None:
    """Write the attempt record; `evidence` holds cli_pid, init, refusals and read refusals."""
    checks = attempt.checks.results if attempt.checks else []
    record = {
        "task_id": attempt.task_id,
        "attempt": attempt.number,
        "runner": attempt.runner_name,
        "started_at": to_iso(started),
        "ended_at": to_iso(utcnow()),
        **evidence,
        "result": asdict(result) if result else None,
        "outcome": _outcome_dict(outcome),
        "hook": {**timing_summary(hook_ms), "timings_ms": hook_ms},
        "checks": [_check_dict(c) for c in checks],
    }
    path = record_path(attempt)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(record, indent=2, default=str) + "\n")
    except OSError:  # the record is evidence, not a reason to fail the attempt
        log.warning("could not write session record %s", path, exc_info=True)


def _check_dict(result: Any) -> dict[str, Any]:
    found = asdict(result)
    found["output"] = found["output"][-2000:]
    found["passed"] = result.passed
    return found


def _outcome_dict(outcome: AttemptReport | None) -> dict[str, Any] | Literal["cancelled"]:
    return asdict(outcome) if outcome is not None else "cancelled"
