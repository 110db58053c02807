"""Graph commands: `load` posts a task graph (and its checks) to the server."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from codefleet.cli_common import (
    RUN,
    CheckOpt,
    JsonOpt,
    ServerOpt,
    TokenOpt,
    app,
    call_server,
    console,
    fail,
    parse_check_options,
    print_json,
    settings_from,
)
from codefleet.graph import GraphError, load_graph

__all__ = ["load"]


@app.command(rich_help_panel=RUN)
def load(
    graph: Annotated[Path, typer.Argument(help="Task graph YAML (see examples/demo-tasks.yaml).")],
    check: CheckOpt = None,
    server: ServerOpt = None,
    token: TokenOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Post a task graph (and its checks) to the server; the batch lands whole or not at all."""
    try:
        tasks = load_graph(graph, standalone=False)
    except GraphError as err:
        raise fail(str(err)) from None
    checks = {**tasks.checks, **parse_check_options(check)}
    settings = settings_from(server_url=server, token=token)
    created = call_server(settings, lambda c: c.create_tasks(tasks, checks))
    if json_out:
        print_json({"created": created})
    else:
        console.print(f"created {len(created)} task(s): {' '.join(created)}")
