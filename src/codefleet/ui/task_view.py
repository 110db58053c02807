"""One task, rendered for a person: `codefleet tasks ID` without `--json`.

A field list (status and attempts, dependencies, scope, verify, usage, the
files it changed and its patch's size, its stale reads and reconcile turns,
its landing (queued at, the landing checks run on it and their verdicts, its
landing order, or the integration breaks and whom they conflicted with), its
repair turns and reworks (decision 0161), the last error) and the description.
Every value is `Text`, never Rich markup: titles, paths and errors are user
and model text. `--json` prints the server's record unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from datetime import datetime
from typing import Any

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from codefleet.failuretext import failure_excerpt
from codefleet.review.landinglog import LandingFacts, landing_of
from codefleet.review.report.reportblocks import seconds
from codefleet.ui.report import STATUS_STYLE
from codefleet.wording import AttemptCounts, cost_text, phrase

__all__ = ["task_detail"]

EXCERPT_CHARS = 600  # of a break's check output: its failing lines, then its last lines


def task_detail(
    task: dict[str, Any],
    reads: Sequence[dict[str, Any]] = (),
    *,
    crop: bool = True,
    simulated: bool = False,
) -> RenderableType:
    """The task's fields as a two-column list, then its description, in a titled panel.

    `reads`: the task's `stale_read`, `reconciled` and `operator_message` events, one line
    each (the operator's messages under "messages"), its checks not run (`check_reused`: it
    passed on the same content before; `check_deferred`: the landing runs it), and the
    leases it took over from a task waiting to land (`stacked_on`) and its `stack_unwound`,
    the landing events that name it
    (`landing_queued`, `landed`, `integration_failed`, and the landing checks whose batch
    holds it), folded into its landing.
    `crop` keeps only the last 2000 characters of the error (for a terminal, not a pipe);
    `simulated` labels the cost (no real model ran on the server).
    """
    fields = Table.grid(padding=(0, 2))
    fields.add_column(style="bold", no_wrap=True)
    fields.add_column()
    restored = {
        str((e.get("payload") or {}).get("path")) for e in reads if e["type"] == "file_restored"
    }
    for name, value in _fields(task, crop, simulated, restored):
        fields.add_row(name, value)
    for name, value in _landing_rows(str(task["id"]), landing_of(reads)):
        fields.add_row(name, value)
    said = [e for e in reads if e["type"] == "operator_message"]
    stale = [e for e in reads if e["type"] in ("stale_read", "reconciled")]
    spared = [e for e in reads if e["type"] in ("check_reused", "check_deferred")]
    stacks = [e for e in reads if e["type"] == "stack_unwound" or _stacked(e)]
    repairs = [e for e in reads if e["type"] in ("repair_started", "repair_finished")]
    for name, value in _mended(reads, simulated):
        fields.add_row(name, value)
    for label, events, style in (
        ("stale reads", stale, "yellow"),
        ("checks spared", spared, "green"),
        ("stacks", stacks, "cyan"),
        ("repair turns", repairs, "yellow"),
        ("messages", said, "cyan"),
    ):
        for n, event in enumerate(events):
            line = phrase(str(event["type"]), event.get("payload") or {}) or str(event["type"])
            fields.add_row(label if n == 0 else "", Text(line, style=style))
    description = Text(task.get("description") or "(no description)", style="dim")
    title = Text(f"{task['id']} · {task['title']}")
    return Panel(Group(fields, Text(""), description), title=title, title_align="left")


def _stacked(event: dict[str, Any]) -> bool:
    """A lease taken over from a task waiting to land (`coord.policy.stacks`)."""
    return event["type"] == "lease_acquired" and bool(
        (event.get("payload") or {}).get("stacked_on")
    )


def _mended(reads: Sequence[dict[str, Any]], simulated: bool) -> list[tuple[str, Text]]:
    """`repairs`: how many failed checks its sessions repaired, what the turns cost, and
    the reworks (rolled back for a new attempt) that still happened; none of either: no row."""
    ended = [e.get("payload") or {} for e in reads if e["type"] == "repair_finished"]
    reworks = sum(1 for e in reads if e["type"] == "task_requeued" and _reworked(e))
    if not ended and not reworks:
        return []
    fixed = sum(1 for p in ended if p.get("outcome") != "failed")
    cost = sum(float(p.get("cost_usd") or 0) for p in ended)
    line = f"{fixed} of {len(ended)} repaired in the same session · {cost_text(cost, simulated)}"
    return [("repairs", Text(f"{line} · {reworks} rework(s)"))]


def _reworked(event: dict[str, Any]) -> bool:
    """A requeue that rolled back a change a check failed (a verify, a landing)."""
    kind = (event.get("payload") or {}).get("error_kind")
    return kind in ("verify_failed", "integration_failed")


def _fields(
    task: dict[str, Any], crop: bool, simulated: bool, restored: AbstractSet[str]
) -> list[tuple[str, Text]]:
    status = Text(task["status"], style=STATUS_STYLE.get(task["status"], ""))
    status.append(f" · attempts: {AttemptCounts.of(task).long()}", style="")
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
    rows.append((_changes_label(task, restored), _changes(task)))
    if task.get("error"):
        kind = f"{task.get('error_kind')}: " if task.get("error_kind") else ""
        error = str(task["error"])[-2000:] if crop else str(task["error"])
        rows.append(("error", Text(kind + error, style="red")))
    elif task.get("result_summary"):
        rows.append(("result", Text(str(task["result_summary"]))))
    return rows


def _changes_label(task: dict[str, Any], restored: AbstractSet[str]) -> str:
    """ "changed", or "wrote, rolled back" for a task that has not succeeded and whose every
    written file was put back (its attempts' writes are not in the tree)."""
    wrote = {str(c["path"]) for c in task.get("file_changes") or ()}
    undone = task["status"] != "succeeded" and bool(wrote) and wrote <= restored
    return "wrote, rolled back" if undone else "changed"


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


def _clock(at: datetime) -> str:
    return at.astimezone().strftime("%H:%M:%S")


def _landing_rows(task_id: str, landing: LandingFacts) -> list[tuple[str, Text]]:
    """Queued at, landed #order (or waiting), each landing check on it, each break."""
    rows: list[tuple[str, Text]] = []
    queued = [q for q in landing.queued if q.task_id == task_id]
    landed = next((x for x in landing.landed if x.task_id == task_id), None)
    if landed is not None:
        text = Text(f"landed #{landed.order}", style="green")
        checks = ", ".join(landed.checks)
        text.append(f" at {_clock(landed.at)}" + (f" · {checks} passed" if checks else ""))
        if landed.waited_s is not None:
            text.append(f" · waited {seconds(landed.waited_s)} to land", style="dim")
        rows.append(("landing", text))
    elif task_id in landing.waiting:
        q = queued[-1]
        where = f" · #{q.position} in the queue" if q.position else ""
        rows.append(("landing", Text(f"waiting to land since {_clock(q.at)}{where}", "magenta")))
    if queued:
        rows.append(
            ("queued", Text(", ".join(f"{_clock(q.at)} (attempt {q.attempt})" for q in queued)))
        )
    for n, c in enumerate(landing.checks_on(task_id)):
        batch = ", ".join(c.batch)
        words = f"{c.check} on {batch} ({c.purpose}) over {c.base} landed: {c.verdict or 'running'}"
        style = "green" if c.passed else "yellow" if c.verdict is None else "red"
        rows.append(("landing checks" if n == 0 else "", Text(words, style=style)))
    for b in (b for b in landing.breaks if b.task_id == task_id):
        text = Text(f"attempt {b.attempt} broke {b.check}", style="bold red")
        text.append(f" with {', '.join(b.conflicts_with) or 'the landed tree'}")
        text.append(" · reworked and landed" if b.reworked else " · rolled back for rework")
        if b.output_tail:
            text.append(f"\n{failure_excerpt(b.output_tail, EXCERPT_CHARS)}", style="dim")
        rows.append(("integration", text))
    return rows
