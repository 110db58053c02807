"""Graph commands: `load` posts a task graph (and its checks) to the server."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from codefleet.api.graphfile import DEFAULT_GRAPH, GraphError, OnServer, find_graph, load_graph
from codefleet.cli.common import (
    RUN,
    CheckOpt,
    JsonOpt,
    ServerOpt,
    TokenOpt,
    app,
    call_server,
    fail,
    parse_check_options,
    print_json,
    settings_from,
)
from codefleet.cli.output import console, err_console
from codefleet.cli.run.checkchange import (
    NotConfirmed,
    changed_by_graph,
    confirm_check_changes,
    graph_key,
    split_given,
    terminal_confirm,
)
from codefleet.cli.run.runprep import plan_load
from codefleet.fleet.views.programs import check_warnings
from codefleet.statedir import tree_id_here

if TYPE_CHECKING:
    from codefleet.api.client import FleetClient
    from codefleet.api.graphfile import GraphTasks

__all__ = ["load"]


@app.command(rich_help_panel=RUN)
def load(
    graph: Annotated[
        Path | None,
        typer.Argument(help="Task graph YAML (default: ./codefleet.yaml; see codefleet init)."),
    ] = None,
    check: CheckOpt = None,
    server: ServerOpt = None,
    token: TokenOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Post a task graph (and its checks) to the server; the batch lands whole or not at all.

    Tasks are matched by id: a new one is created, one already loaded that has not started
    takes the file's edits (said in one line), one that has run keeps its definition (the
    line says how to replace it). A check whose command the file changed is applied only
    with your yes (asked on a terminal; without one the load is refused, and --check
    NAME=CMD says yes). From the load on, the file is protected from agents.
    """
    path = find_graph(graph)
    if path is None:
        raise fail(f"no graph given and no {DEFAULT_GRAPH} here: `codefleet init` writes one")
    given_checks = parse_check_options(check)
    settings = settings_from(server_url=server, token=token)

    async def post(client: FleetClient) -> tuple[dict[str, list[str]], list[str]]:
        health = await client.health()
        say = err_console.print if json_out else console.print
        say(f"load: tree {health['workdir']} · server {settings.url} · {path}", markup=False)
        stored = {t["id"]: t for t in await client.tasks()}
        defined = await client.checks()
        on_server = OnServer(frozenset(stored), {**defined, **given_checks})
        tasks = _read(path, on_server)  # every problem at once, the server's tasks known
        checks = {**tasks.checks, **given_checks}
        tree = _checks_tree(health, settings.workdir)
        for line in check_warnings(checks, tree):
            err_console.print(f"warning: {line}", style="yellow", markup=False)
        source = await _confirmed_source(client, path, tree, tasks.checks, given_checks, defined)
        with_file, typed = split_given(tasks.checks, given_checks, defined)
        plan = plan_load(tasks, stored)
        if not plan.new and not plan.redefine:
            if with_file or source is not None:
                await client.define_checks(with_file, source)
            if typed:
                await client.define_checks(typed)
            return {"created": [], "redefined": []}, [
                f"already loaded ({len(tasks)} task(s)): nothing to create",
                *plan.lines,
            ]
        posted = tasks.with_tasks([*plan.new, *plan.redefine])
        redefine = [t["id"] for t in plan.redefine]
        answer = await client.load_tasks(posted, with_file, redefine, source)
        if typed:  # a change the operator typed is not put down to the file
            await client.define_checks(typed)
        return answer, plan.lines

    answer, lines = call_server(settings, post)
    if json_out:
        print_json(answer)
        return
    created = answer["created"]
    if created:
        console.print(f"created {len(created)} task(s): {' '.join(created)}", markup=False)
    for line in lines:
        console.print(line, markup=False)


async def _confirmed_source(
    client: FleetClient,
    path: Path,
    tree: Path,
    graph_checks: dict[str, str],
    given: dict[str, str],
    defined: dict[str, str],
) -> str | None:
    """The graph's key in the tree (the server protects it), once every check the graph
    changed is confirmed (`cli.run.checkchange`; else the load is refused)."""
    source = graph_key(path, tree)
    changes = changed_by_graph(graph_checks, given, defined)
    try:
        await confirm_check_changes(
            client, changes, source or str(path), source, terminal_confirm()
        )
    except NotConfirmed as err:
        raise fail(str(err)) from None
    return source


def _read(path: Path, on_server: OnServer) -> GraphTasks:
    try:
        return load_graph(path, standalone=False, on_server=on_server)
    except GraphError as err:
        raise fail(str(err)) from None


def _checks_tree(health: dict[str, Any], here: Path) -> Path:
    """Where to look up the checks' programs: this host's mount of the server's tree when
    this is one (a runner's host), else the server's path."""
    served = health.get("tree_id")
    return here if served is not None and tree_id_here(here) == served else Path(health["workdir"])
