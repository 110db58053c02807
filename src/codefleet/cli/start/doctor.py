"""`codefleet doctor`: what would make a run fail minutes in, checked up front."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.text import Text

from codefleet.api.graphfile import find_graph
from codefleet.cli.common import (
    START,
    JsonOpt,
    ServerOpt,
    TokenOpt,
    WorkdirOpt,
    app,
    print_json,
    settings_from,
)
from codefleet.cli.output import console
from codefleet.parts.grammars import problems

if TYPE_CHECKING:
    from codefleet.cli.start.doctor_checks import Check
    from codefleet.config import Settings

__all__ = ["doctor", "run_checks"]


@app.command(rich_help_panel=START)
def doctor(
    graph: Annotated[
        Path | None,
        typer.Option(
            "--graph", help="The task graph to check (default: ./codefleet.yaml if there is one)."
        ),
    ] = None,
    workdir: WorkdirOpt = None,
    server: ServerOpt = None,
    token: TokenOpt = None,
    json_out: JsonOpt = False,
    clone: Annotated[
        Path | None,
        typer.Option(
            "--clone",
            help="This host runs runner --clone DIR: check DIR and that git can fetch the "
            "server's landed line, instead of a mount of the tree.",
        ),
    ] = None,
) -> None:
    """Check what makes a run fail minutes in: Python, grammars, port, tree, graph, SDK.

    With a server answering at --server (a runner's host): its token, its tree's
    identity against this tree (with --clone: the clone directory), the clock skew,
    the round trip and a fetch of its landed line too. Exits 1 on a failure; a warning
    (no key and no login: only keyless runs work) passes.
    """
    _stop_on_a_broken_grammar(json_out)
    # The checks map parts (graph check's scopes), which loads every grammar: imported only
    # once the grammars are known to load, so a broken one is said alone, above.
    from codefleet.cli.start.doctor_checks import print_checks

    settings = settings_from(workdir=workdir, server_url=server, token=token)
    checks = run_checks(settings, graph, clone)
    if json_out:
        print_json([c.as_dict() for c in checks])
    else:
        print_checks(console, checks)
    raise typer.Exit(0 if all(c.passes for c in checks) else 1)


def _stop_on_a_broken_grammar(json_out: bool) -> None:
    """A grammar package that does not load stops every command that maps parts, the other
    checks' among them: say which, alone, and exit 1."""
    broken = problems()
    if not broken:
        return
    hint = "reinstall CodeFleet (`uv sync`, or `pip install --force-reinstall codefleet`)"
    if json_out:
        print_json([{"name": "grammars", "ok": False, "detail": "; ".join(broken), "hint": hint}])
    else:
        for problem in broken:
            console.print(
                Text(" FAIL ", style="bold white on red") + Text(f" grammars    {problem}")
            )
        console.print(Text(f"        → {hint}", style="dim"))
    raise typer.Exit(1)


def run_checks(settings: Settings, graph: Path | None, clone: Path | None = None) -> list[Check]:
    """Every check; a server that answers is also asked what a runner here needs of it
    (with `clone`: a runner in a clone, which has no tree of its own to check)."""
    from codefleet.cli.start import doctor_checks as local  # after the grammars (doctor)
    from codefleet.cli.start.doctor_server import server_checks

    found = find_graph(graph)
    port = local.check_port(settings)
    return [
        local.check_python(),
        local.check_grammars(),
        port,
        *(server_checks(settings, clone) if port.name == "server" and port.ok else []),
        *([] if clone is not None else [local.check_workdir(settings)]),
        local.check_graph(found, settings),
        local.check_programs(found, settings),
        local.check_cli(),
        local.check_key(),
        local.check_shell(settings),
        local.check_views(settings),
    ]
