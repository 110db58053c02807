"""Fleet commands: `run` (N runners in this process) and `runner` (one, as its own process).

`run` starts its runners as asyncio tasks in this process (fast to start,
one process to stop); `runner --name` runs ONE runner as its own process, so
runners can be started, killed and restarted one by one, or on another host.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Annotated, Any

import typer

from codefleet.cli_common import (
    RUN,
    BudgetOpt,
    CheckDirOpt,
    CheckOpt,
    CheckTimeoutOpt,
    DryRunOpt,
    JsonOpt,
    MaxTurnsOpt,
    ModelOpt,
    ProtectedOpt,
    RunDirOpt,
    ScriptOpt,
    ServerOpt,
    TimeoutOpt,
    TokenOpt,
    WorkdirOpt,
    app,
    call_server,
    console,
    err_console,
    fail,
    make_client,
    parse_check_options,
    print_json,
    settings_from,
    unauthorized_message,
)
from codefleet.cli_review import BranchOpt, CommitOpt, committer_for
from codefleet.commitview import history_json, print_history
from codefleet.config import Settings
from codefleet.errors import DomainError, Unauthorized
from codefleet.executor import Executor
from codefleet.scripted import ScriptedExecutor, ScriptError, load_script

__all__ = ["run", "runner"]


def _executor(dry_run: bool, script: Path | None, settings: Settings) -> Executor:
    if dry_run:
        try:
            return ScriptedExecutor(load_script(script) if script else None)
        except ScriptError as err:
            raise fail(str(err)) from None
    from codefleet.session import SessionExecutor, credentials_problem

    problem = credentials_problem()
    if problem:
        raise fail(problem)
    return SessionExecutor(
        model=settings.model,
        max_turns=settings.max_turns,
        max_budget_usd=settings.task_budget_usd,
    )


@app.command(rich_help_panel=RUN)
def runner(
    name: Annotated[
        str, typer.Option("--name", help="This runner's unique slot name, e.g. runner-1.")
    ],
    server: ServerOpt = None,
    workdir: WorkdirOpt = None,
    run_dir: RunDirOpt = None,
    dry_run: DryRunOpt = False,
    script: ScriptOpt = None,
    task_timeout: TimeoutOpt = None,
    check_timeout: CheckTimeoutOpt = None,
    check_dir: CheckDirOpt = None,
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
) -> None:
    """Run ONE runner as its own process until interrupted (or the fleet drains)."""
    from codefleet.client import FleetClient
    from codefleet.runner import CannotContinue, Runner, RunnerOptions

    settings = settings_from(
        server_url=server, workdir=workdir, run_dir=run_dir, token=token,
        task_timeout=task_timeout, model=model, max_turns=max_turns,
        task_budget_usd=task_budget_usd, check_timeout=check_timeout, check_dir=check_dir,
        protected_paths=protected_paths,
    )  # fmt: skip
    executor = _executor(dry_run, script, settings)
    options = RunnerOptions(
        name=name,
        workdir=settings.workdir,
        run_dir=settings.run_dir,
        task_timeout=task_timeout,
        poll_wait=settings.poll_interval,
        exit_when_drained=exit_when_drained,
        protected=(settings.db, settings.run_dir),
        check_timeout=settings.check_timeout,
        check_dir=settings.check_dir,
        replace=replace,
        protected_names=settings.protected_names,
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
    console.print(f"{name}: serving {settings.url} in {settings.workdir.resolve()}")
    try:
        asyncio.run(go())
    except Unauthorized:  # a runner keeps retrying an absent server, never a wrong token
        raise fail(unauthorized_message(settings)) from None
    except (CannotContinue, DomainError) as err:  # refused for good: say why, exit non-zero
        raise fail(f"{name} stopped: {err}") from None


@app.command(rich_help_panel=RUN)
def run(
    runners: Annotated[
        int | None, typer.Option("--runners", "-n", help="How many runners [CODEFLEET_RUNNERS].")
    ] = None,
    verify: Annotated[
        str | None,
        typer.Option(
            "--verify", help="Shell command run in the tree after the drain; its exit code decides."
        ),
    ] = None,
    check: CheckOpt = None,
    dry_run: DryRunOpt = False,
    script: ScriptOpt = None,
    server: ServerOpt = None,
    workdir: WorkdirOpt = None,
    run_dir: RunDirOpt = None,
    task_timeout: TimeoutOpt = None,
    check_timeout: CheckTimeoutOpt = None,
    check_dir: CheckDirOpt = None,
    protected_paths: ProtectedOpt = None,
    token: TokenOpt = None,
    model: ModelOpt = None,
    max_turns: MaxTurnsOpt = None,
    task_budget_usd: BudgetOpt = None,
    commit: CommitOpt = False,
    branch: BranchOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Start N runners against a running server, wait for the graph to drain, print a verdict.

    Exits 0 only if every task succeeded (and --verify passed, and with --commit every
    success was committed). Each --check is defined on the server first, for the agents'
    run_check tool and for tasks' `verify`.
    """
    from codefleet.fleet import invocation_suffix, run_fleet
    from codefleet.report import print_result

    settings = settings_from(
        runners=runners, server_url=server, workdir=workdir, run_dir=run_dir,
        task_timeout=task_timeout, token=token, model=model, max_turns=max_turns,
        task_budget_usd=task_budget_usd, check_timeout=check_timeout, check_dir=check_dir,
        protected_paths=protected_paths,
    )  # fmt: skip
    checks = parse_check_options(check)
    executor = _executor(dry_run, script, settings)
    committer = committer_for(settings.workdir, branch) if commit else None

    def runner_down(why: str) -> None:  # at once, on stderr: the run may go on without it
        err_console.print(f"[bold red]runner stopped:[/] {why}", markup=True, highlight=False)

    async def go() -> tuple[Any, list[dict[str, Any]], Any]:
        from codefleet.dashboard import follow_compact

        async with make_client(settings) as client:
            if checks:
                await client.define_checks(checks)
            since = int((await client.health())["last_event_id"])
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
        try:
            result = await run_fleet(
                settings.url, settings.runners, lambda _: executor, settings.workdir,
                settings.run_dir, verify=verify, token=settings.token, task_timeout=task_timeout,
                protected=(settings.db, settings.run_dir), check_timeout=settings.check_timeout,
                check_dir=settings.check_dir, on_runner_down=runner_down,
                name_suffix=invocation_suffix(), protected_names=settings.protected_names,
            )  # fmt: skip
            history = await committer.finish(settings.url, settings.token) if committer else None
        finally:
            stop.set()
            if follower is not None:
                await follower
        async with make_client(settings) as client:
            return result, await client.conflicts(), history

    result, conflicts, history = call_server(settings, lambda _: go())
    if json_out:
        print_json({"ok": result.ok, "tasks": result.tasks, "conflicts": conflicts,
                    "runner_errors": result.runner_errors,
                    "verify": result.verify and {"exit_code": result.verify.exit_code, "output": result.verify.output},
                    "history": history_json(history) if history else None})  # fmt: skip
    else:
        print_result(console, result, conflicts)
        if committer is not None and history is not None:
            print_history(console, history, committer.log(history))
    raise typer.Exit(0 if result.ok and (history is None or history.ok) else 1)
