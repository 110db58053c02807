"""What `codefleet run` settles with the server before it starts a runner.

In order: the server serves this run's tree (a second terminal without the
right directory must not work on another tree); the graph file
(`codefleet.yaml` by default) is loaded unless its tasks are already there;
the checks are defined; there is something to run; and a scripted run has a
script for every task it would run. Each refusal is a `RunRefused` whose
message names the fix. Nothing here starts a runner.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from codefleet.api.client import FleetClient
from codefleet.api.graph import GraphTasks
from codefleet.fleet.agents import Agents

__all__ = ["GraphFile", "RunRefused", "prepare_run"]

# Tasks a run would still work on (terminal ones are not run again without `retry`).
TO_RUN: Final = frozenset({"pending", "assigned", "running", "blocked_upstream"})


class RunRefused(Exception):
    """The run cannot start; the message says why and what to do."""


@dataclass(frozen=True, slots=True)
class GraphFile:
    path: Path
    tasks: GraphTasks


def same_tree(server_tree: str, local_tree: Path, url: str) -> None:
    """Refuse a run whose tree is not the one the server serves."""
    if os.path.realpath(server_tree) != os.path.realpath(local_tree):
        raise RunRefused(
            f"the server at {url} serves the tree {server_tree}, but this run's tree is "
            f"{local_tree.resolve()}: run `codefleet run` in {server_tree} (or pass --workdir)"
        )


async def load_graph_file(client: FleetClient, graph: GraphFile, checks: Mapping[str, str]) -> str:
    """Post the graph unless its tasks are on the server already; say which happened.

    Tasks are matched by id: a graph is loaded when the server holds none of its
    ids, counted as loaded when it holds all of them, and refused in between (or
    when a task has no id and the server is not empty: it could not be matched).
    """
    all_checks = {**graph.tasks.checks, **checks}
    ids = [t.get("id") for t in graph.tasks]
    existing = {t["id"] for t in await client.tasks()}
    loaded = [i for i in ids if i in existing]
    if existing and ids and all(ids) and len(loaded) == len(ids):
        if all_checks:
            await client.define_checks(all_checks)
        return f"{graph.path}: already loaded ({len(ids)} task(s))"
    if existing and loaded:
        raise RunRefused(
            f"{graph.path}: task(s) {', '.join(map(str, loaded))} are already loaded but others "
            "are not, so it cannot be loaded whole: `codefleet tasks` shows what the server "
            "holds; pass --no-graph to run that as it is"
        )
    if existing and not all(ids):
        raise RunRefused(
            f"{graph.path}: some tasks have no id, so whether the server's {len(existing)} "
            "task(s) are these cannot be told: `codefleet load` it yourself, or pass --no-graph "
            "to run what the server holds"
        )
    created = await client.create_tasks(graph.tasks, all_checks)
    return f"{graph.path}: loaded {len(created)} task(s): {' '.join(created)}"


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
    same_tree(str(health["workdir"]), tree, client.base_url)
    say(f"run: tree {health['workdir']} · server {client.base_url} · {agents.mode} agents")
    if graph is not None:
        say(await load_graph_file(client, graph, checks))
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
