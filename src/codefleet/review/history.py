"""From a run's record to the changes to commit: pure, no git, no I/O.

One `TaskChange` per succeeded task, in the order the tasks succeeded (the
`task_succeeded` events, oldest first): the task's recorded patch (pre-image
to final content, per file), its title and summary, attempts, cost and how
many times it was vetoed. `commit_message` renders the commit message:
title, blank line, summary, then trailers. Tasks that did not succeed are
`Unfinished`, with the paths their attempts wrote (the ledger).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from codefleet.models import EventType, TaskStatus
from codefleet.review.runrecord import RunRecord

__all__ = [
    "NO_PATCHES",
    "FileChange",
    "TaskChange",
    "Unfinished",
    "commit_message",
    "commits_of_tasks",
    "committed_before",
    "format_cost",
    "planned_changes",
    "success_order",
    "task_change",
    "unfinished_tasks",
    "veto_counts",
    "wrote_without_patch",
]

Row = dict[str, Any]
TRAILER_PREFIX = "CodeFleet-"


@dataclass(frozen=True, slots=True)
class FileChange:
    path: str  # relative to the shared tree
    diff: str  # git-style, as `GET /tasks/{id}/patch` gives it
    binary: bool


@dataclass(frozen=True, slots=True)
class TaskChange:
    task_id: str
    title: str
    summary: str
    attempts: int
    cost_usd: float
    vetoes: int
    completed_at: str | None
    files: tuple[FileChange, ...]

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(f.path for f in self.files)


@dataclass(frozen=True, slots=True)
class Unfinished:
    task_id: str
    title: str
    status: str
    paths: tuple[str, ...]  # what its attempts wrote (rolled back unless --keep-failed-edits)


def success_order(events: Iterable[Row]) -> list[str]:
    """Task ids in the order they succeeded (first success wins)."""
    seen: dict[str, None] = {}
    for event in events:
        if event["type"] == EventType.TASK_SUCCEEDED and event["task_id"]:
            seen.setdefault(event["task_id"], None)
    return list(seen)


def veto_counts(events: Iterable[Row]) -> Counter[str]:
    """How many writes of each task were refused (`lease_denied`, counted per requester)."""
    return Counter(e["task_id"] for e in events if e["type"] == EventType.LEASE_DENIED)


def task_change(task: Row, patch: Row, vetoes: int) -> TaskChange:
    files = tuple(
        FileChange(str(f["path"]), str(f["diff"]), bool(f["binary"])) for f in patch["files"]
    )
    return TaskChange(
        task_id=str(task["id"]),
        title=str(task["title"]),
        summary=str(task.get("result_summary") or ""),
        attempts=int(task.get("attempts") or 0),
        cost_usd=float(task.get("cost_usd") or 0.0),
        vetoes=vetoes,
        completed_at=task.get("completed_at"),
        files=files,
    )


def planned_changes(record: RunRecord) -> list[TaskChange]:
    """Every succeeded task's change, in success order."""
    vetoes = veto_counts(record.events)
    by_id = {t["id"]: t for t in record.tasks}
    return [
        task_change(by_id[i], record.patches[i], vetoes[i])
        for i in success_order(record.events)
        if i in by_id and i in record.patches and by_id[i]["status"] == TaskStatus.SUCCEEDED
    ]


def committed_before(record: RunRecord) -> dict[str, list[str]]:
    """Branch -> the tasks an earlier `commit` (or `run --commit`) put on it, in event order."""
    found: dict[str, list[str]] = {}
    for event in record.events:
        if event["type"] == EventType.TASK_COMMITTED and event["task_id"]:
            on = found.setdefault(str(event["payload"]["branch"]), [])
            if event["task_id"] not in on:
                on.append(str(event["task_id"]))
    return found


def commits_of_tasks(record: RunRecord) -> dict[str, list[str]]:
    """Task -> the commits recorded for its change (`task_committed` after its last success)."""
    found: dict[str, list[str]] = {}
    for event in record.events:
        task = event["task_id"]
        if event["type"] == EventType.TASK_SUCCEEDED and task:
            found[str(task)] = []
        elif event["type"] == EventType.TASK_COMMITTED and task:
            found.setdefault(str(task), []).append(str(event["payload"]["commit"]))
    return found


def unfinished_tasks(record: RunRecord) -> list[Unfinished]:
    """Tasks that did not succeed, with the paths their attempts wrote."""
    return [
        Unfinished(
            t["id"],
            t["title"],
            t["status"],
            tuple(sorted({c["path"] for c in record.ledgers.get(t["id"], [])})),
        )
        for t in record.tasks
        if t["status"] != TaskStatus.SUCCEEDED
    ]


NO_PATCHES = (
    "the server recorded no patch for tasks that wrote files: it runs with --keep-failed-edits "
    "(no pre-images, so no per-task changes); commit the tree yourself, or run with rollback on"
)


def wrote_without_patch(task_detail: Row, patch: Row) -> bool:
    """A task that wrote files (its ledger) yet has no patch: the server keeps no pre-images."""
    return bool(task_detail.get("file_changes")) and not patch.get("files")


def format_cost(usd: float) -> str:
    """Dollars with at least two decimals and at most four: 0.12, 0.0042, 0.00."""
    text = f"{usd:.4f}".rstrip("0")
    whole, _, cents = text.partition(".")
    return f"{whole}.{cents.ljust(2, '0')}"


def commit_message(change: TaskChange) -> str:
    """Title, blank line, summary, blank line, the CodeFleet trailers."""
    subject = " ".join(change.title.split()) or change.task_id
    parts = [subject]
    if change.summary.strip():
        parts.append(change.summary.strip())
    trailers = {
        "Task": change.task_id,
        "Attempts": str(change.attempts),
        "Cost-USD": format_cost(change.cost_usd),
        "Vetoes": str(change.vetoes),
    }
    parts.append("\n".join(f"{TRAILER_PREFIX}{k}: {v}" for k, v in trailers.items()))
    return "\n\n".join(parts) + "\n"
