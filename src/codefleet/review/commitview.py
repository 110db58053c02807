"""How a commit series is shown: the branch, its `git log --oneline`, and every loud finding.

Used by `codefleet commit`, `run --commit` and the demo. It renders a
`CommitResult` (what was made and what the checks found) and the tasks that
did not succeed; it holds no state and runs no git itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.text import Text

from codefleet.review.commit import CommitResult
from codefleet.review.history import Unfinished
from codefleet.rollback import quote_name

__all__ = ["history_json", "names", "print_history"]

UNTOUCHED = "your HEAD, index and working tree are untouched"


def print_history(
    console: Console,
    result: CommitResult,
    log: str,
    unfinished: Sequence[Unfinished] = (),
    before: Mapping[str, Sequence[str]] = {},
    land_hint: bool = True,
) -> None:
    """The branch and its log, what earlier branches hold already, what was not committed,
    and (`land_hint`, when the tree is the person's) how to land it."""
    if result.commits:
        head = Text("branch ", style="bold")
        head.append(result.branch, style="bold magenta")
        head.append(f" · {len(result.commits)} commit(s) on {result.base[:10]} · {UNTOUCHED}")
        console.print(head)
        for entry in log.splitlines():
            console.print(Text(f"  {entry}"))
    else:
        console.print(Text("no commit made: no succeeded task changed a file", style="yellow"))
    for branch, tasks in repeated(result, before).items():
        note = f"already committed: {', '.join(tasks)} on {branch} (this branch repeats them)"
        console.print(Text(note, style="yellow"))
    if result.error:
        console.print(Text(f"committing stopped: {result.error}", style="bold red"))
    if result.uncommitted:
        missing = ", ".join(result.uncommitted)
        console.print(Text(f"succeeded but not committed: {missing}", style="red"))
    for skipped in result.skipped:
        line = f"skipped {skipped.task_id} (succeeded, not committed): {skipped.reason}"
        console.print(Text(line, style="bold red"))
    if result.mismatched:
        paths = names(result.mismatched)
        why = f"the working tree differs from the branch (edited outside the lock?): {paths}"
        console.print(Text(why, style="bold red"))
    for finding in _findings(result, unfinished):
        console.print(finding)
    if land_hint and result.commits and result.ok:
        console.print(
            Text(
                f"next: codefleet land {result.branch}  (your branch moves to it; "
                "the files are in the tree already)",
                style="dim",
            )
        )


def _findings(result: CommitResult, unfinished: Sequence[Unfinished]) -> list[Text]:
    lines = []
    if result.empty:
        lines.append(Text(f"no change to commit: {', '.join(result.empty)}", style="dim"))
    if result.left_out:
        lines.append(
            Text(
                "left out (changed in the tree, touched by no task, not committed): "
                + names(result.left_out),
                style="yellow",
            )
        )
    if unfinished:
        lines.append(Text("not succeeded, so not in the branch:", style="bold"))
    kept = set(result.left_out)
    for task in unfinished:
        line = Text(f"  {task.task_id} {task.status}: {task.title}")
        still = [p for p in task.paths if p in kept]
        if still:
            line.append(f" · its edits are still in the tree: {names(still)}", style="red")
        elif task.paths:
            line.append(f" · wrote {names(task.paths)}, rolled back", style="dim")
        lines.append(line)
    return lines


def names(paths: Sequence[str]) -> str:
    """Paths on one line, each quoted as git quotes it when it must be (a newline, a `"`)."""
    return ", ".join(quote_name(p) for p in paths)


def repeated(result: CommitResult, before: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    """Earlier branch -> the tasks of this commit series it already holds."""
    now = {c.task_id for c in result.commits}
    found = {branch: [t for t in tasks if t in now] for branch, tasks in before.items()}
    return {branch: tasks for branch, tasks in found.items() if tasks and branch != result.branch}


def history_json(
    result: CommitResult,
    unfinished: Sequence[Unfinished] = (),
    before: Mapping[str, Sequence[str]] = {},
) -> dict[str, Any]:
    return {
        "branch": result.branch if result.commits else None,
        "base": result.base,
        "tip": result.tip,
        "commits": [
            {"task_id": c.task_id, "commit": c.sha, "subject": c.subject, "paths": list(c.paths)}
            for c in result.commits
        ],
        "empty": list(result.empty),
        "left_out": list(result.left_out),
        "mismatched": list(result.mismatched),
        "error": result.error,
        "uncommitted": list(result.uncommitted),
        "skipped": [
            {"task_id": s.task_id, "reason": s.reason, "paths": list(s.paths)}
            for s in result.skipped
        ],
        "already_committed": repeated(result, before),
        "not_succeeded": [
            {"task_id": u.task_id, "status": u.status, "paths": list(u.paths)} for u in unfinished
        ],
    }
