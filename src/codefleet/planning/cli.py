"""Planning commands: `graph check FILE` and `plan GOAL` (registered on the shared app).

`graph check` needs no server and no model: it loads the graph with the
loader `load` uses, checks its scope paths against the tree, and prints the
analysis (exit 1 on errors). `plan` runs one read-only Claude session over
the tree until it answers a graph that passes the same check (see `planner`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from codefleet.cli_common import (
    RUN,
    JsonOpt,
    WorkdirOpt,
    app,
    console,
    fail,
    print_json,
    settings_from,
)
from codefleet.graph import GraphError, load_graph
from codefleet.planning.check import check_graph, tree_for
from codefleet.planning.render import print_analysis

__all__ = ["graph_app"]

graph_app = typer.Typer(help="Check a task graph before it runs.", no_args_is_help=True)
app.add_typer(graph_app, name="graph", rich_help_panel=RUN)

RunnersOpt = Annotated[
    int,
    typer.Option("--runners", min=1, max=256, help="Runners to predict the parallelism for."),
]


@graph_app.command("check")
def check(
    graph: Annotated[Path, typer.Argument(help="Task graph YAML (see examples/demo-tasks.yaml).")],
    workdir: WorkdirOpt = None,
    runners: RunnersOpt = 3,
    json_out: JsonOpt = False,
) -> None:
    """Analyse a task graph: critical path, width, parallelism, overlaps, hotspots, bad paths.

    No server and no model. Exit 1 when the graph has errors, 0 otherwise.
    """
    settings = settings_from(workdir=workdir)
    if not settings.workdir.is_dir():
        raise fail(f"working tree {settings.workdir} does not exist; set --workdir")
    try:
        tasks = load_graph(graph)
    except GraphError as err:
        if json_out:
            print_json({"ok": False, "errors": [{"code": "invalid_graph", "message": str(err)}]})
            raise typer.Exit(1) from None
        raise fail(str(err)) from None
    analysis = check_graph(
        tasks, tree_for(settings.workdir, settings.db, settings.run_dir), runners
    )
    if json_out:
        print_json({"file": str(graph), "workdir": str(settings.workdir.resolve()),
                    **analysis.to_json()})  # fmt: skip
    else:
        print_analysis(console, analysis, f"{graph} · tree {settings.workdir.resolve()}")
    if not analysis.ok:
        raise typer.Exit(1)
