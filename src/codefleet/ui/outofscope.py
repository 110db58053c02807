"""Writes outside a task's declared scope, followed through the event log.

`file_scope` is what a task is expected to touch; the scheduler trusts it to
run tasks side by side. A write the lease granted on a path outside it (no one
held the path, so no veto) went through, but the graph was wrong about the
task, and the run says so: in its log (`follow_compact`) and in its verdict
(`report.print_result`). A task's scope is the one loaded (`task_created`),
widened by the server when a veto folds the refused path in
(`task_requeued`'s `file_scope`); both paths and scopes are the server's
canonical keys. A person's own session (kind `interactive`) has no scope.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from codefleet.models import EventType

__all__ = ["ScopeWatch", "outside_text"]


@dataclass
class ScopeWatch:
    """Each task's declared scope, and the paths each task wrote outside it (in order)."""

    declared: dict[str, frozenset[str]] = field(default_factory=dict)
    outside: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def of(cls, tasks: Iterable[Mapping[str, Any]]) -> ScopeWatch:
        """Seeded with the scopes of `tasks` (rows of `GET /tasks`)."""
        return cls({str(t["id"]): frozenset(t.get("file_scope") or ()) for t in tasks})

    def take(self, event: Mapping[str, Any]) -> str | None:
        """Follow one event; the path when it is a task's first write outside its scope."""
        task_id, body = event.get("task_id"), event["payload"]
        if not task_id or body.get("kind") == "interactive":
            return None
        if event["type"] in (EventType.TASK_CREATED, EventType.TASK_REQUEUED):
            if "file_scope" in body:
                self.declared[task_id] = frozenset(body["file_scope"])
            return None
        if event["type"] != EventType.FILE_CHANGED or task_id not in self.declared:
            return None
        path = str(body["path"])
        seen = self.outside.setdefault(task_id, [])
        if path in self.declared[task_id] or path in seen:
            return None
        seen.append(path)
        return path

    def line(self, task_id: str, path: str) -> str:
        scope = ", ".join(sorted(self.declared.get(task_id, ()))) or "none declared"
        return f"{task_id} wrote {path} outside its declared scope ({scope})"


def outside_text(outside: Mapping[str, list[str]]) -> str:
    """`N file(s) written outside declared scopes (T1: a, b; T2: c)`, or "" when none."""
    named = [(task_id, paths) for task_id, paths in sorted(outside.items()) if paths]
    if not named:
        return ""
    count = sum(len(paths) for _, paths in named)
    which = "; ".join(f"{task_id}: {', '.join(paths)}" for task_id, paths in named)
    return f"{count} file(s) written outside declared scopes ({which})"
