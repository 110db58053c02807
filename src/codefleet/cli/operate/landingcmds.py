"""`codefleet landing`: the landing queue, and `landing resume` after a halt.

A finished task lands only once its checks pass on everything landed before it
(`coord.calls.landingqueue`). `codefleet landing` shows what waits to land, the check in
progress, the integration check and any halt; `codefleet landing resume` lifts
a halt (the landed tree failed the integration check with no candidate on it:
fix the tree, then resume; the next round checks it again before anything lands).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from codefleet.cli.common import (
    OPERATE,
    JsonOpt,
    ServerOpt,
    TokenOpt,
    app,
    call_server,
    fail,
    print_json,
    settings_from,
)
from codefleet.cli.output import console
from codefleet.failuretext import failure_excerpt
from codefleet.wording import halt_cause

__all__ = ["landing", "landing_lines", "resume_line"]

ACTIONS = ("resume",)
OUTPUT_CHARS = 1_200  # of the halting check's output: its failing lines, then its tail


@app.command(rich_help_panel=OPERATE)
def landing(
    action: Annotated[
        str | None,
        typer.Argument(help="resume: lift a landing halt. Without it: show the queue."),
    ] = None,
    server: ServerOpt = None,
    token: TokenOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Show the landing queue (what waits to land, the check running, a halt), or resume."""
    if action is not None and action not in ACTIONS:
        raise fail(f"unknown action {action!r}: `codefleet landing` or `codefleet landing resume`")
    settings = settings_from(server_url=server, token=token)
    if action == "resume":
        answer = call_server(settings, lambda c: c.landing_resume())
        if json_out:
            print_json(answer)
        else:
            console.print(resume_line(answer), markup=False)
        return
    state = call_server(settings, lambda c: c.landing())
    if json_out:
        print_json(state)
        return
    named = None if state.get("integration") else _graph_integration()
    for line in landing_lines(state, named):
        console.print(line, markup=False)


def _graph_integration() -> tuple[str, str] | None:
    """The graph file `run` would load here and the integration check it names, if any."""
    from codefleet.api.graphfile import GraphError, find_graph, load_graph

    path = find_graph(None)
    try:
        check = load_graph(path, standalone=False).integration if path else None
    except GraphError:  # `load` says what is wrong with it; here it names nothing
        return None
    return (path.name, check) if path and check else None


def resume_line(answer: dict[str, Any]) -> str:
    """What `landing resume` says (pure: tested as text)."""
    if not answer["resumed"]:
        return "landing was not halted; nothing to resume"
    return (
        "landing resumed: the next round checks the landed tree again first; the queue "
        "lands while a `codefleet run` (or a `codefleet runner`) is up"
    )


def _no_integration(named: tuple[str, str] | None) -> str:
    """What `landing` says while the server has no integration check."""
    if named is not None:
        return (
            f"integration check: none on this server yet; {named[0]} names `{named[1]}`, set "
            "when `codefleet run` or `load` reads it (until then tasks land after their own "
            "verify, if any)"
        )
    return (
        "integration check: none on this server yet (a graph's `integration:` is set when "
        "`codefleet run` or `load` reads it; until then tasks land after their own verify, "
        "if any)"
    )


def landing_lines(state: dict[str, Any], named: tuple[str, str] | None = None) -> list[str]:
    """The landing queue for a person, a few lines (pure: tested as text); `named`: the graph
    file here and the integration check it names, when the server has none yet."""
    check = state.get("integration")
    lines = [
        f"integration check: {check}" if check else _no_integration(named),
        f"landed: {state['landed']} · waiting: {len(state['queue'])} · batch up to "
        f"{state['batch']}"
        + (f" · up to {state['parallel']} steps at once" if state.get("parallel", 1) > 1 else ""),
    ]
    if state["queue"]:
        lines.append("queue: " + " → ".join(state["queue"]))
    steps = state.get("steps") or ([state["step"]] if state.get("step") else [])
    for step in steps:  # one per worker when steps run in parallel
        who = f" by {step['worker']}" if step.get("worker") else " (waiting for a worker)"
        lines.append(
            f"checking {', '.join(step['batch']) or 'the landed tree alone'} "
            f"({step['purpose']}: {', '.join(step['checks'])}){who}"
        )
    halted = state.get("halted")
    if halted:
        lines.append(
            f"HALTED: {halt_cause(halted['check'], halted.get('why'))}, with no candidate "
            f"on it (last landed: {halted.get('last_landed') or 'none'}). Fix the tree or the "
            "check, then `codefleet landing resume`."
        )
        if halted.get("output_tail"):
            excerpt = failure_excerpt(str(halted["output_tail"]), OUTPUT_CHARS)
            lines.append("output:")
            lines.extend(f"  {shown}".rstrip() for shown in excerpt.splitlines())
    return lines
