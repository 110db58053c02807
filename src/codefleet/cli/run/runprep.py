"""What `codefleet run` settles with the server before it starts a runner.

In order: the server serves this run's tree (a second terminal without the
right directory must not work on another tree); a scripted run has a script
for every task it would run (checked before anything is loaded); the graph
file's tasks (`codefleet.yaml` by default) that are not on the server yet
are loaded (a check whose program cannot start is warned about first, as
`graph check` and `load` do), and those that have not started take the file's edits; the
checks are defined (one the file changed only with the operator's yes:
`cli.run.checkchange`), naming the file, which the server then protects from agents;
there is something to run. Each refusal is a `RunRefused` whose
message names the fix. Nothing here starts a runner.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from codefleet.api.client import FleetClient
from codefleet.api.graphfile import GraphError, GraphTasks, OnServer, check_references
from codefleet.cli.run.agentchoice import Agents
from codefleet.cli.run.checkchange import (
    Confirm,
    NotConfirmed,
    changed_by_graph,
    confirm_check_changes,
    graph_key,
    split_given,
)
from codefleet.fleet.views.programs import check_warnings
from codefleet.models import ShellMode
from codefleet.statedir import TreeClaim, tree_id_here, tree_mismatch

__all__ = ["GraphFile", "LoadPlan", "RunRefused", "not_started", "plan_load", "prepare_run"]

# Tasks a run would still work on (blocked and finished ones are not run without `retry`).
TO_RUN: Final = frozenset({"pending", "assigned", "running"})
FINISHED: Final = frozenset({"succeeded", "failed", "cancelled", "blocked_upstream"})


class RunRefused(Exception):
    """The run cannot start; the message says why and what to do."""


@dataclass(frozen=True, slots=True)
class GraphFile:
    path: Path
    tasks: GraphTasks


def same_tree(health: Mapping[str, Any], local_tree: Path, url: str) -> None:
    """Refuse a run whose tree is not the one the server serves (any mount of it is)."""
    local = Path(os.path.realpath(local_tree))
    server = TreeClaim(str(health["workdir"]), health.get("tree_id"))
    problem = tree_mismatch(TreeClaim(str(local), tree_id_here(local)), server)
    if problem is not None:
        raise RunRefused(
            f"the server at {url} serves the tree {server.workdir}, but this run's tree is "
            f"{local}: {problem}"
        )


async def load_graph_file(
    client: FleetClient,
    graph: GraphFile,
    checks: Mapping[str, str],
    agents: Agents | None = None,
    *,
    source: str | None = None,
    confirm: Confirm | None = None,
) -> list[str]:
    """Post the graph's tasks that are not on the server yet, and the edited definitions of
    those that have not started; say what happened.

    Tasks are matched by id. A new task may depend on one already loaded (the server
    resolves it). A loaded task that has not started (pending, never assigned) whose spec
    differs takes the file's definition; one that has run keeps the server's (its history
    is of that one), and the line says how to replace it. A task without an id cannot be
    matched, so a graph with one is refused unless the server is empty. With `agents`, a
    scripted run's script is checked against the tasks it would run before anything is
    loaded. The checks are defined again: one whose command the graph changed is replaced
    only once the operator confirms it (`cli.run.checkchange`: `confirm`, or `--check`;
    else `RunRefused`), and named with its old command. `source` is the graph's key in
    the tree: the server protects the file from agents from then on.
    """
    all_checks = {**graph.tasks.checks, **checks}
    stored = {t["id"]: t for t in await client.tasks()}
    ids = [t.get("id") for t in graph.tasks]
    if stored and not all(ids):
        raise RunRefused(
            f"{graph.path}: some tasks have no id, so whether the server's {len(stored)} "
            "task(s) are these cannot be told: `codefleet load` it yourself, or pass --no-graph "
            "to run what the server holds"
        )
    plan = plan_load(graph.tasks, stored)
    if agents is not None:  # check first, then load: a refused run loads nothing
        check_coverage([*stored.values(), *(t for t in plan.new if t.get("id"))], agents)
    said = [f"{graph.path}: {line}" for line in plan.lines]
    defined = await client.checks()
    if all_checks:
        changes = changed_by_graph(graph.tasks.checks, checks, defined)
        try:  # before anything is loaded: a refused run loads nothing
            await confirm_check_changes(client, changes, source or str(graph.path), source, confirm)
        except NotConfirmed as err:
            raise RunRefused(str(err)) from None
        said += [f"{graph.path}: {line}" for line in _changed_checks(all_checks, defined)]
    with_file, typed = split_given(graph.tasks.checks, checks, defined)
    posted = graph.tasks.with_tasks([*plan.new, *plan.redefine])
    if not posted:
        if with_file or source is not None:
            await client.define_checks(with_file, source)
        await _define_typed(client, typed)
        return [f"{graph.path}: already loaded ({len(ids)} task(s))", *said]
    on_server = OnServer(frozenset(stored), {**defined, **all_checks})
    try:  # every unknown reference at once, before the server refuses the first
        check_references(posted, on_server, str(graph.path))
    except GraphError as err:
        raise RunRefused(str(err)) from None
    answer = await client.load_tasks(posted, with_file, [t["id"] for t in plan.redefine], source)
    await _define_typed(client, typed)
    created = answer["created"]
    if not created:
        return said
    if not stored.keys() & set(ids):
        return [f"{graph.path}: loaded {len(created)} task(s): {' '.join(created)}", *said]
    kept = len(ids) - len(created)
    return [
        f"{graph.path}: loaded {len(created)} new task(s): {' '.join(created)} "
        f"({kept} already loaded)",
        *said,
    ]


async def _define_typed(client: FleetClient, typed: Mapping[str, str]) -> None:
    """The command line's changes to the server's checks, once the graph is in."""
    if typed:
        await client.define_checks(typed)


@dataclass(frozen=True, slots=True)
class LoadPlan:
    """A graph file against the server's tasks: what to create, what to redefine, what to say."""

    new: list[dict[str, Any]]
    redefine: list[dict[str, Any]]
    lines: list[str]  # one per task redefined, and per edited task kept


def plan_load(tasks: GraphTasks, stored: Mapping[str, Mapping[str, Any]]) -> LoadPlan:
    """Match the file's tasks to the server's by id (`load` and `run` share it)."""
    new, redefine, lines = [], [], []
    for spec in tasks:
        row = stored.get(spec.get("id", ""))
        if row is None:
            new.append(spec)
            continue
        fresh = not_started(row)
        fields = _changed(spec, row, exact=fresh)
        if not fields:
            continue
        if fresh:
            redefine.append(spec)
            lines.append(f"{spec['id']}: not started yet, its definition was updated")
        else:
            lines.append(_kept(row, fields))
    return LoadPlan(new, redefine, lines)


def not_started(row: Mapping[str, Any]) -> bool:
    """Pending and never assigned (the server refuses a redefinition of any other)."""
    return row["status"] == "pending" and not row["attempts"] and row.get("assigned_at") is None


# What a graph's task declares that the server's copy records as it was loaded.
COMPARED: Final = ("title", "description", "priority", "max_attempts", "verify", "agent")


def _changed(spec: Mapping[str, Any], row: Mapping[str, Any], *, exact: bool) -> list[str]:
    """The fields the file changed in a task already loaded.

    `exact=False` (a task that has run): a scope or resources widened by a veto is not a
    change, only what the file adds to them.
    """
    fields = [k for k in COMPARED if k in spec and k in row and spec[k] != row[k]]
    fields += [
        key
        for key in ("on_stale_read", "lease_granularity")
        if spec.get(key, row.get(key)) != row.get(key)
    ]
    if spec.get("ask", True) != (row.get("ask") != 0):
        fields.append("ask")
    shell = ShellMode.of(spec.get("shell"), spec.get("shell_network"))
    if (shell and shell.value) != row.get("shell"):
        fields.append("shell")
    if set(spec.get("depends_on", ())) != set(row.get("depends_on", ())):
        fields.append("depends_on")
    scope = {posixpath.normpath(p) for p in spec.get("file_scope", ())}
    stored_scope = set(row.get("file_scope", ()))
    if scope != stored_scope if exact else not scope <= stored_scope:
        fields.append("file_scope")
    resources, held = set(spec.get("resources", ())), set(row.get("resources", ()))
    if resources != held if exact else not resources <= held:
        fields.append("resources")
    return fields


def _kept(row: Mapping[str, Any], fields: list[str]) -> str:
    task_id, attempts = row["id"], int(row["attempts"])
    runs = f"{attempts} attempt{'s' if attempts != 1 else ''}"
    cancel = "" if row["status"] in FINISHED else f"`codefleet cancel {task_id}` first, "
    return (
        f"{task_id} has run ({row['status']}, {runs}): the server keeps its definition and "
        f"its history; to run the edited one, give the task a new id in the graph "
        f"({cancel}the old one stays in the record) or start over with `codefleet runs new` "
        f"(changed: {', '.join(fields)})"
    )


def _changed_checks(given: Mapping[str, str], defined: Mapping[str, str]) -> list[str]:
    """A line per check whose command this run changes on the server (it replaces it)."""
    return [
        f"check {name} is now `{command}` (it was `{defined[name]}`)"
        for name, command in given.items()
        if name in defined and defined[name] != command
    ]


def check_coverage(tasks: Sequence[Mapping[str, Any]], agents: Agents) -> None:
    """A scripted run refuses tasks its script does not cover (they would 'pass' unchanged).

    A task without a status is one the run is about to load (it will be pending).
    """
    missing = agents.uncovered(t["id"] for t in tasks if t.get("status", "pending") in TO_RUN)
    if missing:
        flag = "--script" if agents.mode == "dry-run" else "--model-script"
        raise RunRefused(
            f"the {agents.mode} agents' {flag} file has no script for task(s) "
            f"{', '.join(missing)}: add them to it (a task with no script would change nothing "
            "and 'succeed')"
        )


async def prepare_run(
    client: FleetClient,
    tree: Path,
    agents: Agents,
    graph: GraphFile | None,
    checks: Mapping[str, str],
    say: Any,
    confirm: Confirm | None = None,
) -> int:
    """Settle the run with the server (see the module's docstring); returns the event cursor.

    `confirm` asks the operator about a check the graph changed (None: no terminal)."""
    health = await client.health()
    same_tree(health, tree, client.base_url)
    say(f"run: tree {health['workdir']} · server {client.base_url} · {agents.mode} agents")
    if graph is not None:
        for line in check_warnings({**graph.tasks.checks, **checks}, tree):  # as `graph check`
            say(f"warning: {line}")
        source = graph_key(graph.path, tree)
        for line in await load_graph_file(
            client, graph, checks, agents, source=source, confirm=confirm
        ):
            say(line)
    elif checks:
        await client.define_checks(checks)
    tasks = await client.tasks()
    if not tasks:
        raise RunRefused(
            "the server has no tasks: write a graph (`codefleet init` starts codefleet.yaml), "
            "then `codefleet load` it or run `codefleet run` where it is"
        )
    check_coverage(tasks, agents)
    return int(health["last_event_id"])
