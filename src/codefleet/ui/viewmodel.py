"""The dashboard's pure half: a frozen view model, event log lines, and how it all renders.

`describe` turns one event into one `LogLine` (its words from `codefleet.wording`,
the table the web dashboard renders too); `build_view` turns one
`/state` answer plus the recent log into a `ViewModel`; `render` turns a
`ViewModel` into a Rich renderable that fits the log to the terminal height.
None of them does I/O or reads a clock: `now` is an argument, so a literal
view model renders the same way every time. The I/O loop is `codefleet.ui.dashboard`.

Landing (issue 39) is folded from the events the dashboard has seen
(`review.landinglog.landing_of`) into a `LandingPanel` (`ui.landingview`): the
queue, the check under way, the last landing, and a halt shown loudly until
`landing_resumed`.

Ages (heartbeat, lease) are computed from the server's timestamps against
`now`; statuses, the stale flag and the counters are the server's, never
re-derived here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from rich import box
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.panel import Panel
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from codefleet.models import EventType, TaskStatus, from_iso
from codefleet.resources import lease_label
from codefleet.review.landinglog import LandingFacts
from codefleet.safetext import one_line
from codefleet.ui.escaped import Escaped
from codefleet.ui.landingview import (
    LANDING_STYLE,
    LandingPanel,
    halt_text,
    landing_panel,
    landing_text,
)
from codefleet.ui.report import STATUS_STYLE
from codefleet.wording import cost_text, phrase, spent_text

__all__ = [
    "STATUS_MARK",
    "AgentRow",
    "BudgetLine",
    "LeaseRow",
    "LogLine",
    "PauseBanner",
    "TaskRow",
    "ViewModel",
    "build_view",
    "describe",
    "render",
]

VETO_STYLE: Final = "bold red"
PAUSE_STYLE: Final = "bold yellow"
VETO_BADGE: Final = "bold white on red"
MAX_TASK_ROWS: Final = 20
MIN_LOG_ROWS: Final = 3
PINNED_VETOES: Final = 3
# Statuses shown first when the task table must be cut: what needs eyes now.
_URGENT: Final = (TaskStatus.RUNNING, TaskStatus.ASSIGNED, TaskStatus.LANDING, TaskStatus.FAILED)
# A status's mark in the task table beside its word (the others read by colour alone).
STATUS_MARK: Final[dict[str, str]] = {TaskStatus.LANDING: "⇣ "}
_STATUS_ORDER: Final = tuple(TaskStatus)
_TABLE: Final[dict[str, Any]] = {
    "expand": True,
    "box": box.SIMPLE_HEAD,
    "show_edge": False,
    "title_style": "bold",
}


@dataclass(frozen=True, slots=True)
class TaskRow:
    id: str
    title: str
    status: str
    attempts: int
    max_attempts: int
    cost_usd: float
    note: str


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
    words = phrase(kind, {"task_id": event.get("task_id"), **body}) or kind.replace("_", " ")
    subject = _subject(event, names, words)
    text = one_line(f"{subject}: {words}" if subject else words)  # an agent's text: one line
    at = _clock_text(event["at"])
    veto = kind == EventType.LEASE_DENIED
    return LogLine(event_id=int(event["id"]), at=at, text=text, style=_style(kind, body), veto=veto)


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
    return TaskRow(
        id=task["id"],
        title=task["title"],
        status=task["status"],
        attempts=int(task["attempts"]) - int(task.get("uncharged_attempts") or 0),  # charged
        max_attempts=int(task["max_attempts"]),
        cost_usd=float(task.get("cost_usd") or 0.0),
        note=" · ".join(filter(None, (f"landed #{order}" if order else "", note))),
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
    )


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
        agents=tuple(_agent_row(a, now) for a in state["agents"]),
        leases=tuple(_lease_row(lease, now) for lease in state["leases"]),
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


# -- view model -> renderable --------------------------------------------------------------


def _tokens(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)


def _age_text(seconds: float) -> str:
    return f"{seconds:.0f}s" if seconds < 120 else f"{seconds / 60:.0f}m"


def summary_line(view: ViewModel) -> Text:
    """The one-line summary: connection, counts per status, cost, tokens, vetoes, cursor."""
    live = view.connection == "live"
    line = Text()
    line.append(f"● {view.connection}", style="bold green" if live else "bold yellow")
    line.append(" │ ", style="dim")
    for i, (status, n) in enumerate(view.counts or (("no tasks", 0),)):
        line.append(" · " if i else "", style="dim")
        line.append(f"{status} {n}" if n else status, style=STATUS_STYLE.get(status, ""))
    line.append(" │ ", style="dim")
    line.append(cost_text(view.cost_usd, view.simulated))
    if view.budget is not None:
        cap = f" of ${view.budget.max_cost_usd:.2f}"
        line.append(cap, style=VETO_STYLE if view.budget.exhausted else "dim")
    line.append(" · ")
    line.append(f"{_tokens(view.input_tokens)}/{_tokens(view.output_tokens)} tok · ")
    line.append(f"vetoes {view.vetoes}", style=VETO_STYLE if view.vetoes else "")
    line.append(f" · event #{view.last_event_id}")
    line.append(f" │ {view.server}", style="dim")
    line.no_wrap, line.overflow = True, "ellipsis"
    return line


def _task_table(view: ViewModel) -> Table:
    title = "Tasks" + (f" (+{view.hidden_tasks} more)" if view.hidden_tasks else "")
    table = Table(title=title, title_justify="left", **_TABLE)
    table.add_column("task", no_wrap=True)
    table.add_column("title", no_wrap=True, overflow="ellipsis", max_width=44)
    table.add_column("status", no_wrap=True)
    table.add_column("att.", no_wrap=True, justify="right")
    table.add_column("cost $", no_wrap=True, justify="right")
    table.add_column("note", no_wrap=True, overflow="ellipsis", ratio=1)
    for t in view.tasks:
        table.add_row(
            Text(t.id),
            Text(t.title),
            Text(STATUS_MARK.get(t.status, "") + t.status, style=STATUS_STYLE.get(t.status, "")),
            f"{t.attempts}/{t.max_attempts}",
            f"{t.cost_usd:.4f}",
            Text(t.note),
        )
    return table


def _agent_table(view: ViewModel) -> Table:
    table = Table(title="Agents", title_justify="left", **_TABLE)
    for name in ("agent", "status", "task", "hb", "stale", "ok/fail", "cost $"):
        table.add_column(name, no_wrap=True, overflow="ellipsis")
    for a in view.agents:
        style = {"busy": "cyan", "offline": "dim"}.get(a.status, "")
        table.add_row(
            _holder_text(a.name, a.kind),
            Text(a.status, style=style),
            Text(a.task_id or "-"),
            "-" if a.status == "offline" else _age_text(a.heartbeat_age_s),
            Text("STALE", style="bold red") if a.stale else "",
            f"{a.succeeded}/{a.failed}",
            f"{a.cost_usd:.4f}",
        )
    return table


def _lease_table(view: ViewModel) -> Table:
    table = Table(title="Leases", title_justify="left", **_TABLE)
    table.add_column("path", no_wrap=True, overflow="ellipsis", ratio=1)
    for name in ("holder", "task", "age"):
        table.add_column(name, no_wrap=True)
    for lease in view.leases:
        holder = _holder_text(lease.holder, lease.kind)
        table.add_row(
            Text(lease_label(lease.path)), holder, Text(lease.task_id), _age_text(lease.age_s)
        )
    if not view.leases:
        table.add_row(Text("no file is leased", style="dim"), "", "", "")
    return table


def _holder_text(name: str, kind: str) -> Text:
    """A person's own Claude Code session stands out from the fleet: `ada@0aeef531 person`."""
    if kind != "interactive":
        return Text(name)
    return Text.assemble(name, (" person", "magenta"))


def log_text(line: LogLine) -> Text:
    """`#id time text`; a veto gets a white-on-red badge on its first word."""
    text = Text.assemble((f"#{line.event_id:<5} {line.at} ", "dim"))
    at = line.text.find("VETO ") if line.veto else -1
    if at >= 0:
        text.append(line.text[:at], style=line.style)
        text.append("VETO", style=VETO_BADGE)
        text.append(line.text[at + 4 :], style=line.style)
    else:
        text.append(line.text, style=line.style)
    return text


class _LogTail:
    """The newest log lines that fit the height left over below `above`."""

    def __init__(self, above: RenderableType, lines: Sequence[LogLine]) -> None:
        self.above = above
        self.lines = lines

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        above = console.render_lines(self.above, options, pad=False)
        rows = max(MIN_LOG_ROWS, (options.height or options.max_height) - len(above) - 3)
        tail = self.lines[-rows:]
        body = Text("\n").join(log_text(line) for line in tail) if tail else Text("")
        for line in above:
            yield from line
            yield Segment.line()
        yield Panel(body, title="Events", title_align="left", height=min(rows, len(tail)) + 2)


def pause_text(pause: PauseBanner) -> Text:
    """`⏸ FLEET PAUSED · resumes in 25 s (18:04:22) · why`: the countdown moves each repaint."""
    line = Text("⏸ FLEET PAUSED", style=PAUSE_STYLE)
    line.append(f" · resumes in {_age_text(pause.remaining_s)} ({pause.until})")
    line.append(" · no task is assigned until then; `codefleet resume` lifts it", style="dim")
    if pause.reason:
        line.append(f"\n{pause.reason}", style="yellow")
    return line


def budget_text(budget: BudgetLine) -> Text:
    """`⏹ FLEET BUDGET EXHAUSTED · $1.02 of $1.00 · ...`: why nothing more is assigned."""
    line = Text("⏹ FLEET BUDGET EXHAUSTED", style=VETO_STYLE)
    line.append(
        f" · {spent_text(budget.spent_usd, budget.simulated)} of ${budget.max_cost_usd:.4f}"
    )
    stop = "running tasks were stopped" if budget.hard else "running tasks finish"
    line.append(f" · no new task is assigned; {stop}; `codefleet budget USD` raises it", "dim")
    return line


def _veto_panel(view: ViewModel) -> Panel | None:
    """The newest vetoes in the log, pinned so a busy log cannot scroll them away."""
    recent = [line for line in view.log if line.veto][-PINNED_VETOES:]
    if not recent:
        return None
    body = Text("\n").join(log_text(line) for line in recent)
    title = f"Vetoes ({view.vetoes} in all, newest {len(recent)})"
    return Panel(body, title=title, title_align="left", border_style="red")


def render(view: ViewModel) -> RenderableType:
    """One frame: summary, tasks, agents beside leases, pinned vetoes, then the newest events."""
    side_by_side = Table.grid(expand=True, padding=(0, 1))
    side_by_side.add_column(ratio=11)
    side_by_side.add_column(ratio=9)
    side_by_side.add_row(_agent_table(view), _lease_table(view))
    parts: list[RenderableType] = [summary_line(view)]
    if view.pause is not None:
        parts.append(Panel(pause_text(view.pause), border_style="yellow"))
    if view.budget is not None and view.budget.exhausted:
        parts.append(Panel(budget_text(view.budget), border_style="red"))
    if view.landing is not None and view.landing.halt is not None:
        parts.append(Panel(halt_text(view.landing.halt), border_style="red"))
    parts.append(_task_table(view))
    if view.landing is not None:
        title = "Landing (in order)"
        parts.append(
            Panel(
                landing_text(view.landing),
                title=title,
                title_align="left",
                border_style=LANDING_STYLE,
            )
        )
    parts.append(side_by_side)
    vetoes = _veto_panel(view)
    if vetoes is not None:
        parts.append(vetoes)
    return Escaped(_LogTail(Group(*parts), view.log))
