"""The `codefleet` command line: the Typer app and the modules that register its commands.

Each module of `codefleet.cli` owns one area and registers its commands on the shared
`app` (see `cli.common`) when imported, under one of the help panels named
there; adding an area is one line in `COMMAND_MODULES`. Every setting is a
`CODEFLEET_*` environment variable and a flag.
"""

from __future__ import annotations

import importlib
from typing import Annotated

import typer

import codefleet
from codefleet.cli.common import app

# One line per area, in the order `codefleet --help` lists them within a panel.
COMMAND_MODULES = (
    "start.init",  # init
    "start.demo",  # demo
    "start.doctor",  # doctor
    "run.serve",  # serve
    "run.load",  # load
    "start.plancmds",  # graph check, plan
    "run.fleetcmds",  # run, runner
    "operate.watch",  # watch
    "operate.taskcmds",  # tasks, cancel, retry, reset
    "operate.limitcmds",  # resume, budget
    "operate.landingcmds",  # landing [resume]
    "operate.runnercmds",  # runners
    "run.join",  # join, leave, release, hook
    "results.reviewcmds",  # commit, report
    "results.statscmds",  # stats
    "results.runs",  # runs
)
for _module in COMMAND_MODULES:
    importlib.import_module(f"codefleet.cli.{_module}")

__all__ = ["app"]


def _print_version(given: bool) -> None:
    if given:
        typer.echo(f"codefleet {codefleet.__version__}")  # read on use: importlib.metadata is slow
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="Print the version and exit.", is_eager=True, callback=_print_version
        ),
    ] = False,
) -> None:
    """CodeFleet: several Claude Code agents edit ONE working tree at once, and a per-file lease refuses any write that would collide."""


if __name__ == "__main__":
    app()
