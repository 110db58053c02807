"""The report's sections on what the run did: summary, timeline, tasks, operator, cost, branch.

Each builder is `(RunFacts) -> Section | None` and owns its section's data and
blocks (`review.report.reportblocks`); `review.report.runreport` lists them in `SECTIONS`.
The run's one-word verdict (`verdict`) is said here once and shared with the
report's header and the summary. A fleet that ran no real model
prices its cost as simulated (`RunFacts.simulated`), in the summary and in the
cost section alike. Landing (`RunFacts.landing`) gives the task table its order
column (the section is `review.report.landingsections`); a run before landing has neither.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from codefleet.models import EventType
from codefleet.review.facts import LastRun, RunFacts, since_start
from codefleet.review.history import format_cost, success_order
from codefleet.review.report.landingsections import landing_summary
from codefleet.review.report.reportblocks import (
    Bar,
    Block,
    Facts,
    Para,
    Section,
    Table,
    Timeline,
    seconds,
)
from codefleet.review.report.sparedwork import (
    check_counts,
    checks_text,
    stack_counts,
    stacks_text,
)
from codefleet.wording import SIMULATED, attempts_text, verify_blame_text

__all__ = [
    "cost_section",
    "history_section",
    "operator_section",
    "summary_section",
    "tasks_section",
    "timeline_section",
    "verdict",
]


def verdict(facts: RunFacts) -> str:
    """RUNNING while a task is live and no run finished, else the last `run_finished`'s word,
    else PASS only if every task succeeded."""
    statuses = [t["status"] for t in facts.record.tasks]
    live = ("pending", "assigned", "running", "landing")
    if any(s in live for s in statuses) and facts.ok is None:
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


def summary_section(facts: RunFacts) -> Section:
    tasks = facts.record.tasks
    done = sum(t["status"] == "succeeded" for t in tasks)
    cost = sum(float(t.get("cost_usd") or 0) for t in tasks)
    branches = sorted({c["branch"] for c in _commits(facts)})
    ratio = facts.makespan_s / facts.critical_s if facts.critical_s else None
    chain = " → ".join(facts.critical_path) or "—"
    blocks: list[Block] = [Facts(tuple(_summary_items(facts, done, cost, branches)))]
    if ratio is not None:
        blocks.append(
            Para(
                f"The fleet took {seconds(facts.makespan_s)} from the first assignment to the last "
                f"outcome (of each run, when several ran on this database); the longest chain of dependencies, each task at the length of its last "
                f"attempt, is {seconds(facts.critical_s)} ({chain}): {ratio:.1f} times the ideal with "
                "unlimited runners and no retries."
            )
        )
    return Section("summary", "Summary", tuple(blocks), _summary_data(facts, done, cost, branches))


def _summary_items(
    facts: RunFacts, done: int, cost: float, branches: list[str]
) -> list[tuple[str, str]]:
    """The summary's facts, in the order they read."""
    tasks = facts.record.tasks
    chain = " → ".join(facts.critical_path) or "—"
    items = [
        ("verdict", verdict(facts)),
        ("tasks", f"{done} of {len(tasks)} succeeded"),
        ("wall time", seconds(facts.wall_s)),
        ("makespan", seconds(facts.makespan_s)),
        ("critical path", f"{seconds(facts.critical_s)} ({chain})"),
        ("vetoes", str(len(facts.vetoes))),
        ("rollbacks", str(len(facts.rollbacks))),
        ("failed verifies", str(len(facts.verify_failures))),
        *([("checks", said)] if (said := checks_text(check_counts(facts))) else []),
        *([("stacks", said)] if (said := stacks_text(stack_counts(facts))) else []),
        ("fleet cost", _cost(cost, facts.simulated)),
        ("branch", ", ".join(branches) or "not committed (run `codefleet commit`)"),
    ]
    if facts.landing.seen:
        items.insert(-2, ("landing", landing_summary(facts.landing)))
    last = facts.last_run
    if last is not None:  # several runs: the figures above are every run's
        items[1] = ("tasks", f"{done} of {len(tasks)} succeeded (all {facts.runs} runs)")
        items.insert(2, ("last run", _last_run_text(facts, last)))
    if facts.verify:
        said = f"exited {facts.verify.get('exit_code')}"
        if facts.verify.get("reused"):  # the last landing check ran it on this very tree
            said = f"passed: not run again, the landing check {facts.verify['reused']} ran it on this same tree"
        items.insert(2, ("verify", f"`{facts.verify.get('command')}` {said}"))
        if (blame := verify_blame_text(facts.verify)) is not None:
            items.insert(3, ("verify bisect", blame))
    return items


def _summary_data(
    facts: RunFacts, done: int, cost: float, branches: list[str]
) -> dict[str, object]:
    """The summary section's data (the report's JSON)."""
    data: dict[str, object] = {
        "verdict": verdict(facts),
        "tasks": len(facts.record.tasks),
        "succeeded": done,
        "wall_s": round(facts.wall_s, 3),
        "makespan_s": round(facts.makespan_s, 3),
        "critical_path": list(facts.critical_path),
        "critical_path_s": round(facts.critical_s, 3),
        "checks": check_counts(facts),
        "stacks": stack_counts(facts),
        "vetoes": len(facts.vetoes),
        "rollbacks": len(facts.rollbacks),
        "failed_verifies": len(facts.verify_failures),
        "cost_usd": round(cost, 6),
        "verify": facts.verify,
        "branches": branches,
    }
    last = facts.last_run
    if last is not None:
        data["last_run"] = {
            "tasks": list(last.tasks),
            "succeeded": last.succeeded,
            "vetoes": last.vetoes,
        }
    return data


def _last_run_text(facts: RunFacts, last: LastRun) -> str:
    """The last run's own figures, and the failures it did not touch, named as old."""
    text = f"{last.succeeded} of {len(last.tasks)} task(s) it worked on succeeded · {last.vetoes} veto(es)"
    old = [
        t["id"]
        for t in facts.record.tasks
        if t["status"] in ("failed", "cancelled", "blocked_upstream") and t["id"] not in last.tasks
    ]
    return text + (f" · old (not retried since an earlier run): {', '.join(old)}" if old else "")


def timeline_section(facts: RunFacts) -> Section | None:
    if not facts.attempts:
        return None
    lanes: dict[str, list[Bar]] = defaultdict(list)
    end = facts.wall_s
    for a in facts.attempts:
        start = since_start(facts, a.start)
        stop = since_start(facts, a.end) if a.end else end
        lanes[a.runner].append(Bar(a.task_id, a.number, start, stop, a.outcome))
        end = max(end, stop)
    marks = tuple((v.runner, since_start(facts, v.at), v.path) for v in facts.vetoes)
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
    landed = facts.landing.seen  # a run before landing keeps its columns
    rows, tones, data = [], [], []
    for t in tasks:
        files = _files_of(facts, t["id"])
        number = facts.landing.order_of(t["id"])
        row = (
            t["id"],
            t["title"],
            t["status"],
            attempts_text(t),
            seconds(work[t["id"]]),
            f"${format_cost(float(t.get('cost_usd') or 0))}",
            ", ".join(files) or "—",
        )
        rows.append((*row[:3], f"#{number}" if number else "—", *row[3:]) if landed else row)
        tones.append("ok" if t["status"] == "succeeded" else "bad")
        data.append(
            {
                "id": t["id"],
                "title": t["title"],
                "status": t["status"],
                "attempts": t["attempts"],
                "uncharged_attempts": t.get("uncharged_attempts") or 0,
                "retried_attempts": t.get("retried_attempts") or 0,
                "duration_s": round(work[t["id"]], 3),
                "cost_usd": t.get("cost_usd") or 0.0,
                "files": files,
                "error": t.get("error"),
                "order": number,
            }
        )
    columns: tuple[str, ...] = ("task", "title", "outcome", "attempts", "duration", "cost", "files")
    if landed:
        columns = (*columns[:3], "landed", *columns[3:])
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
            _works_in(r),
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
        blocks.append(Table(("runner", "works in", "succeeded", "failed", "busy", "cost"), rows))
    data = {
        "cost_usd": round(cost, 6),
        "input_tokens": tokens_in,
        "output_tokens": tokens_out,
        "simulated": facts.simulated,
    }
    return Section("cost", "Cost", tuple(blocks), data)


def _works_in(runner: Mapping[str, Any]) -> str:
    """Where a runner worked: the tree, or its own clone of the landed line; and its host."""
    where = str(runner.get("workspace") or "tree")
    return f"{where} on {runner['host']}" if runner.get("host") else where


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
