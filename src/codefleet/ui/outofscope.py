"""Writes outside a task's declared scope, followed through the event log.

`file_scope` is what a task is expected to touch; the scheduler trusts it to
run tasks side by side. A write the lease granted on a path outside it (no one
held the path, so no veto) went through, but the graph was wrong about the
task, and the run says so: in its log (`follow_compact`) and in its verdict
(`report.print_result`). A task's scope is the one loaded (`task_created`),
widened by the server when a veto folds the refused path in
(`task_requeued`'s `file_scope`); both paths and scopes are the server's
canonical keys. A person's own session (kind `interactive`) has no scope.

A write is compared by the lease keys its task holds on the written file
(`lease_acquired`, `lease_released`), with the lease rule's own containment
(`leasekeys.covering`): a scope naming a file covers the file and each of its
parts; one naming a part covers that part only, so a write leased as another part
or as the whole file (a write the gate could not map to parts) is outside it.
A write whose keys were not seen (a watch that joined mid-attempt) is inside when
its file is a declared file or the file of a declared part.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from codefleet.models import EventType
from codefleet.toolcalls.leasekeys import covering, file_of

__all__ = ["ScopeWatch", "outside_text"]


@dataclass
class ScopeWatch:
    """Each task's declared scope, the lease keys each holds, and the keys (or paths) each
    wrote outside its scope (in order)."""

    declared: dict[str, frozenset[str]] = field(default_factory=dict)
    outside: dict[str, list[str]] = field(default_factory=dict)
    held: dict[str, set[str]] = field(default_factory=dict)

    @classmethod
    def of(cls, tasks: Iterable[Mapping[str, Any]]) -> ScopeWatch:
        """Seeded with the scopes of `tasks` (rows of `GET /tasks`)."""
        return cls({str(t["id"]): frozenset(t.get("file_scope") or ()) for t in tasks})

    def take(self, event: Mapping[str, Any]) -> str | None:
        """Follow one event; the key(s) when it is a task's first write outside its scope."""
        task_id, body, kind = event.get("task_id"), event["payload"], event["type"]
        if not task_id or body.get("kind") == "interactive":
            return None
        if kind in (EventType.TASK_CREATED, EventType.TASK_REQUEUED):
            if "file_scope" in body:
                self.declared[task_id] = frozenset(body["file_scope"])
        elif kind == EventType.LEASE_ACQUIRED:
            self.held.setdefault(task_id, set()).add(str(body["path"]))
        elif kind == EventType.LEASE_RELEASED:
            self.held.get(task_id, set()).discard(str(body["path"]))
        elif kind == EventType.FILE_CHANGED and task_id in self.declared:
            return self._written(task_id, str(body["path"]))
        return None

    def _written(self, task_id: str, path: str) -> str | None:
        scope = self.declared[task_id]
        keys = sorted(k for k in self.held.get(task_id, ()) if file_of(k) == path)
        if keys:
            out = [k for k in keys if scope.isdisjoint(covering(k))]
        else:  # its keys were not seen: the file against the declared files
            out = [] if path in {file_of(k) for k in scope} else [path]
        new = [k for k in out if k not in self.outside.get(task_id, ())]
        if not new:
            return None
        self.outside.setdefault(task_id, []).extend(new)
        return ", ".join(new)

    def line(self, task_id: str, path: str) -> str:
        scope = ", ".join(sorted(self.declared.get(task_id, ()))) or "none declared"
        return f"{task_id} wrote {path} outside its declared scope ({scope})"


def outside_text(outside: Mapping[str, list[str]]) -> str:
    """`N file(s) written outside declared scopes (T1: a, b::f; T2: c)`, or "" when none."""
    named = [(task_id, paths) for task_id, paths in sorted(outside.items()) if paths]
    if not named:
        return ""
    count = sum(len(paths) for _, paths in named)
    which = "; ".join(f"{task_id}: {', '.join(paths)}" for task_id, paths in named)
    return f"{count} file(s) written outside declared scopes ({which})"
