"""The `codefleet` command line: the Typer app, and the table of commands it loads on use.

`COMMANDS` names each command's module (under `codefleet.cli`), its help panel and
the line `codefleet --help` shows for it, in the order the help lists them. The root
group (`LazyGroup`, Click's lazy-loading pattern) imports a command's module only
when that command runs or shows its own help; the module registers its commands on
`app` as it always did, and the group builds the one asked for from that record. So
`codefleet --help` imports no command module, and each module imports what it uses
at its top. Adding a command is its module plus one row here;
`tests/unit/test_cli_imports.py` holds the rows to the modules (decision 0169).
Every setting is a `CODEFLEET_*` environment variable and a flag.
"""

from __future__ import annotations

import importlib
import sys
from difflib import get_close_matches
from typing import Annotated, Any

import typer
import typer.main
from typer._click.core import Command, Context  # Typer's bundled Click, pinned with typer
from typer._click.exceptions import UsageError

import codefleet
from codefleet.cli.helptext import CliTyper, PanelGroup
from codefleet.statedir import UnsafeStateDir

__all__ = ["COMMANDS", "FleetTyper", "LazyGroup", "app"]

# command: (its module under codefleet.cli, its help panel, its line in `codefleet --help`),
# in the order the help lists them (`test_cli_imports` checks each row against its command).
COMMANDS: dict[str, tuple[str, str, str]] = {
    "init": (
        "start.init",
        "Start here",
        "Write a starter codefleet.yaml at the repository's root: its checks, two example tasks.",
    ),
    "demo": (
        "start.demo",
        "Start here",
        "The whole thing on a copy of the demo repo: server, fleet, the veto, a verdict.",
    ),
    "doctor": (
        "start.doctor",
        "Start here",
        "Check what makes a run fail minutes in: Python, grammars, port, tree, graph, SDK.",
    ),
    "serve": (
        "run.serve",
        "Run a fleet",
        "Run the coordination server (the one process that owns the database).",
    ),
    "load": (
        "run.load",
        "Run a fleet",
        "Post a task graph (and its checks) to the server; the batch lands whole or not at all.",
    ),
    "plan": (
        "start.plancmds",
        "Run a fleet",
        "Plan a task graph for GOAL with one read-only Claude session, check it, write it.",
    ),
    "runner": (
        "run.fleetcmds",
        "Run a fleet",
        "Run ONE runner as its own process until interrupted (or the fleet drains).",
    ),
    "run": (
        "run.fleetcmds",
        "Run a fleet",
        "Start N runners against a running server, wait for the graph to drain, print a verdict.",
    ),
    "watch": (
        "operate.watch",
        "Run a fleet",
        "Live dashboard of a running server (read-only; Ctrl-C to leave).",
    ),
    "graph": ("start.plancmds", "Run a fleet", "Check a task graph before it runs."),
    "commit": (
        "results.reviewcmds",
        "Review what the fleet did",
        "One commit per succeeded task, in the order they succeeded, on a new branch.",
    ),
    "land": (
        "results.reviewcmds",
        "Review what the fleet did",
        "Move the checked-out branch to BRANCH (or --line), whose changes are in the working tree.",
    ),
    "report": (
        "results.reviewcmds",
        "Review what the fleet did",
        "The run on one page: verdict, timing, tasks, vetoes, rollbacks, failed verifies, cost, "
        "branch.",
    ),
    "stats": (
        "results.statscmds",
        "Review what the fleet did",
        "Collisions and their cost per file and per task; parallelism; makespan vs critical path.",
    ),
    "tasks": (
        "operate.taskcmds",
        "Inspect and operate",
        "List the tasks (or one task with its dependencies, file changes and patch size).",
    ),
    "cancel": (
        "operate.taskcmds",
        "Inspect and operate",
        "Cancel tasks: a running attempt is stopped and rolled back; dependents are blocked.",
    ),
    "say": (
        "operate.taskcmds",
        "Inspect and operate",
        "Tell a task something: a running session gets it at its next turn boundary, a task "
        'that is not running gets it in its next attempt\'s prompt ("Notes from the operator").',
    ),
    "questions": (
        "operate.taskcmds",
        "Inspect and operate",
        "List the agents' open questions (ask_operator), oldest first, with how to answer.",
    ),
    "answer": (
        "operate.taskcmds",
        "Inspect and operate",
        "Answer a task's open question; the waiting agent gets the answer and goes on.",
    ),
    "retry": (
        "operate.taskcmds",
        "Inspect and operate",
        "Start failed or cancelled tasks over; their blocked dependents follow.",
    ),
    "reset": (
        "operate.taskcmds",
        "Inspect and operate",
        "Delete every task, agent, lease and event. Needs CODEFLEET_ALLOW_RESET=1.",
    ),
    "resume": (
        "operate.limitcmds",
        "Inspect and operate",
        "Lift the fleet's usage-limit pause now: the server assigns work again at once.",
    ),
    "budget": (
        "operate.limitcmds",
        "Inspect and operate",
        "Show the fleet's budget, or set it live (a higher cap resumes a stopped fleet).",
    ),
    "landing": (
        "operate.landingcmds",
        "Inspect and operate",
        "Show the landing queue (what waits to land, the check running, a halt), or resume.",
    ),
    "runners": (
        "operate.runnercmds",
        "Inspect and operate",
        "Show the runners: where each works (tree or clone), its host, its clone's landed head.",
    ),
    "runs": (
        "results.runs",
        "Inspect and operate",
        "List the run directory (demo workspaces, runner records) with sizes; --prune old demos.",
    ),
    "join": (
        "run.join",
        "Work alongside the fleet",
        "Make every Claude Code session started in this tree take and respect leases.",
    ),
    "leave": (
        "run.join",
        "Work alongside the fleet",
        "Remove exactly the hooks codefleet join (--agent) added to this tree.",
    ),
    "hook": (
        "run.join",
        "Work alongside the fleet",
        "The Claude Code command hook codefleet join installs: hook JSON on stdin, decision on "
        "stdout.",
    ),
    "hold": (
        "run.join",
        "Work alongside the fleet",
        "Hold named resources as a person: no fleet task naming one runs until you release it.",
    ),
    "release": (
        "run.join",
        "Work alongside the fleet",
        "Give back what a person holds: named resources, or a Claude Code session's file leases.",
    ),
}


class LazyGroup(PanelGroup):
    """The root group: lists `COMMANDS` from the table and imports a command's module only
    when that command is asked for (Click's documented lazy-loading pattern)."""

    def list_commands(self, ctx: Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            self.commands[cmd_name] = load_command(cmd_name)
        return self.commands.get(cmd_name)

    def help_rows(self, ctx: Context) -> list[tuple[str, str, str]]:
        """(name, panel, line) of every command, from the table: no module is imported."""
        return [(name, panel, line) for name, (_, panel, line) in COMMANDS.items()]

    def resolve_command(
        self, ctx: Context, args: list[str]
    ) -> tuple[str | None, Command | None, list[str]]:
        """Typer's lookup, with "Did you mean" drawn from the table, not the loaded commands."""
        try:
            return self._click_resolve_command(ctx, args)
        except UsageError as err:
            matches = get_close_matches(args[0], COMMANDS) if args else []
            if matches:
                names = ", ".join(f"{m!r}" for m in matches)
                err.message = f"{err.message.rstrip('.')}. Did you mean {names}?"
            raise


def load_command(name: str) -> Command:
    """Import `name`'s module (it registers its commands on `app`) and build that command."""
    importlib.import_module(f"codefleet.cli.{COMMANDS[name][0]}")
    for info in app.registered_commands:
        if typer.main.get_command_name(info.name or info.callback.__name__) == name:  # type: ignore[union-attr]
            return typer.main.get_command_from_info(
                info,
                pretty_exceptions_short=app.pretty_exceptions_short,
                rich_markup_mode=app.rich_markup_mode,
            )
    for group in app.registered_groups:
        if group.name == name:
            return typer.main.get_group_from_info(
                group,
                pretty_exceptions_short=app.pretty_exceptions_short,
                suggest_commands=app.suggest_commands,
                rich_markup_mode=app.rich_markup_mode,
            )
    raise LookupError(f"codefleet.cli.{COMMANDS[name][0]} registers no command {name!r}")


class FleetTyper(CliTyper):
    """The command line: a state directory CodeFleet will not use (`statedir.UnsafeStateDir`,
    met wherever a command first opens `.codefleet/`) ends any command with its one line; so
    does an answer read as CodeFleet's that is not (a `KeyError` or `TypeError` out of a
    command: a server of another kind, or a bug), never a traceback."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().__call__(*args, **kwargs)
        except UnsafeStateDir as err:
            _fail(str(err))
        except (KeyError, TypeError) as err:
            _fail(
                f"an answer had a shape no CodeFleet server sends ({type(err).__name__}: {err}): "
                "check --server / CODEFLEET_SERVER_URL; if it is CodeFleet's, please report this"
            )
        sys.exit(1)


def _fail(message: str) -> None:
    from codefleet.cli.output import print_error  # on an error only: Rich loads with it

    print_error(message)


# Plain help (`cli.helptext`): paragraphs reflow to the terminal's width, no Rich.
app = FleetTyper(
    cls=LazyGroup, no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False
)


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
