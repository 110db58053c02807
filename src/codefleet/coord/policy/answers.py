"""The engine's answers to the runner's gate and a person's hook, as frozen values.

The engine returns these; the server turns each into its JSON in one place
(`transport.answerjson`, and `server.person_routes` for a person's session), so the
wire shape is defined once and the engine never builds a dict for the wire.
A lease denial is an answer like an allow (STYLE §3): `LeaseAnswer.denied`
carries one `Denial` row per refused path, with the holder when it is held.
"""

from __future__ import annotations

from dataclasses import dataclass

from codefleet.attempt import OperatorNote
from codefleet.coord.policy.waits import WaitOutcome
from codefleet.models import AgentStatus, DenyReason, TaskStatus

__all__ = [
    "Beat",
    "Denial",
    "HolderRef",
    "LeaseAnswer",
    "Registered",
    "TaskAnswer",
    "WaitReport",
]


@dataclass(frozen=True, slots=True)
class WaitReport:
    """How a parked request's wait ended (`lease_waited`), carried on its lease answer."""

    outcome: WaitOutcome
    waited_s: float
    holder_task_id: str


@dataclass(frozen=True, slots=True)
class Denial:
    """One refused path; the holder fields are set when another holder has it."""

    path: str
    reason: DenyReason
    message: str
    holder_agent_id: str | None = None
    holder_agent_name: str | None = None
    holder_task_id: str | None = None
    holder_kind: str | None = None  # `task`, or `interactive`: a person's session (held only)
    holder_task_title: str | None = None  # a person's session's denials name the task too


@dataclass(frozen=True, slots=True)
class HolderRef:
    """The person's session a write of theirs was granted to."""

    agent_id: str
    name: str
    task_id: str


@dataclass(frozen=True, slots=True)
class LeaseAnswer:
    """All-or-nothing: `allowed` with the granted keys, or the denied rows and why."""

    allowed: bool
    granted: tuple[str, ...] = ()
    denied: tuple[Denial, ...] = ()
    message: str = ""
    skipped: tuple[str, ...] = ()  # a person's paths the fleet can never lease
    holder: HolderRef | None = None
    waited: WaitReport | None = None  # the request was parked first
    # a clone runner's grant: each granted file's SHA-256 in the server's tree (None: absent),
    # the version its clone must have before it writes (`fleet.clone`)
    versions: tuple[tuple[str, str | None], ...] = ()

    @classmethod
    def deny(cls, denied: list[Denial], message: str | None = None) -> LeaseAnswer:
        text = "; ".join(d.message for d in denied) if message is None else message
        return cls(False, denied=tuple(denied), message=text)


@dataclass(frozen=True, slots=True)
class TaskAnswer:
    """A task after a completion report; `duplicate` when the report was outdated."""

    status: TaskStatus
    attempts: int
    backoff_until: str | None
    duplicate: bool


@dataclass(frozen=True, slots=True)
class Registered:
    agent_id: str
    epoch: int
    status: AgentStatus


@dataclass(frozen=True, slots=True)
class Beat:
    """A heartbeat's answer: the agent's status, its current epoch, and the operator's
    messages its running task has not received yet (`coord.tables.messages`)."""

    status: AgentStatus
    epoch: int
    messages: tuple[OperatorNote, ...] = ()
    answers: tuple[tuple[str, str], ...] = ()  # (question id, answer) of the running attempt
