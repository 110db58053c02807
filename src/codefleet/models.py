"""Enums, constants, entities and time helpers shared by every layer.

This module owns the vocabulary of CodeFleet: task and agent statuses, error
kinds, event types, lease reasons and the gated write-tool set. Each name is
defined once here; the store validates event types against `EventType`, the
scheduler and engine speak in `TaskStatus`, and both doors (the runner's gate, a
person's hook) check exactly `WRITE_TOOLS`.

Timestamps are timezone-aware UTC everywhere. On the wire and in SQLite they
are ISO-8601 text with milliseconds and a `Z` suffix; `to_iso` refuses naive
datetimes so a local time can never slip in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Final

__all__ = [
    "CHECK_NAME_PATTERN",
    "DEFAULT_BACKOFF_BASE_S",
    "DEFAULT_BACKOFF_CAP_S",
    "DEFAULT_HEARTBEAT_INTERVAL_S",
    "DEFAULT_INTERACTIVE_IDLE_S",
    "DEFAULT_LANDING_BATCH",
    "DEFAULT_LANDING_PARALLEL",
    "DEFAULT_LEASE_WAIT_S",
    "DEFAULT_MAX_ATTEMPTS",
    "DEFAULT_POLL_INTERVAL_S",
    "DEFAULT_PREIMAGE_MAX_BYTES",
    "DEFAULT_RECONCILE_ROUNDS",
    "DEFAULT_REPAIR_TURNS",
    "DEFAULT_STALE_AFTER_S",
    "DEFAULT_TASK_TIMEOUT_S",
    "DEFAULT_TICK_INTERVAL_S",
    "GATED_TOOLS",
    "MAX_BATCH_SCOPE_PATHS",
    "MAX_CHECK_COMMAND",
    "MAX_INT",
    "MAX_LEASE_WAIT_S",
    "READ_RECORDED_TOOLS",
    "RETRYABLE_KINDS",
    "TERMINAL_STATUSES",
    "WRITE_TOOLS",
    "AgentKind",
    "AgentStatus",
    "AttemptCounts",
    "CheckPurpose",
    "CheckVerdict",
    "DenyReason",
    "ErrorKind",
    "EventType",
    "RepairCause",
    "StaleReadPolicy",
    "TaskStatus",
    "cost_simulated",
    "from_iso",
    "new_agent_id",
    "new_task_id",
    "read_clock_skew_s",
    "to_iso",
    "utcnow",
]


class TaskStatus(StrEnum):
    PENDING = "pending"
    ASSIGNED = "assigned"
    RUNNING = "running"
    LANDING = "landing"  # finished, its leases kept: waiting for (or in) its landing check
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    BLOCKED_UPSTREAM = "blocked_upstream"
    CANCELLED = "cancelled"


TERMINAL_STATUSES: Final = frozenset(
    {
        TaskStatus.SUCCEEDED,
        TaskStatus.FAILED,
        TaskStatus.BLOCKED_UPSTREAM,
        TaskStatus.CANCELLED,
    }
)


class AgentStatus(StrEnum):
    IDLE = "idle"
    BUSY = "busy"
    OFFLINE = "offline"


class AgentKind(StrEnum):
    """Which coding agent a runner drives; a task may name the one it needs (`agent:`)."""

    CLAUDE = "claude"
    CODEX = "codex"


class Workspace(StrEnum):
    """Where a runner's agents work: the one shared tree, or a clone of the landed line
    (`fleet.clone`: reset to the line before each attempt, its files delivered at the end)."""

    TREE = "tree"
    CLONE = "clone"


class CheckVerdict(StrEnum):
    """A landing check's verdict (`landing_check_finished`'s `verdict`), one word each."""

    PASSED = "passed"
    FAILED = "failed"
    TIMED_OUT = "timed_out"  # a failure: it ran past its time limit
    UNRUNNABLE = "unrunnable"  # its program could not start (exit 126/127)
    DID_NOT_RUN = "did_not_run"  # no verdict: no view, no server; the step is handed out again
    STOPPED = "stopped"  # its answer stopped mattering (the server dropped the step)


class HaltCause(StrEnum):
    """Why landing halts (`landing_halted`'s `why`): nobody is blamed for any of these.
    How each reads: `wording.halt_cause`."""

    FAILS_ALONE = "fails on the landed tree alone"
    CANNOT_START = "could not start"
    FLAKY = "flaky: failed, then passed when run again on the same tree"
    COULD_NOT_RUN = "could not run"  # no worker could run the step, several times


class ErrorKind(StrEnum):
    AGENT_ERROR = "agent_error"
    VETO = "veto"
    TIMEOUT = "timeout"
    BUDGET = "budget"
    INFRA = "infra"
    ATTEMPTS_EXHAUSTED = "attempts_exhausted"
    CANCELLED = "cancelled"
    VERIFY_FAILED = "verify_failed"
    RATE_LIMITED = "rate_limited"
    STALE_READ = "stale_read"  # `on_stale_read: retry` (or reconcile's last resort)
    CHECK_UNRUNNABLE = "check_unrunnable"  # a verify's program cannot start: retrying can't help
    INTEGRATION_FAILED = "integration_failed"  # its landing check failed on the landed base
    STACK_UNWOUND = "stack_unwound"  # a task it stacked on did not land: its work went with it


# Not retryable: the rest, and CHECK_UNRUNNABLE (docs/decisions/0091-a-check-that-cannot-start-its-program.md, "A check that cannot
# start its program").
RETRYABLE_KINDS: Final = frozenset(
    {
        ErrorKind.AGENT_ERROR,
        ErrorKind.VETO,
        ErrorKind.TIMEOUT,
        ErrorKind.INFRA,
        ErrorKind.VERIFY_FAILED,
        ErrorKind.RATE_LIMITED,
        ErrorKind.STALE_READ,
        ErrorKind.INTEGRATION_FAILED,
        ErrorKind.STACK_UNWOUND,
    }
)


class StaleReadPolicy(StrEnum):
    """What an attempt does when files it read changed under it (`on_stale_read`)."""

    RECONCILE = "reconcile"  # one more turn in the same session, with the diffs
    VERIFY = "verify"  # run the task's verify check
    RETRY = "retry"  # roll back and requeue, naming the stale files
    IGNORE = "ignore"  # only record


class EventType(StrEnum):
    TASK_CREATED = "task_created"
    TASK_ASSIGNED = "task_assigned"
    TASK_STARTED = "task_started"
    TASK_SUCCEEDED = "task_succeeded"
    TASK_FAILED = "task_failed"
    TASK_REQUEUED = "task_requeued"
    TASK_UNBLOCKED = "task_unblocked"
    TASK_BLOCKED_UPSTREAM = "task_blocked_upstream"
    TASK_CANCELLED = "task_cancelled"
    TASK_RETRIED = "task_retried"
    TASK_REDEFINED = "task_redefined"
    LEASE_ACQUIRED = "lease_acquired"
    LEASE_DENIED = "lease_denied"
    LEASE_RELEASED = "lease_released"
    LEASE_WAITING = "lease_waiting"
    LEASE_WAITED = "lease_waited"
    FILE_CHANGED = "file_changed"
    FILE_RESTORED = "file_restored"
    RESTORE_REQUESTED = "restore_requested"
    RESTORE_FAILED = "restore_failed"
    CHECK_DEFINED = "check_defined"
    CHECK_STARTED = "check_started"
    CHECK_FINISHED = "check_finished"
    CHECK_DEFERRED = "check_deferred"  # a verify left to the landing check, which runs it
    CHECK_REUSED = "check_reused"  # not run: it passed before on exactly this content
    COMMAND_STARTED = "command_started"
    COMMAND_FINISHED = "command_finished"
    AGENT_REGISTERED = "agent_registered"
    AGENT_ONLINE = "agent_online"
    AGENT_OFFLINE = "agent_offline"
    FLEET_STARTED = "fleet_started"
    FLEET_IDLE = "fleet_idle"
    RUN_FINISHED = "run_finished"
    TASK_COMMITTED = "task_committed"
    FLEET_PAUSED = "fleet_paused"
    FLEET_RESUMED = "fleet_resumed"
    FLEET_BUDGET_SET = "fleet_budget_set"
    FLEET_BUDGET_EXHAUSTED = "fleet_budget_exhausted"
    STALE_READ = "stale_read"
    RECONCILED = "reconciled"
    OPERATOR_MESSAGE = "operator_message"
    OPERATOR_MESSAGE_DELIVERED = "operator_message_delivered"
    QUESTION_ASKED = "question_asked"
    QUESTION_ANSWERED = "question_answered"
    NUMBER_ALLOCATED = "number_allocated"
    SEQUENCE_DEFINED = "sequence_defined"
    LANDING_QUEUED = "landing_queued"
    LANDING_CHECK_STARTED = "landing_check_started"
    LANDING_CHECK_FINISHED = "landing_check_finished"
    LANDED = "landed"
    INTEGRATION_FAILED = "integration_failed"
    LANDING_HALTED = "landing_halted"
    LANDING_RESUMED = "landing_resumed"
    STACK_UNWOUND = "stack_unwound"  # built on a task that did not land: undone with it
    REPAIR_STARTED = "repair_started"  # a failed check's change is repaired in the same session
    REPAIR_FINISHED = "repair_finished"  # ... and how that repair turn ended


class ShellMode(StrEnum):
    """A task's `run_command` tool: off, on, or on with the network (NULL: the fleet's default)."""

    OFF = "off"
    ON = "on"
    NETWORK = "network"

    @classmethod
    def of(cls, shell: bool | None, network: bool | None) -> ShellMode | None:
        """From a task's `shell:` / `shell_network:` keys; network on implies the tool on."""
        if shell is False:
            return cls.OFF
        if network:
            return cls.NETWORK
        return cls.ON if shell else None


class CheckPurpose(StrEnum):
    """Why a check ran: an agent's `run_check` call, or the runner verifying a session."""

    TOOL = "tool"
    VERIFY = "verify"


class RepairCause(StrEnum):
    """Which check a repair turn answers: the task's `verify` at the session's end, or its
    landing check on the landed tree."""

    VERIFY = "verify"
    INTEGRATION = "integration"


class Granularity(StrEnum):
    """What a fleet write's lease covers (`lease_granularity`): the parts it changes where
    they can be found (a Python file's top-level definitions), or always the whole file;
    `auto` is parts where a landing check runs both changes together, else files."""

    PART = "part"
    FILE = "file"
    AUTO = "auto"

    def resolved(self, integration: str | None) -> Granularity:
        """`part` or `file`: `auto` is `part` when an integration check is set (decision 0164)."""
        if self is not Granularity.AUTO:
            return self
        return Granularity.PART if integration else Granularity.FILE

    def stated(self, integration: str | None) -> str:
        """What a write leases under this choice, and why, for a person (`leases: ...`)."""
        if self is not Granularity.AUTO:
            whole = "whole files" if self is Granularity.FILE else "by part"
            return f"{whole} (lease_granularity: {self.value})"
        if integration:
            return (
                f"by part (lease_granularity: auto; the integration check "
                f"{integration!r} runs every two changes of a file together)"
            )
        return (
            "whole files (lease_granularity: auto; no integration check runs two "
            "changes of a file together: set `integration:` to lease by part)"
        )


class DenyReason(StrEnum):
    """Why a lease request was refused; each door (the gate, the hook) turns it into an instruction."""

    HELD = "held"
    OUTSIDE_WORKDIR = "outside_workdir"
    PROTECTED_PATH = "protected_path"
    INVALID_PATH = "invalid_path"
    TOO_LARGE = "too_large"
    NOT_OWNER = "not_owner"
    HARD_LINK = "hard_link"  # an existing file with more than one link: two names, one inode
    BUSY = "busy"  # another task's write of a part of the file is under way: ask again shortly


class ReleaseReason(StrEnum):
    TASK_ENDED = "task_ended"
    AGENT_STALE = "agent_stale"
    AGENT_LEFT = "agent_left"
    AGENT_REREGISTERED = "agent_reregistered"
    DEADLINE = "deadline"
    CANCELLED = "cancelled"
    SESSION_END = "session_end"  # a person's session ended (its SessionEnd hook)
    OPERATOR = "operator"  # `codefleet release`
    INTERACTIVE_IDLE = "interactive_idle"  # a person's session wrote nothing for a while
    FLEET_BUDGET = "fleet_budget"  # the fleet's budget ran out and the stop is hard
    INTERRUPTED = "interrupted"  # the operator stopped the runner (SIGINT/SIGTERM): a leave
    STACKED = "stacked"  # passed on to the next writer while it waits to land (`policy.stacks`)


# Defaults shared by `Settings`, the engine's `EngineConfig` and the scheduler's snapshot
# (DESIGN §6): one definition each.
DEFAULT_STALE_AFTER_S: Final = 20.0
# The landing batch: bench/landing.py; docs/decisions/0026-the-landing-batch.md, "The landing batch".
DEFAULT_LANDING_BATCH: Final = 8
# Landing steps in flight at once: bench/landing.py --parallel; decision 0160.
DEFAULT_LANDING_PARALLEL: Final = 4
DEFAULT_TASK_TIMEOUT_S: Final = 600.0
DEFAULT_HEARTBEAT_INTERVAL_S: Final = 5.0
DEFAULT_POLL_INTERVAL_S: Final = 1.0
DEFAULT_TICK_INTERVAL_S: Final = 0.5
DEFAULT_MAX_ATTEMPTS: Final = 3
DEFAULT_BACKOFF_BASE_S: Final = 2.0
DEFAULT_BACKOFF_CAP_S: Final = 30.0
DEFAULT_PREIMAGE_MAX_BYTES: Final = 10 * 1024 * 1024
DEFAULT_INTERACTIVE_IDLE_S: Final = 900.0
# How long a write refused only because another fleet task holds it may wait (0: never).
# Chosen from bench/waiting.py (docs/history/performance-log.md, "Waiting for a lease").
DEFAULT_LEASE_WAIT_S: Final = 0.0
MAX_LEASE_WAIT_S: Final = 600.0
DEFAULT_RECONCILE_ROUNDS: Final = 2  # reconcile turns per attempt before the last resort
# Repair turns per attempt before a failed check rolls the change back and reworks it
# (docs/decisions/0161-a-failed-check-is-repaired-in-the-same-session.md).
DEFAULT_REPAIR_TURNS: Final = 1

# The longest command a check may run (graph file, `--check`, `POST /checks`).
MAX_CHECK_COMMAND: Final = 4096
MAX_MESSAGE_BYTES: Final = 16 * 1024  # one operator message (UTF-8)
MAX_MESSAGES_PER_TASK: Final = 100  # operator messages one task keeps
DEFAULT_QUESTION_TIMEOUT_S: Final = 600.0  # an unanswered `ask_operator` gets NO_ANSWER after it
NO_ANSWER: Final = (
    "No answer: use your best judgment and say in your final message what you assumed"
)

# Scope paths one graph load may declare in all: each is canonicalized with a `stat`
# (docs/decisions/0047-a-big-load-is-prepared-off-the-event-loop.md, "A big load is prepared off the event loop").
MAX_BATCH_SCOPE_PATHS: Final = 100_000

# SQLite's largest INTEGER: a wire number past it is a 422, and a sequence hands it out last.
MAX_INT: Final = 2**63 - 1

# The names an operator may give a check; an agent only ever passes such a name.
CHECK_NAME_PATTERN: Final = r"^[a-z][a-z0-9_-]{0,31}$"

# The tools whose every call must pass the lease check. One definition: the
# hook matcher, the pre-write path and the docs are derived from it.
WRITE_TOOLS: Final = frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit"})
# Every tool the pre-write gate leases for: Claude Code's write tools and Codex's `apply_patch`.
GATED_TOOLS: Final = WRITE_TOOLS | frozenset({"apply_patch"})

# The tools whose call is recorded as a read of a file (its path and the content's hash):
# the content reached the model whole. Not Grep or Glob (docs/decisions/0075-what-counts-as-a-read.md, "What counts as
# a read"). `NotebookRead` where a CLI still has it.
READ_RECORDED_TOOLS: Final = frozenset({"Read", "NotebookRead"})


def cost_simulated(started: Iterable[Mapping[str, Any]]) -> bool:
    """Whether a server's cost is priced, not spent: it saw a fleet run, and each said so.

    `started` are the `fleet_started` payloads (`simulated: true` when no real model ran);
    the one rule every view of the cost follows (docs/decisions/0092-simulated-cost-reads-as-simulated.md, "Simulated cost reads
    as simulated").
    """
    said = [bool(payload.get("simulated")) for payload in started]
    return bool(said) and all(said)


def utcnow() -> datetime:
    return datetime.now(UTC)


def to_iso(moment: datetime) -> str:
    """ISO-8601 UTC with milliseconds and `Z`; naive datetimes are a bug."""
    if moment.tzinfo is None:
        raise ValueError("naive datetime: CodeFleet timestamps must be timezone-aware UTC")
    text = moment.astimezone(UTC).isoformat(timespec="milliseconds")
    return text.replace("+00:00", "Z")


def from_iso(text: str) -> datetime:
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        raise ValueError(f"timestamp without a timezone: {text!r}")
    return moment.astimezone(UTC)


def clock_skew_s(server_time: str, sent: datetime, received: datetime) -> float:
    """The server's clock minus this host's, from the `server_time` of an answer to a
    request sent at `sent` and answered at `received` (both this host's clock): the
    server stamped it, at best, half-way."""
    return (from_iso(server_time) - (sent + (received - sent) / 2)).total_seconds()


def read_clock_skew_s(server_time: str, received: datetime) -> float:
    """The skew a runner stamps its reads with: the lowest the exchange allows.

    The server stamped `server_time` before its answer arrived at `received`, so its
    clock minus this host's is at least `server_time - received`. A read stamped with
    that bound is never later than it happened in the server's time, so no write
    after it is missed (a slow exchange's midpoint could stamp it up to half the round
    trip late); at worst a write just before the read is named too, which only ever
    blames a file whose content the read did not see anyway.
    """
    return (from_iso(server_time) - received).total_seconds()


def new_task_id() -> str:
    return f"t_{_token()}"


def new_agent_id() -> str:
    return f"a_{_token()}"


def _token() -> str:
    import secrets  # here, not at the top: `codefleet hook` imports this module on every write

    return secrets.token_hex(6)


@dataclass(frozen=True, slots=True)
class AttemptCounts:
    """A task's attempts as a person needs them: `charged` of `allowed` count against the
    limit; `free` ones do not (interrupted, a usage limit, a repair); `before_retry` ones
    ran before the last `codefleet retry` (kept in the record, not charged)."""

    charged: int
    allowed: int
    free: int = 0
    before_retry: int = 0

    @classmethod
    def of(cls, task: Mapping[str, Any]) -> AttemptCounts:
        """From a task row of the wire (`attempts`, `uncharged_attempts`, `retried_attempts`)."""
        uncharged = int(task.get("uncharged_attempts") or 0)
        retried = int(task.get("retried_attempts") or 0)
        charged = int(task.get("attempts") or 0) - uncharged
        return cls(charged, int(task["max_attempts"]), uncharged - retried, retried)

    def short(self) -> str:
        """A table's cell: `1/3`, `0/3 +3 free`, `1/3 +3 before retry`."""
        text = f"{self.charged}/{self.allowed}"
        text += f" +{self.free} free" if self.free else ""
        return text + (f" +{self.before_retry} before retry" if self.before_retry else "")

    def long(self) -> str:
        """`tasks ID`'s words: what counts against the limit and what does not, and why."""
        text = f"{self.charged} of {self.allowed} charged"
        if self.free:
            text += f" (+{self.free} free: interrupted, a usage limit or a repair)"
        if self.before_retry:
            text += f" · {self.before_retry} before the last retry (kept, not charged)"
        return text
