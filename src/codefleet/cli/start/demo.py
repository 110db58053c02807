"""`codefleet demo`: the whole thing on a fresh copy of the demo repository."""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Annotated

import typer

from codefleet.cli.common import START, DryRunOpt, RunDirOpt, app, fail, settings_from
from codefleet.cli.output import console
from codefleet.gcpolicy import collector_off
from codefleet.session.credentials import credentials_problem

__all__ = ["demo", "import_demo_run"]


@app.command(rich_help_panel=START)
def demo(
    dry_run: DryRunOpt = False,
    offline: Annotated[
        bool,
        typer.Option(
            "--offline",
            help="Real Claude Code sessions against the built-in scripted model: no key, no cost.",
        ),
    ] = False,
    runners: Annotated[int, typer.Option("--runners", "-n", help="How many runners.")] = 3,
    mixed: Annotated[
        bool,
        typer.Option(
            "--mixed",
            help="With --offline: a mixed fleet, Claude Code runners and one Codex runner "
            "(T4 is Codex's), the veto firing across them.",
        ),
    ] = False,
    example: Annotated[
        str,
        typer.Option(
            "--example",
            help="Which example: python (the default: five tasks, a veto, a landing repair) or "
            "typescript (two tasks add a handler each to src/router.ts side by side; "
            "--dry-run or live).",
        ),
    ] = "python",
    run_dir: RunDirOpt = None,
    commit: Annotated[
        bool,
        typer.Option(
            "--commit/--no-commit",
            help="Commit each task as it succeeds on a branch of the demo workspace's repository.",
        ),
    ] = True,
) -> None:
    """The whole thing on a copy of the demo repo: server, fleet, the veto, a verdict.

    Your checkout is never touched: the demo works in a fresh workspace under the run dir.
    """
    settings = settings_from(find_server=False, run_dir=run_dir)
    mode = "dry-run" if dry_run else "offline" if offline else "live"
    if mixed and mode != "offline":
        raise fail("--mixed goes with --offline (a live Codex runner needs OPENAI_API_KEY)")
    if mixed and runners < 2:
        raise fail("--mixed needs at least 2 runners: Claude Code ones and one Codex runner")
    problem = credentials_problem() if mode == "live" else None
    if problem:  # refused before a workspace or a server exists
        raise fail(problem)
    demo_run = import_demo_run()
    chosen = demo_run.EXAMPLES.get(example)
    if chosen is None:
        raise fail(f"--example is one of {', '.join(demo_run.EXAMPLES)}, not {example!r}")
    if mode == "offline" and chosen.model is None:
        raise fail(f"the {example} example has no scripted model for --offline: use --dry-run")
    try:
        ok = demo_run.run_demo(
            mode, settings.run_dir, runners, console, commit=commit, mixed=mixed, example=example
        )
    except NotImplementedError as err:
        raise fail(str(err)) from None
    raise typer.Exit(0 if ok else 1)


def import_demo_run() -> ModuleType:
    """`cli.start.demo_run` (the server, the client, the fleet): most of the demo's start-up.

    Imported with the collector off (`gcpolicy.collector_off`, frozen after), without pydantic.v1:
    FastAPI imports it (23 modules) only to refuse v1 models in routes, and the
    demo's server has none. A None entry makes that import fail, and FastAPI's
    check answers "not v1", as it does for a pydantic without v1 (decision
    "The demo's start-up").
    """
    sys.modules.setdefault("pydantic.v1", None)  # type: ignore[arg-type]
    with collector_off(freeze=True):
        import codefleet.cli.start.demo_run as demo_run  # on use, collector off: the server
    return demo_run
