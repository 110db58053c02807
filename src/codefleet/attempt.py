"""The two records of one attempt that cross the wire, one frozen type each.

`AssignedTask` is the task as a runner receives it (`GET /agents/{id}/assignment`),
parsed from the JSON by the client in one place (`AssignedTask.from_wire`).
`AttemptReport` is what the runner says about the attempt
(`POST /tasks/{id}/complete`): an executor builds it, the runner adds what it
measured (`dataclasses.replace`: verify, `duration_ms`), the client sends
`to_wire()`, the server validates the body with pydantic (`api.wire.CompleteBody`)
and turns it back into this type for the engine. Standard library only: both
sides import it, and neither sees the other's machinery. Not in `models`: the
hook imports that on every write, and `dataclasses` costs it milliseconds
(docs/decisions/0067-an-attempts-records-are-one-type-each.md, "An attempt's records are one type each").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from typing import Any, Final

from codefleet.models import ErrorKind, Granularity, StaleReadPolicy, from_iso, to_iso

__all__ = [
    "CLOSED",
    "AssignedTask",
    "AttemptReport",
    "OperatorNote",
    "Reconciled",
    "StaleRead",
    "merged_report",
]


# pydantic's config of a record used as an answer's type (`api.answermodels`): no other key
CLOSED: Final = {"extra": "forbid"}


@dataclass(frozen=True, slots=True)
class OperatorNote:
    """One operator message to a task (`codefleet say`): its number in the task, and its text."""

    __pydantic_config__ = CLOSED  # as an answer's type, its JSON has no other key

    seq: int
    text: str

    def to_wire(self) -> dict[str, Any]:
        return {"seq": self.seq, "text": self.text}

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> OperatorNote:
        return cls(int(data["seq"]), str(data["text"]))


@dataclass(frozen=True, slots=True, kw_only=True)
class AssignedTask:
    """One assignment: the task, its attempt number and the previous attempt's failure."""

    __pydantic_config__ = CLOSED  # as an answer's type, its JSON has no other key

    id: str
    title: str
    attempts: int  # the number of this attempt (1 on the first)
    deadline: datetime  # when the server takes the attempt back
    description: str = ""
    priority: int = 0
    file_scope: tuple[str, ...] = ()
    blocked_on_path: str | None = None  # the file the previous attempt was refused
    error: str | None = None  # the previous attempt's error, shown in the retry's prompt
    error_kind: ErrorKind | None = None
    verify: str | None = None  # the check run after a successful session
    # ... left to the landing check, which runs it on the landed tree (it is the integration check)
    verify_at_landing: bool = False
    on_stale_read: StaleReadPolicy = StaleReadPolicy.RECONCILE
    lease_granularity: Granularity | None = None  # what its writes lease; None: the runner's
    notes: tuple[OperatorNote, ...] = ()  # the operator's messages so far, in order
    ask: bool = True  # False: the graph said `ask: false` (no `ask_operator` tool)
    shell_mode: str | None = None  # a `ShellMode` value: the run_command tool; None: the fleet's

    resources: tuple[str, ...] = ()  # the named resources it holds for the attempt
    # a repair: resume this session, whose change is still on the tree, and fix what `error`
    # says broke (its landing check); None: a fresh attempt (decision 0161)
    repair_session: str | None = None

    def to_wire(self) -> dict[str, Any]:
        """The assignment JSON's `task` object, in the wire's key order."""
        return {
            "id": self.id,
            "title": self.title,
            "description": self.description,
            "priority": self.priority,
            "file_scope": list(self.file_scope),
            "attempts": self.attempts,
            "deadline": to_iso(self.deadline),
            "blocked_on_path": self.blocked_on_path,
            "error": self.error,
            "error_kind": None if self.error_kind is None else self.error_kind.value,
            "verify": self.verify,
            "verify_at_landing": self.verify_at_landing,
            "on_stale_read": self.on_stale_read.value,
            "lease_granularity": None
            if self.lease_granularity is None
            else self.lease_granularity.value,
            "notes": [n.to_wire() for n in self.notes],
            "ask": self.ask,
            "shell_mode": self.shell_mode,
            "resources": list(self.resources),
            "repair_session": self.repair_session,
        }

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> AssignedTask:
        """The assignment JSON's `task` object (unknown keys ignored, a missing one raises)."""
        kind = data["error_kind"]
        return cls(
            id=str(data["id"]),
            title=str(data["title"]),
            attempts=int(data["attempts"]),
            deadline=from_iso(str(data["deadline"])),
            description=str(data["description"]),
            priority=int(data["priority"]),
            file_scope=tuple(str(p) for p in data["file_scope"]),
            blocked_on_path=data["blocked_on_path"],
            error=data["error"],
            error_kind=None if kind is None else ErrorKind(kind),
            verify=data["verify"],
            verify_at_landing=bool(data.get("verify_at_landing", False)),  # an older server: no
            on_stale_read=StaleReadPolicy(data.get("on_stale_read") or StaleReadPolicy.RECONCILE),
            lease_granularity=Granularity(data["lease_granularity"])
            if data.get("lease_granularity")
            else None,
            notes=tuple(OperatorNote.from_wire(n) for n in data.get("notes") or ()),
            ask=bool(data.get("ask", True)),
            shell_mode=data.get("shell_mode"),
            resources=tuple(str(n) for n in data["resources"]),
            repair_session=data.get("repair_session"),  # an older server: never a repair
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class StaleRead:
    """A file the attempt read that changed since, and who changed it (event `stale_read`)."""

    path: str
    changed_by: tuple[str, ...]  # task ids, or "a person" / "outside the lock"
    read_sha256: str | None  # None: the file did not exist when read
    now_sha256: str | None  # None: the file is gone

    def to_wire(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "changed_by": list(self.changed_by),
            "read_sha256": self.read_sha256,
            "now_sha256": self.now_sha256,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Reconciled:
    """How an attempt's reconcile turns ended (event `reconciled`)."""

    rounds: int
    outcome: str  # `fleet.reconcile.Outcome`: clean, unresolved, failed
    cost_usd: float = 0.0

    def to_wire(self) -> dict[str, Any]:
        return {"rounds": self.rounds, "outcome": self.outcome, "cost_usd": self.cost_usd}


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptReport:
    """What a runner says about one attempt of one task."""

    attempt: int
    ok: bool
    summary: str | None = None
    error: str | None = None
    error_kind: ErrorKind | None = None
    blocked_on_path: str | None = None  # VETO: the file another task holds
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    duration_ms: int | None = None  # measured by the runner, verify included
    session_id: str | None = None
    files_written: tuple[str, ...] = ()
    retry_after_s: float | None = None  # RATE_LIMITED: when the limit lifts, if it was said

    def to_wire(self) -> dict[str, Any]:
        """The `complete` body's fields (without `agent_id`); `retry_after_s` only when said."""
        body = asdict(self)
        body["files_written"] = list(self.files_written)
        if self.retry_after_s is None:
            del body["retry_after_s"]
        return body

    @classmethod
    def from_wire(cls, fields: Mapping[str, Any]) -> AttemptReport:
        """The report from a `complete` body's fields, already validated at the wire."""
        kind = fields.get("error_kind")
        return cls(
            **{
                **fields,
                "error_kind": None if kind is None else ErrorKind(kind),
                "files_written": tuple(fields.get("files_written", ())),
            }
        )


def merged_report(before: AttemptReport, after: AttemptReport) -> AttemptReport:
    """The attempt's report after one more turn: the turn's verdict, the usage summed."""
    written = tuple(dict.fromkeys((*before.files_written, *after.files_written)))
    return replace(
        after,
        input_tokens=before.input_tokens + after.input_tokens,
        output_tokens=before.output_tokens + after.output_tokens,
        cost_usd=before.cost_usd + after.cost_usd,
        files_written=written,
        session_id=after.session_id or before.session_id,
        summary=after.summary or before.summary,
    )
