"""Pydantic models of the wire API: request bodies and the graph file.

Pydantic lives only here and in `config`. Request models forbid unknown keys
and use strict list types, so `file_scope: "a.py"` or `depends_on: {...}` is a
clear 422 instead of a silently reinterpreted value. Size limits are named
constants so the docs and the tests can cite them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    model_validator,
)

from codefleet.attempt import AttemptReport
from codefleet.models import (
    CHECK_NAME_PATTERN,
    MAX_CHECK_COMMAND,
    MAX_INT,
    MAX_LEASE_WAIT_S,
    AgentKind,
    CheckPurpose,
    CheckVerdict,
    ErrorKind,
    Granularity,
    RepairCause,
    StaleReadPolicy,
    Workspace,
)
from codefleet.paths import MAX_PATH_CHARS
from codefleet.resources import MAX_RESOURCES, RESOURCE_NAME_PATTERN

__all__ = [
    "AcquireBody",
    "BudgetBody",
    "ChangeBody",
    "CheckEventBody",
    "CheckSpec",
    "ChecksBody",
    "CommandEventBody",
    "CommitsBody",
    "CompleteBody",
    "DeliveredFile",
    "DeliveryBody",
    "FleetBody",
    "GraphBody",
    "HeartbeatBody",
    "IntegrationBody",
    "InteractiveAcquireBody",
    "InteractiveHoldBody",
    "InteractiveReleaseBody",
    "InteractiveUnholdBody",
    "LandingCheckResult",
    "LandingClaimBody",
    "LandingResultBody",
    "LandingStartedBody",
    "NumberBody",
    "RegisterBody",
    "ResourceBody",
    "SequenceSpec",
    "StartBody",
    "TaskSpec",
    "check_commands",
    "check_resources",
    "check_reuse",
]

MAX_TITLE = 500
MAX_DESCRIPTION = 100_000
MAX_PATH = MAX_PATH_CHARS
MAX_SCOPE = 1000
MAX_TASKS = 50_000
MAX_BODY_BYTES = 32 * 1024 * 1024
MAX_COST_USD = 1_000_000.0
MAX_JSON_DEPTH = 32
MAX_CHECKS = 100
MAX_CHECK_TAIL = 4000  # output kept in a check_finished event; the agent gets more
MAX_ESTIMATE_MIN = 100_000  # minutes (about ten weeks): a planning hint, not a timeout
MAX_RETRY_AFTER_S = 8 * 24 * 3600.0  # a usage limit's retry time: the weekly window, and a day
MAX_SEQUENCES = 100
SEQUENCE_NAME_PATTERN = r"^[a-z][a-z0-9_-]{0,63}$"

CheckName = Annotated[StrictStr, Field(pattern=CHECK_NAME_PATTERN)]
CheckCommand = Annotated[StrictStr, Field(min_length=1, max_length=MAX_CHECK_COMMAND)]
Path_ = Annotated[StrictStr, Field(min_length=1, max_length=MAX_PATH)]
ResourceName = Annotated[StrictStr, Field(pattern=RESOURCE_NAME_PATTERN)]
Resources = Annotated[list[ResourceName], Field(max_length=MAX_RESOURCES)]


class CheckSpec(BaseModel):
    """A check with options: `{run: COMMAND, resources: [db], reuse: false}` (else a plain
    command). `reuse: false`: a passing result is never reused for the same content (its
    result depends on something outside the view: the clock, the network, ignored files)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    run: CheckCommand
    resources: Resources = []
    reuse: StrictBool = True


Checks = Annotated[dict[CheckName, CheckCommand | CheckSpec], Field(max_length=MAX_CHECKS)]


def check_commands(checks: Mapping[str, str | CheckSpec]) -> dict[str, str]:
    """Each check's command, whichever form it was given in."""
    return {n: c if isinstance(c, str) else c.run for n, c in checks.items()}


def check_resources(checks: Mapping[str, str | CheckSpec]) -> dict[str, list[str]]:
    """The resources each check names (every check given, `[]` for a plain command)."""
    return {
        n: [] if isinstance(c, str) else list(dict.fromkeys(c.resources)) for n, c in checks.items()
    }


def check_reuse(checks: Mapping[str, str | CheckSpec]) -> dict[str, bool]:
    """Whether each check's passing result may be reused on the same content (every check
    given; a plain command: yes)."""
    return {n: isinstance(c, str) or c.reuse for n, c in checks.items()}


def _json_safe(value: dict[str, Any]) -> dict[str, Any]:
    """A free-form object lands in the event log: every reader must be able to parse it."""
    if _depth(value) > MAX_JSON_DEPTH:  # ~950 levels parse here but break every later read
        raise ValueError(f"nested deeper than {MAX_JSON_DEPTH} levels")
    json.dumps(value, allow_nan=False, ensure_ascii=False).encode()  # NaN, lone surrogates
    return value


def _depth(value: Any, level: int = 1) -> int:
    """How many objects and arrays deep `value` goes (stops counting past the limit)."""
    if level > MAX_JSON_DEPTH:
        return level
    if not isinstance(value, dict | list):
        return level - 1
    items = value.values() if isinstance(value, dict) else value
    return max((_depth(item, level + 1) for item in items), default=level)


def _not_blank(text: str) -> str:
    """A description is the agent's prompt: empty or only whitespace is no task."""
    if not text.strip():
        raise ValueError("a task needs a description: it is the agent's prompt")
    return text


JsonObject = Annotated[dict[str, Any], AfterValidator(_json_safe)]
Description = Annotated[
    StrictStr, Field(min_length=1, max_length=MAX_DESCRIPTION), AfterValidator(_not_blank)
]
TaskId = Annotated[StrictStr, Field(min_length=1, max_length=64)]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TaskSpec(_Body):
    """One task of a graph (the YAML file and `POST /tasks` share this shape)."""

    id: TaskId | None = None
    title: Annotated[StrictStr, Field(min_length=1, max_length=MAX_TITLE)]
    description: Description
    priority: Annotated[StrictInt, Field(ge=1, le=5)] = 3
    file_scope: Annotated[list[Path_], Field(max_length=MAX_SCOPE)] = []
    depends_on: Annotated[list[TaskId], Field(max_length=MAX_SCOPE)] = []
    max_attempts: Annotated[StrictInt, Field(ge=1, le=100)] | None = None
    verify: CheckName | None = None
    shell: StrictBool | None = None  # the run_command tool (None: the fleet's default)
    shell_network: StrictBool | None = None  # ... with the network (implies shell)
    estimate_min: Annotated[StrictInt, Field(ge=1, le=MAX_ESTIMATE_MIN)] | None = None
    agent: AgentKind | None = None  # the coding agent the task needs; None: any runner
    on_stale_read: StaleReadPolicy | None = None  # None: the graph's, else reconcile
    lease_granularity: Granularity | None = None  # None: the graph's, else the runner's
    ask: StrictBool = True  # False: its sessions get no `ask_operator` tool

    resources: Resources = []  # named exclusive locks held for the whole attempt


SequenceName = Annotated[StrictStr, Field(pattern=SEQUENCE_NAME_PATTERN)]


class SequenceSpec(_Body):
    """One counter of `sequences:`: its first value, or a glob whose highest number it follows."""

    start: Annotated[StrictInt, Field(ge=0, le=MAX_INT // 2)] | None = None
    start_after: Annotated[StrictStr, Field(min_length=1, max_length=MAX_PATH)] | None = None

    @model_validator(mode="after")
    def _one_start(self) -> SequenceSpec:
        if (self.start is None) == (self.start_after is None):
            raise ValueError("give exactly one of start or start_after")
        return self


Sequences = Annotated[dict[SequenceName, SequenceSpec], Field(max_length=MAX_SEQUENCES)]


class GraphBody(_Body):
    tasks: Annotated[list[TaskSpec], Field(min_length=1, max_length=MAX_TASKS)]
    checks: Checks = {}
    sequences: Sequences = {}
    integration: CheckName | None = None  # the check every landing must pass
    source: Path_ | None = None  # the graph file in the tree: protected from agents from now on
    # Stored tasks this load may write over, if they have not started (else: refused).
    redefine: Annotated[list[TaskId], Field(max_length=MAX_TASKS)] = []


class IntegrationBody(_Body):
    """`POST /landing/integration`: the check every landing must pass (null: none)."""

    check: CheckName | None


MAX_LANDING_OUTPUT = 20_000  # a failed landing check's output the reworked task is told


class LandingClaimBody(_Body):
    """`POST /landing/claim`: a landing worker asks for the step to run."""

    worker: Annotated[StrictStr, Field(min_length=1, max_length=200)]
    wait: Annotated[float, Field(strict=True, ge=0, le=5, allow_inf_nan=False)] = (
        0.0  # a short long-poll
    )
    timeout_s: Annotated[float, Field(strict=True, gt=0, le=86_400, allow_inf_nan=False)]


class LandingStartedBody(_Body):
    check: CheckName


class LandingCheckResult(_Body):
    """One check of a landing step, as its worker ran it."""

    check: CheckName
    verdict: CheckVerdict
    exit_code: StrictInt | None = None
    duration_ms: Annotated[StrictInt, Field(ge=0, le=MAX_INT)] | None = None
    view_ms: Annotated[StrictInt, Field(ge=0, le=MAX_INT)] | None = None
    view: Annotated[StrictStr, Field(max_length=20)] | None = None
    error: Annotated[StrictStr, Field(max_length=MAX_CHECK_TAIL)] | None = None
    output: Annotated[StrictStr, Field(max_length=MAX_LANDING_OUTPUT)] = ""
    output_tail: Annotated[StrictStr, Field(max_length=MAX_CHECK_TAIL)] = ""
    # the view's content identity, where it held still for the run (`fleet.views.identity`)
    identity: Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{64}$")] | None = None
    # a `uv run` check: uv resolved its lock, or it ran on the one kept (`fleet.views.uvlock`)
    resolution: Literal["resolved", "skipped"] | None = None
    command: Annotated[StrictStr, Field(max_length=MAX_CHECK_COMMAND)] | None = None
    # `view: reused`: the earlier step whose passing run on this same content this is
    reused_step: Annotated[StrictInt, Field(ge=1, le=MAX_INT)] | None = None
    # ... or a task's own passing run on it: its `check_finished` (decision 0177)
    reused_event: Annotated[StrictInt, Field(ge=1, le=MAX_INT)] | None = None


class LandingResultBody(_Body):
    results: Annotated[list[LandingCheckResult], Field(max_length=MAX_CHECKS)]


class ChecksBody(_Body):
    """`POST /checks`: define or redefine named checks (operator-facing); `source` is the
    file in the tree they were read from (protected from agents from now on)."""

    checks: Checks
    source: Path_ | None = None


class RegisterBody(_Body):
    """`POST /agents/register`. `tree_id` (read in the runner's own mount) must be the
        server's tree's; without it the workdir must be the server's path. `probe` names the
    file the runner wrote in its tree's `.codefleet/`: the server must see it (a copy fails). `host` and `pid` say
        which process holds the name, and `replace` takes a name a live process holds."""

    name: Annotated[StrictStr, Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.:-]+$")]
    workdir: Annotated[StrictStr, Field(min_length=1, max_length=MAX_PATH, pattern=r"^[^\x00]+$")]
    tree_id: Annotated[StrictStr, Field(pattern=r"^tree_[0-9a-f]{32}$")] | None = None
    probe: Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{32}$")] | None = None
    pid: Annotated[StrictInt, Field(ge=0, le=MAX_INT)] | None = None
    host: Annotated[StrictStr, Field(max_length=255)] | None = None
    replace: StrictBool = False
    agent: AgentKind = AgentKind.CLAUDE  # the coding agent this runner drives
    workspace: Workspace = Workspace.TREE  # the tree, or a clone of the landed line


class HeartbeatBody(_Body):
    """`POST /agents/{id}/heartbeat`; `task_id` and `delivered`: the running session has the
    operator's messages of that task up to `delivered` (their `seq`); `head`: the landed
    line's commit a runner's clone is level with (a runner in the tree sends none)."""

    task_id: TaskId | None = None
    delivered: Annotated[StrictInt, Field(ge=0, le=MAX_INT)] | None = None
    head: Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{40}([0-9a-f]{24})?$")] | None = None

    def delivery(self) -> tuple[str, int] | None:
        if self.task_id is None or self.delivered is None:
            return None
        return self.task_id, self.delivered


class QuestionBody(_Body):
    """`POST /tasks/{id}/questions`: the owner's session asks the operator (`ask_operator`)."""

    agent_id: StrictStr
    text: Annotated[StrictStr, Field(min_length=1, pattern=r"\S")]


class AnswerBody(_Body):
    """`POST /tasks/{id}/answers`: the operator answers the task's oldest open question (or
    the one named)."""

    text: Annotated[StrictStr, Field(min_length=1, pattern=r"\S")]
    question_id: Annotated[StrictStr, Field(min_length=1, max_length=100)] | None = None


class MessageBody(_Body):
    """`POST /tasks/{id}/messages`: one operator message (at most 16 KiB of UTF-8: 413)."""

    text: Annotated[StrictStr, Field(min_length=1, pattern=r"\S")]


class StartBody(_Body):
    agent_id: StrictStr


Sha256 = Annotated[StrictStr, Field(pattern="^[0-9a-f]{64}$")]


class AcquireBody(_Body):
    agent_id: StrictStr
    task_id: TaskId
    paths: Annotated[list[Annotated[StrictStr, Field(max_length=MAX_PATH)]], Field(max_length=100)]
    tool: Annotated[StrictStr, Field(max_length=100)] = "Write"
    # Seconds it may park while other fleet tasks hold the paths (CODEFLEET_LEASE_WAIT bounds it).
    wait: Annotated[float, Field(ge=0, le=MAX_LEASE_WAIT_S)] = 0.0
    # path -> the SHA-256 the session last saw (None: no content): a wait's "changed" test.
    seen: Annotated[dict[str, Sha256 | None], Field(max_length=100)] = {}


class ResourceBody(_Body):
    """`POST /resources/acquire`: a named resource for the caller's attempt."""

    agent_id: StrictStr
    task_id: TaskId
    name: ResourceName


class NumberBody(_Body):
    """`POST /sequences/next`: the next value of a sequence, for the caller's attempt."""

    agent_id: StrictStr
    task_id: TaskId
    sequence: Annotated[StrictStr, Field(min_length=1, max_length=64)]


class ChangeBody(_Body):
    agent_id: StrictStr
    task_id: TaskId
    path: Annotated[StrictStr, Field(min_length=1, max_length=MAX_PATH)]
    tool: Annotated[StrictStr, Field(max_length=100)] = "Write"
    # the file's content right after the write, as the writer read it (the content oracle)
    sha256: Annotated[StrictStr, Field(pattern="^[0-9a-f]{64}$")] | None = None


Moment = Annotated[StrictStr, Field(min_length=1, max_length=40)]


class ReadRowBody(_Body):
    path: Path_
    tool: Annotated[StrictStr, Field(max_length=100)] = "Read"
    at: Moment  # when the agent read it (ISO-8601 UTC)
    sha256: Sha256 | None = None  # None: the file did not exist


class WatchBody(_Body):
    path: Path_
    at: Moment


class StaleReadBody(_Body):
    path: Path_
    changed_by: Annotated[list[Annotated[StrictStr, Field(max_length=64)]], Field(max_length=100)]
    read_sha256: Sha256 | None = None
    now_sha256: Sha256 | None = None


class ReconciledBody(_Body):
    rounds: Annotated[StrictInt, Field(ge=0, le=100)]
    outcome: Literal["clean", "unresolved", "failed"]
    cost_usd: Annotated[float, Field(ge=0, le=MAX_COST_USD, allow_inf_nan=False)] = 0.0


class ReadsBody(_Body):
    """`POST /tasks/{id}/reads`: an attempt's reads (ledger rows) and the ones to check."""

    agent_id: StrictStr
    attempt: Annotated[StrictInt, Field(ge=1, le=MAX_INT)]
    reads: Annotated[list[ReadRowBody], Field(max_length=10_000)] = []
    watch: Annotated[list[WatchBody], Field(max_length=10_000)] = []
    stale: Annotated[list[StaleReadBody], Field(max_length=10_000)] = []  # -> `stale_read`
    reconciled: ReconciledBody | None = None  # -> `reconciled`


class DeliveredFile(_Body):
    """One file as a clone's attempt left it: its bytes (base64; a symlink: its target) and
    permission bits, or `existed` false for a file it deleted."""

    path: Path_
    existed: StrictBool
    content: StrictStr = ""  # base64
    mode: Annotated[StrictInt, Field(ge=0, le=0o177777)] | None = None


class DeliveryBody(_Body):
    """`POST /tasks/{id}/delivery`: a clone runner's attempt hands the server the files it
    holds, as they are in its clone, before it reports success (`fleet.clone`)."""

    agent_id: StrictStr
    attempt: Annotated[StrictInt, Field(ge=1, le=MAX_INT)]
    files: Annotated[list[DeliveredFile], Field(max_length=10_000)] = []


class CompleteBody(_Body):
    agent_id: StrictStr
    attempt: Annotated[StrictInt, Field(ge=1, le=MAX_INT)]
    ok: StrictBool
    summary: Annotated[StrictStr, Field(max_length=MAX_DESCRIPTION)] | None = None
    error: Annotated[StrictStr, Field(max_length=MAX_DESCRIPTION)] | None = None
    error_kind: ErrorKind | None = None
    blocked_on_path: Annotated[StrictStr, Field(max_length=MAX_PATH)] | None = None
    input_tokens: Annotated[StrictInt, Field(ge=0, le=MAX_INT)] = 0
    output_tokens: Annotated[StrictInt, Field(ge=0, le=MAX_INT)] = 0
    cost_usd: Annotated[float, Field(ge=0, le=MAX_COST_USD, allow_inf_nan=False)] = 0.0
    duration_ms: Annotated[StrictInt, Field(ge=0, le=MAX_INT)] | None = None
    session_id: Annotated[StrictStr, Field(max_length=200)] | None = None
    files_written: Annotated[list[Path_], Field(max_length=10_000)] = []
    # rate_limited only: when the CLI or API said the limit lifts (seconds from the report)
    retry_after_s: (
        Annotated[float, Field(ge=0, le=MAX_RETRY_AFTER_S, allow_inf_nan=False)] | None
    ) = None

    def report(self) -> AttemptReport:
        """The validated body as the engine's one report type (`agent_id` is the caller)."""
        return AttemptReport.from_wire(self.model_dump(exclude={"agent_id"}))


class CheckEventBody(_Body):
    """`POST /tasks/{id}/checks`: the runner reports a check it starts or finished."""

    agent_id: StrictStr
    attempt: Annotated[StrictInt, Field(ge=1, le=MAX_INT)]
    name: CheckName
    # deferred: left to the landing check; reused: it passed on this same content before;
    # repair_started / repair_finished: a failed verify repaired in the same session (0161)
    phase: Literal["started", "finished", "deferred", "reused", "repair_started", "repair_finished"]
    reused_from: CheckPurpose | None = None  # the purpose of the run a reused result is
    reused_event: Annotated[StrictInt, Field(ge=1, le=MAX_INT)] | None = None  # its check_finished
    # what a finished or reused run is about: its command and its view's content identity
    command: Annotated[StrictStr, Field(max_length=MAX_CHECK_COMMAND)] | None = None
    identity: Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{64}$")] | None = None
    purpose: CheckPurpose
    exit_code: StrictInt | None = None
    passed: StrictBool | None = None
    timed_out: StrictBool = False
    error: Annotated[StrictStr, Field(max_length=MAX_CHECK_TAIL)] | None = None
    duration_ms: Annotated[StrictInt, Field(ge=0, le=MAX_INT)] | None = None
    view: Literal["layer", "copy"] | None = None
    view_ms: Annotated[StrictInt, Field(ge=0, le=MAX_INT)] | None = None
    view_files: Annotated[StrictInt, Field(ge=0, le=MAX_INT)] | None = None
    resolution: Literal["resolved", "skipped"] | None = None  # a `uv run` check's lock
    isolated: Annotated[list[Path_], Field(max_length=1000)] = []
    disturbed: Annotated[list[Path_], Field(max_length=1000)] = []
    output_bytes: Annotated[StrictInt, Field(ge=0, le=MAX_INT)] | None = None
    output_tail: Annotated[StrictStr, Field(max_length=MAX_CHECK_TAIL)] | None = None
    cause: RepairCause | None = None  # a repair's: which check it answers
    turn: Annotated[StrictInt, Field(ge=0, le=MAX_INT)] | None = None  # the repair turn's number
    outcome: Literal["fixed", "failed"] | None = None  # how a repair turn ended
    # a repair turn that changed nothing: the failed check_finished that stands (0175)
    kept_event: Annotated[StrictInt, Field(ge=1, le=MAX_INT)] | None = None
    cost_usd: Annotated[float, Field(ge=0)] | None = None  # ... and what it cost
    spent_usd: Annotated[float, Field(ge=0)] | None = None  # the session before its repair
    input_tokens: Annotated[StrictInt, Field(ge=0, le=MAX_INT)] | None = None
    output_tokens: Annotated[StrictInt, Field(ge=0, le=MAX_INT)] | None = None


MAX_COMMAND = 10_000  # the longest command line an agent may run
MAX_COMMAND_PATHS = 1000  # paths listed in a command_finished event


class CommandEventBody(_Body):
    """`POST /tasks/{id}/commands`: the runner reports a command it starts or finished."""

    agent_id: StrictStr
    attempt: Annotated[StrictInt, Field(ge=1, le=MAX_INT)]
    phase: Literal["started", "finished"]
    command: Annotated[StrictStr, Field(min_length=1, max_length=MAX_COMMAND)]
    exit_code: StrictInt | None = None
    timed_out: StrictBool = False
    wall_s: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None
    applied: Annotated[list[Path_], Field(max_length=MAX_COMMAND_PATHS)] = []
    kept_out: Annotated[list[Path_], Field(max_length=MAX_COMMAND_PATHS)] = []
    refused: Annotated[list[Path_], Field(max_length=MAX_COMMAND_PATHS)] = []
    denied_on: Path_ | None = None
    error: Annotated[StrictStr, Field(max_length=MAX_CHECK_TAIL)] | None = None
    sandboxed: StrictBool | None = None
    output_tail: Annotated[StrictStr, Field(max_length=MAX_CHECK_TAIL)] | None = None


class CommittedTask(_Body):
    task_id: TaskId
    commit: Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{40}([0-9a-f]{24})?$")]


class CommitsBody(_Body):
    """`POST /commits`: the commits `codefleet commit` made, one per succeeded task."""

    branch: Annotated[StrictStr, Field(min_length=1, max_length=255)]
    commits: Annotated[list[CommittedTask], Field(min_length=1, max_length=MAX_TASKS)]


class BudgetBody(_Body):
    """`POST /fleet/budget`: the fleet's cap in USD (null: none), and whether it stops running work."""

    max_cost_usd: Annotated[float, Field(gt=0, le=MAX_COST_USD, allow_inf_nan=False)] | None
    hard: StrictBool = False


class FleetBody(_Body):
    """`POST /fleet/started` and `/fleet/finished`: the run's own bookends."""

    runners: Annotated[StrictInt, Field(ge=0, le=MAX_INT)] | None = None
    simulated: StrictBool | None = None  # no real model: its costs are priced, not spent
    ok: StrictBool | None = None
    verify: JsonObject | None = None
    summary: JsonObject | None = None
    # The run's agents' flags, so the hints after it name the same run (`cli.operate.again`).
    agents: Literal["live", "dry-run", "offline"] | None = None
    script: Annotated[StrictStr, Field(max_length=MAX_PATH)] | None = None
    graph: Annotated[StrictStr, Field(max_length=MAX_PATH)] | None = None


# -- a person's own Claude Code session (`codefleet hook`, `codefleet release`) ------------

SessionId = Annotated[
    StrictStr, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]*$")
]
UserName = Annotated[StrictStr, Field(max_length=100)]
HookPaths = Annotated[
    list[Annotated[StrictStr, Field(min_length=1, max_length=MAX_PATH)]],
    Field(min_length=1, max_length=100),
]


class InteractiveAcquireBody(_Body):
    """`POST /interactive/acquire` and `/interactive/changes`: one write of a person's session."""

    session_id: SessionId
    user: UserName = "you"
    paths: HookPaths
    tool: Annotated[StrictStr, Field(max_length=100)] = "Write"
    sha256: Sha256 | None = None  # a Read's: the content the session saw (its first path)


class InteractiveHoldBody(_Body):
    """`POST /interactive/hold`: a person takes named resources (`codefleet hold db`)."""

    session_id: SessionId
    user: UserName = "you"
    names: Annotated[list[ResourceName], Field(min_length=1, max_length=MAX_RESOURCES)]


class InteractiveUnholdBody(_Body):
    """`POST /interactive/unhold`: release named resources people hold (`codefleet release db`)."""

    names: Annotated[list[ResourceName], Field(min_length=1, max_length=MAX_RESOURCES)]


class InteractiveReleaseBody(_Body):
    """`POST /interactive/release`: one session (its SessionEnd, or the operator) or all."""

    session_id: SessionId | None = None
    all: StrictBool = False
    reason: Literal["session_end", "operator"] = "operator"
