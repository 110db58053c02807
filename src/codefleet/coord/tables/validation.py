"""The graph validator: a batch of tasks is checked whole before anything lands.

Pure functions, no engine state: the engine hands them the tree, what is
stored and the known checks, and inserts what they return in one transaction
of its own. Validation happens before the first write, in two halves.
`prepare_tasks` is the heavy one, so the server runs it off the event loop: at most `MAX_BATCH_SCOPE_PATHS` scope paths in all, ids well-formed and
unique in the batch, every declared scope path canonical and inside the tree
(a `stat` each), no cycle (self-dependency included). `check_against` is the
cheap one, on the loop: ids not already stored (unless the load redefines a
stored task that has not started: `redefine`), every dependency known (in
the batch or stored), `verify` naming a known check; a redefinition's new
dependencies make no cycle with the stored edges (`reject_stored_cycles`);
`task_rows` builds the rows the engine then inserts (or writes over the
redefined ones).
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from codefleet.coord.tables.checkregistry import validated_checks
from codefleet.dag import find_cycle
from codefleet.errors import InvalidGraph, TooLarge
from codefleet.models import MAX_BATCH_SCOPE_PATHS, TaskStatus, new_task_id
from codefleet.paths import PathRejected, TreeRoot

__all__ = [
    "NewTask",
    "PreparedBatch",
    "check_against",
    "prepare_tasks",
    "reject_cycles",
    "reject_stored_cycles",
    "task_rows",
]

TASK_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")


@dataclass(frozen=True, slots=True)
class NewTask:
    title: str
    id: str | None = None
    description: str = ""
    priority: int = 3
    file_scope: Sequence[str] = ()
    depends_on: Sequence[str] = ()
    max_attempts: int | None = None
    verify: str | None = None
    estimate_min: int | None = None  # read by `graph check` and `plan`; not stored
    agent: str | None = None  # the agent kind the task needs (`models.AgentKind`); None: any
    on_stale_read: str | None = None  # a `StaleReadPolicy` value; None: the default
    lease_granularity: str | None = None  # a `Granularity` value; None: the runner's
    ask: bool = True  # False: the task's sessions cannot ask the operator
    shell_mode: str | None = None  # a `ShellMode` value; None: the fleet's default
    resources: Sequence[str] = ()  # names (`resources`), held for the whole attempt


@dataclass(frozen=True, slots=True)
class PreparedBatch:
    """A batch whose state-free checks passed: its ids, canonical scopes and checks."""

    specs: tuple[NewTask, ...]
    ids: list[str]
    scopes: dict[str, list[str]]
    checks: dict[str, str] = field(default_factory=dict)


def prepare_tasks(
    tree: TreeRoot, specs: Sequence[NewTask], checks: Mapping[str, str] | None = None
) -> PreparedBatch:
    """The heavy, state-free half of a load; safe to run off the loop thread (writes nothing)."""
    checks = validated_checks(checks or {})
    _check_size(specs)
    ids = _validated_ids(specs)
    spellings: dict[str, str] = {}
    scopes = {
        task_id: _canonical_scope(tree, task_id, spec.file_scope, spellings)
        for spec, task_id in zip(specs, ids, strict=True)
    }
    reject_cycles(specs, ids)
    return PreparedBatch(tuple(specs), ids, scopes, checks)


def check_against(
    batch: PreparedBatch,
    stored: Mapping[str, TaskStatus],
    known_checks: Mapping[str, str],
    redefine: Mapping[str, bool] | None = None,
) -> frozenset[str]:
    """The cheap half: ids not stored yet, dependencies known, `verify` naming a known check.

    `redefine` maps the stored ids this load may redefine to whether each has not
    started yet; a stored id outside it is refused, one that has started too. Returns
    the stored ids the batch redefines.
    """
    redefined = _validate_against_state(batch.specs, batch.ids, stored, redefine or {})
    _validate_verify(batch.specs, batch.ids, {**known_checks, **batch.checks})
    return redefined


def task_rows(
    batch: PreparedBatch, seq: int, at: str, default_max_attempts: int
) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """The batch's task rows (numbered after `seq`) and its dependency edges."""
    rows: list[dict[str, Any]] = []
    edges: list[tuple[str, str]] = []
    for n, (spec, task_id) in enumerate(zip(batch.specs, batch.ids, strict=True), start=1):
        rows.append(
            {
                "id": task_id,
                "seq": seq + n,
                "title": spec.title,
                "description": spec.description,
                "status": TaskStatus.PENDING,
                "priority": spec.priority,
                "file_scope": batch.scopes[task_id],
                "max_attempts": spec.max_attempts or default_max_attempts,
                "verify": spec.verify,
                "agent": spec.agent,
                "on_stale_read": spec.on_stale_read,
                "lease_granularity": spec.lease_granularity,
                "ask": None if spec.ask else 0,
                "shell": spec.shell_mode,
                "created_at": at,
                "updated_at": at,
                "resources": sorted(set(spec.resources)),
            }
        )
        edges.extend((task_id, dep) for dep in dict.fromkeys(spec.depends_on))
    return rows, edges


def created_events(
    rows: Sequence[Mapping[str, Any]], depends_on: Sequence[Sequence[str]]
) -> list[tuple[str, dict[str, Any]]]:
    """The `task_created` event (task id, payload) of each row of `task_rows`."""
    return [
        (
            str(row["id"]),
            {
                "title": row["title"],
                "priority": row["priority"],
                "file_scope": row["file_scope"],
                "depends_on": list(parents),
            },
        )
        for row, parents in zip(rows, depends_on, strict=True)
    ]


def _validated_ids(specs: Sequence[NewTask]) -> list[str]:
    if not specs:
        raise InvalidGraph("the graph has no tasks", {"problem": "empty"})
    ids = [spec.id or new_task_id() for spec in specs]
    seen: set[str] = set()
    for task_id in ids:
        if not TASK_ID.match(task_id):
            raise InvalidGraph(
                f"task id {task_id!r} must be 1-64 letters, digits, '_', '.', ':' or '-'",
                {"problem": "invalid_id", "task_id": task_id},
            )
        if task_id in seen:
            raise _used_twice(task_id)
        seen.add(task_id)
    return ids


def _validate_against_state(
    specs: Sequence[NewTask],
    ids: list[str],
    stored: Mapping[str, TaskStatus],
    redefine: Mapping[str, bool],
) -> frozenset[str]:
    redefined: set[str] = set()
    for task_id in ids:
        if task_id not in stored:
            continue
        if task_id not in redefine:
            raise _already_loaded(task_id)
        if not redefine[task_id]:
            raise InvalidGraph(
                f"task {task_id} has started ({stored[task_id]}) since the graph was read: "
                "its definition is kept; load the graph again to see how to replace it",
                {"problem": "already_started", "task_id": task_id},
            )
        redefined.add(task_id)
    in_batch = set(ids)
    for spec, task_id in zip(specs, ids, strict=True):
        for dep in spec.depends_on:
            if dep not in in_batch and dep not in stored:
                raise InvalidGraph(
                    f"task {task_id} depends on unknown task {dep}",
                    {"problem": "unknown_dependency", "task_id": task_id, "depends_on": dep},
                )
    return frozenset(redefined)


def _validate_verify(specs: Sequence[NewTask], ids: list[str], checks: Mapping[str, str]) -> None:
    for spec, task_id in zip(specs, ids, strict=True):
        if spec.verify is not None and spec.verify not in checks:
            known = ", ".join(sorted(checks)) or "none are defined"
            raise InvalidGraph(
                f"task {task_id}: verify names unknown check {spec.verify!r} "
                f"(known checks: {known}); define it under `checks:` or with --check",
                {"problem": "unknown_check", "task_id": task_id, "check": spec.verify},
            )


def _canonical_scope(
    tree: TreeRoot, task_id: str, scope: Sequence[str], seen: dict[str, str]
) -> list[str]:
    """Canonical scope keys; `seen` caches spellings across one batch (graphs repeat them)."""
    keys: list[str] = []
    for raw in scope:
        if raw in seen:
            keys.append(seen[raw])
            continue
        try:
            key = seen[raw] = tree.canonical(raw)
        except PathRejected as err:
            raise InvalidGraph(
                f"task {task_id}: file_scope entry {err.raw!r}: {err.message}",
                {"problem": "invalid_path", "task_id": task_id, "reason": err.reason},
            ) from None
        keys.append(key)
    return sorted(set(keys))


def _already_loaded(task_id: str) -> InvalidGraph:
    return InvalidGraph(
        f"task {task_id} is already loaded on the server: nothing was created",
        {"problem": "already_loaded", "task_id": task_id},
    )


def _used_twice(task_id: str) -> InvalidGraph:
    return InvalidGraph(
        f"task id {task_id} is used twice", {"problem": "duplicate_id", "task_id": task_id}
    )


def _check_size(specs: Sequence[NewTask]) -> None:
    """At most `MAX_BATCH_SCOPE_PATHS` scope paths per batch: each costs a `stat` to check."""
    paths = sum(len(spec.file_scope) for spec in specs)
    if paths > MAX_BATCH_SCOPE_PATHS:
        raise TooLarge(
            f"the batch declares {paths} file_scope paths in all, more than the "
            f"{MAX_BATCH_SCOPE_PATHS} one load may hold; split the graph into several loads "
            "(a task may depend on tasks of an earlier load)",
            {"problem": "too_many_scope_paths", "paths": paths, "limit": MAX_BATCH_SCOPE_PATHS},
        )


def reject_stored_cycles(
    batch: PreparedBatch, redefined: frozenset[str], stored_edges: Sequence[tuple[str, str]]
) -> None:
    """A redefined task's new dependencies make no cycle with the stored tasks' edges.

    `reject_cycles` looks at the batch alone, which holds for new tasks (a stored task
    cannot depend on them); a redefined task may have stored dependents.
    """
    deps: dict[str, list[str]] = {}
    for child, parent in stored_edges:
        if child not in redefined:
            deps.setdefault(child, []).append(parent)
    for spec, task_id in zip(batch.specs, batch.ids, strict=True):
        deps[task_id] = list(spec.depends_on)
    cycle = find_cycle(deps)
    if cycle:
        raise InvalidGraph(
            f"the graph has a dependency cycle: {' -> '.join(cycle)}",
            {"problem": "cycle", "task_ids": sorted(set(cycle))},
        )


def reject_cycles(specs: Sequence[NewTask], ids: list[str]) -> None:
    """Kahn's algorithm over the batch; existing tasks cannot depend on new ones."""
    in_batch = set(ids)
    parents = {
        t: [d for d in s.depends_on if d in in_batch] for s, t in zip(specs, ids, strict=True)
    }
    children: dict[str, list[str]] = {t: [] for t in ids}
    for child, deps in parents.items():
        for dep in deps:
            children[dep].append(child)
    waiting = {t: len(set(deps)) for t, deps in parents.items()}
    queue = deque(t for t, n in waiting.items() if n == 0)
    while queue:
        for child in set(children[queue.popleft()]):
            waiting[child] -= 1
            if waiting[child] == 0:
                queue.append(child)
    stuck = sorted(t for t, n in waiting.items() if n > 0)
    if stuck:
        raise InvalidGraph(
            f"the graph has a dependency cycle through {', '.join(stuck[:10])}",
            {"problem": "cycle", "task_ids": stuck},
        )
