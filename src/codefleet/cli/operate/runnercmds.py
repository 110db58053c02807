"""`codefleet runners`: the fleet's runners, where each works, and what it is doing.

One line per runner the server knows: its name, status, the agent it drives,
where it works (`tree`: the shared tree, or a mount of it; `clone`: its own
clone of the landed line, `fleet.clone`), its host and process, the landed
commit its clone is level with (its last heartbeat's), its task, and what it
has done. Runners that went offline are folded into one line unless `--all`;
people's own sessions (`codefleet join`) are listed after them.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from codefleet.cli.common import (
    OPERATE,
    JsonOpt,
    ServerOpt,
    TokenOpt,
    app,
    call_server,
    print_json,
    settings_from,
)
from codefleet.cli.output import console

__all__ = ["runner_rows", "runners"]

SHORT_SHA = 12


@app.command(rich_help_panel=OPERATE)
def runners(
    server: ServerOpt = None,
    token: TokenOpt = None,
    json_out: JsonOpt = False,
    every: Annotated[
        bool, typer.Option("--all", help="List offline runners too, one line each.")
    ] = False,
) -> None:
    """Show the runners: where each works (tree or clone), its host, its clone's landed head."""
    settings = settings_from(server_url=server, token=token)
    agents = call_server(settings, lambda c: c.agents())
    if json_out:
        print_json(agents)
        return
    rows, folded = runner_rows(agents, every=every)
    if not rows and not folded:
        console.print("no runner has registered with this server yet", markup=False)
        return
    table = Table(box=None, pad_edge=False)
    for column in ("runner", "status", "agent", "works in", "host", "head", "task", "done"):
        table.add_column(column)
    for row in rows:
        table.add_row(*row)
    console.print(table)
    if folded:
        console.print(f"{folded} offline runner(s) not shown (--all lists them)", markup=False)


def runner_rows(
    agents: list[dict[str, Any]], *, every: bool = False
) -> tuple[list[tuple[str, ...]], int]:
    """The table's rows (pure: tested as text), and how many offline runners were folded."""
    rows: list[tuple[str, ...]] = []
    folded = 0
    for agent in agents:
        if agent.get("kind") != "runner":
            continue
        if agent["status"] == "offline" and not every:
            folded += 1
            continue
        status = "stale" if agent.get("stale") else str(agent["status"])
        where = str(agent.get("workspace") or "tree")
        host = str(agent.get("host") or "")
        if agent.get("pid"):
            host = f"{host} pid {agent['pid']}".strip()
        head = str(agent.get("head") or "")[:SHORT_SHA] if where == "clone" else ""
        done = f"{agent.get('tasks_succeeded', 0)} ok, {agent.get('tasks_failed', 0)} failed"
        rows.append(
            (
                str(agent["name"]),
                status,
                str(agent.get("agent") or "claude"),
                f"{where} {agent.get('workdir') or ''}".strip(),
                host,
                head or ("-" if where == "clone" else ""),
                str(agent.get("current_task_id") or ""),
                done,
            )
        )
    people = [a for a in agents if a.get("kind") == "interactive"]
    for person in people:
        rows.append((str(person["name"]), str(person["status"]), "person", "tree", "", "", "", ""))
    return rows, folded
