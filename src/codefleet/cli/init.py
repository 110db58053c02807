"""`codefleet init`: a starter `codefleet.yaml` for the repository in the current directory."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from codefleet.cli.common import START, app, fail

if TYPE_CHECKING:
    from codefleet.cli.starter import FoundCheck

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
    force: Annotated[bool, typer.Option("--force", help="Overwrite files that exist.")] = False,
) -> None:
    """Write a starter codefleet.yaml here: the checks found in the repository, two example tasks."""
    from codefleet.api.graph import DEFAULT_GRAPH, GraphError, load_graph
    from codefleet.cli.starter import (
        find_checks,
        starter_graph,
        starter_model_script,
        starter_script,
    )

    root = Path.cwd()
    files = [DEFAULT_GRAPH, *((SCRIPT_FILE, MODEL_FILE) if scripts else ())]
    existing = [name for name in files if (root / name).exists()]
    if existing and not force:
        raise fail(f"{', '.join(existing)} already exist(s) here; pass --force to overwrite")
    checks = find_checks(root)
    texts = {DEFAULT_GRAPH: starter_graph(root, checks)}
    if scripts:
        texts[SCRIPT_FILE] = starter_script(root, checks)
        texts[MODEL_FILE] = starter_model_script(root, checks)
    for name, text in texts.items():
        (root / name).write_text(text, encoding="utf-8")
    try:
        load_graph(root / DEFAULT_GRAPH)  # what init writes must load
    except GraphError as err:  # pragma: no cover - a bug in the template, not the user's input
        raise fail(f"the starter graph does not load: {err}") from None
    _report(root, checks, scripts)


def _say(text: str) -> None:
    from codefleet.cli.output import console

    console.print(text, markup=False, highlight=False)


def _report(root: Path, checks: list[FoundCheck], scripts: bool) -> None:
    from codefleet.api.graph import DEFAULT_GRAPH

    _say(f"wrote {DEFAULT_GRAPH} in {root}: 2 example tasks (T1, T2) to replace with yours")
    for check in checks:
        _say(f"  check {check.name}: {check.command}   (from {check.source})")
    if not checks:
        _say("  no test command found: name your checks under `checks:`")
    if scripts:
        _say(f"wrote {SCRIPT_FILE} and {MODEL_FILE}: the example tasks, scripted (no key needed)")
    if not (root / ".git").exists():
        _say("note: this is not a git repository; `git init` and commit first, so you can "
             "review and undo what the agents change")  # fmt: skip
    run = f"codefleet run --dry-run --script {SCRIPT_FILE}" if scripts else "codefleet run"
    _say("next:")
    _say("  codefleet serve &     # the coordination server for this tree; leave it running")
    _say(f"  codefleet load        # posts {DEFAULT_GRAPH} (the tasks and their checks)")
    _say(f"  {run}   # runs them, prints the verdict; `codefleet watch` shows it live")
