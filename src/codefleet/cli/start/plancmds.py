"""Planning commands: `graph check FILE` and `plan GOAL` (registered on the shared app).

`graph check` needs no server and no model: it loads the graph with the
loader `load` uses, checks its scope paths against the tree, and prints the
analysis (exit 1 on errors). Where the tree's server runs, the tasks that
succeeded there are left out of the overlaps (their leases are gone). `plan` runs one read-only Claude session over
the tree until it answers a graph that passes the same check (see `planner`).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from codefleet.api.graphfile import DEFAULT_GRAPH, GraphError, find_graph, leases_line, load_graph
from codefleet.cli.common import (
    RUN,
    JsonOpt,
    ModelOpt,
    RunDirOpt,
    ServerOpt,
    TokenOpt,
    WorkdirOpt,
    app,
    call_server,
    fail,
    make_client,
    print_json,
    settings_from,
)
from codefleet.cli.helptext import CliTyper
from codefleet.cli.output import console, err_console
from codefleet.cli.settingopts import option
from codefleet.planning.analysistext import print_analysis
from codefleet.planning.check import check_graph, tree_for
from codefleet.planning.planner import PlanFailed, plan_file
from codefleet.planning.plansession import PlanRun, run_plan
from codefleet.session.credentials import credentials_problem
from codefleet.wording import cost_text

if TYPE_CHECKING:
    from codefleet.config import Settings
    from codefleet.planning.answer import Verdict
    from codefleet.planning.planner import Plan

__all__ = ["graph_app", "plan"]

graph_app = CliTyper(help="Check a task graph before it runs.", no_args_is_help=True)
app.add_typer(graph_app, name="graph", rich_help_panel=RUN)

RunnersOpt = Annotated[
    int,
    typer.Option("--runners", min=1, max=256, help="Runners to predict the parallelism for."),
]


@graph_app.command("check")
def check(
    graph: Annotated[
        Path | None,
        typer.Argument(help="Task graph YAML (default: ./codefleet.yaml; see codefleet init)."),
    ] = None,
    workdir: WorkdirOpt = None,
    runners: RunnersOpt = 3,
    json_out: JsonOpt = False,
) -> None:
    """Analyse a task graph: critical path, width, parallelism, overlaps, hotspots, bad paths.

    No model, and no server needed: where this tree's server runs, tasks that succeeded
    there are left out of the overlaps. Exit 1 when the graph has errors, 0 otherwise.
    """
    given = find_graph(graph)
    if given is None:
        raise fail(f"no graph given and no {DEFAULT_GRAPH} here: `codefleet init` writes one")
    graph = given
    settings = settings_from(find_server=False, workdir=workdir)
    if not settings.workdir.is_dir():
        raise fail(f"working tree {settings.workdir} does not exist; set --workdir")
    try:
        tasks = load_graph(graph)
    except GraphError as err:
        if json_out:
            print_json({"ok": False, "errors": [{"code": "invalid_graph", "message": str(err)}]})
            raise typer.Exit(1) from None
        raise fail(str(err)) from None
    tree = tree_for(settings.workdir, settings.db, settings.run_dir)
    analysis = check_graph(tasks, tree, runners, _succeeded_here(settings))
    integration = settings.integration or tasks.integration  # as `run` sets it
    leases = leases_line(tasks, settings.lease_granularity, integration)
    if json_out:
        where = {"file": str(graph), "workdir": str(settings.workdir.resolve()), "leases": leases}
        print_json({**where, **analysis.to_json()})
    else:
        print_analysis(console, analysis, f"{graph} · tree {settings.workdir.resolve()}", leases)
    if not analysis.ok:
        raise typer.Exit(1)


def _succeeded_here(settings: Settings) -> frozenset[str]:
    """The ids of the tasks that succeeded on this tree's running server (none when no
    server runs or it does not answer): their scopes are free again."""
    import asyncio

    from codefleet.api.client import ApiError, ServerUnavailable, UntrustedServer
    from codefleet.api.treeserver import NotThisTree, tree_server
    from codefleet.errors import Unauthorized

    try:
        record = tree_server(settings.workdir)
    except NotThisTree:
        return frozenset()
    if record is None:
        return frozenset()

    async def ask() -> list[dict[str, object]]:
        async with make_client(settings.model_copy(update={"server_url": record.url})) as client:
            return await client.tasks(status="succeeded")

    try:
        return frozenset(str(t["id"]) for t in asyncio.run(ask()))
    except (ApiError, ServerUnavailable, UntrustedServer, Unauthorized, OSError):
        return frozenset()  # the check goes on without the server's state


@app.command(rich_help_panel=RUN)
def plan(
    goal: Annotated[str, typer.Argument(help="What the fleet should achieve, in plain words.")],
    output: Annotated[
        Path, typer.Option("--output", "-o", help="Where to write the graph YAML.")
    ] = Path("tasks.yaml"),
    tasks: Annotated[
        int | None, typer.Option("--tasks", min=1, max=200, help="About how many tasks to plan.")
    ] = None,
    load_it: Annotated[
        bool, typer.Option("--load", help="Post the graph to the server once it is written.")
    ] = False,
    force: Annotated[bool, typer.Option("--force", help="Overwrite OUTPUT if it exists.")] = False,
    offline: Annotated[
        bool,
        typer.Option(
            "--offline",
            help="Plan for a fresh copy of the demo repository with the built-in scripted model: "
            "no key, nothing spent.",
        ),
    ] = False,
    workdir: WorkdirOpt = None,
    runners: RunnersOpt = 3,
    model: ModelOpt = None,
    max_turns: Annotated[int | None, option("max_turns", help="Turn cap per answer")] = None,
    max_budget_usd: Annotated[
        float | None,
        option("task_budget_usd", "--max-budget-usd", help="Spend cap of the session, USD"),
    ] = None,
    run_dir: RunDirOpt = None,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Plan a task graph for GOAL with one read-only Claude session, check it, write it.

    The session reads the tree (Read, Glob, Grep; nothing else) and answers one YAML
    graph; the errors of graph check go back to it, at most twice. Exit 1 if no graph passes.
    """
    from codefleet.cli.start.demo_run import examples_dir  # on use: it brings the server

    if offline and workdir is not None:
        raise fail("--offline plans for the demo repository; drop --workdir")
    settings = settings_from(
        workdir=workdir,
        model=model,
        max_turns=max_turns,
        task_budget_usd=max_budget_usd,
        run_dir=run_dir,
        server_url=server,
        token=token,
    )
    _refuse_before_spending(settings, output, force, offline)
    if offline:
        settings = _in_a_demo_copy(settings)
    request = PlanRun(
        goal,
        tree_for(settings.workdir, settings.db, settings.run_dir),
        tasks,
        runners,
        examples_dir() / "plan-model.yaml" if offline else None,
    )
    result, record = _plan_session(settings, request, offline)
    _write_plan(settings, request.goal, (result, record), output, offline, load_it)


def _plan_session(settings: Settings, request: PlanRun, offline: bool) -> tuple[Plan, Path]:
    """`plan`'s session until a graph passes the check; its failure said and exit 1."""
    mode = "offline" if offline else "live"
    console.print(f"[bold]planning[/] in {escape(str(request.tree.root))} ({mode})", markup=True)
    try:
        return asyncio.run(run_plan(settings, request, _say_feedback))
    except PlanFailed as failed:
        for error in failed.errors:
            err_console.print(f"  {error}", markup=False, highlight=False)
        cost = cost_text(failed.cost_usd, offline)
        raise fail(f"{failed} (nothing written; {cost if offline else cost + ' spent'})") from None


def _write_plan(
    settings: Settings,
    goal: str,
    planned: tuple[Plan, Path],
    output: Path,
    offline: bool,
    load_it: bool,
) -> None:
    """Write the planned graph to `output`, print its analysis; with `--load`, post it."""
    result, record = planned
    text = plan_file(result, goal, datetime.now(UTC), str(output), simulated=offline)
    output.write_text(text, encoding="utf-8")
    console.print(
        f"wrote {output} · {len(result.verdict.graph or [])} task(s) · "
        f"{cost_text(result.cost_usd, offline)} · {len(result.exchanges)} answer(s) · "
        f"record {record}"
    )
    assert result.verdict.analysis is not None and result.verdict.graph is not None
    print_analysis(console, result.verdict.analysis, str(output))
    if load_it:
        graph = result.verdict.graph
        created = call_server(settings, lambda c: c.create_tasks(graph, graph.checks))
        console.print(f"loaded: created {len(created)} task(s): {' '.join(created)}")


def _in_a_demo_copy(settings: Settings) -> Settings:
    """The settings of an offline plan: a fresh copy of the demo repository, made as `demo`
    makes its workspace, so nothing is written into the installation (whose files uv
    installs as hard links, which the tree refuses)."""
    from codefleet.cli.start.demo_run import make_workspace  # on use: it brings the server

    workspace = make_workspace(settings.run_dir)
    return settings.model_copy(
        update={"workdir": workspace / "tree", "db": workspace / "codefleet.db"}
    )


def _refuse_before_spending(settings: Settings, output: Path, force: bool, offline: bool) -> None:
    """Everything that would make the plan fail at the end, checked before it costs anything."""
    if not settings.workdir.is_dir():
        raise fail(f"working tree {settings.workdir} does not exist; set --workdir")
    if output.exists() and not force:
        raise fail(f"{output} exists; choose another --output or pass --force")
    if not output.parent.is_dir():
        raise fail(f"cannot write {output}: {output.parent} is not a directory")
    if not offline:
        problem = credentials_problem()
        if problem:
            raise fail(f"{problem} (or try `codefleet plan --offline`)")


def _say_feedback(answer: int, verdict: Verdict) -> None:
    console.print(
        f"answer {answer} has {len(verdict.errors)} error(s); sending them back:", style="yellow"
    )
    for error in verdict.errors:
        console.print(f"  {error}", markup=False, highlight=False)
