"""The run report: one page per run, as a list of sections any renderer can draw.

A `Report` is a verdict and an ordered tuple of `Section`s. Each section owns
its data (what `--format json` prints under its key) and its blocks
(`Para`, `Facts`, `Table`, `Code`, `Timeline`) that `runreport_render` draws as
Markdown or self-contained HTML. Sections are built by the functions in
`SECTIONS`, in order, from the run's `RunFacts`.

Adding a section (as contention analytics, `stats_section`, was) is one function
`(RunFacts) -> Section | None` and one entry in `SECTIONS`; a builder that
has nothing to say returns None and the section is left out.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from codefleet.models import ErrorKind, EventType, from_iso
from codefleet.planning.analysis import PlannedTask, analyse
from codefleet.review.facts import RunFacts, run_facts
from codefleet.review.history import format_cost, success_order
from codefleet.review.record import RunRecord
from codefleet.review.stats import fleet_stats, stats_json
from codefleet.wording import SIMULATED

__all__ = [
    "SECTIONS",
    "Code",
    "Facts",
    "Para",
    "Report",
    "Section",
    "Table",
    "Timeline",
    "build_report",
    "report_json",
    "seconds",
]

OUTPUT_TAIL_LINES = 30


@dataclass(frozen=True, slots=True)
class Para:
    text: str
    tone: str = ""  # "", "ok", "bad", "warn"


@dataclass(frozen=True, slots=True)
class Facts:
    items: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class Table:
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    tones: tuple[str, ...] = ()  # one per row, optional


@dataclass(frozen=True, slots=True)
class Code:
    text: str
    label: str = ""


@dataclass(frozen=True, slots=True)
class Bar:
    task_id: str
    attempt: int
    start_s: float
    end_s: float
    outcome: str


@dataclass(frozen=True, slots=True)
class Timeline:
    """Runner lanes of attempt bars and veto marks, in seconds from the run's start."""

    lanes: tuple[tuple[str, tuple[Bar, ...]], ...]
    vetoes: tuple[tuple[str, float, str], ...]  # (refused runner, at, path)
    span_s: float


Block = Para | Facts | Table | Code | Timeline


@dataclass(frozen=True, slots=True)
class Section:
    key: str
    title: str
    blocks: tuple[Block, ...]
    data: Any = None


@dataclass(frozen=True, slots=True)
class Report:
    title: str
    verdict: str  # PASS, FAIL, RUNNING
    generated_at: str
    sections: tuple[Section, ...] = field(default_factory=tuple)


SectionBuilder = Callable[[RunFacts], Section | None]


def seconds(value: float | None) -> str:
    """A duration for people: 0.42 s, 12.3 s, 3 min 05 s; an em dash for none."""
    if value is None:
        return "—"
    if value < 10:
        return f"{value:.2f} s"
    if value < 60:
        return f"{value:.1f} s"
    minutes, rest = divmod(round(value), 60)
    return f"{minutes} min {rest:02d} s"


def _origin(facts: RunFacts) -> datetime | None:
    """The run's time zero: the first `fleet_started`, else the first event."""
    events = facts.record.events
    first = next((e for e in events if e["type"] == EventType.FLEET_STARTED), None)
    first = first or (events[0] if events else None)
    return from_iso(str(first["at"])) if first else None


def _offset(facts: RunFacts, at: datetime) -> float:
    origin = _origin(facts)
    return (at - origin).total_seconds() if origin else 0.0


def _verdict(facts: RunFacts) -> str:
    statuses = [t["status"] for t in facts.record.tasks]
    if any(s in ("pending", "assigned", "running") for s in statuses) and facts.ok is None:
        return "RUNNING"
    if facts.ok is not None:
        return "PASS" if facts.ok else "FAIL"
    return "PASS" if statuses and all(s == "succeeded" for s in statuses) else "FAIL"


def _files_of(facts: RunFacts, task_id: str) -> list[str]:
    patch = facts.record.patches.get(task_id)
    if patch is not None:
        return [str(f["path"]) for f in patch["files"]]
    return sorted({str(c["path"]) for c in facts.record.ledgers.get(task_id, [])})


def _commits(facts: RunFacts) -> list[dict[str, str]]:
    return [
        {
            "branch": str(e["payload"]["branch"]),
            "task_id": str(e["task_id"]),
            "commit": str(e["payload"]["commit"]),
        }
        for e in facts.record.events
        if e["type"] == EventType.TASK_COMMITTED
    ]


# -- sections -------------------------------------------------------------------------------


def summary_section(facts: RunFacts) -> Section:
    tasks = facts.record.tasks
    done = sum(t["status"] == "succeeded" for t in tasks)
    cost = sum(float(t.get("cost_usd") or 0) for t in tasks)
    branches = sorted({c["branch"] for c in _commits(facts)})
    ratio = facts.makespan_s / facts.critical_s if facts.critical_s else None
    chain = " → ".join(facts.critical_path) or "—"
    items = [
        ("verdict", _verdict(facts)),
        ("tasks", f"{done} of {len(tasks)} succeeded"),
        ("wall time", seconds(facts.wall_s)),
        ("makespan", seconds(facts.makespan_s)),
        ("critical path", f"{seconds(facts.critical_s)} ({chain})"),
        ("vetoes", str(len(facts.vetoes))),
        ("rollbacks", str(len(facts.rollbacks))),
        ("failed verifies", str(len(facts.verify_failures))),
        ("fleet cost", _cost(cost, facts.simulated)),
        ("branch", ", ".join(branches) or "not committed (run `codefleet commit`)"),
    ]
    if facts.verify:
        items.insert(
            2, ("verify", f"`{facts.verify.get('command')}` exited {facts.verify.get('exit_code')}")
        )
    blocks: list[Block] = [Facts(tuple(items))]
    if ratio is not None:
        blocks.append(
            Para(
                f"The fleet took {seconds(facts.makespan_s)} from the first assignment to the last "
                f"outcome; the longest chain of dependencies, each task at the length of its last "
                f"attempt, is {seconds(facts.critical_s)} ({chain}): {ratio:.1f} times the ideal with "
                "unlimited runners and no retries."
            )
        )
    data = {
        "verdict": _verdict(facts),
        "tasks": len(tasks),
        "succeeded": done,
        "wall_s": round(facts.wall_s, 3),
        "makespan_s": round(facts.makespan_s, 3),
        "critical_path": list(facts.critical_path),
        "critical_path_s": round(facts.critical_s, 3),
        "vetoes": len(facts.vetoes),
        "rollbacks": len(facts.rollbacks),
        "failed_verifies": len(facts.verify_failures),
        "cost_usd": round(cost, 6),
        "verify": facts.verify,
        "branches": branches,
    }
    return Section("summary", "Summary", tuple(blocks), data)


def timeline_section(facts: RunFacts) -> Section | None:
    if not facts.attempts:
        return None
    lanes: dict[str, list[Bar]] = defaultdict(list)
    end = facts.wall_s
    for a in facts.attempts:
        start = _offset(facts, a.start)
        stop = _offset(facts, a.end) if a.end else end
        lanes[a.runner].append(Bar(a.task_id, a.number, start, stop, a.outcome))
        end = max(end, stop)
    marks = tuple((v.runner, _offset(facts, v.at), v.path) for v in facts.vetoes)
    timeline = Timeline(
        tuple((name, tuple(bars)) for name, bars in sorted(lanes.items())), marks, end
    )
    return Section("timeline", "Timeline", (timeline,))


def tasks_section(facts: RunFacts) -> Section:
    work: dict[str, float] = defaultdict(float)
    for a in facts.attempts:
        work[a.task_id] += a.seconds
    order = {t: i for i, t in enumerate(success_order(facts.record.events))}
    tasks = sorted(facts.record.tasks, key=lambda t: (order.get(t["id"], len(order)), t["id"]))
    rows, tones, data = [], [], []
    for t in tasks:
        files = _files_of(facts, t["id"])
        rows.append(
            (
                t["id"],
                t["title"],
                t["status"],
                f"{t['attempts']}/{t['max_attempts']}",
                seconds(work[t["id"]]),
                f"${format_cost(float(t.get('cost_usd') or 0))}",
                ", ".join(files) or "—",
            )
        )
        tones.append("ok" if t["status"] == "succeeded" else "bad")
        data.append(
            {
                "id": t["id"],
                "title": t["title"],
                "status": t["status"],
                "attempts": t["attempts"],
                "duration_s": round(work[t["id"]], 3),
                "cost_usd": t.get("cost_usd") or 0.0,
                "files": files,
                "error": t.get("error"),
            }
        )
    columns = ("task", "title", "outcome", "attempts", "duration", "cost", "files")
    table = Table(columns, tuple(rows), tuple(tones))
    return Section("tasks", "Tasks", (table,), data)


def operator_section(facts: RunFacts) -> Section | None:
    """The person in the loop: the operator's messages and the agents' questions, in order."""
    answers = {
        str(e["payload"]["question_id"]): e["payload"]
        for e in facts.record.events
        if e["type"] == "question_answered"
    }
    delivered = {
        (e["task_id"], e["payload"]["seq"])
        for e in facts.record.events
        if e["type"] == "operator_message_delivered"
    }
    rows: list[tuple[str, ...]] = []
    for e in facts.record.events:
        p = e["payload"]
        if e["type"] == "operator_message":
            got = "received" if (e["task_id"], p["seq"]) in delivered else "not received"
            rows.append(
                (
                    str(e["task_id"]),
                    str(p["attempt"]),
                    "operator says",
                    str(p["text"]),
                    f"{p['delivered'].replace('_', ' ')}, {got}",
                )
            )
        elif e["type"] == "question_asked":
            answer = answers.get(str(p["question_id"]), {})
            said = f"{answer.get('by', 'open')}: {answer.get('text', '—')}"
            rows.append((str(e["task_id"]), str(p["attempt"]), "agent asks", str(p["text"]), said))
    if not rows:
        return None
    columns = ("task", "attempt", "who", "text", "outcome")
    data = [dict(zip(columns, row, strict=True)) for row in rows]
    return Section("operator", "The operator in the loop", (Table(columns, tuple(rows)),), data)


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
            f"+{seconds(_offset(facts, v.at))}",
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
        tail = "\n".join(f.output_tail.rstrip().splitlines()[-OUTPUT_TAIL_LINES:])
        blocks.append(Code(tail or "(no output)", f"last {OUTPUT_TAIL_LINES} lines of output"))
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
                f"+{seconds(_offset(facts, from_iso(str(e['at']))))}",
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


def cost_section(facts: RunFacts) -> Section:
    tasks = facts.record.tasks
    cost = sum(float(t.get("cost_usd") or 0) for t in tasks)
    tokens_in = sum(int(t.get("input_tokens") or 0) for t in tasks)
    tokens_out = sum(int(t.get("output_tokens") or 0) for t in tasks)
    busy: dict[str, float] = defaultdict(float)
    for a in facts.attempts:
        busy[a.runner] += a.seconds
    rows = tuple(
        (
            str(r["name"]),
            str(r.get("tasks_succeeded", 0)),
            str(r.get("tasks_failed", 0)),
            seconds(busy.get(str(r["name"]), 0.0)),
            f"${format_cost(float(r.get('cost_usd') or 0))}",
        )
        for r in sorted(facts.record.agents, key=lambda r: str(r["name"]))
    )
    facts_block = Facts(
        (
            ("fleet cost", _cost(cost, facts.simulated)),
            ("tokens", f"{tokens_in:,} in · {tokens_out:,} out"),
        )
    )
    blocks: list[Block] = [facts_block]
    if rows:
        blocks.append(Table(("runner", "succeeded", "failed", "busy", "cost"), rows))
    data = {
        "cost_usd": round(cost, 6),
        "input_tokens": tokens_in,
        "output_tokens": tokens_out,
        "simulated": facts.simulated,
    }
    return Section("cost", "Cost", tuple(blocks), data)


def _cost(cost: float, simulated: bool) -> str:
    """The fleet's cost, read as simulated when no real model ran (`RunFacts.simulated`)."""
    return f"${format_cost(cost)}{SIMULATED if simulated else ''}"


def history_section(facts: RunFacts) -> Section:
    commits = _commits(facts)
    if not commits:
        text = "Not committed yet: `codefleet commit` makes one commit per succeeded task."
        return Section("history", "Branch", (Para(text),), [])
    titles = {t["id"]: t["title"] for t in facts.record.tasks}
    blocks: list[Block] = []
    by_branch: dict[str, list[dict[str, str]]] = defaultdict(list)
    for c in commits:
        by_branch[c["branch"]].append(c)
    for branch, made in by_branch.items():
        blocks.append(Para(f"`{branch}`: {len(made)} commit(s), one per task, oldest first"))
        rows = tuple((c["commit"][:10], c["task_id"], titles.get(c["task_id"], "")) for c in made)
        blocks.append(Table(("commit", "task", "subject"), rows))
    return Section("history", "Branch", tuple(blocks), commits)


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
        rows = tuple(
            (
                f.path,
                str(f.vetoes),
                ", ".join(f.tasks) or "—",
                seconds(f.veto_lost_s),
                seconds(f.rollback_lost_s),
            )
            for f in found.files
        )
        columns = ("file", "vetoes", "tasks", "lost to vetoes", "lost to rollbacks")
        blocks.append(Table(columns, rows))
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


SECTIONS: list[SectionBuilder] = [
    summary_section,
    timeline_section,
    tasks_section,
    operator_section,
    graph_section,
    vetoes_section,
    rollbacks_section,
    verify_section,
    commands_section,
    cost_section,
    history_section,
    stats_section,
]


def build_report(record: RunRecord, builders: Sequence[SectionBuilder] = ()) -> Report:
    """The report of `record`, with `builders` (default: `SECTIONS`) in order."""
    facts = run_facts(record)
    sections = tuple(s for b in (builders or SECTIONS) if (s := b(facts)) is not None)
    stamp = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    return Report("CodeFleet run report", _verdict(facts), stamp, sections)


def report_json(report: Report) -> dict[str, Any]:
    """The machine-readable report: the verdict and each section's data under its key."""
    return {
        "title": report.title,
        "verdict": report.verdict,
        "generated_at": report.generated_at,
        "sections": {s.key: s.data for s in report.sections if s.data is not None},
    }
