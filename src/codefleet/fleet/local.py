"""Running a fleet: N in-process runners against a server, until the graph drains.

`codefleet run` and `codefleet demo` use this. The runners are asyncio tasks in
this process (each with its own HTTP client, each exactly the `Runner` a
`codefleet runner` process would run); `codefleet runner --name` starts one
as its own process instead. The fleet is drained when the server reports no
pending, assigned or running task: we wait for the `fleet_idle` event on the
stream, so there is no polling delay. Then the runners leave, the optional
verify command runs in the working tree (when it fails by its own verdict, the
landings are bisected: `fleet.verifybisect`), and `run_finished` is recorded.
"""

from __future__ import annotations

import asyncio
import os
import re
import socket
import sys
import time
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codefleet.api.client import FleetClient, ServerUnavailable
from codefleet.fleet.executor import Executor
from codefleet.fleet.landingworker import LandingOptions, LandingWorker
from codefleet.fleet.runner import MAX_RETRY_S, RETRY_START_S, Runner, RunnerOptions
from codefleet.fleet.views.identity import view_identity
from codefleet.fleet.views.programs import NOT_RUNNABLE, missing_programs, not_started_text
from codefleet.fleet.views.shell import check_env, run_command
from codefleet.models import TERMINAL_STATUSES, CheckVerdict, EventType, TaskStatus
from codefleet.paths import TreeRoot
from codefleet.statedir import STATE_DIR
from codefleet.wording import halt_cause, spent_text

if TYPE_CHECKING:
    from codefleet.fleet.verifybisect import VerifyBlame

__all__ = [
    "FleetOptions",
    "FleetResult",
    "VerifyResult",
    "invocation_suffix",
    "run_fleet",
    "run_verify",
    "wait_drained",
]

VERIFY_OUTPUT_CHARS = 20_000
VERIFY_TIMEOUT_S = 900.0
TIMED_OUT = -1  # a verify's exit code when its time limit killed it
# While landing is halted, the events after which the fleet may have nothing left to run.
SETTLING = frozenset(
    {
        EventType.LANDING_QUEUED,
        EventType.TASK_REQUEUED,
        EventType.TASK_FAILED,
        EventType.TASK_CANCELLED,
        EventType.TASK_SUCCEEDED,
    }
)
# What `wait_drained` reads of the stream; it never parses the other events.
DRAIN_EVENTS = SETTLING | {EventType.FLEET_IDLE, EventType.LANDING_HALTED}
SERVER_WAIT_S = 120.0  # how long `run` waits for a server that went away before giving up


@dataclass(frozen=True, slots=True)
class VerifyResult:
    command: str
    exit_code: int
    output: str
    duration_s: float
    unstartable: tuple[tuple[str, str], ...] = ()  # (program, why) on exit 126/127, if found
    blame: VerifyBlame | None = None  # the first failing landing, when it failed and was bisected
    reused: str | None = None  # not run: the landing check (name) that passed on this content

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    @property
    def bisectable(self) -> bool:
        """Failed by its own verdict: not a time limit, not a program that could not start."""
        return self.exit_code not in (0, TIMED_OUT, *NOT_RUNNABLE)

    def payload(self) -> dict[str, Any]:
        """What `run_finished` and `run --json` say of it (the output aside)."""
        said = {"command": self.command, "exit_code": self.exit_code, "ok": self.ok}
        if self.reused is not None:
            said["reused"] = self.reused
        return said | (self.blame.payload() if self.blame is not None else {})

    def cannot_start(self) -> str | None:
        """What to do when the shell could not start a program (exit 126/127), else None."""
        if self.exit_code not in NOT_RUNNABLE:
            return None
        what, programs = not_started_text(self.unstartable, self.exit_code)
        return (
            f"could not start: {what} where checks run. Install {programs} where checks run, "
            "or fix the --verify command; it is not the agents' work that failed."
        )


@dataclass(slots=True)
class FleetResult:
    tasks: list[dict[str, Any]] = field(default_factory=list)
    verify: VerifyResult | None = None
    duration_s: float = 0.0
    runner_errors: list[str] = field(default_factory=list)  # "name: why", one per stopped runner
    stopped: str | None = None  # why the fleet stopped before the graph drained (its budget)
    interrupted: bool = False  # the operator stopped the run (SIGINT/SIGTERM) before the drain
    nothing_ran: bool = False  # every task had finished before this run started

    @property
    def all_succeeded(self) -> bool:
        return bool(self.tasks) and all(t["status"] == TaskStatus.SUCCEEDED for t in self.tasks)

    @property
    def ok(self) -> bool:
        return self.all_succeeded and (self.verify is None or self.verify.ok)


async def wait_drained(
    client: FleetClient,
    server_wait: float = SERVER_WAIT_S,
    say: Callable[[str], object] | None = None,
) -> None:
    """Return once nothing is pending, assigned or running (event-driven), or once the
    fleet's budget is spent and nothing runs any more (the fleet stopped).

    A server that goes away is waited for, as the runners do, up to `server_wait`
    seconds each time (said through `say`); past that, `ServerUnavailable`.
    """
    cursor: int | None = None
    while True:
        health = await _health_within(client, server_wait, say or (lambda _: None))
        if int(health["live_tasks"]) == 0 or _stopped(health):
            return
        halted = bool((health.get("landing") or {}).get("halted"))
        try:
            async for event in client.stream(
                int(health["last_event_id"]) if cursor is None else cursor, DRAIN_EVENTS
            ):
                cursor = int(event["id"])
                if event["type"] == EventType.FLEET_IDLE:
                    return
                if event["type"] == EventType.LANDING_HALTED or (
                    halted and event["type"] in SETTLING
                ):
                    break  # landing halted: stopped once nothing else can run (asked above)
        except ServerUnavailable:
            pass  # the stream broke: the server is going away; wait for it above


async def _health_within(
    client: FleetClient, bound: float, say: Callable[[str], object]
) -> dict[str, Any]:
    """`GET /health`, retried with capped backoff while the server does not answer."""
    deadline: float | None = None
    delay = RETRY_START_S
    while True:
        try:
            health = await client.health()
        except ServerUnavailable as err:
            now = time.monotonic()
            if deadline is None:
                deadline = now + bound
                say(
                    f"run: the server at {client.base_url} does not answer ({err}); waiting up "
                    f"to {bound:.0f} s for it to come back, as the runners do"
                )
            elif now >= deadline:
                raise ServerUnavailable(
                    f"the server at {client.base_url} did not come back within {bound:.0f} s"
                ) from err
            await asyncio.sleep(delay)  # a retry's backoff, not a wait on a condition
            delay = min(delay * 2, MAX_RETRY_S)
            continue
        if deadline is not None:
            say(f"run: the server at {client.base_url} answers again")
        return health


def _stopped(health: dict[str, Any]) -> bool:
    """The fleet stopped with work left: its budget spent, or landing halted, and idle."""
    budget = health.get("budget") or {}
    if bool((health.get("landing") or {}).get("stuck")):
        return True
    return bool(budget.get("exhausted")) and int(health.get("in_flight", 1)) == 0


def budget_stop(health: dict[str, Any], tasks: list[dict[str, Any]]) -> str | None:
    """Why the fleet stopped with work left, in one line, when its budget is spent."""
    budget = health.get("budget") or {}
    if not budget.get("exhausted"):
        return None
    left = sum(t["status"] in ("pending", "assigned", "running") for t in tasks)
    spent = spent_text(budget["spent_usd"], bool(budget.get("simulated")))
    return f"fleet budget exhausted: {spent} of ${budget['max_cost_usd']:.4f}; {left} task(s) not done. Raise it with `codefleet budget USD` and run again."


async def landing_stop(client: FleetClient, health: dict[str, Any]) -> str | None:
    """Why the fleet stopped with tasks waiting to land, in one line, when landing halted."""
    if not (health.get("landing") or {}).get("halted"):
        return None
    state = await client.landing()
    halted = state["halted"]
    return (
        f"landing halted: {halt_cause(halted['check'], halted.get('why'))}, with no candidate "
        f"on it (last landed: {halted.get('last_landed') or 'none'}); {len(state['queue'])} "
        "task(s) wait to land. Fix the tree or the check, then `codefleet landing resume` and "
        "run again."
    )


async def run_verify(
    command: str, workdir: Path, timeout: float = VERIFY_TIMEOUT_S
) -> VerifyResult:
    """Run the operator's verify command in the tree, like a check: own process group, capped.

    One shell runner for both (`fleet.views.shell.run_command`): on the time limit and after a
    normal exit alike the whole group is killed, and the environment is scrubbed.
    """
    env = check_env(workdir.resolve())
    ran = await run_command(command, workdir, timeout=timeout, cap=VERIFY_OUTPUT_CHARS, env=env)
    if ran.timed_out:
        output = f"{ran.output}\ntimed out after {timeout:.0f}s".lstrip("\n")
        return VerifyResult(command, TIMED_OUT, output, ran.duration_s)
    code = int(ran.exit_code or 0)
    unstartable = tuple(missing_programs(command, workdir, env)) if code in NOT_RUNNABLE else ()
    return VerifyResult(command, code, ran.output, ran.duration_s, unstartable)


def invocation_suffix() -> str:
    """`.HOST.PID`: what makes one `run`'s runner names differ from another's side by side."""
    host = re.sub(r"[^A-Za-z0-9_-]+", "-", socket.gethostname().split(".")[0])[:40] or "host"
    return f".{host}.{os.getpid()}"


def python_command(args: str) -> str:
    """A shell command running this interpreter (the demo's tests need no venv of their own)."""
    return f'"{sys.executable}" {args}'


@dataclass(frozen=True, slots=True)
class FleetOptions:
    """What a fleet of `run_fleet` runs with: every runner's options and the fleet's own.

    `runner` is the options each runner takes whole; only its name and agent kind are
    each runner's own: runner n is `runner-N<name_suffix>` (`codex-N` for a Codex runner,
    so every view shows which agent it is) and drives `agent_for(n)` (default claude).
    """

    runner: RunnerOptions
    runners: int = 1
    verify: str | None = None  # the shell command run in the tree after the drain
    name_suffix: str = ""
    server_wait: float = SERVER_WAIT_S  # how long a server that went away is waited for
    simulated: bool = False  # no real model: every view reads the run's cost as simulated
    agent_for: Callable[[int], str] | None = None
    landing_worker: bool = True  # false: a test that stages a landing queue starts its own
    # runners in their own clones of the landed line (`fleet.clone`), each in `clones/NAME`:
    # the first `in_clones` of them (None: all); the landing worker stays in the tree
    clones: Path | None = None
    in_clones: int | None = None
    started_with: Mapping[str, Any] | None = None  # the command's flags (`cli.operate.again`)
    # the landing checks that passed in this fleet, shared by its workers (`LandingOptions`)
    landing_passes: dict[tuple[str, str], int] = field(default_factory=dict)
    # the tasks' checks that passed, kept by its runners for its workers (decision 0177)
    attempt_passes: dict[tuple[str, str], int] = field(default_factory=dict)

    def kind(self, n: int) -> str:
        """Runner n's agent kind."""
        return self.agent_for(n) if self.agent_for else "claude"

    def runner_options(self, n: int) -> RunnerOptions:
        """Runner n's options: the fleet's, under its own name and agent kind."""
        kind = self.kind(n)
        name = f"{_prefix(kind)}-{n}{self.name_suffix}"
        own = replace(self.runner, name=name, agent=kind, check_passes=self.attempt_passes)
        if self.clones is None or (self.in_clones is not None and n > self.in_clones):
            return own
        root = self.clones / name
        return replace(
            own,
            workdir=root,
            run_dir=root / STATE_DIR / "runs",
            protected=(root / STATE_DIR,),
            clone=True,
        )

    def landing(self, n: int = 1) -> LandingOptions:
        """The options of the fleet's landing worker n (one beside each runner: `landing`,
        then `landing-2`, … so that steps run in parallel, decision 0160)."""
        runner = self.runner
        name = "landing" if n == 1 else f"landing-{n}"
        return LandingOptions(
            f"{name}{self.name_suffix}", runner.check_timeout, exclude=runner.protected,
            view_dir=runner.check_dir, locks=runner.locks(), passed=self.landing_passes,
            attempt_passes=self.attempt_passes,
        )  # fmt: skip


async def run_fleet(
    url: str,
    make_executor: Callable[[int], Executor],
    options: FleetOptions,
    *,
    token: str | None = None,
    connect: Callable[[], FleetClient] | None = None,
    on_runner_down: Callable[[str], object] | None = None,
    interrupt: asyncio.Event | None = None,
    say: Callable[[str], object] | None = None,
) -> FleetResult:
    """Run `options.runners` runners until the graph drains, until no runner is left to drain
    it, or until `interrupt` is set (the operator's stop: the runners leave as interrupted).

    A runner that stops on its own (it cannot go on) is reported at once through
    `on_runner_down("name: why")` and listed in `runner_errors`. `connect` makes
    each runner's client (default: one per runner on `url` with `token`). However this
    ends, every runner leaves the server. A server that goes away is waited for up to
    `options.server_wait` s (said through `say`). `simulated` and `started_with` go into
    `fleet_started`. A landing worker (`fleet.landingworker`) runs beside each runner
    unless `options.landing_worker` is false.
    """
    started = time.monotonic()
    connect = connect or (lambda: FleetClient(url, token=token))
    interrupt = interrupt or asyncio.Event()
    async with FleetClient(url, token=token) as client:
        before = await client.tasks()
        await client.fleet_started(
            runners=options.runners,
            **({"simulated": True} if options.simulated else {}),
            **(options.started_with or {}),
        )
        watch = await _drive(
            client, connect, make_executor, options, on_runner_down, interrupt, say
        )
        result = await _collect(client, watch, before, interrupt.is_set())
        if options.verify and not result.interrupted:
            result.verify = await _verify(client, options.verify, options.runner, say)
        result.duration_s = time.monotonic() - started
        await _finished(client, result, options.runners)
    return result


async def _drive(
    client: FleetClient,
    connect: Callable[[], FleetClient],
    make_executor: Callable[[int], Executor],
    options: FleetOptions,
    on_runner_down: Callable[[str], object] | None,
    interrupt: asyncio.Event,
    say: Callable[[str], object] | None,
) -> _RunnerWatch:
    """Start the runners (and a landing worker beside each), wait for the drain, stop them
    all."""
    stop = asyncio.Event()
    watch = _RunnerWatch(options.runners, stop, on_runner_down)
    fleet = [
        watch.started(
            _start_runner(connect, make_executor(n), options.runner_options(n), stop, interrupt)
        )
        for n in range(1, options.runners + 1)
    ]
    if options.landing_worker:
        fleet += [
            start_landing(connect, options.runner, options.landing(n), stop)
            for n in range(1, options.runners + 1)
        ]
    try:
        await _until_drained_or_all_down(
            wait_drained(client, options.server_wait, say), watch, interrupt
        )
    finally:
        stop.set()
        await asyncio.gather(*fleet, return_exceptions=True)
    return watch


async def _collect(
    client: FleetClient, watch: _RunnerWatch, before: list[dict[str, Any]], interrupted: bool
) -> FleetResult:
    """The fleet's result once its runners are gone: the tasks, why it stopped, if it did."""
    result = FleetResult(tasks=await client.tasks(), runner_errors=list(watch.errors))
    health = await client.health()
    result.stopped = budget_stop(health, result.tasks) or await landing_stop(client, health)
    result.interrupted = interrupted
    result.nothing_ran = bool(before) and all(t["status"] in TERMINAL_STATUSES for t in before)
    return result


async def _finished(client: FleetClient, result: FleetResult, runners: int) -> None:
    """Record `run_finished`."""
    await client.fleet_finished(
        ok=result.ok,
        runners=runners,
        verify=_verify_payload(result.verify),
        summary={
            "duration_s": round(result.duration_s, 3),
            "tasks": len(result.tasks),
            "runner_errors": len(result.runner_errors),
            "stopped": result.stopped,
        },
    )


@dataclass
class _RunnerWatch:
    """Reports each runner that stops on its own, at once; knows when none is left."""

    runners: int
    stop: asyncio.Event
    on_down: Callable[[str], object] | None
    errors: list[str] = field(default_factory=list)
    all_down: asyncio.Event = field(default_factory=asyncio.Event)

    def started(self, task: asyncio.Task[None]) -> asyncio.Task[None]:
        task.add_done_callback(self._ended)
        return task

    def _ended(self, task: asyncio.Task[None]) -> None:
        if task.cancelled() or self.stop.is_set():
            return
        err = task.exception()
        why = (str(err) or type(err).__name__) if err is not None else "it ended by itself"
        self.errors.append(f"{task.get_name()}: {why}")
        if self.on_down is not None:
            self.on_down(self.errors[-1])
        if len(self.errors) >= self.runners:
            self.all_down.set()


async def _until_drained_or_all_down(
    drain: Coroutine[Any, Any, None], watch: _RunnerWatch, interrupt: asyncio.Event
) -> None:
    drained = asyncio.create_task(drain)
    down = asyncio.create_task(watch.all_down.wait())
    stopped = asyncio.create_task(interrupt.wait())
    waiters = {drained, down, stopped}
    try:
        done, _ = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
        await asyncio.gather(*waiters, return_exceptions=True)
    if drained in done:
        drained.result()  # the event stream's own failure, if it had one


async def _verify(
    client: FleetClient,
    command: str,
    runner: RunnerOptions,
    say: Callable[[str], object] | None,
) -> VerifyResult:
    """Run `--verify` in the tree (unless the last landing check ran this very command on
    this very content); when it fails by its own verdict, bisect the landings."""
    workdir = runner.workdir
    reused = await _landed_on_this(client, command, runner)
    if reused is not None:
        said = f"not run: the landing check {reused} passed with this command on this same tree"
        (say or (lambda _: None))(f"verify: {said}")
        return VerifyResult(command, 0, said, 0.0, reused=reused)
    verified = await run_verify(command, workdir)
    if not verified.bisectable:
        return verified
    tell = say or (lambda _: None)
    tell(f"verify: `{command}` exited {verified.exit_code}; bisecting the landings")
    from codefleet.fleet.verifybisect import bisect_verify  # on use: only a failed verify bisects

    blame = await bisect_verify(
        client,
        command,
        workdir,
        timeout=VERIFY_TIMEOUT_S,
        exclude=runner.protected,
        view_dir=runner.check_dir,
        say=tell,
    )
    return replace(verified, blame=blame)


async def _landed_on_this(client: FleetClient, command: str, runner: RunnerOptions) -> str | None:
    """The landing check that last passed with exactly `command` on exactly the tree as it
    is now (no lease held, the same content identity), or None: `--verify` runs then."""
    if await client.leases():
        return None  # someone is at work: the tree is not what it will be
    events = await client.all_events()
    finished = [e for e in events if _tells_the_tree(e)]
    if not finished:
        return None
    last = finished[-1]["payload"]
    name = str(last.get("check") or "")
    if last.get("verdict") != "passed" or not last.get("identity"):
        return None
    if (await client.checks()).get(name) != command:
        return None
    landed_since = [e for e in events if e["type"] == "landed" and e["id"] > finished[-1]["id"]]
    if not landed_since:  # the check that passed was a round that did not land (halted, voided)
        return None
    now = await asyncio.to_thread(view_identity, runner.workdir, {}, (), runner.protected)
    return name if now == last["identity"] else None


def _tells_the_tree(event: dict[str, Any]) -> bool:
    """A landing check's end that says something of a tree (a stopped one, its answer moot
    while it ran, does not)."""
    stopped = event["payload"].get("verdict") == CheckVerdict.STOPPED
    return event["type"] == "landing_check_finished" and not stopped


def _verify_payload(verify: VerifyResult | None) -> dict[str, Any] | None:
    return None if verify is None else verify.payload()


def _prefix(kind: str) -> str:
    return "codex" if kind == "codex" else "runner"


def start_landing(
    connect: Callable[[], FleetClient],
    runner: RunnerOptions,
    options: LandingOptions,
    stop: asyncio.Event,
) -> asyncio.Task[None]:
    """The fleet's landing worker (`fleet.landingworker`) in the runners' tree, until `stop`."""
    tree = TreeRoot(runner.workdir, protected=runner.protected, names=runner.protected_names)

    async def work() -> None:
        async with connect() as client:
            await LandingWorker(client, tree, options).run(stop)

    return asyncio.create_task(work(), name=options.name)


def _start_runner(
    connect: Callable[[], FleetClient],
    executor: Executor,
    options: RunnerOptions,
    stop: asyncio.Event,
    interrupt: asyncio.Event,
) -> asyncio.Task[None]:
    async def work() -> None:
        async with connect() as client:
            await Runner(client, executor, options).run(stop, interrupt)

    return asyncio.create_task(work(), name=options.name)
