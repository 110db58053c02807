"""The thin runner: register, heartbeat, long-poll, start, run one attempt, report.

A runner holds no queue and makes no policy decision; it talks to the server
only through `client` (it imports neither the store nor the scheduler). Its
heartbeat runs as a separate task. It enforces the task's wall clock by
cancelling the executor (which must stop what it started).

Checks: at the start of each attempt the runner reads the server's named
checks and hands the executor a `Checker` for them. When a session of a task
with `verify` ends successfully, the runner runs that check in the isolated
view (within what is left of the attempt's wall clock), unless the assignment
leaves it to the landing check (`verify_at_landing`: it is the integration
check, which runs on the landed tree before the task can succeed; the runner
says so with a `check_deferred` event); a failure turns the
attempt into `verify_failed` whose error carries the check's output, so the
next attempt's prompt shows what to fix — unless the check's program could not
start (`check_unrunnable`: the task fails at once, no attempt can install it).

Operator messages: the heartbeat's answer carries the running task's unreceived
messages into the attempt's `Inbox`, and the next heartbeat says which ones
its session has (`fleet.tools.inbox`): no other loop asks for them.

Fencing: when any call answers `stale_epoch`, the runner cancels the running
attempt, drops its result and registers again. A `not_owner` answer means the
task moved on without us; the runner simply asks for new work. While the
server is unreachable or answers 5xx it retries with capped backoff, and the
write path denies every write meanwhile (fail closed).

Faults: any other surprise in the work loop (an answer that breaks the
contract, a bug) is logged with its traceback and retried after a backoff:
one bad answer never ends a runner. Only what no retry can fix ends it, by
raising out of `run`: the token refused (`Unauthorized`, `Forbidden`), an https
server's certificate not trusted here (`UntrustedServer`), or the
registration refused (`CannotContinue`, naming the server's reason).

Two such refusals: `name_in_use` (a live runner of another process holds the
name; `replace` takes it over, on the first registration only, so two
replacing runners cannot take a name back and forth) and `wrong_tree`.

A clone (`RunnerOptions.clone`): the runner works in its own clone of the
server's landed line instead of a mount of the tree (`fleet.clone`): it
registers with the server's tree identity and no probe, resets the clone to
the line before each attempt, brings each granted file level with the
server's version before the write (`fleet.gate.prewrite`), and hands the files
it holds to the server before it reports a success (`delivery`). A server with
no landed line is `CannotContinue`; one whose line has not started is waited for.

The tree: the runner registers with the identity it reads in its own mount
(`statedir.read_tree_id`) and its own path, so it may run on another host
whose mount of the tree is elsewhere, with a probe file written there that the
server must see (a copy of the tree is refused); every path it sends is tree-relative.
A mount without the identity file waits for the server (a new tree's server
may not have started yet) and reads again; still without it, the runner
ends (`CannotContinue`) before it registers.

Stop means stop in every phase: setting `stop` cancels whatever the runner is
doing (registering against an absent server, polling, running an attempt,
retrying a report), then it leaves as `interrupted` (its attempt is not
charged), also when the stop came while its registration was on its way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from codefleet.api.client import (
    ApiError,
    FleetClient,
    ServerUnavailable,
    UntrustedServer,
    handed_task,
)
from codefleet.attempt import AssignedTask, AttemptReport, OperatorNote
from codefleet.errors import DomainError, Forbidden, NotFound, NotOwner, StaleEpoch, Unauthorized
from codefleet.fleet.clone import AsyncClone, Clone, CloneError, CloneRefused
from codefleet.fleet.executor import Attempt, Executor
from codefleet.fleet.gate.prewrite import WriteGate
from codefleet.fleet.gate.readset import ReadLog
from codefleet.fleet.tools.ask import Asker
from codefleet.fleet.tools.attemptchecks import (
    DEFAULT_CHECK_TIMEOUT_S,
    OUTPUT_CHARS,
    Checker,
    CheckLimits,
)
from codefleet.fleet.tools.commandtool import CommandRunner, ShellConfig
from codefleet.fleet.tools.inbox import Inbox
from codefleet.fleet.tools.resourcecalls import DEFAULT_RESOURCE_WAIT_S
from codefleet.fleet.views.uvlock import LockCache
from codefleet.models import (
    DEFAULT_RECONCILE_ROUNDS,
    DEFAULT_REPAIR_TURNS,
    CheckPurpose,
    ErrorKind,
    Granularity,
    ShellMode,
    Workspace,
    read_clock_skew_s,
    utcnow,
)
from codefleet.paths import DEFAULT_PROTECTED_NAMES, TreeRoot
from codefleet.statedir import NoTreeId, read_tree_id, remove_probe, write_probe

__all__ = ["CannotContinue", "Runner", "RunnerOptions"]

log = logging.getLogger(__name__)
RETRY_START_S = 0.1
MAX_RETRY_S = 5.0
LEAVE_TIMEOUT_S = 2.0  # on the way out: the server takes a silent runner back anyway
HOST = socket.gethostname()


class CannotContinue(Exception):
    """This runner cannot go on (its registration was refused): stop and say why."""


# What no retry can fix: the runner stops and says so.
FATAL = (Unauthorized, Forbidden, CannotContinue, UntrustedServer)


def _transient(err: BaseException) -> bool:
    """The server is away or failed on its side: the same call may work later."""
    return isinstance(err, ServerUnavailable) or (
        isinstance(err, ApiError) and err.status_code >= 500
    )


@dataclass(frozen=True, slots=True)
class RunnerOptions:
    name: str
    workdir: Path
    run_dir: Path
    task_timeout: float | None = None  # None: use the server's
    poll_wait: float = 1.0
    exit_when_drained: bool = False
    protected: tuple[Path, ...] = ()
    check_timeout: float = DEFAULT_CHECK_TIMEOUT_S
    check_output_chars: int = OUTPUT_CHARS
    check_dir: Path | None = None
    uv_lock_cache: bool = True  # a `uv run` check resolves once per content (`fleet.views.uvlock`)
    resource_wait: float = DEFAULT_RESOURCE_WAIT_S  # a check waits this long for its resources
    replace: bool = False  # take the name over from a live runner of another process
    protected_names: tuple[str, ...] = DEFAULT_PROTECTED_NAMES  # see `paths`
    agent: str = "claude"  # the agent kind its executor drives; the server routes by it
    shell_default: bool = False  # tasks get run_command unless their `shell:` says otherwise
    shell_network: bool = False  # ... and its commands may use the network
    shell_config: ShellConfig | None = None  # how commands run here; None: they cannot
    reconcile_rounds: int = DEFAULT_RECONCILE_ROUNDS  # `fleet.reconcile`
    repair_turns: int = DEFAULT_REPAIR_TURNS  # `fleet.repair`: a failed verify's repair turns
    no_questions: bool = False  # unattended: `ask_operator` answers NO_ANSWER at once
    # What a write leases: wins over the task's `lease_granularity`; None or `auto`: the
    # task's, else the server's, which resolves `auto` (decisions 0146, 0164)
    lease_granularity: Granularity | None = None
    clone: bool = False  # `workdir` is this runner's own clone of the landed line (`fleet.clone`)
    line: str | None = None  # ... fetched from this remote, not the server (`serve --line-remote`)
    # the fleet's checks that passed, shared with its landing workers (`Checker.passes`)
    check_passes: dict[tuple[str, str], int] | None = None

    def locks(self) -> LockCache | None:
        """The locks `uv run` checks keep (`fleet.views.uvlock`), or None when turned off."""
        return LockCache(self.workdir) if self.uv_lock_cache else None


def _collect(task: asyncio.Task[Any]) -> None:
    """Retrieve an abandoned task's outcome so asyncio does not report it as lost."""
    if not task.cancelled():
        task.exception()


class Fenced(Exception):
    """This runner's epoch was superseded; drop everything and register again."""


class Runner:
    def __init__(self, client: FleetClient, executor: Executor, options: RunnerOptions) -> None:
        self.client = client
        self.executor = executor
        self.options = options
        self.tree = TreeRoot(
            options.workdir, protected=options.protected, names=options.protected_names
        )
        self.agent_id = ""
        self.epoch = 0
        self.heartbeat_s = 5.0
        self.grant_trust_s = 10.0
        self.lease_wait_s = 0.0  # the server's CODEFLEET_LEASE_WAIT: how long a write may park
        self.granularity = Granularity.FILE  # the server's default lease (registration says)
        self.task_timeout = options.task_timeout or 600.0
        self.question_timeout = 0.0  # the server's; 0: sessions cannot ask
        self.clock_skew_s = (
            0.0  # the server's clock minus this host's, at its lowest (registration)
        )
        self.fenced = asyncio.Event()
        self._registering: asyncio.Future[dict[str, Any]] | None = None  # the last register call
        self.inbox = Inbox()  # the running attempt's operator messages (`fleet.tools.inbox`)
        self.clone = (
            Clone(options.workdir, client.base_url, client.token, options.line)
            if options.clone
            else None
        )
        self._opened = False  # the clone is made (or checked) once, before the first register
        self._forget: set[str] = set()  # what the last attempt wrote: the next reset removes it

    # -- lifecycle ------------------------------------------------------------------

    async def register(self) -> None:
        """Register (retrying an absent server); a refusal is `CannotContinue`."""
        take_over = self.options.replace and not self.agent_id  # the first registration only
        tree_id = await self._tree_id()
        try:
            answer = await self._retrying(lambda: self._register_once(take_over, tree_id))
        except FATAL:
            raise
        except DomainError as err:  # refused: registering again would be refused again
            raise CannotContinue(f"registration refused: {err.message}") from err
        self.agent_id, self.epoch = answer["agent_id"], answer["epoch"]
        self.heartbeat_s = float(answer.get("heartbeat_interval_s", 5.0))
        # A grant is trusted for half the server's stale window (prewrite: "A late grant").
        self.grant_trust_s = float(answer.get("stale_after_s", 20.0)) / 2
        self.lease_wait_s = float(answer.get("lease_wait_s", 0.0))
        self.granularity = Granularity(
            answer.get("lease_granularity", Granularity.FILE)  # an older server: files
        )
        self.task_timeout = self.options.task_timeout or float(answer.get("task_timeout_s", 600.0))
        self.question_timeout = float(answer.get("question_timeout_s", 0.0))
        self.fenced.clear()
        log.info("%s registered as %s epoch %s", self.options.name, self.agent_id, self.epoch)

    def _own_granularity(self) -> Granularity | None:
        """This runner's flag, where it names one: `auto` is the server's to resolve, never
        guessed here (the server knows the integration check)."""
        own = self.options.lease_granularity
        return None if own is Granularity.AUTO else own

    async def _tree_id(self) -> str:
        """This tree's identity. A tree without one may be new, its server not started yet:
        wait for the server (it writes the identity as it starts), then read again; still
        none is `CannotContinue` naming the file. A clone takes the server's."""
        if self.clone is not None:
            return await self._open_clone(self.clone)
        try:
            return read_tree_id(self.tree.root)
        except NoTreeId:
            await self._retrying(self.client.health)
        try:
            return read_tree_id(self.tree.root)
        except NoTreeId as err:
            raise CannotContinue(f"cannot register: {err}") from None

    async def _open_clone(self, clone: Clone) -> str:
        """The served tree's identity, once the clone is made (or checked) at its line."""
        health = await self._retrying(self.client.health)
        tree_id = str(health.get("tree_id") or "")
        if self._opened:
            return tree_id
        delay = RETRY_START_S
        while True:
            line = await self._retrying(self.client.landed)
            if line.get("off"):
                raise CannotContinue(
                    f"the server has no landed line ({line['off']}): a runner in a clone needs "
                    "a server that serves a git repository"
                )
            if line.get("started"):
                break
            log.info("%s: the landed line has not started yet; waiting", self.options.name)
            await asyncio.sleep(delay)
            delay = min(delay * 2, MAX_RETRY_S)
        delay = RETRY_START_S
        while True:
            try:
                tip = await asyncio.to_thread(clone.open, tree_id)
                break
            except CloneRefused as err:  # the directory or the host: no retry can fix it
                raise CannotContinue(str(err)) from None
            except CloneError as err:  # a fetch the server's going away cut short: again
                log.warning("%s: %s; retrying in %.1fs", self.options.name, err, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, MAX_RETRY_S)
        self._opened = True
        log.info("%s: clone %s at the landed line's %s", self.options.name, clone.root, tip[:12])
        return tree_id

    async def _register_once(self, take_over: bool, tree_id: str) -> dict[str, Any]:
        """One register call, shielded: a stop cuts the wait short, never the call, so
        a registration that lands anyway is known and left (`_leave`)."""
        root = str(self.tree.root)
        # the server must see the probe: a copy of the tree fails (a clone is one by design)
        probe = None if self.clone is not None else write_probe(self.tree.root)
        self._registering = asyncio.ensure_future(
            self.client.register(
                self.options.name,
                root,
                os.getpid(),
                host=HOST,
                replace=take_over,
                agent=self.options.agent,
                tree_id=tree_id,
                probe=probe,
                workspace=Workspace.CLONE if self.clone is not None else None,
            )
        )
        self._registering.add_done_callback(_collect)
        if probe is not None:
            self._registering.add_done_callback(lambda _: remove_probe(self.tree.root, probe))
        answer = await asyncio.shield(self._registering)
        if "server_time" in answer:  # reads are stamped in the server's time (`fleet.gate.readset`)
            self.clock_skew_s = read_clock_skew_s(str(answer["server_time"]), utcnow())
        return answer

    async def run(
        self, stop: asyncio.Event | None = None, interrupt: asyncio.Event | None = None
    ) -> None:
        """Work until `stop` is set (or the fleet drains, with exit_when_drained).

        `stop` interrupts every phase: the work is cancelled wherever it waits. The runner
        leaves as `interrupted` when `interrupt` (default: `stop` itself) is set: the
        operator's stop, not a drained fleet's.
        """
        stop = stop or asyncio.Event()
        work = asyncio.create_task(
            self._serve(stop, interrupt or stop), name=f"{self.options.name}-work"
        )
        halt = asyncio.create_task(stop.wait())
        try:
            await asyncio.wait({work, halt}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            halt.cancel()
            work.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await work

    async def _serve(self, stop: asyncio.Event, interrupt: asyncio.Event) -> None:
        try:
            await self.register()
            beat = asyncio.create_task(
                self._heartbeat_loop(), name=f"{self.options.name}-heartbeat"
            )
            try:
                await self._work_loop(stop)
            finally:
                beat.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await beat
        finally:
            await self._leave(interrupted=interrupt.is_set())

    async def _leave(self, interrupted: bool) -> None:
        """Leave the server, however the runner ends; told to stop, it leaves `interrupted`
        (its attempt, rolled back, is not charged). A registration still on its way is
        waited for (bounded), so a runner stopped mid-registration does not stay behind."""
        call = self._registering
        if call is not None and not call.cancelled():
            with contextlib.suppress(Exception):  # it never landed: there is nothing to leave
                answer = await asyncio.wait_for(asyncio.shield(call), LEAVE_TIMEOUT_S)
                self.agent_id, self.epoch = answer["agent_id"], answer["epoch"]
        if not self.agent_id:
            return
        with contextlib.suppress(Exception):  # leaving is a courtesy; stale detection covers it
            await self.client.leave(
                self.agent_id, self.epoch, timeout=LEAVE_TIMEOUT_S, interrupted=interrupted
            )

    async def _work_loop(self, stop: asyncio.Event) -> None:
        delay = RETRY_START_S
        again = False  # register before the next poll
        while not stop.is_set():
            try:
                if again:
                    await self.register()
                    again = False
                if await self._work_once(stop):
                    return
                delay = RETRY_START_S
                continue
            except (StaleEpoch, Fenced, NotFound):  # fenced, or forgotten (reset): register again
                again = True
                continue
            except FATAL:
                raise
            except Exception as err:  # a loop boundary: one bad answer must not end the runner
                if _transient(err):
                    log.warning("%s: %s; retrying in %.1fs", self.options.name, err, delay)
                else:
                    log.exception(
                        "%s: unexpected failure; retrying in %.1fs", self.options.name, delay
                    )
            with contextlib.suppress(TimeoutError):  # a stop cuts the backoff short
                await asyncio.wait_for(stop.wait(), delay)
            delay = min(delay * 2, MAX_RETRY_S)

    async def _work_once(self, stop: asyncio.Event) -> bool:
        """Poll once and run what comes; True when the fleet drained and we should exit.

        A report's answer may hand over the next task: it runs without a poll.
        """
        task = await self._next_task(stop)
        if task is None:
            return self.options.exit_when_drained and await self._drained()
        while task is not None and not stop.is_set():
            task = await self.run_task(task)
        return False

    async def _next_task(self, stop: asyncio.Event) -> AssignedTask | None:
        poll = asyncio.create_task(
            self.client.assignment(self.agent_id, self.epoch, self.options.poll_wait)
        )
        stopper = asyncio.create_task(stop.wait())
        try:
            done, _ = await asyncio.wait({poll, stopper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopper.cancel()
            if not poll.done():
                # Stopped or cancelled mid-poll: the request may still fail as
                # the server goes away; collect that failure, nobody awaits it.
                poll.cancel()
                poll.add_done_callback(_collect)
        if poll not in done:
            return None
        return poll.result()

    async def _drained(self) -> bool:
        return int((await self.client.health()).get("live_tasks", 1)) == 0

    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_s)
            try:
                await self._beat(self.inbox)
            except StaleEpoch:
                self.fenced.set()
            except Exception:  # a loop boundary: a missed beat is retried next interval
                log.warning("%s: heartbeat failed", self.options.name, exc_info=True)

    async def _beat(self, inbox: Inbox) -> None:
        """One heartbeat: say which operator messages the session has, take the new ones."""
        acknowledged = inbox.acknowledged()
        head = self.clone.head if self.clone is not None else None
        beat = await self.client.heartbeat(self.agent_id, self.epoch, acknowledged, head)
        inbox.told(acknowledged)
        inbox.offer(OperatorNote.from_wire(m) for m in beat.get("messages") or ())
        inbox.answer((str(a["question_id"]), str(a["text"])) for a in beat.get("answers") or ())

    async def _retrying(self, call: Any) -> Any:
        """`call()` until it is not a transient fault (unreachable, timed out, 5xx)."""
        delay = RETRY_START_S
        while True:
            try:
                return await call()
            except (ServerUnavailable, ApiError) as err:
                if not _transient(err):
                    raise
                log.warning("%s: %s, retrying in %.1fs", self.options.name, err, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, MAX_RETRY_S)

    # -- one attempt ------------------------------------------------------------------

    async def run_task(self, task: AssignedTask) -> AssignedTask | None:
        """One attempt, reported; the next task when the report's answer hands one over."""
        commands, resources, fresh = await self.client.check_options()
        try:  # retried: a start applied just before a server crash must not be lost (idempotent)
            await self._retrying(lambda: self.client.start(task.id, self.agent_id, self.epoch))
        except NotOwner:
            return None  # the task moved on before we started it
        failed = self._unrepairable(task) or await self._reset_clone(task)
        if failed is not None:
            return await self._report(task.id, failed)
        reads = ReadLog(skew_s=self.clock_skew_s)
        gate = WriteGate(
            self.client,
            self.tree,
            self.agent_id,
            self.epoch,
            task.id,
            self.grant_trust_s,
            lease_wait_s=self.lease_wait_s,
            reads=reads.latest,
            granularity=Granularity.FILE  # a clone delivers whole files
            if self.clone is not None
            else self._own_granularity() or task.lease_granularity or self.granularity,
            clone=self._clone_async() if self.clone is not None else None,
        )
        checker = self._checker(gate, commands, task.attempts, resources, fresh)
        inbox = Inbox(task)
        started = time.monotonic()

        async def verify(report: AttemptReport) -> AttemptReport:
            return await self._verify(task, checker, report, started)

        attempt = Attempt(
            task,
            gate,
            self.tree.root,
            self.options.run_dir,
            self.options.name,
            checker,
            self._commands(gate, task),
            reconcile_rounds=self.options.reconcile_rounds,
            inbox=inbox,
            ask=self._asker(task.id, inbox) if task.ask else None,
            reads=reads,
            verify=verify,
            repair_turns=self.options.repair_turns,
        )
        self.inbox = attempt.inbox
        try:
            report = await self._execute(attempt)
            if attempt.inbox.owed and not gate.fenced:  # before the report ends the attempt
                with contextlib.suppress(Exception):  # a record; the prompt covers the rest
                    await self._beat(attempt.inbox)
        finally:
            self.inbox = Inbox()
        if report is not None and not gate.fenced and not attempt.repairs.verified:
            report = await verify(report)  # an executor that does not end in `fleet.repair`
        if report is None or gate.fenced:
            raise Fenced  # drop the result: the server already took the task back
        if self.clone is not None:
            self._forget = set(gate.written)
            report = await self._deliver(task, gate, report)
        duration_ms = int((time.monotonic() - started) * 1000)
        return await self._report(task.id, replace(report, duration_ms=duration_ms))

    def _unrepairable(self, task: AssignedTask) -> AttemptReport | None:
        """A repair in a clone: the change is in the server's tree, out of this clone's reach;
        the attempt fails at once and the server reworks the task (decision 0161)."""
        if task.repair_session is None or self.clone is None:
            return None
        return AttemptReport(
            attempt=task.attempts,
            ok=False,
            error="a runner in a clone cannot repair a change delivered to the server's tree",
            error_kind=ErrorKind.INFRA,
        )

    async def _reset_clone(self, task: AssignedTask) -> AttemptReport | None:
        """A clone's rollback and fresh start: the line's tip, before the attempt (said to the
        server at once); a failed reset (the line cannot be fetched) is the attempt's
        infrastructure failure."""
        if self.clone is None:
            return None
        try:
            await self._clone_async().reset(self._forget)
        except CloneError as err:
            return AttemptReport(
                attempt=task.attempts,
                ok=False,
                error=f"this runner's clone could not be reset to the landed line: {err}",
                error_kind=ErrorKind.INFRA,
            )
        self._forget = set()
        with contextlib.suppress(Exception):  # a view's record; the next heartbeat says it too
            await self._beat(self.inbox)  # the clone's new head, at once
        return None

    def _clone_async(self) -> AsyncClone:
        """The clone as the attempt's gate uses it, asking this server whether its line is
        current."""
        assert self.clone is not None

        remote = self.options.line is not None

        async def current() -> tuple[bool, str | None]:
            line = await self.client.landed()
            pushed = not remote or line.get("pushed") == line.get("tip")  # the remote has it too
            return bool(line.get("current", True)) and pushed, line.get("tip") or None

        return AsyncClone(self.clone, current)

    async def _deliver(
        self, task: AssignedTask, gate: WriteGate, report: AttemptReport
    ) -> AttemptReport:
        """A clone's success reaches the server's tree: the files the attempt holds, as they
        are here, before the report. Refused, the attempt fails (and is rolled back)."""
        assert self.clone is not None
        if not report.ok:
            return report
        rows = self.clone.delivered(gate.held | set(gate.written))
        if not rows:
            return report
        try:
            await self._retrying(
                lambda: self.client.deliver(task.id, self.agent_id, self.epoch, task.attempts, rows)
            )
        except StaleEpoch:
            raise Fenced from None
        except NotOwner:
            return report  # the task moved on: its report is refused the same way
        except DomainError as err:
            return replace(
                report,
                ok=False,
                error=f"the server refused this clone's files: {err}",
                error_kind=ErrorKind.INFRA,
            )
        return report

    def _asker(self, task_id: str, inbox: Inbox) -> Asker | None:
        """The attempt's `ask_operator` (None when the server's question timeout is 0)."""
        if self.question_timeout <= 0 and not self.options.no_questions:
            return None
        return Asker(
            self.client,
            self.agent_id,
            self.epoch,
            task_id,
            inbox,
            self.question_timeout,
            self.options.no_questions,
        )

    def _checker(
        self,
        gate: WriteGate,
        commands: dict[str, str],
        attempt: int,
        resources: dict[str, list[str]],
        fresh: frozenset[str] = frozenset(),
    ) -> Checker | None:
        if not commands:
            return None
        opts = self.options
        limits = CheckLimits(
            opts.check_timeout,
            opts.check_output_chars,
            opts.protected,
            opts.check_dir,
            resource_wait=opts.resource_wait,
            locks=opts.locks(),
        )
        return Checker(gate, commands, attempt, limits, resources, fresh, opts.check_passes)

    def _commands(self, gate: WriteGate, task: AssignedTask) -> CommandRunner | None:
        """The attempt's run_command tool: the task's `shell` mode, else the fleet's default."""
        opts, mode = self.options, task.shell_mode
        enabled = mode in (ShellMode.ON, ShellMode.NETWORK) or (mode is None and opts.shell_default)
        if not enabled:
            return None
        if opts.shell_config is None:
            log.warning(
                "%s: task %s asks for run_command, but commands cannot run on this "
                "runner (see `codefleet doctor`); it gets no tool",
                opts.name,
                task.id,
            )
            return None
        network = mode == ShellMode.NETWORK or opts.shell_network
        config = replace(
            opts.shell_config, sandbox=replace(opts.shell_config.sandbox, network=network)
        )
        return CommandRunner(gate, task.attempts, config)

    async def _verify(
        self, task: AssignedTask, checks: Checker | None, report: AttemptReport, started: float
    ) -> AttemptReport:
        """Run the task's `verify` check after a successful session; failure -> verify_failed.

        A check whose program cannot start is `check_unrunnable`: the task fails at once.
        """
        name = task.verify
        if not report.ok or not name:
            return report
        if task.verify_at_landing:  # the same check runs before it lands: said, not run
            with contextlib.suppress(Exception):  # a record; the landing check is the gate
                await self.client.check_event(
                    task.id,
                    self.agent_id,
                    self.epoch,
                    {
                        "attempt": task.attempts,
                        "name": name,
                        "phase": "deferred",
                        "purpose": CheckPurpose.VERIFY,
                    },
                )
            summary = f"{report.summary or 'done'} (verify: check {name} runs at landing)"
            return replace(report, summary=summary)
        if checks is None:
            return replace(
                report,
                ok=False,
                error_kind=ErrorKind.INFRA,
                error=f"task verifies with check {name!r} but no check is defined",
            )
        left = self.task_timeout - (time.monotonic() - started)
        result = await checks.run(name, CheckPurpose.VERIFY, timeout=max(1.0, left))
        if result.passed:
            how = "passed on this same content before" if result.reused else "passed"
            summary = f"{report.summary or 'done'} (verified: check {name} {how})"
            return replace(report, summary=summary)
        if result.not_runnable:
            kind = ErrorKind.CHECK_UNRUNNABLE
        else:
            kind = ErrorKind.INFRA if result.infra else ErrorKind.VERIFY_FAILED
        error = result.failure_text(task.id)
        return replace(report, ok=False, error=error, error_kind=kind)

    async def _execute(self, attempt: Attempt) -> AttemptReport | None:
        """The executor's report, a timeout report, or None when fenced mid-run."""
        work = asyncio.create_task(self.executor.run(attempt))
        fence = asyncio.create_task(self.fenced.wait())
        try:
            done = await self._within_wall_clock(attempt.inbox, {work, fence})
        except asyncio.CancelledError:  # the runner is stopping: so is the attempt
            work.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await work
            raise
        finally:
            fence.cancel()
        if work in done:
            try:
                return work.result()
            except Exception as err:  # an executor crash is the attempt's failure, not ours
                log.exception("executor failed on %s", attempt.task_id)
                return AttemptReport(
                    attempt=attempt.number,
                    ok=False,
                    error=f"executor crashed: {err!r}",
                    error_kind=ErrorKind.AGENT_ERROR,
                )
        work.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await work
        if fence in done:
            return None
        return AttemptReport(
            attempt=attempt.number,
            ok=False,
            error=f"timed out after {self.task_timeout:.0f}s",
            error_kind=ErrorKind.TIMEOUT,
            blocked_on_path=attempt.gate.blocked_on,
        )

    async def _within_wall_clock(
        self, inbox: Inbox, running: set[asyncio.Task[Any]]
    ) -> set[asyncio.Task[Any]]:
        """Wait for the first of `running` within the wall clock; the time the attempt
        waited on the operator's answers (`Inbox.waited`) is not charged."""
        started = time.monotonic()
        while True:
            left = self.task_timeout + inbox.waited() - (time.monotonic() - started)
            if left <= 0 and not inbox.asking:
                return set()
            budget = max(left, 0.0) if not inbox.asking else max(left, self.heartbeat_s)
            done, _ = await asyncio.wait(
                running, timeout=budget, return_when=asyncio.FIRST_COMPLETED
            )
            if done:
                return done

    async def _report(self, task_id: str, report: AttemptReport) -> AssignedTask | None:
        try:
            answer = await self._retrying(
                lambda: self.client.complete(task_id, self.agent_id, self.epoch, report)
            )
        except NotOwner:
            return None  # someone took the task back; our report no longer applies
        return handed_task(answer)
