"""The steps of `codefleet run` once its options are read: drive the fleet, then report.

`RunPlan` is what the command decided before anything starts (settings,
agents, the graph to load, the runners' options); `drive` settles the run
with the server (`cli.run.runprep`), follows it on the terminal, answers the
agents' questions from standard input, runs the fleet in this process
(`fleet.local.run_fleet`) until it drains or the operator stops it, and
returns what `report` prints. SIGINT/SIGTERM stop the runners once (their
attempts are requeued, not charged); a second signal acts at once. Piped
output whose reader left (Ctrl-C stops `| tee` too) changes none of that: the
run stops and exits the same way, silent on standard output.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rich.markup import escape

from codefleet.cli.common import call_server, fail, make_client, print_json
from codefleet.cli.output import console, err_console, reader_gone
from codefleet.cli.run.asking import HINT, answer_from_terminal
from codefleet.cli.run.checkchange import terminal_confirm
from codefleet.cli.run.runprep import RunRefused, prepare_run
from codefleet.errors import DomainError
from codefleet.fleet.local import FleetOptions, invocation_suffix, run_fleet
from codefleet.review.commitview import history_json, print_history
from codefleet.review.report.checksections import weakened_lines
from codefleet.review.report.sidebyside import side_by_side
from codefleet.statedir import prepare_dirs
from codefleet.ui.dashboard import follow_compact
from codefleet.ui.outofscope import ScopeWatch
from codefleet.ui.report import RunShare, print_result

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable

    from codefleet.api.client import FleetClient
    from codefleet.cli.operate.again import RunFlags
    from codefleet.cli.run.agentchoice import Agents
    from codefleet.cli.run.runprep import GraphFile
    from codefleet.config import Settings
    from codefleet.fleet.runner import RunnerOptions
    from codefleet.models import AgentKind
    from codefleet.review.live import LiveCommitter

__all__ = ["Outcome", "RunPlan", "drive", "execute", "exit_code", "report"]

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@dataclass(frozen=True, slots=True)
class RunPlan:
    """What `run` decided before it starts; `runner` is every runner's options."""

    settings: Settings
    agents: Agents
    agent: AgentKind
    graph_file: GraphFile | None
    checks: dict[str, str]
    committer: LiveCommitter | None
    runner: RunnerOptions
    verify: str | None
    json_out: bool
    flags: RunFlags  # recorded in `fleet_started`: the hints after a failure name them

    @property
    def no_questions(self) -> bool:
        return self.runner.no_questions

    @property
    def simulated(self) -> bool:
        return self.agents.mode != "live"

    def say(self, text: str) -> None:
        """Progress, on stderr when standard output carries the JSON verdict."""
        (err_console if self.json_out else console).print(text, markup=False)


@dataclass(frozen=True, slots=True)
class Outcome:
    """How the run ended: the fleet's result, the server's conflicts, the `--commit` history."""

    result: Any
    conflicts: list[dict[str, Any]]
    history: Any
    scopes: ScopeWatch
    share: RunShare | None = None  # this run's own part of the server's figures
    weakened: tuple[str, ...] = ()  # tests deleted, checks changed (`review.report.checksections`)
    side_by_side: tuple[str, ...] = ()  # tasks that held parts of one file at once (`sidebyside`)

    @property
    def ok(self) -> bool:
        return bool(self.result.ok and (self.history is None or self.history.ok))


def execute(plan: RunPlan) -> int:
    """`run`'s steps once planned: drive the fleet, report, and the exit code."""
    caught: list[signal.Signals] = []
    outcome = call_server(plan.settings, lambda _: drive(plan, caught))
    try:
        report(plan, outcome)
        sys.stdout.flush()
    except BrokenPipeError:  # standard output's reader left (`| tee`, stopped by the Ctrl-C)
        reader_gone(sys.stdout)
    return exit_code(caught, outcome.ok, plan.flags.command())


async def drive(plan: RunPlan, caught: list[signal.Signals]) -> Outcome:
    """Settle the run with the server, run the fleet until it drains or is stopped, collect."""
    settings = plan.settings
    since, scopes, at_start = await _settle(plan)
    prepare_dirs(settings.run_dir)
    if plan.committer is not None:
        plan.committer.start(settings.url, settings.token, since)
    stop = asyncio.Event()
    follower = None if plan.json_out else _following(settings, stop, since)
    interrupt = _interrupt_on_signals(caught)
    answering = _answering(settings, stop, plan.json_out or plan.no_questions, plan.say)
    try:
        result = await _fleet(plan, interrupt)
        committer = plan.committer
        history = await committer.finish(settings.url, settings.token) if committer else None
    finally:
        _default_signals()
        stop.set()
        for listener in (follower, answering):
            if listener is not None:
                await listener
    async with make_client(settings) as client:
        conflicts, events = await _conflicts_and_scopes(client, since, scopes)
    share = RunShare.of(at_start, result.tasks, events, conflicts, since)
    succeeded = {t["id"] for t in result.tasks if t["status"] == "succeeded"}
    weakened = tuple(weakened_lines(events, succeeded))
    together = tuple(pair.describe() for pair in side_by_side(events))
    return Outcome(result, conflicts, history, scopes, share, weakened, together)


async def _settle(plan: RunPlan) -> tuple[int, ScopeWatch, list[dict[str, Any]]]:
    """Load the graph and checks, set the budget; the event cursor, the declared scopes and
    the tasks as the run starts."""
    settings = plan.settings
    async with make_client(settings) as client:
        try:
            since = await prepare_run(
                client,
                settings.workdir,
                plan.agents,
                plan.graph_file,
                plan.checks,
                plan.say,
                terminal_confirm(),
            )
        except RunRefused as err:
            raise fail(str(err)) from None
        if settings.max_cost is not None:  # run passes the fleet's budget on to the server
            await client.set_budget(settings.max_cost, settings.max_cost_hard)
        graph = plan.graph_file.tasks if plan.graph_file is not None else None
        integration = settings.integration or (graph.integration if graph else None)
        if integration:  # --integration wins over the graph's `integration:`
            try:
                await client.set_integration(integration)
            except DomainError as err:  # an unknown check: the server names the known ones
                raise fail(f"--integration: {err}") from None
        plan.say(_leases(plan, await client.landing()))
        at_start = await client.tasks()
        return since, ScopeWatch.of(at_start), at_start


def _leases(plan: RunPlan, landing: dict[str, Any]) -> str:
    """The run's start line on what a write leases: the runners' flag, else the graph's, else
    the server's setting, `auto` resolved by the server's integration check (decision 0164)."""
    from codefleet.api.graphfile import leases_line
    from codefleet.models import Granularity

    own, integration = plan.runner.lease_granularity, landing.get("integration")
    if own is not None and own is not Granularity.AUTO:
        return f"leases: {own.stated(integration)}, this run's --lease-granularity"
    setting = (landing.get("lease_granularity") or {}).get("setting", Granularity.FILE.value)
    specs = list(plan.graph_file.tasks) if plan.graph_file is not None else []
    return f"leases: {leases_line(specs, Granularity(setting), integration)}"


async def _fleet(plan: RunPlan, interrupt: asyncio.Event) -> Any:
    """The runners of this process, until the graph drains or `interrupt` is set."""
    settings = plan.settings
    options = FleetOptions(
        runner=plan.runner,
        runners=settings.runners,
        verify=plan.verify,
        name_suffix=invocation_suffix(),
        simulated=plan.simulated,
        agent_for=lambda _: plan.agent,
        started_with=plan.flags.payload(),
    )
    return await run_fleet(
        settings.url,
        lambda _: plan.agents.executor,
        options,
        token=settings.token,
        on_runner_down=_runner_down,
        interrupt=interrupt,
        say=lambda s: err_console.print(s, markup=False),
    )


def _runner_down(why: str) -> None:
    """Said at once, on stderr: the run may go on without that runner."""
    err_console.print(f"[bold red]runner stopped:[/] {escape(why)}", markup=True, highlight=False)


def report(plan: RunPlan, outcome: Outcome) -> None:
    """The verdict: JSON with `--json`, else the table and the branch `--commit` made."""
    result, history = outcome.result, outcome.history
    if plan.json_out:
        verify = result.verify
        print_json(
            {
                "ok": result.ok,
                "tasks": result.tasks,
                "conflicts": outcome.conflicts,
                "runner_errors": result.runner_errors,
                "stopped": result.stopped,
                "interrupted": result.interrupted,
                "verify": verify and {**verify.payload(), "output": verify.output},
                "history": history_json(history) if history else None,
                "weakened": list(outcome.weakened),
                "side_by_side": list(outcome.side_by_side),
            }
        )
        return
    for pair in outcome.side_by_side:  # leases by part: two tasks in one file at once
        console.print(f"[bold cyan]SIDE BY SIDE[/]  {escape(pair)}", markup=True)
    outside = outcome.scopes.outside
    print_result(
        console,
        result,
        outcome.conflicts,
        simulated_cost=plan.simulated,
        outside=outside,
        again=plan.flags.command(),
        share=outcome.share,
        weakened=outcome.weakened,
    )
    if plan.committer is not None and history is not None:
        print_history(console, history, plan.committer.log(history))


def _following(settings: Settings, stop: asyncio.Event, since: int) -> asyncio.Task[int]:
    """One line per notable event of the run on the terminal, until `stop`."""
    return asyncio.create_task(
        follow_compact(settings.url, settings.token, console, stop, since=since)
    )


def _answering(
    settings: Settings, stop: asyncio.Event, quiet: bool, say: Callable[[str], None]
) -> asyncio.Task[None] | None:
    """With a terminal on standard input: its lines answer the agents' questions."""
    if quiet or not sys.stdin.isatty():
        return None
    say(HINT)

    async def listen() -> None:
        async with make_client(settings) as client:
            await answer_from_terminal(client, stop, say)

    return asyncio.create_task(listen())


def exit_code(caught: list[signal.Signals], ok: bool, again: str = "codefleet run") -> int:
    """0 when all went well; 128 + the signal (said on stderr) when the operator stopped it.

    `again` is the command that carries on (the run's own flags: `cli.operate.again`).
    """
    if not caught:
        return 0 if ok else 1
    err_console.print(
        f"run: interrupted ({caught[0].name}): the runners left; an attempt in progress was "
        f"rolled back and requeued, not charged. `{again}` carries on.",
        markup=False,
    )
    return 128 + caught[0].value


def _interrupt_on_signals(caught: list[signal.Signals]) -> Any:
    """An event the first SIGINT/SIGTERM sets (noted in `caught`); a second one acts at once."""
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
    loop = asyncio.get_running_loop()
    for sig in STOP_SIGNALS:
        loop.remove_signal_handler(sig)


async def _conflicts_and_scopes(
    client: FleetClient, since: int, scopes: ScopeWatch
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The server's conflicts and the run's events; `scopes` follows them (writes outside
    a scope)."""
    events = await client.all_events(since)
    for event in events:
        scopes.take(event)
    conflicts: list[dict[str, Any]] = await client.conflicts()
    return conflicts, events
