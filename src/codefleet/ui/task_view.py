"""One task, rendered for a person: `codefleet tasks ID` without `--json`.

A field list (status and attempts, dependencies, scope, verify, usage, the
files it changed and its patch's size, its stale reads and reconcile turns,
the last error) and the description.
Every value is `Text`, never Rich markup: titles, paths and errors are user
and model text. `--json` prints the server's record unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from codefleet.ui.report import STATUS_STYLE
from codefleet.wording import cost_text, phrase

__all__ = ["task_detail"]


def task_detail(
    task: dict[str, Any],
    reads: Sequence[dict[str, Any]] = (),
    *,
    crop: bool = True,
    simulated: bool = False,
) -> RenderableType:
    """The task's fields as a two-column list, then its description, in a titled panel.

    `reads`: the task's `stale_read`, `reconciled` and `operator_message` events, one line
    each (the operator's messages under "messages").
    `crop` keeps only the last 2000 characters of the error (for a terminal, not a pipe);
    `simulated` labels the cost (no real model ran on the server).
    """
    fields = Table.grid(padding=(0, 2))
    fields.add_column(style="bold", no_wrap=True)
    fields.add_column()
    for name, value in _fields(task, crop, simulated):
        fields.add_row(name, value)
    said = [e for e in reads if e["type"] == "operator_message"]
    stale = [e for e in reads if e["type"] != "operator_message"]
    for label, events, style in (("stale reads", stale, "yellow"), ("messages", said, "cyan")):
        for n, event in enumerate(events):
            line = phrase(str(event["type"]), event.get("payload") or {}) or str(event["type"])
            fields.add_row(label if n == 0 else "", Text(line, style=style))
    description = Text(task.get("description") or "(no description)", style="dim")
    title = Text(f"{task['id']} · {task['title']}")
    return Panel(Group(fields, Text(""), description), title=title, title_align="left")


def _fields(task: dict[str, Any], crop: bool, simulated: bool) -> list[tuple[str, Text]]:
    status = Text(task["status"], style=STATUS_STYLE.get(task["status"], ""))
    free = int(task.get("uncharged_attempts") or 0)
    charged = int(task["attempts"]) - free
    status.append(
        f" · attempts: {charged} of {task['max_attempts']} charged"
        + (f" (+{free} not charged)" if free else ""),
        style="",
    )
    if task.get("assigned_agent_id") and task["status"] in ("assigned", "running"):
        status.append(f" · on {task['assigned_agent_id']}")
    rows = [("status", status)]
    rows.append(("depends on", Text(", ".join(task.get("depends_on") or ()) or "—")))
    if task.get("unmet_dependencies"):
        rows.append(("waiting on", Text(", ".join(task["unmet_dependencies"]))))
    rows.append(("dependents", Text(", ".join(task.get("dependents") or ()) or "—")))
    rows.append(("scope", Text(", ".join(task.get("file_scope") or ()) or "—")))
    if task.get("verify"):
        rows.append(("verify", Text(str(task["verify"]))))
    cost = cost_text(float(task.get("cost_usd") or 0), simulated)
    usage = (
        f"{cost} · {task.get('input_tokens') or 0} in / {task.get('output_tokens') or 0} out tokens"
    )
    rows.append(("usage", Text(usage)))
    rows.append(("changed", _changes(task)))
    if task.get("error"):
        kind = f"{task.get('error_kind')}: " if task.get("error_kind") else ""
        error = str(task["error"])[-2000:] if crop else str(task["error"])
        rows.append(("error", Text(kind + error, style="red")))
    elif task.get("result_summary"):
        rows.append(("result", Text(str(task["result_summary"]))))
    return rows


def _changes(task: dict[str, Any]) -> Text:
    paths = sorted({c["path"] for c in task.get("file_changes") or ()})
    patch = task.get("patch") or {}
    if not paths and not patch.get("files"):
        return Text("nothing recorded")
    text = Text(", ".join(paths) or f"{patch.get('files')} file(s)")
    if patch.get("files"):
        text.append(
            f"  (+{patch['added']} -{patch['removed']}; "
            f"`codefleet tasks {task['id']} --patch` prints the diff)",
            style="dim",
        )
    return text
