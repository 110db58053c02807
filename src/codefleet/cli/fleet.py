"""Fleet commands: `run` (N runners in this process) and `runner` (one, as its own process).

`run` starts its runners as asyncio tasks in this process (fast to start,
one process to stop); `runner --name` runs ONE runner as its own process, so
runners can be started, killed and restarted one by one, or on another host.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from codefleet.cli.common import (
    RUN,
    SCRIPT_HELP,
    AgentOpt,
    BudgetOpt,
    CheckDirOpt,
    CheckOpt,
    CheckTimeoutOpt,
    DryRunOpt,
    JsonOpt,
    MaxCostHardOpt,
    MaxCostOpt,
    MaxTurnsOpt,
    ModelOpt,
    ModelScriptOpt,
    OfflineOpt,
    ProtectedOpt,
    ReconcileRoundsOpt,
    ResourceWaitOpt,
    RunDirOpt,
    ScriptOpt,
    ServerOpt,
    TimeoutOpt,
    TokenOpt,
    WorkdirOpt,
    app,
    call_server,
    fail,
    make_client,
    parse_check_options,
    print_json,
    settings_from,
    unauthorized_message,
)
from codefleet.cli.review import BranchOpt, CommitOpt, committer_for
from codefleet.cli.shellopts import (
    ShellMaxBytesOpt,
    ShellMaxFilesOpt,
    ShellNetworkOpt,
    ShellOpt,
    ShellUnsandboxedOpt,
    fleet_shell,
    shell_settings,
)
from codefleet.errors import DomainError, Unauthorized
from codefleet.models import AgentKind
from codefleet.statedir import prepare_dirs

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable

    from codefleet.api.client import FleetClient
    from codefleet.cli.agents import AgentChoice, Agents
    from codefleet.cli.runprep import GraphFile
    from codefleet.config import Settings
    from codefleet.ui.scopes import ScopeWatch

__all__ = ["run", "runner"]


def _agents(choice: AgentChoice, settings: Settings) -> Agents:
    from codefleet.cli.agents import AgentSetupError, choose_agents

    try:
        return choose_agents(choice, settings)
    except AgentSetupError as err:
        raise fail(str(err)) from None


@app.command(rich_help_panel=RUN, epilog=SCRIPT_HELP)
def runner(
    name: Annotated[
        str, typer.Option("--name", help="This runner's unique slot name, e.g. runner-1.")
    ],
    server: ServerOpt = None,
    workdir: WorkdirOpt = None,
    run_dir: RunDirOpt = None,
    dry_run: DryRunOpt = False,
    script: ScriptOpt = None,
    offline: OfflineOpt = False,
    model_script: ModelScriptOpt = None,
    agent: AgentOpt = AgentKind.CLAUDE,
    task_timeout: TimeoutOpt = None,
    check_timeout: CheckTimeoutOpt = None,
    check_dir: CheckDirOpt = None,
    reconcile_rounds: ReconcileRoundsOpt = None,
    resource_wait: ResourceWaitOpt = None,
    exit_when_drained: Annotated[
        bool, typer.Option(help="Exit once no task is pending or running.")
    ] = False,
    protected_paths: ProtectedOpt = None,
    replace: Annotated[
        bool,
        typer.Option(
            "--replace",
            help="Take the name over even if a live runner of another process holds it "
            "(that runner is fenced).",
        ),
    ] = False,
    token: TokenOpt = None,
    model: ModelOpt = None,
    max_turns: MaxTurnsOpt = None,
    task_budget_usd: BudgetOpt = None,
    shell: ShellOpt = None,
    shell_network: ShellNetworkOpt = None,
    shell_unsandboxed: ShellUnsandboxedOpt = None,
    shell_max_files: ShellMaxFilesOpt = None,
    shell_max_bytes: ShellMaxBytesOpt = None,
) -> None:
    """Run ONE runner as its own process until interrupted (or the fleet drains)."""
    import asyncio

    from codefleet.api.client import FleetClient, UntrustedServer
    from codefleet.cli.agents import AgentChoice
    from codefleet.cli.output import console
    from codefleet.fleet.runner import CannotContinue, Runner, RunnerOptions

    settings = settings_from(
        server_url=server, workdir=workdir, run_dir=run_dir, token=token,
        task_timeout=task_timeout, model=model, max_turns=max_turns,
        task_budget_usd=task_budget_usd, check_timeout=check_timeout, check_dir=check_dir,
        protected_paths=protected_paths, reconcile_rounds=reconcile_rounds,
        resource_wait=resource_wait,
        **shell_settings(shell, shell_network, shell_unsandboxed, shell_max_files, shell_max_bytes),
    )  # fmt: skip
    choice = AgentChoice(dry_run, script, offline, model_script, agent)
    executor = _agents(choice, settings).executor
    options = RunnerOptions(
        name=name,
        agent=agent,
        workdir=settings.workdir,
        run_dir=settings.run_dir,
        task_timeout=task_timeout,
        poll_wait=settings.poll_interval,
        exit_when_drained=exit_when_drained,
        protected=(settings.db, settings.run_dir),
        check_timeout=settings.check_timeout,
        check_dir=settings.check_dir,
        resource_wait=settings.resource_wait,
        replace=replace,
        protected_names=settings.protected_names,
        reconcile_rounds=settings.reconcile_rounds,
        **fleet_shell(settings),
    )

    async def go() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        async with FleetClient(settings.url, token=settings.token) as client:
            await Runner(client, executor, options).run(stop)

    if not settings.workdir.is_dir():
        raise fail(f"working tree {settings.workdir} does not exist")
    console.print(
        f"{name}: tree {settings.workdir.resolve()} · server {settings.url}", markup=False
    )
    prepare_dirs(settings.run_dir)
    try:
        asyncio.run(go())
    except Unauthorized:  # a runner keeps retrying an absent server, never a wrong token
        raise fail(unauthorized_message(settings)) from None
    except (CannotContinue, DomainError, UntrustedServer) as err:  # for good: say why, exit 1
        raise fail(f"{name} stopped: {err}") from None


@app.command(rich_help_panel=RUN, epilog=SCRIPT_HELP)
def run(
    runners: Annotated[
        int | None, typer.Option("--runners", "-n", help="How many runners [CODEFLEET_RUNNERS].")
    ] = None,
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
            "--verify", help="Shell command run in the tree after the drain; its exit code decides."
        ),
    ] = None,
    check: CheckOpt = None,
    dry_run: DryRunOpt = False,
    script: ScriptOpt = None,
    offline: OfflineOpt = False,
    model_script: ModelScriptOpt = None,
    agent: AgentOpt = AgentKind.CLAUDE,
    server: ServerOpt = None,
    workdir: WorkdirOpt = None,
    run_dir: RunDirOpt = None,
    task_timeout: TimeoutOpt = None,
    check_timeout: CheckTimeoutOpt = None,
    check_dir: CheckDirOpt = None,
    reconcile_rounds: ReconcileRoundsOpt = None,
    resource_wait: ResourceWaitOpt = None,
    protected_paths: ProtectedOpt = None,
    token: TokenOpt = None,
    model: ModelOpt = None,
    max_turns: MaxTurnsOpt = None,
    task_budget_usd: BudgetOpt = None,
    shell: ShellOpt = None,
    shell_network: ShellNetworkOpt = None,
    shell_unsandboxed: ShellUnsandboxedOpt = None,
    shell_max_files: ShellMaxFilesOpt = None,
    shell_max_bytes: ShellMaxBytesOpt = None,
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

    Loads the tasks of ./codefleet.yaml (or --graph) not yet on the server first, and names
    loaded ones the file changed. Exits 0 only if every task succeeded (and --verify passed,
    and with --commit every success was committed); Ctrl-C (SIGINT) or SIGTERM stops the
    runners, whose attempts are requeued uncharged, and exits 130 or 143. A server that
    goes away is waited for up to 120 s. Each --check is defined on the server first, for the agents' run_check tool
    and for the tasks' verify: key. Without a key: --dry-run --script FILE or
    --offline --model-script FILE. --max-cost sets the fleet's budget on the server.
    """
    import asyncio

    from codefleet.cli.agents import AgentChoice
    from codefleet.cli.output import console, err_console
    from codefleet.cli.runprep import RunRefused, prepare_run
    from codefleet.fleet.local import invocation_suffix, run_fleet
    from codefleet.review.commitview import history_json

    settings = settings_from(
        runners=runners, server_url=server, workdir=workdir, run_dir=run_dir,
        task_timeout=task_timeout, token=token, model=model, max_turns=max_turns,
        task_budget_usd=task_budget_usd, check_timeout=check_timeout, check_dir=check_dir,
        protected_paths=protected_paths, max_cost=max_cost, max_cost_hard=max_cost_hard,
        reconcile_rounds=reconcile_rounds,
        resource_wait=resource_wait,
        **shell_settings(shell, shell_network, shell_unsandboxed, shell_max_files, shell_max_bytes),
    )  # fmt: skip
    checks = parse_check_options(check)
    shell_kw = fleet_shell(settings)
    graph_file = None if no_graph else _graph_file(graph)
    agents = _agents(AgentChoice(dry_run, script, offline, model_script, agent), settings)
    committer = committer_for(settings.workdir, branch) if commit else None
    say = (err_console if json_out else console).print

    def runner_down(why: str) -> None:  # at once, on stderr: the run may go on without it
        err_console.print(f"[bold red]runner stopped:[/] {why}", markup=True, highlight=False)

    async def go() -> tuple[Any, list[dict[str, Any]], Any, ScopeWatch]:
        from codefleet.ui.dashboard import follow_compact

        async with make_client(settings) as client:
            try:
                since = await prepare_run(
                    client,
                    settings.workdir,
                    agents,
                    graph_file,
                    checks,
                    lambda s: say(s, markup=False),
                )
            except RunRefused as err:
                raise fail(str(err)) from None
            if settings.max_cost is not None:  # run passes the fleet's budget on to the server
                await client.set_budget(settings.max_cost, settings.max_cost_hard)
            scopes = await _declared_scopes(client)
        prepare_dirs(settings.run_dir)
        if committer is not None:
            committer.start(settings.url, settings.token, since)
        stop = asyncio.Event()
        follower = (
            None
            if json_out
            else asyncio.create_task(
                follow_compact(settings.url, settings.token, console, stop, since=since)
            )
        )
        interrupt = _interrupt_on_signals(caught)
        answering = _answering(settings, stop, json_out or no_questions, say)
        try:
            result = await run_fleet(
                settings.url, settings.runners, lambda _: agents.executor, settings.workdir,
                settings.run_dir, verify=verify, token=settings.token, task_timeout=task_timeout,
                protected=(settings.db, settings.run_dir), check_timeout=settings.check_timeout,
                check_dir=settings.check_dir, resource_wait=settings.resource_wait,
                on_runner_down=runner_down,
                name_suffix=invocation_suffix(), protected_names=settings.protected_names,
                reconcile_rounds=settings.reconcile_rounds, no_questions=no_questions,
                interrupt=interrupt, say=lambda s: err_console.print(s, markup=False),
                simulated=agents.mode != "live", agent_for=lambda _: agent,
                **shell_kw,
            )  # fmt: skip
            history = await committer.finish(settings.url, settings.token) if committer else None
        finally:
            _default_signals()
            stop.set()
            for listener in (follower, answering):
                if listener is not None:
                    await listener
        async with make_client(settings) as client:
            return result, await _conflicts_and_scopes(client, since, scopes), history, scopes

    caught: list[signal.Signals] = []
    result, conflicts, history, scopes = call_server(settings, lambda _: go())
    if json_out:
        print_json({"ok": result.ok, "tasks": result.tasks, "conflicts": conflicts,
                    "runner_errors": result.runner_errors, "stopped": result.stopped,
                    "interrupted": result.interrupted,
                    "verify": result.verify and {"exit_code": result.verify.exit_code, "output": result.verify.output},
                    "history": history_json(history) if history else None})  # fmt: skip
    else:
        _print_outcome(result, conflicts, agents.mode != "live", scopes, (committer, history))
    raise typer.Exit(_exit_code(caught, result.ok and (history is None or history.ok)))


def _answering(
    settings: Settings, stop: asyncio.Event, quiet: bool, say: Callable[..., None]
) -> asyncio.Task[None] | None:
    """With a terminal on standard input: its lines answer the agents' questions."""
    import asyncio
    import sys

    from codefleet.cli.asking import HINT, answer_from_terminal

    if quiet or not sys.stdin.isatty():
        return None
    say(HINT, markup=False)

    async def listen() -> None:
        async with make_client(settings) as client:
            await answer_from_terminal(client, stop, lambda s: say(s, markup=False))

    return asyncio.create_task(listen())


def _exit_code(caught: list[signal.Signals], ok: bool) -> int:
    """0 when all went well; 128 + the signal (said on stderr) when the operator stopped it."""
    from codefleet.cli.output import err_console

    if not caught:
        return 0 if ok else 1
    err_console.print(
        f"run: interrupted ({caught[0].name}): the runners left; an attempt in progress was "
        "rolled back and requeued, not charged. `codefleet run` carries on.",
        markup=False,
    )
    return 128 + caught[0].value


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _interrupt_on_signals(caught: list[signal.Signals]) -> Any:
    """An event the first SIGINT/SIGTERM sets (noted in `caught`); a second one acts at once."""
    import asyncio

    interrupt = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal(sig: signal.Signals) -> None:
        caught.append(sig)
        interrupt.set()
        _default_signals()

    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, on_signal, sig)
    return interrupt


def _default_signals() -> None:
    import asyncio

    loop = asyncio.get_running_loop()
    for sig in STOP_SIGNALS:
        loop.remove_signal_handler(sig)


def _print_outcome(
    result: Any,
    conflicts: list[dict[str, Any]],
    simulated: bool,
    scopes: ScopeWatch,
    commits: tuple[Any, Any],
) -> None:
    """The verdict, then the branch `--commit` made (`commits`: its committer and history)."""
    from codefleet.cli.output import console
    from codefleet.review.commitview import print_history
    from codefleet.ui.report import print_result

    print_result(console, result, conflicts, simulated_cost=simulated, outside=scopes.outside)
    committer, history = commits
    if committer is not None and history is not None:
        print_history(console, history, committer.log(history))


async def _declared_scopes(client: FleetClient) -> ScopeWatch:
    """Each task's scope as the run starts (`ui.scopes`)."""
    from codefleet.ui.scopes import ScopeWatch

    return ScopeWatch.of(await client.tasks())


async def _conflicts_and_scopes(
    client: FleetClient, since: int, scopes: ScopeWatch
) -> list[dict[str, Any]]:
    """The server's conflicts; `scopes` follows the run's events (writes outside a scope)."""
    for event in await client.all_events(since):
        scopes.take(event)
    conflicts: list[dict[str, Any]] = await client.conflicts()
    return conflicts


def _graph_file(given: Path | None) -> GraphFile | None:
    """The graph `run` loads first: --graph, else codefleet.yaml in the current directory."""
    from codefleet.api.graphfile import GraphError, find_graph, load_graph
    from codefleet.cli.runprep import GraphFile

    path = find_graph(given)
    if path is None:
        return None
    try:
        return GraphFile(path, load_graph(path, standalone=False))
    except GraphError as err:
        raise fail(str(err)) from None
