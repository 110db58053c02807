"""Pydantic models of the server's answers: the typed answer a route's row declares.

A route whose row names one of these (`transport.routetable.Route.answer`) builds
it in its handler, and the route table sends its `model_dump_json(exclude_unset=True)`
(the bytes `JSONResponse` would render): the model is both what the handler must
fill and the answer's schema in the OpenAPI document. A field with a default is a key the
answer may leave out; every other key is always there. Closed answers forbid
other keys; open data (an event's payload) stays `dict[str, Any]`. Records with
`to_wire` that are their own JSON (`attempt.AssignedTask`, `api.landingrecords`)
are used as they are. The hot routes' handlers keep building their JSON from
frozen records (`transport.answerjson`); their models here are the schema the
fleet test holds that JSON to. The reads' answers are in `api.readanswers`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from codefleet.api.landingrecords import LandingStep
from codefleet.attempt import AssignedTask, OperatorNote
from codefleet.models import AgentStatus, DenyReason, TaskStatus

__all__ = [
    "Acknowledged",
    "Answer",
    "Assignment",
    "Budget",
    "ChecksDefined",
    "Claimed",
    "CommitsRecorded",
    "Completed",
    "Created",
    "Delivered",
    "EventRecorded",
    "FleetResumed",
    "ForeignPreimages",
    "Health",
    "LandedLine",
    "LandingHealth",
    "LandingResumed",
    "LandingState",
    "LeaseDecision",
    "MessageKept",
    "NextNumber",
    "Noted",
    "PersonLeaseDecision",
    "Question",
    "Questions",
    "ReadsRecorded",
    "Registered",
    "Released",
    "ResetDone",
    "ResultApplied",
    "StepAlive",
    "StepPreimages",
    "TaskStatusNow",
    "Unheld",
]


class Answer(BaseModel):
    """Every answer model's base: closed (no key it does not name) and frozen. Built on first
    use, not at import: a process that never answers (or sends) a model pays nothing for it."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


# -- the runner's calls (`transport.routes`) ------------------------------------------------


class Registered(Answer):
    """`POST /agents/register`: the agent's id and epoch, the timings its runner keeps, and
    what a write leases by default (`auto` resolved: `part` or `file`)."""

    agent_id: str
    epoch: int
    status: AgentStatus
    heartbeat_interval_s: float
    stale_after_s: float
    poll_interval_s: float
    task_timeout_s: float
    question_timeout_s: float
    lease_wait_s: float
    lease_granularity: str
    server_time: str


class AnswerNote(Answer):
    """The operator's answer to one of the running attempt's questions."""

    question_id: str
    text: str


class Beat(Answer):
    """`POST /agents/{id}/heartbeat`: the agent's status and epoch; the running task's
    messages and answers only when it has some waiting."""

    status: AgentStatus
    epoch: int
    messages: list[OperatorNote] = []
    answers: list[AnswerNote] = []


class Assignment(Answer):
    """`GET /agents/{id}/assignment`: the task handed to the agent (204 when none is)."""

    task: AssignedTask


class Waited(Answer):
    """How a parked lease request's wait ended (`granted`, `changed`, `timed_out`, ...)."""

    outcome: str
    waited_s: float
    holder_task_id: str | None


class Denial(Answer):
    """One refused path; a held one names its holder's kind (and, to a person, its title)."""

    path: str
    holder_agent_id: str | None
    holder_agent_name: str | None
    holder_task_id: str | None
    holder_task_title: str | None = None
    holder_kind: str | None = None
    reason: DenyReason
    message: str


class LeaseAllowed(Answer):
    """A write's leases granted; a clone's runner also gets each file's version."""

    decision: Literal["allow"]
    granted: list[str]
    waited: Waited | None = None
    versions: dict[str, str | None] = {}


class LeaseDenied(Answer):
    """A write refused, all or nothing: the rows and why."""

    decision: Literal["deny"]
    denied: list[Denial]
    message: str
    waited: Waited | None = None


# `POST /leases/acquire` and `POST /resources/acquire`
LeaseDecision = Annotated[LeaseAllowed | LeaseDenied, Field(discriminator="decision")]


class TaskStatusNow(Answer):
    """The task's status after the call (`start`, `cancel`, `retry`)."""

    status: TaskStatus


class Completed(Answer):
    """`POST /tasks/{id}/complete`: the task as stored now, and the caller's next task."""

    status: TaskStatus
    attempts: int
    backoff_until: str | None
    duplicate: bool
    next: AssignedTask | None


class Noted(Answer):
    """An empty answer, `{}`: a ledger row taken (`202`), never a veto."""


class WriteSince(Answer):
    """A write to a watched file since the attempt read it."""

    task_id: str
    at: str
    sha256: str | None
    person: bool


class ReadsRecorded(Answer):
    """`POST /tasks/{id}/reads`: each watched path's writes since it was read."""

    changes: dict[str, list[WriteSince]]


class EventRecorded(Answer):
    """The id of the event the call recorded (a check's, a command's, a fleet's)."""

    event_id: int


class Delivered(Answer):
    """`POST /tasks/{id}/delivery`: the files written into the server's tree."""

    task_id: str
    written: list[str]


class Question(Answer):
    """A question an attempt asked the operator, and its answer once there is one."""

    question_id: str
    task_id: str
    attempt: int
    text: str
    at: str
    answer: str | None
    by: str | None


class Numbered(Answer):
    """The next number of a sequence, handed out once."""

    value: int
    sequence: str


class NoNumber(Answer):
    """No number: the known sequences, and why."""

    value: None
    known: list[str]
    refused: str


NextNumber = Numbered | NoNumber  # `POST /sequences/next`


class ViewFile(Answer):
    """A file a check's view puts back: its pre-image under the task that holds it."""

    path: str
    holder_task_id: str
    existed: bool
    mode: int | None
    created_dirs: list[str]
    content_b64: str


class ForeignPreimages(Answer):
    """`GET /tasks/{id}/foreign-preimages`: what the isolated view restores, and what it cannot."""

    task_id: str
    files: list[ViewFile]
    unrestorable: list[str]


# -- the operator's calls (`server.httpapp`) ------------------------------------------------


class Created(Answer):
    """`POST /tasks`: the ids the load created, and those it redefined."""

    created: list[str]
    redefined: list[str]


class ChecksDefined(Answer):
    """`POST /checks`: the checks defined, and those whose command changed."""

    defined: list[str]
    changed: list[str]


class MessageKept(Answer):
    """`POST /tasks/{id}/messages`: the message kept, its number and where it goes."""

    task_id: str
    seq: int
    text: str
    at: str
    attempt: int
    delivered: str
    arrived: bool


class Questions(Answer):
    """`GET /questions`: the questions waiting for the operator."""

    questions: list[Question]


class CommitsRecorded(Answer):
    """`POST /commits`: how many commits were recorded."""

    recorded: int


class Budget(Answer):
    """The fleet's budget: its limit, whether it is hard, what was spent, and if it ran out."""

    max_cost_usd: float | None
    hard: bool
    spent_usd: float
    exhausted: bool
    simulated: bool


class Pause(Answer):
    """A usage-limit pause: since when, until when, why, and the task that hit it."""

    since: str
    until: str
    reason: str
    task_id: str | None
    remaining_s: float


class FleetResumed(Answer):
    """`POST /fleet/resume`: whether a pause was lifted, and which."""

    resumed: bool
    paused_until: None
    was: Pause | None


class ResetDone(Answer):
    """`POST /reset`: the state is gone."""

    reset: bool


class LandingHealth(Answer):
    """How many tasks wait to land, and whether landing is halted (and nothing else runs)."""

    queued: int
    halted: bool
    stuck: bool


class Health(Answer):
    """`GET /health`: the server's identity and version, its tree and database, and how it is."""

    status: str
    version: str
    workdir: str
    tree_id: str | None
    database_id: str
    last_event_id: int
    live_tasks: int
    loop_stalled_s: float
    server_time: str
    paused_until: str | None
    in_flight: int
    budget: Budget
    landing: LandingHealth


# -- a person's calls (`server.person_routes`) ----------------------------------------------


class Holder(Answer):
    """The person's session that holds a write's leases."""

    agent_id: str
    name: str
    task_id: str


class PersonAllowed(Answer):
    """A person's write allowed: the keys granted, the paths skipped, its session."""

    decision: Literal["allow"]
    granted: list[str]
    skipped: list[str]
    holder: Holder | None


class PersonDenied(Answer):
    """A person's write refused: the rows (each with its holder's task title) and why."""

    decision: Literal["deny"]
    denied: list[Denial]
    message: str


# `POST /interactive/acquire` and `POST /interactive/hold`
PersonLeaseDecision = Annotated[PersonAllowed | PersonDenied, Field(discriminator="decision")]


class Unheld(Answer):
    """`POST /interactive/unhold`: the resources let go, and those refused (and why)."""

    released: list[str]
    refused: dict[str, str]


class SessionReleased(Answer):
    """One person's session whose holding ended: its paths, and why."""

    session_id: str
    name: str
    task_id: str
    paths: list[str]
    reason: str


class Released(Answer):
    """`POST /interactive/release`: the sessions released."""

    released: list[SessionReleased]


# -- the landing queue (`server.landing_routes`) and the landed line -----------------------


class Claimed(Answer):
    """`POST /landing/claim`: the step the worker runs now, or none."""

    step: LandingStep | None


class StepPreimages(Answer):
    """`GET /landing/steps/{id}/preimages`: what the step's view puts back, and cannot."""

    step: int
    files: list[ViewFile]
    unrestorable: list[str]


class Acknowledged(Answer):
    """A call that only says it was taken (`POST /landing/steps/{id}/started`)."""

    ok: bool


class StepAlive(Answer):
    """`POST /landing/steps/{id}/beat`: the step still current."""

    step: int


class ResultApplied(Answer):
    """`POST /landing/steps/{id}/result`: whether the verdicts were applied."""

    applied: bool


class ShownStep(Answer):
    """A step in progress as `codefleet landing` shows it (its worker while its claim holds)."""

    step: int
    purpose: str
    batch: list[str]
    base: int
    checks: list[str]
    worker: str | None


class Halt(Answer):
    """Why landing halted: the check, why, the last task landed, the output's tail."""

    check: str
    why: str
    last_landed: str | None
    output_tail: str


class LeaseSetting(Answer):
    """What a write leases by default: the setting, and `auto` resolved."""

    setting: str
    resolved: str


class LandingState(Answer):
    """`GET /landing` (and `POST /landing/integration`): the queue, its steps, its halt."""

    integration: str | None
    queue: list[str]
    landed: int
    step: ShownStep | None
    steps: list[ShownStep]
    halted: Halt | None
    batch: int
    parallel: int
    lease_granularity: LeaseSetting


class LandingResumed(Answer):
    """`POST /landing/resume`: whether a halt was lifted, and which."""

    resumed: bool
    was: Halt | None


class LandedLine(Answer):
    """`GET /landed`: where the landed line is, or why the tree has none."""

    branch: str
    path: str
    off: str | None
    started: bool
    current: bool
    base: str
    tip: str
    cursor: int
    skipped: list[str]
    problem: str | None
    remote: str | None
    pushed: str | None
    push_problem: str | None
