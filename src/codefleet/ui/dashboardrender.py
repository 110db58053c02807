"""The dashboard's rendering: a view model drawn with Rich, the log fitted to the terminal.

`render` turns a `ViewModel` (`ui.viewmodel`, with its landing panel from
`ui.landingview`) into one Rich renderable: the summary line, the banners (pause,
budget, landing halt), the tasks, the landing queue, agents beside leases, the pinned
vetoes and the newest events, as many as fit the height left. It draws what it is
handed and nothing else: no I/O, no clock, no server; the same view model draws the
same frame every time. The agents' text is shown escaped (`ui.escaped`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from rich import box
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.panel import Panel
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from codefleet.failuretext import GAP, failure_excerpt
from codefleet.models import TaskStatus
from codefleet.resources import lease_label
from codefleet.toolcalls.leasekeys import PART_SEPARATOR, split_part_key
from codefleet.ui.escaped import Escaped
from codefleet.ui.landingview import HaltBanner, LandingPanel
from codefleet.ui.report import STATUS_STYLE
from codefleet.ui.viewmodel import (
    PAUSE_STYLE,
    VETO_STYLE,
    AgentRow,
    BudgetLine,
    LogLine,
    PauseBanner,
    ViewModel,
)
from codefleet.wording import cost_text, halt_cause, spent_text

__all__ = [
    "HALT_STYLE",
    "LANDING_STYLE",
    "STATUS_MARK",
    "budget_text",
    "halt_text",
    "landing_text",
    "log_text",
    "pause_text",
    "render",
    "summary_line",
]

VETO_BADGE: Final = "bold white on red"
LANDING_STYLE: Final = "bold magenta"
HALT_STYLE: Final = "bold white on red"
MIN_LOG_ROWS: Final = 3
PINNED_VETOES: Final = 3
MAX_QUEUE_SHOWN: Final = 12
TAIL_CHARS: Final = 240  # the failed check's excerpt a halt banner shows
DETAIL_INDENT: Final = "    "
DETAIL_STYLE: Final = "red"
# A status's mark in the task table beside its word (the others read by colour alone).
STATUS_MARK: Final[dict[str, str]] = {TaskStatus.LANDING: "⇣ "}
_TABLE: Final[dict[str, Any]] = {
    "expand": True,
    "box": box.SIMPLE_HEAD,
    "show_edge": False,
    "title_style": "bold",
}


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
            t.attempts_said or f"{t.attempts}/{t.max_attempts}",
            f"{t.cost_usd:.4f}",
            Text(t.note),
        )
    return table


def _agent_table(view: ViewModel) -> Table:
    table = Table(
        title="Agents",
        title_justify="left",
        caption=_earlier(view),
        caption_justify="left",
        **_TABLE,
    )
    for name in ("agent", "status", "task", "hb", "stale", "ok/fail", "cost $"):
        table.add_column(name, no_wrap=True, overflow="ellipsis")
    for a in view.agents:
        style = {"busy": "cyan", "offline": "dim"}.get(a.status, "")
        table.add_row(
            _runner_text(a),
            Text(a.status, style=style),
            Text(a.task_id or "-"),
            "-" if a.status == "offline" else _age_text(a.heartbeat_age_s),
            Text("STALE", style="bold red") if a.stale else "",
            f"{a.succeeded}/{a.failed}",
            f"{a.cost_usd:.4f}",
        )
    return table


def _earlier(view: ViewModel) -> Text | None:
    """The runners of earlier runs, folded into one line under this run's."""
    n = view.earlier_runners
    if not n:
        return None
    return Text(
        f"+ {n} earlier runner{'s' if n > 1 else ''} (offline, from runs before this one)",
        style="dim",
    )


def _lease_table(view: ViewModel) -> Table:
    table = Table(title="Leases", title_justify="left", **_TABLE)
    table.add_column("path", no_wrap=True, overflow="ellipsis", ratio=1)
    for name in ("holder", "task", "age"):
        table.add_column(name, no_wrap=True)
    shown: set[str] = set()  # the files with a row of their own so far
    for lease in view.leases:  # by file: its whole key first, then its parts (the view model's)
        path, part = split_part_key(lease.path)
        if part is not None and path not in shown:  # the file, then its parts beneath it
            table.add_row(Text(path), Text("by part", style="dim"), "", "")
        shown.add(path)
        label = lease_label(lease.path) if part is None else f"  {PART_SEPARATOR}{part}"
        holder = _holder_text(lease.holder, lease.kind)
        table.add_row(Text(label), holder, Text(lease.task_id), _age_text(lease.age_s))
    if not view.leases:
        table.add_row(Text("no file is leased", style="dim"), "", "", "")
    return table


def _runner_text(agent: AgentRow) -> Text:
    """A runner in its own clone says so, with the landed commit it is level with."""
    if agent.workspace != "clone":
        return _holder_text(agent.name, agent.kind)
    return Text.assemble(agent.name, (f" clone@{(agent.head or '-')[:8]}", "blue"))


def _holder_text(name: str, kind: str) -> Text:
    """A person's own Claude Code session stands out from the fleet: `ada@0aeef531 person`."""
    if kind != "interactive":
        return Text(name)
    return Text.assemble(name, (" person", "magenta"))


def log_text(line: LogLine, detail: bool = True) -> Text:
    """`#id time text`; a veto gets a white-on-red badge on its first word. With `detail`,
    the line's detail (a failed check's excerpt) follows on lines of its own, indented."""
    text = Text.assemble((f"#{line.event_id:<5} {line.at} ", "dim"))
    at = line.text.find("VETO ") if line.veto else -1
    if at >= 0:
        text.append(line.text[:at], style=line.style)
        text.append("VETO", style=VETO_BADGE)
        text.append(line.text[at + 4 :], style=line.style)
    else:
        text.append(line.text, style=line.style)
    if detail and line.detail:
        shown = "".join(f"\n{DETAIL_INDENT}{x}" for x in line.detail.splitlines())
        text.append(shown, style=DETAIL_STYLE)
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
        body = Text("\n").join(log_text(line, detail=False) for line in tail) if tail else Text("")
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


# -- the landing panel ----------------------------------------------------------------


def landing_text(panel: LandingPanel) -> Text:
    """`queue T3 → T4 · checking test on T3 (batch) over 2 landed, 3s · last landed #2 (T2)`."""
    line = Text("queue ", style="bold")
    shown = panel.queue[:MAX_QUEUE_SHOWN]
    more = f" (+{len(panel.queue) - len(shown)})" if len(panel.queue) > len(shown) else ""
    line.append(" → ".join(shown) + more if shown else "empty", LANDING_STYLE if shown else "dim")
    line.append(" · ", style="dim")
    if panel.checking:
        line.append("checking ", style="bold")
        line.append(f"{panel.checking}, {panel.checking_s:.0f}s", style="cyan")
        for other in panel.also:  # steps in parallel
            line.append("; also ", style="bold")
            line.append(other, style="cyan")
    else:
        line.append("no check running", style="dim")
    line.append(" · ", style="dim")
    if panel.last_order:
        line.append(f"last landed #{panel.last_order} ({panel.last_task})", style="green")
    else:
        line.append("nothing landed yet", style="dim")
    if panel.breaks:
        line.append(" · ", style="dim")
        line.append(f"{panel.breaks} integration break(s), {panel.reworked} reworked", "yellow")
    return line


def halt_text(halt: HaltBanner) -> Text:
    """The halt, loud: what fails, the last landing, and how to resume."""
    line = Text("⛔ LANDING HALTED", style=HALT_STYLE)
    line.append(f" · {halt_cause(halt.check, halt.why)} (last landed {halt.last_landed})")
    line.append(" · nothing lands until `codefleet landing resume`", style="bold red")
    shown = [x for x in failure_excerpt(halt.output_tail, TAIL_CHARS).splitlines() if x != GAP]
    if shown:
        line.append("".join(f"\n{x}" for x in shown), style="red")
    return line
