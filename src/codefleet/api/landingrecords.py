"""The landing worker's two records that cross the wire: the step it claims, each check's run.

A landing worker (`fleet.landingworker`) claims a `LandingStep` from the landing
queue (`coord.calls.landingqueue`: `POST /landing/claim`) and posts back one
`CheckRun` per check it ran (`POST /landing/steps/{id}/result`). Each is one
frozen type, built by the side that says it and read by the other; the JSON is
made in one place (`to_wire`) and read in one place (`from_wire`), and the
server's request body (`api.wire.LandingCheckResult`) validates a run before
it becomes one. Standard library only, like `attempt`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Final

from codefleet.attempt import CLOSED
from codefleet.models import CheckVerdict

__all__ = ["CheckRun", "LandingStep", "StepCheck"]

# the optional fields of a run, said on the wire only when set
_OPTIONAL: Final = (
    "exit_code",
    "duration_ms",
    "view_ms",
    "view",
    "error",
    "identity",
    "resolution",
    "command",
    "reused_step",
    "reused_event",
)


@dataclass(frozen=True, slots=True)
class StepCheck:
    """One check a step runs: its name and the command it stands for."""

    __pydantic_config__ = CLOSED  # as an answer's type, its JSON has no other key

    name: str
    command: str


@dataclass(frozen=True, slots=True)
class LandingStep:
    """A step handed to a worker: the first candidates of a round (`batch`) on `base` landed
    tasks, checked for `purpose` (`landingpolicy`); its worker beats every `beat_s`."""

    __pydantic_config__ = CLOSED  # as an answer's type, its JSON has no other key

    step: int
    purpose: str
    batch: tuple[str, ...]
    base: int
    checks: tuple[StepCheck, ...]
    beat_s: float

    def to_wire(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "purpose": self.purpose,
            "batch": list(self.batch),
            "base": self.base,
            "checks": [{"name": c.name, "command": c.command} for c in self.checks],
            "beat_s": self.beat_s,
        }

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> LandingStep:
        return cls(
            step=int(data["step"]),
            purpose=str(data["purpose"]),
            batch=tuple(str(t) for t in data["batch"]),
            base=int(data["base"]),
            checks=tuple(StepCheck(str(c["name"]), str(c["command"])) for c in data["checks"]),
            beat_s=float(data["beat_s"]),
        )


@dataclass(frozen=True, slots=True)
class CheckRun:
    """One check of a landing step as its worker ran it: its verdict and what it showed."""

    check: str
    verdict: CheckVerdict
    exit_code: int | None = None
    duration_ms: int | None = None
    view_ms: int | None = None
    view: str | None = None
    error: str | None = None  # why it did not run
    output: str = ""
    output_tail: str = ""
    identity: str | None = None  # the view's content identity, where it held still
    resolution: str | None = None  # a `uv run` check: `resolved` or `skipped`
    command: str | None = None  # the command it ran (or stands for, reused)
    reused_step: int | None = None  # not run: the step whose passing run of it this is
    reused_event: int | None = None  # ... or the task's `check_finished` whose pass it is

    def to_wire(self) -> dict[str, Any]:
        """The run's JSON: the optional fields only when set."""
        found: dict[str, Any] = {"check": self.check, "verdict": str(self.verdict)}
        found.update((k, getattr(self, k)) for k in _OPTIONAL if getattr(self, k) is not None)
        found.update(output=self.output, output_tail=self.output_tail)
        return found

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> CheckRun:
        known = {f.name for f in fields(cls)}
        given = {k: v for k, v in data.items() if k in known and v is not None}
        return cls(**{**given, "verdict": CheckVerdict(data["verdict"])})
