"""Operator commands over the server's tasks: `tasks`, `reset`."""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from codefleet.cli_common import (
    OPERATE,
    JsonOpt,
    ServerOpt,
    TokenOpt,
    app,
    call_server,
    console,
    fail,
    print_json,
    settings_from,
)

__all__ = ["reset", "tasks"]


@app.command(rich_help_panel=OPERATE)
def tasks(
    task_id: Annotated[str | None, typer.Argument(help="Show one task in full.")] = None,
    status: Annotated[str | None, typer.Option(help="Only tasks with this status.")] = None,
    patch: Annotated[
        bool, typer.Option("--patch", help="With ID: print the task's recorded change as a diff.")
    ] = False,
    server: ServerOpt = None,
    token: TokenOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """List the tasks (or one task with its dependencies and file changes)."""
    from codefleet.report import task_table

    settings = settings_from(server_url=server, token=token)
    if task_id and patch:
        found = call_server(settings, lambda c: c.patch(task_id))
        if json_out:
            print_json(found)
        else:
            sys.stdout.write("".join(f["diff"] for f in found["files"]))
        return
    if task_id:
        data = call_server(settings, lambda c: c.task(task_id))
        if json_out:
            print_json(data)
        else:
            console.print_json(data=data)
        return
    rows = call_server(settings, lambda c: c.tasks(status))
    if json_out:
        print_json(rows)
    else:
        console.print(task_table(rows))


@app.command(rich_help_panel=OPERATE)
def reset(server: ServerOpt = None, token: TokenOpt = None) -> None:
    """Delete every task, agent, lease and event. Needs CODEFLEET_ALLOW_RESET=1."""
    if os.environ.get("CODEFLEET_ALLOW_RESET") not in ("1", "true", "yes"):
        raise fail("reset deletes everything; set CODEFLEET_ALLOW_RESET=1 to confirm")
    settings = settings_from(server_url=server, token=token)
    call_server(settings, lambda c: c.reset())
    console.print("reset: the database is empty")
