"""The dashboard's view model: frozen values for one frame, and the event log's lines.

`describe` turns one event into one `LogLine` (its words from `codefleet.wording`,
the table the web dashboard renders too, and its colour as a style name);
`build_view` turns one `/state` answer plus the recent log into a `ViewModel`.
Neither does I/O or reads a clock: `now` is an argument, so a literal view model
is the same frame every time. Nothing here imports Rich (tests/unit/test_boundaries.py):
drawing a `ViewModel` is `codefleet.ui.dashboardrender`'s, the I/O loop
`codefleet.ui.dashboard`'s.

Landing (issue 39) is folded from the events the dashboard has seen
(`review.landinglog.landing_of`) into a `LandingPanel` (`ui.landingview`): the
queue, the check under way, the last landing, and a halt shown loudly until
`landing_resumed`.

The agents are this run's: a runner the server calls `earlier` (offline since a run
before the last one began) is only counted, in one line under the table.

Ages (heartbeat, lease) are computed from the server's timestamps against
`now`; statuses, the stale flag and the counters are the server's, never
re-derived here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from codefleet.failuretext import failure_excerpt
from codefleet.models import EventType, TaskStatus, from_iso
from codefleet.review.landinglog import LandingFacts
from codefleet.safetext import one_line
from codefleet.toolcalls.leasekeys import split_part_key
from codefleet.ui.landingview import LandingPanel, landing_panel
from codefleet.wording import AttemptCounts, phrase

__all__ = [
    "EVENT_STYLE",
    "PAUSE_STYLE",
    "VETO_STYLE",
    "AgentRow",
    "BudgetLine",
    "LeaseRow",
    "LogLine",
    "PauseBanner",
    "TaskRow",
    "ViewModel",
    "build_view",
    "describe",
]

VETO_STYLE: Final = "bold red"
# The events whose check output is shown under their line: the failing lines, then the tail.
EXCERPTED: Final = frozenset({EventType.INTEGRATION_FAILED, EventType.LANDING_HALTED})
LOG_EXCERPT_CHARS: Final = 600
PAUSE_STYLE: Final = "bold yellow"
MAX_TASK_ROWS: Final = 20
# Statuses shown first when the task table must be cut: what needs eyes now.
_URGENT: Final = (TaskStatus.RUNNING, TaskStatus.ASSIGNED, TaskStatus.LANDING, TaskStatus.FAILED)
_STATUS_ORDER: Final = tuple(TaskStatus)


@dataclass(frozen=True, slots=True)
class TaskRow:
    id: str
    title: str
    status: str
    attempts: int  # charged
    max_attempts: int
    cost_usd: float
    note: str
    attempts_said: str = ""  # the table's cell (`wording.AttemptCounts.short`)


@dataclass(frozen=True, slots=True)
class AgentRow:
    name: str
    status: str
    task_id: str | None
    heartbeat_age_s: float
    stale: bool
    succeeded: int
    failed: int
    cost_usd: float
    kind: str = "runner"  # or "interactive": a person's own Claude Code session
    workspace: str = "tree"  # or "clone": its own clone of the landed line
    head: str | None = None  # the landed commit a clone is level with


@dataclass(frozen=True, slots=True)
class LeaseRow:
    path: str
    holder: str
    task_id: str
    age_s: float
    kind: str = "task"  # or "interactive": held by a person's own Claude Code session


@dataclass(frozen=True, slots=True)
class LogLine:
    event_id: int
    at: str
    text: str
    style: str = ""
    veto: bool = False
    detail: str = ""  # lines shown under the line: a failed check's output, excerpted


@dataclass(frozen=True, slots=True)
class ViewModel:
    """Everything one frame shows; `connection` is "live", "connecting…" or "reconnecting…"."""

    server: str
    connection: str
    tasks: tuple[TaskRow, ...] = ()
    hidden_tasks: int = 0
    agents: tuple[AgentRow, ...] = ()
    leases: tuple[LeaseRow, ...] = ()
    log: tuple[LogLine, ...] = ()
    counts: tuple[tuple[str, int], ...] = ()
    cost_usd: float = 0.0
    simulated: bool = False  # no real model ran on this server: the cost is priced, not spent
    input_tokens: int = 0
    output_tokens: int = 0
    vetoes: int = 0
    last_event_id: int = 0
    pause: PauseBanner | None = None
    budget: BudgetLine | None = None
    landing: LandingPanel | None = None
    earlier_runners: int = 0  # runners of earlier runs (the server's `earlier`), folded


@dataclass(frozen=True, slots=True)
class BudgetLine:
    """The fleet's budget: its cap, what was spent, whether it stopped the fleet."""

    max_cost_usd: float
    spent_usd: float
    hard: bool
    exhausted: bool
    simulated: bool = False


@dataclass(frozen=True, slots=True)
class PauseBanner:
    """The fleet is paused on a usage limit: until when (local clock text), how long left, why."""

    until: str
    remaining_s: float
    reason: str


# -- events -> log lines ------------------------------------------------------------------


# The terminal's colour per event type; the words are `wording.json`'s (shared with the web).
EVENT_STYLE: Final[dict[str, str]] = {
    EventType.LEASE_DENIED: VETO_STYLE,
    EventType.TASK_SUCCEEDED: "green",
    EventType.TASK_FAILED: "bold red",
    EventType.TASK_BLOCKED_UPSTREAM: "red",
    EventType.TASK_REQUEUED: "yellow",
    EventType.TASK_CANCELLED: "yellow",
    EventType.TASK_RETRIED: "yellow",
    EventType.AGENT_OFFLINE: "yellow",
    EventType.TASK_ASSIGNED: "cyan",
    EventType.TASK_STARTED: "cyan",
    EventType.TASK_COMMITTED: "magenta",
    EventType.FLEET_BUDGET_SET: "magenta",
    EventType.CHECK_FINISHED: "bold yellow",
    EventType.FLEET_PAUSED: PAUSE_STYLE,
    EventType.FLEET_RESUMED: "green",
    EventType.FLEET_BUDGET_EXHAUSTED: "bold red",
    EventType.FILE_RESTORED: "yellow",
    EventType.RESTORE_FAILED: "bold red",
    EventType.COMMAND_STARTED: "cyan",
    EventType.COMMAND_FINISHED: "bold cyan",
    EventType.STALE_READ: "bold yellow",
    EventType.RECONCILED: "yellow",
    EventType.REPAIR_STARTED: "bold yellow",
    EventType.REPAIR_FINISHED: "yellow",
    EventType.OPERATOR_MESSAGE: "bold cyan",
    EventType.OPERATOR_MESSAGE_DELIVERED: "cyan",
    EventType.LANDING_QUEUED: "magenta",
    EventType.LANDING_CHECK_STARTED: "cyan",
    EventType.LANDING_CHECK_FINISHED: "bold yellow",
    EventType.LANDED: "bold green",
    EventType.INTEGRATION_FAILED: "bold red",
    EventType.LANDING_HALTED: "bold white on red",
    EventType.LANDING_RESUMED: "green",
}


def _style(kind: str, body: Mapping[str, Any]) -> str:
    if kind == EventType.CHECK_FINISHED and body.get("passed"):
        return "green"
    if kind == EventType.LANDING_CHECK_FINISHED and body.get("verdict") == "passed":
        return "green"
    if kind == EventType.COMMAND_FINISHED and body.get("denied_on"):
        return VETO_STYLE
    if body.get("kind") == "interactive" and kind.startswith("agent_"):
        return "magenta"
    return EVENT_STYLE.get(kind, "dim")


def _subject(event: Mapping[str, Any], names: Mapping[str, str], words: str) -> str:
    """`T3 · runner-1`: the task and the runner an event is about (unless its words name the runner)."""
    agent_id = event.get("agent_id")
    who = names.get(agent_id, agent_id) if agent_id else None
    if who and (who in words or str(event["payload"].get("name")) in words):
        who = None
    return " · ".join(str(part) for part in (event.get("task_id"), who) if part)


def describe(event: Mapping[str, Any], names: Mapping[str, str]) -> LogLine:
    """One log line for one event; `names` maps agent ids to runner names."""
    kind, body = str(event["type"]), event["payload"]
    detail = ""
    if kind in EXCERPTED and body.get("output_tail"):  # under the line, not in it
        detail = failure_excerpt(str(body["output_tail"]), LOG_EXCERPT_CHARS)
        body = {**body, "output_tail": None}
    words = phrase(kind, {"task_id": event.get("task_id"), **body}) or kind.replace("_", " ")
    subject = _subject(event, names, words)
    text = one_line(f"{subject}: {words}" if subject else words)  # an agent's text: one line
    at = _clock_text(event["at"])
    veto = kind == EventType.LEASE_DENIED
    style = _style(kind, body)
    return LogLine(int(event["id"]), at, text, style=style, veto=veto, detail=detail)


def _clock_text(stamp: str) -> str:
    """A server timestamp as local wall-clock time, `HH:MM:SS`."""
    return from_iso(stamp).astimezone().strftime("%H:%M:%S")


# -- state -> view model ------------------------------------------------------------------


def _age(stamp: str | None, now: datetime) -> float:
    return max(0.0, (now - from_iso(stamp)).total_seconds()) if stamp else 0.0


def _note(task: Mapping[str, Any]) -> str:
    if task["status"] == TaskStatus.SUCCEEDED:
        return str(task.get("result_summary") or "")
    if task["status"] == TaskStatus.LANDING:
        return " · ".join(filter(None, ("waits to land", str(task.get("result_summary") or ""))))
    error = task.get("error") or ""
    if error and task["status"] in (TaskStatus.PENDING, TaskStatus.ASSIGNED, TaskStatus.RUNNING):
        return f"last attempt: {error}"
    return str(error)


def _task_row(task: Mapping[str, Any], landing: LandingFacts) -> TaskRow:
    order = landing.order_of(str(task["id"])) if task["status"] == TaskStatus.SUCCEEDED else None
    note = _note(task)
    counts = AttemptCounts.of(task)
    return TaskRow(
        id=task["id"],
        title=task["title"],
        status=task["status"],
        attempts=counts.charged,
        max_attempts=counts.allowed,
        cost_usd=float(task.get("cost_usd") or 0.0),
        note=" · ".join(filter(None, (f"landed #{order}" if order else "", note))),
        attempts_said=counts.short(),
    )


def _pick_tasks(tasks: Sequence[Mapping[str, Any]], limit: int) -> list[Mapping[str, Any]]:
    """All tasks in server order when they fit; else the urgent ones first, then the rest."""
    if len(tasks) <= limit:
        return list(tasks)
    urgent = [t for t in tasks if t["status"] in _URGENT]
    rest = [t for t in tasks if t["status"] not in _URGENT]
    return (urgent + rest)[:limit]


def _agent_row(agent: Mapping[str, Any], now: datetime) -> AgentRow:
    return AgentRow(
        name=agent["name"],
        status=agent["status"],
        task_id=agent.get("current_task_id"),
        heartbeat_age_s=_age(agent.get("last_heartbeat_at"), now),
        stale=bool(agent.get("stale")),
        succeeded=int(agent.get("tasks_succeeded") or 0),
        failed=int(agent.get("tasks_failed") or 0),
        cost_usd=float(agent.get("cost_usd") or 0.0),
        kind=str(agent.get("kind") or "runner"),
        workspace=str(agent.get("workspace") or "tree"),
        head=agent.get("head"),
    )


def _lease_rows(leases: Iterable[Mapping[str, Any]], now: datetime) -> tuple[LeaseRow, ...]:
    """The leases by file: a file's whole key first, then its parts (`api.py::handle`) by name."""
    rows = (_lease_row(lease, now) for lease in leases)
    return tuple(sorted(rows, key=lambda row: _by_file(row.path)))


def _by_file(key: str) -> tuple[str, str]:
    path, name = split_part_key(key)
    return path, name or ""


def _lease_row(lease: Mapping[str, Any], now: datetime) -> LeaseRow:
    return LeaseRow(
        path=lease["path"],
        holder=lease.get("holder_agent_name") or lease["agent_id"],
        task_id=lease["task_id"],
        age_s=_age(lease.get("acquired_at"), now),
        kind=str(lease.get("kind") or "task"),
    )


def _pause(state: Mapping[str, Any], now: datetime) -> PauseBanner | None:
    pause = state.get("pause")
    if not pause:
        return None
    left = max(0.0, (from_iso(pause["until"]) - now).total_seconds())
    return PauseBanner(_clock_text(pause["until"]), left, str(pause.get("reason") or ""))


def _budget(state: Mapping[str, Any]) -> BudgetLine | None:
    budget = state.get("budget") or {}
    if budget.get("max_cost_usd") is None:
        return None
    return BudgetLine(
        float(budget["max_cost_usd"]),
        float(budget.get("spent_usd") or 0.0),
        bool(budget.get("hard")),
        bool(budget.get("exhausted")),
        _simulated(state),
    )


def _simulated(state: Mapping[str, Any]) -> bool:
    """The server's word on its cost (`budget.simulated`, `models.cost_simulated`)."""
    return bool((state.get("budget") or {}).get("simulated"))


def _counts(counters: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    known = [(s.value, counters[s]) for s in _STATUS_ORDER if counters.get(s)]
    extra = sorted((k, v) for k, v in counters.items() if k not in set(_STATUS_ORDER) and v)
    return tuple(known + extra)


def build_view(
    state: Mapping[str, Any] | None,
    log: Iterable[LogLine],
    *,
    server: str,
    connection: str,
    vetoes: int,
    last_event_id: int,
    now: datetime,
    max_task_rows: int = MAX_TASK_ROWS,
    landing: LandingFacts | None = None,
) -> ViewModel:
    """The frame for one `/state` answer (None before the first one) and the recent log.

    `landing`: what the events seen so far say of landing (`review.landinglog.landing_of`).
    """
    base = ViewModel(
        server=server,
        connection=connection,
        log=tuple(log),
        vetoes=vetoes,
        last_event_id=last_event_id,
    )
    if state is None:
        return base
    tasks = state["tasks"]
    counters = state["counters"]
    shown = _pick_tasks(tasks, max_task_rows)
    return ViewModel(
        server=server,
        connection=connection,
        tasks=tuple(_task_row(t, landing or LandingFacts()) for t in shown),
        hidden_tasks=len(tasks) - len(shown),
        agents=tuple(_agent_row(a, now) for a in state["agents"] if not a.get("earlier")),
        earlier_runners=sum(1 for a in state["agents"] if a.get("earlier")),
        leases=_lease_rows(state["leases"], now),
        log=base.log,
        counts=_counts(counters["tasks"]),
        cost_usd=float(counters["cost_usd"]),
        simulated=_simulated(state),
        input_tokens=int(counters["input_tokens"]),
        output_tokens=int(counters["output_tokens"]),
        vetoes=vetoes,
        last_event_id=last_event_id,
        pause=_pause(state, now),
        budget=_budget(state),
        landing=landing_panel(landing or LandingFacts(), tasks, now),
    )
