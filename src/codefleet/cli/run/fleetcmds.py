"""Fleet commands: `run` (N runners in this process) and `runner` (one, as its own process).

`run` starts its runners as asyncio tasks in this process (fast to start,
one process to stop); `runner --name` runs ONE runner as its own process, so
runners can be started, killed and restarted one by one, or on another host.
"""

from __future__ import annotations

import asyncio
import dataclasses
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from codefleet.api.client import (
    FleetClient,
    UntrustedServer,
)
from codefleet.api.graphfile import GraphError, find_graph, load_graph
from codefleet.cli.common import (
    MODEL_SCRIPT_HELP,
    RUN,
    SCRIPT_HELP,
    CheckOpt,
    JsonOpt,
    MaxCostHardOpt,
    MaxCostOpt,
    app,
    fail,
    parse_check_options,
    settings_of,
    unauthorized_message,
)
from codefleet.cli.operate.again import RunFlags
from codefleet.cli.output import console
from codefleet.cli.results.reviewcmds import BranchOpt, CommitOpt, committer_for
from codefleet.cli.run.agentchoice import AgentChoice, AgentSetupError, choose_agents
from codefleet.cli.run.fleetopts import FleetFlags, with_fleet_flags
from codefleet.cli.run.fleetrun import RunPlan, execute
from codefleet.cli.run.runprep import GraphFile
from codefleet.cli.run.shellopts import (
    fleet_shell,
)
from codefleet.cli.settingopts import option
from codefleet.config import DEFAULT_DB, DEFAULT_RUN_DIR
from codefleet.errors import DomainError, Unauthorized
from codefleet.fleet.landingworker import LandingOptions
from codefleet.fleet.local import start_landing
from codefleet.fleet.runner import CannotContinue, Runner, RunnerOptions
from codefleet.statedir import prepare_dirs

if TYPE_CHECKING:
    from codefleet.cli.run.agentchoice import Agents
    from codefleet.config import Settings
    from codefleet.fleet.executor import Executor

__all__ = ["run", "runner", "runner_options"]


def _agents(choice: AgentChoice, settings: Settings) -> Agents:
    try:
        return choose_agents(choice, settings)
    except AgentSetupError as err:
        raise fail(str(err)) from None


@app.command(rich_help_panel=RUN, epilog=f"{SCRIPT_HELP}\n{MODEL_SCRIPT_HELP}")
@with_fleet_flags
def runner(
    ctx: typer.Context,
    name: Annotated[
        str, typer.Option("--name", help="This runner's unique slot name, e.g. runner-1.")
    ],
    flags: FleetFlags,
    exit_when_drained: Annotated[
        bool, typer.Option(help="Exit once no task is pending or running.")
    ] = False,
    replace: Annotated[
        bool,
        typer.Option(
            "--replace",
            help="Take the name over even if a live runner of another process holds it "
            "(that runner is fenced).",
        ),
    ] = False,
    clone: Annotated[
        Path | None,
        typer.Option(
            "--clone",
            help="Work in this runner's own clone of the server's landed line, kept in this "
            "directory (absent or empty: it is cloned; a clone this runner made before: "
            "reused), not in a mount of the tree: for a host that shares no disk with the "
            "server. Its files reach the server over the wire; it runs no landing worker.",
        ),
    ] = None,
    line: Annotated[
        str | None,
        typer.Option(
            "--line",
            help="With --clone: fetch the landed line from this git remote, where the server "
            "pushes it (serve --line-remote), instead of from the server; git's own "
            "credentials for it apply.",
        ),
    ] = None,
    landing_only: Annotated[
        bool,
        typer.Option(
            "--landing-only",
            help="Run only a landing worker, no agent: landing checks in the server's tree, "
            "for a fleet whose runners all work in clones (run it where the tree is).",
        ),
    ] = False,
) -> None:
    """Run ONE runner as its own process until interrupted (or the fleet drains)."""
    if line is not None and clone is None:
        raise fail("--line goes with --clone: it is where a clone fetches the landed line")
    if clone is not None and landing_only:
        raise fail(
            "--clone and --landing-only do not go together: a landing worker runs in the tree"
        )
    settings = settings_of(ctx.params, server_url=flags.server)
    if clone is not None:
        settings = _in_clone(settings, clone)
    # a landing worker runs checks, no agent: it needs neither a key nor a script
    executor = None if landing_only else _agents(flags.agents(), settings).executor
    options = dataclasses.replace(
        runner_options(settings, flags.agent, flags.task_timeout),
        name=name,
        poll_wait=settings.poll_interval,
        exit_when_drained=exit_when_drained,
        replace=replace,
        clone=clone is not None,
        line=line,
    )
    _run_one(settings, executor, options, landing_only=landing_only)


def _in_clone(settings: Settings, clone: Path) -> Settings:
    """`runner --clone DIR`'s settings: DIR is the tree its agents work in, its records there."""
    if clone.exists() and not clone.is_dir():
        raise fail(f"--clone {clone} is a file: give an absent or empty directory")
    root = clone.absolute()
    root.mkdir(parents=True, exist_ok=True)
    return settings.model_copy(
        update={"workdir": root, "run_dir": root / DEFAULT_RUN_DIR, "db": root / DEFAULT_DB}
    )


def _run_one(
    settings: Settings,
    executor: Executor | None,
    options: RunnerOptions,
    *,
    landing_only: bool = False,
) -> None:
    """`runner`'s steps: run the runner and its landing worker here until they end."""
    name = options.name
    if not settings.workdir.is_dir():
        raise fail(f"working tree {settings.workdir} does not exist")
    where = "clone" if options.clone else "landing worker in tree" if landing_only else "tree"
    console.print(
        f"{name}: {where} {settings.workdir.resolve()} · server {settings.url}", markup=False
    )
    if not landing_only:
        console.print(f"{name}: leases {_runner_leases(options)}", markup=False)
    prepare_dirs(settings.run_dir)
    try:
        asyncio.run(_one_runner(settings, executor, options, landing_only))
    except Unauthorized:  # a runner keeps retrying an absent server, never a wrong token
        raise fail(unauthorized_message(settings)) from None
    except (CannotContinue, DomainError, UntrustedServer) as err:  # for good: say why, exit 1
        raise fail(f"{name} stopped: {err}") from None


def _runner_leases(options: RunnerOptions) -> str:
    """What this runner's writes lease, as far as it decides (decisions 0146, 0164)."""
    from codefleet.models import Granularity

    own = options.lease_granularity
    if options.clone:
        return "whole files (a clone delivers whole files)"
    if own is None or own is Granularity.AUTO:
        return (
            "as each task's assignment says (a task's lease_granularity, else the server's; "
            "the server resolves auto: by part where an integration check is set)"
        )
    return f"{own.stated(None)}, this runner's --lease-granularity"


async def _one_runner(
    settings: Settings,
    executor: Executor | None,
    options: RunnerOptions,
    landing_only: bool = False,
) -> None:
    """The runner and its landing worker, until SIGINT/SIGTERM or the runner ends. A runner
    in a clone has no landing worker (landing checks run in the tree); `landing_only` has
    no runner."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    passes: dict[tuple[str, str], int] = {}  # the runner's passes, for its worker (0177)
    options = dataclasses.replace(options, check_passes=passes)
    lander = LandingOptions(
        f"landing-{options.name}", options.check_timeout, exclude=options.protected,
        view_dir=options.check_dir, locks=options.locks(), passed={}, attempt_passes=passes,
    )  # fmt: skip

    def connect() -> FleetClient:
        return FleetClient(settings.url, token=settings.token)

    # a clone has no tree to check landings in: the server's tree has its own worker
    landing = None if options.clone else start_landing(connect, options, lander, stop)
    try:
        if executor is None:  # --landing-only
            await stop.wait()
            return
        async with connect() as client:
            await Runner(client, executor, options).run(stop)
    finally:
        stop.set()  # the runner ended (drained, refused): so does its landing worker
        if landing is not None:
            await asyncio.gather(landing, return_exceptions=True)


@app.command(rich_help_panel=RUN, epilog=f"{SCRIPT_HELP}\n{MODEL_SCRIPT_HELP}")
@with_fleet_flags
def run(
    ctx: typer.Context,
    *,
    runners: Annotated[int | None, option("runners")] = None,
    graph: Annotated[
        Path | None,
        typer.Option(
            "--graph",
            help="Task graph whose tasks not yet on the server are loaded first (default: "
            "./codefleet.yaml if there is one).",
        ),
    ] = None,
    no_graph: Annotated[
        bool, typer.Option("--no-graph", help="Run the server's tasks; load no graph file.")
    ] = False,
    verify: Annotated[
        str | None,
        typer.Option(
            "--verify",
            help="Shell command run in the tree after the drain; its exit code decides. A "
            "failure is bisected over the landings to name the first failing task.",
        ),
    ] = None,
    check: CheckOpt = None,
    integration: Annotated[str | None, option("integration")] = None,
    flags: FleetFlags,
    max_cost: MaxCostOpt = None,
    max_cost_hard: MaxCostHardOpt = None,
    no_questions: Annotated[
        bool,
        typer.Option(
            "--no-questions",
            help="Unattended: an agent's ask_operator is answered at once with 'No answer: use "
            "your best judgment'.",
        ),
    ] = False,
    commit: CommitOpt = False,
    branch: BranchOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Start N runners against a running server, wait for the graph to drain, print a verdict.

    Loads the tasks of ./codefleet.yaml (or --graph) not yet on the server first; a loaded
    one that has not started takes the file's edits, one that has run is named (a scripted
    run checks its script against the graph before it loads anything). Exits 0 only if every task succeeded (and --verify passed,
    and with --commit every success was committed); Ctrl-C (SIGINT) or SIGTERM stops the
    runners, whose attempts are requeued uncharged, and exits 130 or 143. A server that
    goes away is waited for up to 120 s. Each --check is defined on the server first, for the agents' run_check tool
    and for the tasks' verify: key. A check whose command the graph changed since the
    server had it is applied only with your yes (asked on a terminal; without one the run
    is refused, and --check NAME=CMD says yes); the graph file is protected from agents. Without a key: --dry-run --script FILE or
    --offline --model-script FILE. --max-cost sets the fleet's budget on the server.
    """
    settings = settings_of(ctx.params, server_url=flags.server)
    checks = parse_check_options(check)
    # refuses --shell without a sandbox
    options = runner_options(settings, flags.agent, flags.task_timeout, no_questions=no_questions)
    graph_file = None if no_graph else _graph_file(graph)
    agents = _agents(flags.agents(), settings)
    committer = committer_for(settings.workdir, branch) if commit else None
    plan = RunPlan(
        settings=settings,
        agents=agents,
        agent=flags.agent,
        graph_file=graph_file,
        checks=checks,
        committer=committer,
        runner=options,
        verify=verify,
        json_out=json_out,
        flags=RunFlags(agents.mode, flags.script or flags.model_script, graph),
    )
    raise typer.Exit(execute(plan))


def runner_options(
    settings: Settings, agent: str, task_timeout: float | None, *, no_questions: bool = False
) -> RunnerOptions:
    """The options every runner of `run` and `runner` takes from the settings (refuses
    `--shell` with no sandbox); `runner` names its one, `run_fleet` each of its own.

    The runner's `task_timeout` is the flag only: without it the server's applies.
    """
    return RunnerOptions(
        name="runner",
        workdir=settings.workdir,
        run_dir=settings.run_dir,
        agent=agent,
        task_timeout=task_timeout,
        protected=(settings.db, settings.run_dir),
        check_timeout=settings.check_timeout,
        check_dir=settings.check_dir,
        uv_lock_cache=settings.uv_lock_cache,
        resource_wait=settings.resource_wait,
        protected_names=settings.protected_names,
        reconcile_rounds=settings.reconcile_rounds,
        repair_turns=settings.repair_turns,
        no_questions=no_questions,
        # the flag (or its env variable) overrides the server's; unset, the server's applies
        lease_granularity=settings.lease_granularity
        if "lease_granularity" in settings.model_fields_set
        else None,
        **fleet_shell(settings),
    )


def _graph_file(given: Path | None) -> GraphFile | None:
    """The graph `run` loads first: --graph, else codefleet.yaml in the current directory."""
    path = find_graph(given)
    if path is None:
        return None
    try:
        return GraphFile(path, load_graph(path, standalone=False))
    except GraphError as err:
        raise fail(str(err)) from None
