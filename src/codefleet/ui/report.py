"""Rendering a finished run for a person: the task table, the vetoes, the verdict.

Everything here renders data fetched from the server (tasks, conflicts) or
the run's own result; it holds no state. `run`, `demo` and `tasks` use it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from codefleet.fleet.local import FleetResult
from codefleet.ui.scopes import outside_text
from codefleet.wording import cost_text

__all__ = ["STATUS_STYLE", "cost_text", "print_result", "task_table", "veto_lines"]

NOTHING_RAN = (
    "nothing ran: every task had finished before this run (`codefleet retry ID`, then "
    "`{again}`, runs one again; `codefleet runs new` starts over on this tree)"
)
DEAD = ("failed", "cancelled", "blocked_upstream")
STATUS_STYLE = {
    "pending": "dim",
    "assigned": "cyan",
    "running": "bold cyan",
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
            f"{task['attempts']}/{task['max_attempts']}",
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
) -> None:
    """The task table, the vetoes, the verify output and the verdict panel.

    `outside` is what each task wrote outside its declared scope (`scopes.ScopeWatch`);
    `again` is the command that runs the fleet again with this run's flags (the hints
    after a failure name it).
    """
    console.print(task_table(result.tasks, crop=console.is_terminal))
    for line in veto_lines(conflicts):
        console.print(line)
    if result.verify is not None:
        style = "green" if result.verify.ok else "red"
        console.print(
            Text(f"verify: `{result.verify.command}` exited {result.verify.exit_code}", style=style)
        )
        if (hint := result.verify.cannot_start()) is not None:
            console.print(Text(f"verify {hint}", style=style))
        if not result.verify.ok:
            console.print(result.verify.output[-3000:], markup=False)
    for why in result.runner_errors:
        console.print(Text(f"runner stopped: {why}", style="bold red"))
    if result.stopped:
        console.print(Text(f"fleet stopped: {result.stopped}", style="bold red"))
    done = sum(t["status"] == "succeeded" for t in result.tasks)
    cost = sum(float(t.get("cost_usd") or 0) for t in result.tasks)
    verdict = Text("PASS" if result.ok else "FAIL", style="bold green" if result.ok else "bold red")
    summary = Text(
        f"{done}/{len(result.tasks)} tasks succeeded · {len(conflicts)} veto(es) · "
        f"{cost_text(cost, simulated_cost)} · {result.duration_s:.2f}s"
    )
    undeclared = outside_text(outside or {})
    lines = [verdict, summary, *([Text(undeclared, style="yellow")] if undeclared else [])]
    if result.nothing_ran:
        lines.append(Text(NOTHING_RAN.format(again=again), style="yellow"))
    body = Group(*lines)
    console.print(Panel(body, title="verdict", expand=False))
    failed = [t["id"] for t in result.tasks if t["status"] in DEAD]
    if failed and not result.nothing_ran:
        console.print(
            Text(
                f"next: `codefleet tasks {failed[0]}` says why; `codefleet retry --failed`, "
                f"then `{again}`"
            )
        )
