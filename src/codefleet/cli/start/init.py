"""`codefleet init`: a starter `codefleet.yaml` for the repository the current directory is in.

The file goes in the tree's root (`statedir.tree_root`: the git repository's root, or
the tree CodeFleet already serves), which is where `serve`, `load` and `run` look;
from a subdirectory, `init` says which directory that is and why.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from codefleet.api.graphfile import DEFAULT_GRAPH, GraphError, load_graph
from codefleet.cli.common import START, app, fail
from codefleet.cli.output import console
from codefleet.cli.start.starter import (
    EXAMPLE_TASK_IDS,
    find_checks,
    starter_graph,
    starter_model_script,
    starter_script,
)
from codefleet.statedir import tree_root

if TYPE_CHECKING:
    from codefleet.cli.start.starter import FoundCheck

__all__ = ["init"]

SCRIPT_FILE = "codefleet.script.yaml"
MODEL_FILE = "codefleet.model.yaml"


@app.command(rich_help_panel=START)
def init(
    scripts: Annotated[
        bool,
        typer.Option(
            "--scripts",
            help=f"Also write {SCRIPT_FILE} and {MODEL_FILE}: the example tasks played by "
            "scripted agents (--dry-run) and by the scripted model (--offline), to try the "
            "plumbing with no key.",
        ),
    ] = False,
    force: Annotated[
        bool,
        typer.Option("--force", help="Overwrite files that exist (without it, they are kept)."),
    ] = False,
) -> None:
    """Write a starter codefleet.yaml at the repository's root: its checks, two example tasks."""
    root, why = tree_root(Path.cwd())
    if root != Path.cwd().absolute():
        _say(f"the tree is {root} ({why}; you are in {Path.cwd()}): the files go there")
    files = [DEFAULT_GRAPH, *((SCRIPT_FILE, MODEL_FILE) if scripts else ())]
    kept = [] if force else [name for name in files if (root / name).exists()]
    if kept == files:
        which = (
            f"{kept[0]} already exists" if len(kept) == 1 else f"{', '.join(kept)} already exist"
        )
        raise fail(f"{which} here, in {root}; pass --force to overwrite")
    checks = find_checks(root)
    makers = {
        DEFAULT_GRAPH: starter_graph,
        SCRIPT_FILE: starter_script,
        MODEL_FILE: starter_model_script,
    }
    for name in files:
        if name not in kept:
            (root / name).write_text(makers[name](root, checks), encoding="utf-8")
    try:
        graph = load_graph(root / DEFAULT_GRAPH)  # what init writes must load
    except GraphError as err:
        raise fail(f"{DEFAULT_GRAPH} does not load: {err}") from None
    _report(root, checks, scripts, kept)
    unscripted = [spec["id"] for spec in graph if spec["id"] not in EXAMPLE_TASK_IDS]
    if scripts and unscripted:
        _say(
            f"note: the scripts play the example tasks {', '.join(EXAMPLE_TASK_IDS)}; "
            f"{DEFAULT_GRAPH}'s tasks {', '.join(unscripted)} have no script: add their steps "
            f"to {SCRIPT_FILE} (the format: codefleet run --help)"
        )


def _say(text: str) -> None:
    console.print(text, markup=False, highlight=False)


def _report(root: Path, checks: list[FoundCheck], scripts: bool, kept: list[str]) -> None:
    """What was written, what was kept as it was, and the next commands."""
    for name in kept:
        _say(f"kept {name} (it exists; --force overwrites it)")
    if DEFAULT_GRAPH not in kept:
        _say(f"wrote {DEFAULT_GRAPH} in {root}: 2 example tasks (T1, T2) to replace with yours")
        for check in checks:
            _say(f"  check {check.name}: {check.command}   (from {check.source})")
        if not checks:
            _say("  no test command found: name your checks under `checks:`")
    written = [name for name in (SCRIPT_FILE, MODEL_FILE) if scripts and name not in kept]
    if written:
        _say(f"wrote {' and '.join(written)}: the example tasks, scripted (no key needed)")
    if not (root / ".git").exists():
        _say(
            "note: this is not a git repository; `git init` and commit first, so you can "
            "review and undo what the agents change"
        )
    run = f"codefleet run --dry-run --script {SCRIPT_FILE}" if scripts else "codefleet run"
    _say("next:")
    _say(f"  codefleet graph check   # {DEFAULT_GRAPH}'s critical path and overlaps; nothing spent")
    _say("  codefleet serve &       # the coordination server for this tree; leave it running")
    _say(
        f"  {run}   # loads {DEFAULT_GRAPH}, runs it, prints the verdict; `codefleet watch` shows it live"
    )
