"""Rendering a finished run for a person: the task table, the vetoes, the verdict.

Everything here renders data fetched from the server (tasks, conflicts) or
the run's own result; it holds no state. `run`, `demo` and `tasks` use it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from codefleet.fleet.local import FleetResult
from codefleet.ui.outofscope import outside_text
from codefleet.wording import attempts_text, cost_text, verify_blame_text

__all__ = [
    "STATUS_STYLE",
    "RunShare",
    "attempts_text",
    "cost_text",
    "print_result",
    "task_table",
    "veto_lines",
]

NOTHING_RAN = (
    "nothing ran: every task had finished before this run (`codefleet retry ID`, then "
    "`{again}`, runs one again; `codefleet runs new` starts over on this tree)"
)
DEAD = ("failed", "cancelled", "blocked_upstream")
OLD_WORD = {
    "failed": "failed",
    "cancelled": "was cancelled",
    "blocked_upstream": "was blocked upstream",
}


@dataclass(frozen=True, slots=True)
class RunShare:
    """This run's own part of what the server holds: the tasks it worked on, its vetoes, its cost.

    The server's tasks and conflicts are the graph's, every run's; a run's verdict shows
    its own figures apart, and names a failure of an earlier run as old.
    """

    touched: frozenset[str]  # the tasks with an event of this run (loaded, run, blocked...)
    vetoes: int
    cost: float
    since: int = 0  # the last event before the run: a conflict after it is the run's

    @classmethod
    def of(
        cls,
        at_start: Iterable[Mapping[str, Any]],
        at_end: Iterable[Mapping[str, Any]],
        events: Iterable[Mapping[str, Any]],
        conflicts: Iterable[Mapping[str, Any]],
        since: int,
    ) -> RunShare:
        """From the tasks before and after the run, and the events and conflicts after `since`."""
        before = {t["id"]: float(t.get("cost_usd") or 0) for t in at_start}
        cost = sum(float(t.get("cost_usd") or 0) - before.get(t["id"], 0.0) for t in at_end)
        touched = {
            str(e["task_id"])
            for e in events
            if e.get("task_id") and str(e["type"]).startswith("task_")
        }
        vetoes = sum(1 for c in conflicts if int(c["event_id"]) > since)
        return cls(frozenset(touched), vetoes, cost, since)


STATUS_STYLE = {
    "pending": "dim",
    "assigned": "cyan",
    "running": "bold cyan",
    "landing": "bold magenta",
    "succeeded": "green",
    "failed": "bold red",
    "blocked_upstream": "red",
    "cancelled": "yellow",
}


def _note(task: dict[str, Any]) -> str:
    if task["status"] == "succeeded":
        note = task.get("result_summary") or ""
        if task.get("attempts", 0) > 1 and task.get("error_kind"):
            note = f"after {task['error_kind']} on attempt 1; {note}"
        return note
    return task.get("error") or ""


def task_table(tasks: list[dict[str, Any]], title: str = "Tasks", *, crop: bool = True) -> Table:
    """One row a task; `crop` shortens long titles and notes (for a terminal, not a pipe)."""
    title_max, note_max = (48, 90) if crop else (None, None)
    table = Table(title=title, title_justify="left", expand=False)
    for column in ("task", "title", "status", "att.", "cost $", "note"):
        table.add_column(column, overflow="fold")
    for task in tasks:
        status = Text(task["status"], style=STATUS_STYLE.get(task["status"], ""))
        table.add_row(  # user and model text as Text: never parsed as Rich markup
            Text(task["id"]),
            Text(task["title"][:title_max]),
            status,
            attempts_text(task),
            f"{task.get('cost_usd', 0.0):.4f}",
            Text(_note(task)[:note_max]),
        )
    return table


def veto_lines(conflicts: list[dict[str, Any]]) -> list[Text]:
    lines = []
    for c in conflicts:
        line = Text("VETO ", style="bold white on red")
        line.append(
            f" {c['agent_name']} (task {c['task_id']}) was refused {c['path']}: "
            f"held by {c['holder_agent_name']} (task {c['holder_task_id']})"
        )
        line.append(
            " → retried and succeeded" if c["resolved"] else " → not resolved",
            style="green" if c["resolved"] else "red",
        )
        lines.append(line)
    return lines


def print_result(
    console: Console,
    result: FleetResult,
    conflicts: list[dict[str, Any]],
    *,
    simulated_cost: bool = False,
    outside: Mapping[str, list[str]] | None = None,
    again: str = "codefleet run",
    share: RunShare | None = None,
    weakened: Sequence[str] = (),
) -> None:
    """The task table, the vetoes, the verify output and the verdict panel.

    `outside` is what each task wrote outside its declared scope (`ui.outofscope.ScopeWatch`);
    `weakened` names tests deleted and checks changed (`review.report.checksections.weakened_lines`);
    `again` is the command that runs the fleet again with this run's flags (the hints
    after a failure name it); `share` is this run's own part (without it, the figures
    are the server's totals).
    """
    console.print(task_table(result.tasks, crop=console.is_terminal))
    own = [c for c in conflicts if share is None or int(c["event_id"]) > share.since]
    for line in veto_lines(own):
        console.print(line)
    if result.verify is not None:
        style = "green" if result.verify.ok else "red"
        said = f"exited {result.verify.exit_code}"
        if result.verify.reused is not None:  # the last landing check ran it on this very tree
            said = f"passed: {result.verify.output}"
        console.print(Text(f"verify: `{result.verify.command}` {said}", style=style))
        if (hint := result.verify.cannot_start()) is not None:
            console.print(Text(f"verify {hint}", style=style))
        if not result.verify.ok:
            console.print(result.verify.output[-3000:], markup=False)
        if (blame := verify_blame_text(result.verify.payload())) is not None:
            console.print(Text(blame, style="bold red"))
    for why in result.runner_errors:
        console.print(Text(f"runner stopped: {why}", style="bold red"))
    if result.stopped:
        console.print(Text(f"fleet stopped: {result.stopped}", style="bold red"))
    verdict = Text("PASS" if result.ok else "FAIL", style="bold green" if result.ok else "bold red")
    summary = _summary(result, conflicts, simulated_cost, share, again)
    undeclared = outside_text(outside or {})
    lines = [verdict, *summary, *([Text(undeclared, style="yellow")] if undeclared else [])]
    lines += [Text(line, style="bold yellow") for line in weakened]
    if result.nothing_ran:
        lines.append(Text(NOTHING_RAN.format(again=again), style="yellow"))
    body = Group(*lines)
    console.print(Panel(body, title="verdict", expand=False))
    failed = [
        t["id"]
        for t in result.tasks
        if t["status"] in DEAD and (share is None or t["id"] in share.touched)
    ]
    if failed and not result.nothing_ran:
        console.print(
            Text(
                f"next: `codefleet tasks {failed[0]}` says why; `codefleet retry --failed`, "
                f"then `{again}`"
            )
        )


def _summary(
    result: FleetResult,
    conflicts: list[dict[str, Any]],
    simulated: bool,
    share: RunShare | None,
    again: str,
) -> list[Text]:
    """The figures under the verdict: this run's own, then the graph's when they differ."""
    tasks = result.tasks
    done = sum(t["status"] == "succeeded" for t in tasks)
    timing = f"{result.duration_s:.2f}s"
    if share is None:
        cost = sum(float(t.get("cost_usd") or 0) for t in tasks)
        return [
            Text(
                f"{done}/{len(tasks)} tasks succeeded · {len(conflicts)} veto(es) · "
                f"{cost_text(cost, simulated)} · {timing}"
            )
        ]
    own = [t for t in tasks if t["id"] in share.touched]
    own_done = sum(t["status"] == "succeeded" for t in own)
    lines = [
        Text(
            f"this run: {own_done}/{len(own)} task(s) succeeded · {share.vetoes} veto(es) · "
            f"{cost_text(share.cost, simulated)} · {timing}"
        )
    ]
    if len(own) == len(tasks):
        return lines
    lines.append(Text(f"the graph: {done}/{len(tasks)} tasks succeeded (every run's)"))
    for task in tasks:
        if task["status"] in DEAD and task["id"] not in share.touched:
            way = (
                "it comes back when what it waits on is retried"
                if task["status"] == "blocked_upstream"
                else f"`codefleet retry {task['id']}`, then `{again}`"
            )
            lines.append(
                Text(
                    f"old: {task['id']} {OLD_WORD[task['status']]} before this run ({way})",
                    style="yellow",
                )
            )
    return lines
