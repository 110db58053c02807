"""What `codefleet run` settles with the server before it starts a runner.

In order: the server serves this run's tree (a second terminal without the
right directory must not work on another tree); the graph file's tasks
(`codefleet.yaml` by default) that are not on the server yet are loaded;
the checks are defined; there is something to run; and a scripted run has a
script for every task it would run. Each refusal is a `RunRefused` whose
message names the fix. Nothing here starts a runner.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from codefleet.api.client import FleetClient
from codefleet.api.graphfile import GraphError, GraphTasks, OnServer, check_references
from codefleet.cli.agents import Agents
from codefleet.statedir import TreeClaim, tree_id_here, tree_mismatch

__all__ = ["GraphFile", "RunRefused", "prepare_run"]

# Tasks a run would still work on (blocked and finished ones are not run without `retry`).
TO_RUN: Final = frozenset({"pending", "assigned", "running"})


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
    client: FleetClient, graph: GraphFile, checks: Mapping[str, str]
) -> list[str]:
    """Post the graph's tasks that are not on the server yet; say what happened.

    Tasks are matched by id. A new task may depend on one already loaded (the server
    resolves it). A loaded task whose spec differs from the server's copy is named, not
    updated: the server keeps the record of what ran. A task without an id cannot be
    matched, so a graph with one is refused unless the server is empty. The checks are
    defined again: one whose command changed is replaced, and named with its old command.
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
    changed = [
        _changed(spec, stored[spec["id"]]) for spec in graph.tasks if spec.get("id") in stored
    ]
    if all_checks:
        changed += _changed_checks(all_checks, await client.checks())
    said = [f"{graph.path}: {line}" for line in changed if line]
    new = graph.tasks.with_tasks([t for t in graph.tasks if t.get("id") not in stored])
    if not new:
        if all_checks:
            await client.define_checks(all_checks)
        return [f"{graph.path}: already loaded ({len(ids)} task(s))", *said]
    on_server = OnServer(frozenset(stored), {**await client.checks(), **all_checks})
    try:  # every unknown reference at once, before the server refuses the first
        check_references(new, on_server, str(graph.path))
    except GraphError as err:
        raise RunRefused(str(err)) from None
    created = await client.create_tasks(new, all_checks)
    if not stored.keys() & set(ids):
        return [f"{graph.path}: loaded {len(created)} task(s): {' '.join(created)}", *said]
    kept = len(ids) - len(new)
    return [
        f"{graph.path}: loaded {len(created)} new task(s): {' '.join(created)} "
        f"({kept} already loaded)",
        *said,
    ]


# What a graph's task declares that the server's copy records as it was loaded.
COMPARED: Final = ("title", "description", "priority", "max_attempts", "verify", "estimate_min")


def _changed(spec: Mapping[str, Any], row: Mapping[str, Any]) -> str | None:
    """A line naming what the file changed in a task already loaded (None if nothing)."""
    fields = [k for k in COMPARED if k in spec and k in row and spec[k] != row[k]]
    if set(spec.get("depends_on", ())) != set(row.get("depends_on", ())):
        fields.append("depends_on")
    scope = {posixpath.normpath(p) for p in spec.get("file_scope", ())}
    if not scope <= set(row.get("file_scope", ())):  # a veto widens the stored scope
        fields.append("file_scope")
    if not fields:
        return None
    task_id = spec["id"]
    return (
        f"{task_id} differs from the server's copy ({', '.join(fields)}); the server's is "
        f"kept: `codefleet cancel {task_id}` and give the task a new id to replace it"
    )


def _changed_checks(given: Mapping[str, str], defined: Mapping[str, str]) -> list[str]:
    """A line per check whose command this run changes on the server (it replaces it)."""
    return [
        f"check {name} is now `{command}` (it was `{defined[name]}`)"
        for name, command in given.items()
        if name in defined and defined[name] != command
    ]


def check_coverage(tasks: list[dict[str, Any]], agents: Agents) -> None:
    """A scripted run refuses tasks its script does not cover (they would 'pass' unchanged)."""
    missing = agents.uncovered(t["id"] for t in tasks if t["status"] in TO_RUN)
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
) -> int:
    """Settle the run with the server (see the module's docstring); returns the event cursor."""
    health = await client.health()
    same_tree(health, tree, client.base_url)
    say(f"run: tree {health['workdir']} · server {client.base_url} · {agents.mode} agents")
    if graph is not None:
        for line in await load_graph_file(client, graph, checks):
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
