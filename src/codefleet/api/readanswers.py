"""Pydantic models of the reads' answers: tasks, checks, the graph, the figures, the fleet.

Each is the typed answer a read's row declares (`transport.routetable.Route.answer`),
built by its handler from the read model's rows (`readmodel.readapi.Reads`) and
sent as `model_dump_json(exclude_unset=True)`, so the JSON is the rows' own.
`/state` and `/conflicts` send the projection's encoded JSON as it is, and
declare their model as its schema. A field with a default is a key a row may
leave out. A task row is the `tasks` table's columns and the fields derived at
read time; an agent row is a runner's (`kind: runner`) or a person's session
(`kind: interactive`); an event's payload is open (`dict[str, Any]`: each type
has its own fields). The answers of the calls that change something are in
`api.answermodels`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from codefleet.api.answermodels import Answer, Budget, Pause
from codefleet.models import AgentStatus, TaskStatus

__all__ = [
    "Agents",
    "Checks",
    "Conflicts",
    "Events",
    "GraphAnalysis",
    "Leases",
    "Patch",
    "Resources",
    "State",
    "Stats",
    "TaskDetail",
    "TaskRow",
    "Tasks",
]


# -- tasks ----------------------------------------------------------------------------------


class TaskRow(Answer):
    """A task as stored (the `tasks` table's columns) and what is derived from it at read time."""

    id: str
    seq: int
    title: str
    description: str
    status: TaskStatus
    priority: int
    file_scope: list[str]
    assigned_agent_id: str | None
    attempts: int
    uncharged_attempts: int
    retried_attempts: int
    max_attempts: int
    backoff_until: str | None
    result_summary: str | None
    error: str | None
    error_kind: str | None
    blocked_on_path: str | None
    input_tokens: int
    output_tokens: int
    cost_usd: float
    duration_ms: int | None
    session_id: str | None
    created_at: str
    updated_at: str
    assigned_at: str | None
    started_at: str | None
    completed_at: str | None
    verify: str | None
    agent: str | None
    on_stale_read: str | None
    lease_granularity: str | None
    ask: int | None
    shell: str | None
    resources: list[str]
    landing_seq: int | None
    landed_order: int | None
    repair_session: str | None
    repairs: int
    unmet_dependencies: list[str]
    depends_on: list[str]
    runnable: bool


class Tasks(Answer):
    """`GET /tasks`: a page of the tasks, by seq."""

    tasks: list[TaskRow]


class ChangeRow(Answer):
    """One write of the task's attempts, as its runner reported it."""

    id: int
    task_id: str
    agent_id: str
    path: str
    tool: str
    at: str
    attempt: int | None
    sha256: str | None


class HeldLease(Answer):
    """A lease the task holds now."""

    path: str
    agent_id: str
    task_id: str
    acquired_at: str


class PatchStats(Answer):
    """The size of the task's recorded change."""

    files: int
    added: int
    removed: int


class TaskDetail(TaskRow):
    """`GET /tasks/{id}`: the task's row, its dependents, writes, leases and patch size."""

    dependents: list[str]
    file_changes: list[ChangeRow]
    leases: list[HeldLease]
    patch: PatchStats


class PatchFile(Answer):
    """One file of a task's change: its git-style diff and its size."""

    task_id: str
    path: str
    diff: str
    added: int
    removed: int
    binary: bool


class Patch(Answer):
    """`GET /tasks/{id}/patch?format=json`: the task's change, file by file."""

    task_id: str
    files: list[PatchFile]
    added: int
    removed: int


# -- checks, the graph, the figures ---------------------------------------------------------


class CheckRow(Answer):
    """A defined check: its command, when it was defined, what it holds, if it is reused."""

    name: str
    command: str
    defined_at: str
    resources: list[str]
    reuse: bool


class Checks(Answer):
    """`GET /checks`: the checks; with `?source=`, the task whose write left that file."""

    checks: list[CheckRow]
    written_by: str | None = None


class PathFigure(Answer):
    """A path through the graph: its tasks, its length, and its minutes when estimated."""

    tasks: list[str]
    length: int
    minutes: int | float | None


class Parallelism(Answer):
    """How many runners the graph keeps busy."""

    runners: int
    predicted: float
    makespan: int | float
    total_work: int | float
    peak: int
    unit: Literal["minutes", "tasks"]


class Overlap(Answer):
    tasks: list[str]
    paths: list[str]


class Hotspot(Answer):
    path: str
    tasks: list[str]


class Finding(Answer):
    code: str
    message: str
    task: str | None
    path: str | None


class GraphAnalysis(Answer):
    """`GET /graph`: `graph check`'s analysis of the stored graph, for `runners` runners."""

    runners: int
    ok: bool
    tasks: int
    critical_path: PathFigure | None
    critical_path_minutes: PathFigure | None
    max_width: int
    width_exact: bool
    parallelism: Parallelism
    overlaps: list[Overlap]
    hotspots: list[Hotspot]
    succeeded: list[str]
    errors: list[Finding]
    warnings: list[Finding]


# a figure of `review.statsjson`, rounded: an int stays an int, as its JSON has it
Figure = int | float | None


class FleetFigures(Answer):
    """The fleet's own figures: its runners, how busy, how long, what was lost and spent."""

    runners: int
    busy_mean: Figure
    parallelism: Figure
    makespan_s: Figure
    critical_path: list[str]
    critical_path_s: Figure
    stretch: Figure
    attempt_s: Figure
    veto_lost_s: Figure
    rollback_lost_s: Figure
    pauses: int
    paused_s: Figure
    cost_usd: Figure
    simulated: bool


class FileFigures(Answer):
    """A file's vetoes and the time they and rollbacks cost; its parts' rows name their `part`."""

    path: str
    vetoes: int
    tasks: list[str]
    veto_lost_s: Figure
    rollback_lost_s: Figure
    rollbacks: int
    parts: list[FileFigures]
    part: str | None = None


class ResourceFigures(Answer):
    """A named resource's vetoes and the time they cost."""

    name: str
    vetoes: int
    tasks: list[str]
    veto_lost_s: Figure


class KindFigures(Answer):
    """One coding agent's attempts, vetoes and time per attempt."""

    agent: str
    attempts: int
    vetoed: int
    attempt_s: Figure


class TaskFigures(Answer):
    """One task's attempts, vetoes, waiting and running time, cost and landing."""

    id: str
    status: str
    attempts: int
    uncharged: int
    vetoed: int
    waiting_s: Figure
    running_s: Figure
    cost_usd: Figure
    order: int | None
    landing_s: Figure


class LandingFigures(Answer):
    """The landing queue's checks, landings, waits, breaks and halts."""

    checks: int
    landed: int
    checks_per_landed: Figure
    waited_s: Figure
    waited_max_s: Figure
    breaks: int
    reworked: int
    halts: int


class StaleReadFigures(Answer):
    """Reads of a file another task changed before the reader finished."""

    path: str
    reader: str
    changed_by: str
    count: int


class WaitFigures(Answer):
    """A file's parked lease waits: how they ended, the time waited and what it kept."""

    path: str
    waits: int
    outcomes: dict[str, int]
    waited_s: Figure
    kept_s: Figure
    kept_usd: Figure
    parts: list[WaitFigures]
    part: str | None = None


class Stats(Answer):
    """`GET /stats`: `codefleet stats`' figures (`review.statsjson`)."""

    fleet: FleetFigures
    files: list[FileFigures]
    resources: list[ResourceFigures]
    agents: list[KindFigures]
    tasks: list[TaskFigures]
    landing: LandingFigures | None
    stale_reads: list[StaleReadFigures]
    lease_waits: list[WaitFigures]


# -- the fleet: runners and sessions, leases, resources, events ------------------------------


class RunnerRow(Answer):
    """A runner as stored, its clone's landed commit, and whether it is stale or of a run before."""

    id: str
    name: str
    status: AgentStatus
    epoch: int
    current_task_id: str | None
    workdir: str | None
    pid: int | None
    host: str | None
    agent: str
    workspace: str
    last_heartbeat_at: str
    fenced: int
    last_assigned_at: str | None
    idle_since: str
    tasks_succeeded: int
    tasks_failed: int
    input_tokens: int
    output_tokens: int
    cost_usd: float
    registered_at: str
    updated_at: str
    kind: Literal["runner"]
    head: str | None
    earlier: bool
    stale: bool


class PersonRow(Answer):
    """A person's session in the shape of a runner's row, with its session id and state."""

    id: str
    name: str
    kind: Literal["interactive"]
    status: AgentStatus
    epoch: int
    current_task_id: str | None
    current_task_title: str | None
    session_id: str
    workdir: str
    pid: None
    last_heartbeat_at: str
    last_write_at: str
    idle_since: str
    last_assigned_at: None
    registered_at: str
    updated_at: str
    ended_at: str | None
    end_reason: str | None
    leases: int
    tasks_succeeded: int
    tasks_failed: int
    input_tokens: int
    output_tokens: int
    cost_usd: float
    stale: bool


class Agents(Answer):
    """`GET /agents`: the runners, then people's sessions."""

    agents: list[Annotated[RunnerRow | PersonRow, Field(discriminator="kind")]]


class LeaseRow(Answer):
    """A lease, its holder, whether its file is still being put back, and its age."""

    path: str
    agent_id: str
    task_id: str
    acquired_at: str
    holder_agent_name: str | None
    kind: str | None
    restoring: bool
    restore_error: str | None
    age_s: float


class Leases(Answer):
    """`GET /leases`: every lease, by path."""

    leases: list[LeaseRow]


class ResourceHolder(Answer):
    """A held resource: its holder, since when, and the tasks that wait for it."""

    name: str
    task_id: str
    agent_id: str
    holder_agent_name: str | None
    kind: str | None
    acquired_at: str
    age_s: float
    waiters: list[str]


class SequenceRow(Answer):
    """A sequence: the last value handed out and the next (None: exhausted)."""

    name: str
    last_value: int
    next: int | None


class Resources(Answer):
    """`GET /resources`: who holds each resource and who waits, and the sequences."""

    resources: list[ResourceHolder]
    sequences: list[SequenceRow]


class EventRow(Answer):
    """One event of the log; its payload is the event type's own fields."""

    id: int
    at: str
    type: str
    task_id: str | None
    agent_id: str | None
    payload: dict[str, Any]


class Events(Answer):
    """`GET /events`: a page of the event log, after `since`."""

    events: list[EventRow]


class ConflictRow(Answer):
    """A write refused because another task held the file, and whether that is resolved."""

    event_id: int
    at: str
    path: str | None
    task_id: str | None
    agent_id: str | None
    agent_name: str | None
    holder_task_id: str | None
    holder_agent_id: str | None
    holder_agent_name: str | None
    resolved: bool


class Conflicts(Answer):
    """`GET /conflicts`: the refused writes (all, or the resolved or open ones)."""

    conflicts: list[ConflictRow]


class Counters(Answer):
    """The tasks by status, and what every task used."""

    tasks: dict[str, int]
    input_tokens: int
    output_tokens: int
    cost_usd: float


class State(Answer):
    """`GET /state`: every task, runner, session and lease, the counters, the pause and the
    budget, at the event `last_event_id` (a client's stream goes on from there)."""

    tasks: list[TaskRow]
    agents: list[Annotated[RunnerRow | PersonRow, Field(discriminator="kind")]]
    leases: list[LeaseRow]
    counters: Counters
    last_event_id: int
    database_id: str
    server_time: str
    paused_until: str | None
    pause: Pause | None
    budget: Budget
