"""The report's sections on what got in the run's way, and what the graph allowed.

Vetoes (who was refused which path, held by whom, and the wait), rollbacks
(the files put back after a failed attempt), failed verifications (with the
tail of their output), the commands agents ran, contention analytics
(`review.collisionstats`, as `codefleet stats` shows them) and the graph as loaded,
measured by `graph check`'s own analysis against the run's makespan. Each
builder is `(RunFacts) -> Section | None`; `review.report.runreport` lists them in
`SECTIONS`.
"""

from __future__ import annotations

from codefleet.analysis.graphanalysis import PlannedTask, analyse
from codefleet.failuretext import failure_excerpt
from codefleet.models import ErrorKind, EventType, from_iso
from codefleet.review.collisionstats import FileStats, fleet_stats, part_row_label
from codefleet.review.facts import RunFacts, since_start
from codefleet.review.report.reportblocks import Block, Code, Facts, Para, Section, Table, seconds
from codefleet.review.statsjson import stats_json

__all__ = [
    "commands_section",
    "graph_section",
    "rollbacks_section",
    "stats_section",
    "verify_section",
    "vetoes_section",
]

OUTPUT_CHARS = 2_000  # of a failed verify's output: its failing lines, then its last lines


def graph_section(facts: RunFacts) -> Section | None:
    """The graph as loaded, measured by `graph check`'s own analysis, against the run."""
    declared = _declared_graph(facts)
    if not declared:
        return None
    runners = _runners(facts)
    analysis = analyse(declared, runners)
    ideal_s = analysis.parallelism.makespan * 60
    items = [
        ("max width", f"{analysis.max_width} task(s) can run at once"),
        (
            f"ideal on {runners} runners",
            f"{seconds(ideal_s)} "
            f"({analysis.parallelism.predicted:.2f} busy on average, peak {analysis.parallelism.peak})",
        ),
        ("the run's makespan", seconds(facts.makespan_s)),
        ("overlapping scopes", f"{len(analysis.overlaps)} pair(s) never run together"),
        ("hotspots", f"{len(analysis.hotspots)} file(s) in 3 or more scopes"),
    ]
    blocks: list[Block] = [
        Facts(tuple(items)),
        Para(
            "The ideal plays the graph as loaded through the scheduler's own policy (as "
            "`codefleet graph check` does), each task at the length of its last attempt, with no "
            "veto, retry or failed verify: the gap to the run is what those cost."
        ),
    ]
    if analysis.overlaps:
        rows = tuple((" + ".join(o.task_ids), ", ".join(o.paths)) for o in analysis.overlaps)
        blocks.append(Table(("tasks", "declared scopes share"), rows))
    if analysis.hotspots:
        rows = tuple((h.path, ", ".join(h.task_ids)) for h in analysis.hotspots)
        blocks.append(Table(("hotspot", "declared by"), rows))
    data = {
        **analysis.to_json(),
        "ideal_makespan_s": round(ideal_s, 3),
        "makespan_s": round(facts.makespan_s, 3),
    }
    return Section("graph", "The graph", tuple(blocks), data)


def _declared_graph(facts: RunFacts) -> list[PlannedTask]:
    """Each task as loaded (its `task_created` event), at the length of its last attempt."""
    created = {
        str(e["task_id"]): e["payload"]
        for e in facts.record.events
        if e["type"] == EventType.TASK_CREATED and e.get("task_id")
    }
    last = {a.task_id: a.seconds / 60 for a in facts.attempts if a.end}
    declared = []
    for task in facts.record.tasks:
        loaded = created.get(task["id"], task)
        declared.append(
            PlannedTask(
                id=task["id"],
                priority=int(loaded.get("priority") or 3),
                file_scope=tuple(loaded.get("file_scope") or ()),
                depends_on=tuple(loaded.get("depends_on") or ()),
                estimate_min=last.get(task["id"]),
            )
        )
    return declared


def _runners(facts: RunFacts) -> int:
    started = [e for e in facts.record.events if e["type"] == EventType.FLEET_STARTED]
    given = started[0]["payload"].get("runners") if started else None
    return int(given) if given else max(1, len(facts.record.agents))


def vetoes_section(facts: RunFacts) -> Section:
    if not facts.vetoes:
        return Section("vetoes", "Vetoes", (Para("No write was refused."),), [])
    rows = tuple(
        (
            f"+{seconds(since_start(facts, v.at))}",
            v.path,
            f"{v.task_id} ({v.runner})",
            f"{v.holder_task_id} ({v.holder_runner})",
            seconds(v.held_s),
            seconds(v.waited_s),
            "succeeded on a retry" if v.resolved else "not resolved",
        )
        for v in facts.vetoes
    )
    columns = ("at", "path", "refused", "held by", "held for", "waited", "then")
    tones = tuple("ok" if v.resolved else "bad" for v in facts.vetoes)
    data = [
        {
            "at": v.at.isoformat(),
            "path": v.path,
            "task_id": v.task_id,
            "runner": v.runner,
            "holder_task_id": v.holder_task_id,
            "holder_runner": v.holder_runner,
            "held_s": v.held_s,
            "waited_s": v.waited_s,
            "resolved": v.resolved,
        }
        for v in facts.vetoes
    ]
    note = Para(
        "Each refused write never reached the disk; the task was requeued with the path in its "
        "scope and ran again after the holder finished. \u201cWaited\u201d is the time from the "
        "refusal to its next attempt."
    )
    return Section("vetoes", "Vetoes", (Table(columns, rows, tones), note), data)


def rollbacks_section(facts: RunFacts) -> Section:
    if not facts.rollbacks:
        return Section(
            "rollbacks", "Rollbacks", (Para("No failed attempt had edits to undo."),), []
        )
    rows = tuple(
        (
            r.task_id,
            str(r.attempt),
            r.reason,
            ", ".join(p if existed else f"{p} (removed)" for p, existed in r.restored),
        )
        for r in facts.rollbacks
    )
    data = [
        {
            "task_id": r.task_id,
            "attempt": r.attempt,
            "reason": r.reason,
            "files": [{"path": p, "existed": e} for p, e in r.restored],
        }
        for r in facts.rollbacks
    ]
    table = Table(("task", "attempt", "why it failed", "files put back"), rows)
    return Section("rollbacks", "Rollbacks", (table,), data)


def verify_section(facts: RunFacts) -> Section | None:
    if not facts.verify_failures:
        return None
    blocks: list[Block] = []
    unrunnable = _unrunnable_errors(facts)
    for f in facts.verify_failures:
        how = "timed out" if f.timed_out else f"exited {f.exit_code}"
        blocks.append(Para(f"{f.task_id}, attempt {f.attempt}: check `{f.check}` {how}", "bad"))
        if (f.task_id, f.attempt) in unrunnable:
            blocks.append(Para(unrunnable[f.task_id, f.attempt], "bad"))
        shown = failure_excerpt(f.output_tail, OUTPUT_CHARS)
        blocks.append(
            Code(shown or "(no output)", "the failing lines, then the last lines of output")
        )
    data = [
        {
            "task_id": f.task_id,
            "attempt": f.attempt,
            "check": f.check,
            "exit_code": f.exit_code,
            "timed_out": f.timed_out,
            "output_tail": f.output_tail,
        }
        for f in facts.verify_failures
    ]
    return Section("verify", "Failed verifications", tuple(blocks), data)


def _unrunnable_errors(facts: RunFacts) -> dict[tuple[str, int], str]:
    """(task, attempt) -> what to do, for tasks a verify that could not start failed at once."""
    return {
        (t["id"], int(t["attempts"])): str(t["error"]).split(" Output:\n", 1)[0]
        for t in facts.record.tasks
        if t.get("error_kind") == ErrorKind.CHECK_UNRUNNABLE and t.get("error")
    }


def commands_section(facts: RunFacts) -> Section | None:
    """Every `run_command` an agent ran: what it applied, or the veto that applied nothing."""
    runs = [e for e in facts.record.events if e["type"] == EventType.COMMAND_FINISHED]
    if not runs:
        return None
    rows, tones, data = [], [], []
    for e in runs:
        body = e["payload"]
        ended = "timed out" if body.get("timed_out") else f"exit {body.get('exit_code')}"
        veto = body.get("denied_on")
        landed = f"VETO on {veto}: nothing" if veto else ", ".join(body.get("applied") or ()) or "-"
        rows.append(
            (
                f"+{seconds(since_start(facts, from_iso(str(e['at']))))}",
                str(e.get("task_id")),
                str(body.get("command", ""))[:120],
                ended,
                landed,
                ", ".join(body.get("refused") or ()) or "-",
            )
        )
        tones.append("bad" if veto else "")
        data.append({"at": e["at"], "task_id": e.get("task_id"), **body})
    columns = ("at", "task", "command", "ended", "applied", "refused")
    return Section("commands", "Commands", (Table(columns, tuple(rows), tuple(tones)),), data)


def _file_rows(f: FileStats) -> list[tuple[str, ...]]:
    """A file's row (its total), then one per part beneath it when it was leased by part."""
    rows: list[tuple[str, ...]] = [
        (
            f.path,
            str(f.vetoes),
            ", ".join(f.tasks) or "—",
            seconds(f.veto_lost_s),
            seconds(f.rollback_lost_s),
        )
    ]
    for part in f.parts:  # a rollback puts the file back: counted on its row
        rows.append(
            (
                part_row_label(part.path),
                str(part.vetoes),
                ", ".join(part.tasks),
                seconds(part.veto_lost_s),
                "—",
            )
        )
    return rows


def stats_section(facts: RunFacts) -> Section | None:
    """Contention analytics (`codefleet stats`): what collisions cost, parallelism, stretch."""
    found = fleet_stats(facts)
    if not found.tasks:
        return None
    stretch = f"{found.stretch:.1f} times" if found.stretch is not None else "—"
    items = (
        ("runners", str(found.runners)),
        ("busy on average", f"{found.busy_mean:.2f} runners ({found.parallelism:.0%})"),
        (
            "makespan vs critical path",
            f"{seconds(found.makespan_s)} vs {seconds(found.critical_s)}: {stretch}",
        ),
        ("lost to vetoes", seconds(found.veto_lost_s)),
        ("lost to rollbacks", seconds(found.rollback_lost_s)),
        ("usage-limit pauses", f"{found.pauses} ({seconds(found.paused_s)})"),
    )
    blocks: list[Block] = [Facts(items)]
    if found.files:
        columns = ("file", "vetoes", "tasks", "lost to vetoes", "lost to rollbacks")
        blocks.append(Table(columns, tuple(row for f in found.files for row in _file_rows(f))))
    if found.resources:
        held = tuple(
            (r.name, str(r.vetoes), ", ".join(r.tasks), seconds(r.veto_lost_s))
            for r in found.resources
        )
        blocks.append(Table(("resource", "vetoes", "tasks", "lost to vetoes"), held))
    if found.stale_reads:
        stale = tuple((r.path, r.reader, r.changed_by, str(r.count)) for r in found.stale_reads)
        blocks.append(Table(("stale read of", "read by", "changed by", "times"), stale))
    waits = tuple(
        (t.id, str(t.attempts), seconds(t.waiting_s), seconds(t.running_s)) for t in found.tasks
    )
    blocks.append(Table(("task", "attempts", "waiting", "running"), waits))
    blocks.append(
        Para(
            "`codefleet stats --suggest GRAPH -o NEXT` writes the graph amended from "
            "these collisions."
        )
    )
    return Section("stats", "Contention", tuple(blocks), stats_json(found))
