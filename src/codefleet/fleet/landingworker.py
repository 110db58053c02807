"""The landing worker: claims a landing step, runs its checks in a view, reports.

The server decides what lands (`coord.calls.landingqueue`); a worker only runs the step
it is handed: for each check of the step, a view of the tree holding the
landed work plus the step's batch, with every other leased file put back to
its pre-image, the check's command run there with a time limit
and an output cap, and the verdicts posted. It stops at the first failing
check (the step has failed; the rest would not change that). A view that
cannot be built, or a server that cannot be reached, is `did_not_run`: the
server hands the step out again. While a step runs the worker beats (`beat_s`,
from the claim): a worker that dies is not heard from, and its claim lapses
after `stale_after` (docs/decisions/0152-a-landing-claim-lapses-with-its-worker.md).
A beat answered `not_owner` means the step's answer can no longer matter (a
shorter prefix failed under it, the round ended): its check is stopped and the
worker claims again.
The check itself dies with the worker (`fleet.views.shell`: its process group is
killed when the worker's end of a pipe closes).

Each check reports its view's content identity (`fleet.views.identity`,
taken before and after the run, kept when they agree): `run --verify` after
the drain reuses the last landing check that passed on exactly the tree it
would run on, and a fleet's workers share the passes (`LandingOptions.passed`,
kept once the server recorded them): a check that passed on a content is not
run again on it (the base alone, after the batch that landed it), its result
says `view: reused` and names the step it reuses (`reused_step`). A task's own
check that passed on that content (`LandingOptions.attempt_passes`, kept by the
fleet's runners once the server recorded it) stands for it too: the result
names that `check_finished` (`reused_event`; decision 0177).

The view is the one every check gets (`fleet.views.runinview.run_in_view`: an overlay
layer at the tree's own path, or a copy where layers are unavailable), masked by
the step's own set of files.

One worker runs beside each runner of `codefleet run` and beside each `codefleet
runner`; the server hands each free worker a step of its own, up to
`landing_parallel` at once (docs/decisions/0137-who-runs-landing-checks.md,
0160-landing-steps-run-in-parallel.md).
A worker is never the server process and never on the pre-write path; it runs
its checks with the isolation every check has.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from codefleet.api.client import FleetClient, ServerUnavailable
from codefleet.api.landingrecords import CheckRun, LandingStep, StepCheck
from codefleet.errors import DomainError, NotOwner
from codefleet.failuretext import failure_excerpt
from codefleet.fleet.tools.attemptchecks import DEFAULT_CHECK_TIMEOUT_S, OUTPUT_CHARS
from codefleet.fleet.views.programs import NOT_RUNNABLE
from codefleet.fleet.views.runinview import (
    Mask,
    Removals,
    ViewFailed,
    masked_identity,
    run_in_view,
)
from codefleet.fleet.views.uvlock import LockCache
from codefleet.models import CheckVerdict
from codefleet.paths import TreeRoot

__all__ = ["LandingOptions", "LandingWorker"]

log = logging.getLogger(__name__)
TAIL_CHARS: Final = 2_000
RETRY_S: Final = 1.0
BEAT_S: Final = 5.0  # when a claim does not say how often to beat
REUSED: Final = "reused"  # a result's `view` when the check was not run (`_reused`)


@dataclass(frozen=True, slots=True)
class LandingOptions:
    name: str
    check_timeout: float = DEFAULT_CHECK_TIMEOUT_S
    output_chars: int = OUTPUT_CHARS
    exclude: tuple[Path, ...] = ()  # protected paths inside the tree (database, run dir)
    view_dir: Path | None = None
    wait: float = 1.0  # a claim's long-poll
    locks: LockCache | None = None  # a `uv run` check resolves once per content; None: always
    # (command, content identity) -> the step of a check that passed in this fleet (its result
    # recorded): not run again on the same content (the base alone after a batch that just
    # landed it), the reuse names that step; None: always run
    passed: dict[tuple[str, str], int] | None = None
    # (command, content identity) -> the `check_finished` of a task's check that passed in
    # this fleet (`fleet.tools.attemptchecks`): a landing check on that content names it
    attempt_passes: dict[tuple[str, str], int] | None = None


class LandingWorker:
    """One landing worker: `run` until stopped; see the module docstring."""

    def __init__(self, client: FleetClient, tree: TreeRoot, options: LandingOptions) -> None:
        self.client = client
        self.tree = tree
        self.options = options
        self.steps = 0  # steps run (for tests and the log)

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                step = await self._claim(stop)
                if step is not None:
                    await self.run_step(step)
            except asyncio.CancelledError:
                raise
            except Exception as err:  # a loop boundary: the server hands the step out again
                log.warning("%s: landing step failed: %s", self.options.name, err)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), RETRY_S)

    async def _claim(self, stop: asyncio.Event) -> LandingStep | None:
        """A step to run, or None: none within the claim's long-poll, or `stop` was set (a
        fleet that drained does not wait out the poll)."""
        claim = asyncio.create_task(
            self.client.landing_claim(
                self.options.name, self.options.check_timeout, wait=self.options.wait
            )
        )
        stopper = asyncio.create_task(stop.wait())
        try:
            done, _ = await asyncio.wait({claim, stopper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopper.cancel()
            if not claim.done():  # stopped mid-poll: nobody awaits the claim's failure
                claim.cancel()
                claim.add_done_callback(_collect)
        return claim.result() if claim in done else None

    async def run_step(self, step: LandingStep) -> None:
        """Run the step's checks in order, stopping at the first that does not pass; report.
        A step the server says is over stops at once (its check killed)."""
        step_id = step.step
        removals = Removals()  # its views are removed while the worker goes on, then awaited
        checks = asyncio.create_task(self._run_checks(step_id, step.checks, removals))
        every = step.beat_s or BEAT_S
        beating = asyncio.create_task(self._beat(step_id, every, checks.cancel))
        try:
            results = await checks
            await self.client.landing_result(step_id, results)
            self._keep_passes(step_id, results)
        except NotOwner:
            log.info("%s: landing step %s is over; claiming again", self.options.name, step_id)
        except asyncio.CancelledError:
            if (me := asyncio.current_task()) is not None and me.cancelling():
                raise  # this worker is stopping
            log.info("%s: landing step %s is over; its check stopped", self.options.name, step_id)
        finally:
            checks.cancel()
            beating.cancel()
            await asyncio.gather(checks, beating, return_exceptions=True)
            await removals.wait()
        self.steps += 1

    async def _run_checks(
        self, step_id: int, checks: Sequence[StepCheck], removals: Removals
    ) -> list[CheckRun]:
        """Each check of the step in order, until the first that does not pass."""
        results: list[CheckRun] = []
        for check in checks:
            # The view's mask and its content identity are read while the start is recorded.
            look = asyncio.create_task(self._before(step_id))
            look.add_done_callback(_collect)
            try:
                await self.client.landing_started(step_id, check.name)
            except BaseException:
                look.cancel()
                raise
            result = await self._check(step_id, check.name, check.command, look, removals)
            result = replace(result, command=check.command)
            results.append(result)
            if result.verdict != CheckVerdict.PASSED:
                break
        return results

    async def _beat(self, step_id: int, every: float, over: Callable[[], object]) -> None:
        """Say this worker is alive every `every` s while step `step_id` runs; once the server
        says it is over, call `over` (which stops its check)."""
        while True:
            await asyncio.sleep(every)  # a timer, not a wait on anything
            try:
                await self.client.landing_beat(step_id)
            except NotOwner:
                over()  # the step is over (handed out again, a shorter prefix failed under it)
                return
            except (ServerUnavailable, DomainError) as err:  # the next beat tries again
                log.info("%s: beat of landing step %s failed: %s", self.options.name, step_id, err)

    async def _check(
        self,
        step_id: int,
        name: str,
        command: str,
        look: Awaitable[tuple[Mask, str | None]],
        removals: Removals,
    ) -> CheckRun:
        """Run one check of the step (`look`: its view's mask and identity before, fetched once
        for both, decision 0173), or reuse a pass on the same content."""
        try:
            first, before = await look
            earlier = self._earlier_pass(command, before)
            if earlier is not None and await self._reusable(name):
                return _reused(name, before, **earlier)
            run = await run_in_view(
                self.tree.root,
                functools.partial(self._mask, step_id),
                command,
                timeout=self.options.check_timeout,
                cap=self.options.output_chars,
                exclude=self.options.exclude,
                view_dir=self.options.view_dir,
                locks=self.options.locks,
                mask=first,
                identify=before is not None,
                removals=removals,
            )
        except NotOwner:
            raise
        except (ViewFailed, ServerUnavailable, DomainError, OSError, ValueError) as err:
            why = f"the landing check {name} did not run: {type(err).__name__}: {err}"
            return CheckRun(name, CheckVerdict.DID_NOT_RUN, error=why[:TAIL_CHARS])
        ran = run.ran
        if ran.timed_out:
            verdict = CheckVerdict.TIMED_OUT
        elif ran.exit_code == 0:
            verdict = CheckVerdict.PASSED
        elif ran.exit_code in NOT_RUNNABLE:
            verdict = CheckVerdict.UNRUNNABLE
        else:
            verdict = CheckVerdict.FAILED
        output = ran.output[-self.options.output_chars :]
        if ran.timed_out:
            output += f"\n(timed out after {self.options.check_timeout:g}s)"
        still = before is not None and not run.disturbed and run.identity == before
        return CheckRun(
            name,
            verdict,
            exit_code=ran.exit_code,
            duration_ms=int(ran.duration_s * 1000),
            view_ms=int(run.ms),
            view=run.view,
            output=output,
            output_tail=failure_excerpt(output, TAIL_CHARS),
            identity=before if still else None,
            resolution=run.resolution,
        )

    async def _reusable(self, name: str) -> bool:
        """Whether the check's passing result may stand for another run (not `reuse: false`)."""
        _, _, fresh = await self.client.check_options()
        return name not in fresh

    def _earlier_pass(self, command: str, identity: str | None) -> dict[str, int] | None:
        """Where `command` passed on `identity` in this fleet, if it did: a landing step
        (`step`, kept first), else a task's own recorded run (`event`, decision 0177)."""
        if identity is None:
            return None
        key = (command, identity)
        if (step := (self.options.passed or {}).get(key)) is not None:
            return {"step": step}
        if (event := (self.options.attempt_passes or {}).get(key)) is not None:
            return {"event": event}
        return None

    def _keep_passes(self, step_id: int, results: Sequence[CheckRun]) -> None:
        """Keep each check the server recorded passing on a content that held still (a reuse
        names this step: `reused_step`)."""
        passed = self.options.passed
        if passed is None:
            return
        for run in results:
            if run.verdict is CheckVerdict.PASSED and run.identity and run.view != REUSED:
                passed.setdefault((run.command or "", run.identity), step_id)

    async def _mask(self, step_id: int) -> Mask:
        """What the step's view puts back (`landing_preimages`)."""
        return Mask.from_answer(await self.client.landing_preimages(step_id))

    async def _before(self, step_id: int) -> tuple[Mask, str | None]:
        """The step's view's mask, and that view's content identity now (`fleet.views.identity`;
        None: none)."""
        images = functools.partial(self._mask, step_id)
        return await masked_identity(self.tree.root, images, self.options.exclude)


def _reused(
    name: str, identity: str | None, *, step: int | None = None, event: int | None = None
) -> CheckRun:
    """A check not run: it passed with the same command on this same content, in landing
    `step` (decision 0158) or in a task's own run, its `check_finished` `event` (0177)."""
    whose = "this check" if event is None else "a task's own run of this check"
    said = f"not run: {whose} passed with the same command on this same content"
    return CheckRun(
        name,
        CheckVerdict.PASSED,
        exit_code=0,
        duration_ms=0,
        view_ms=0,
        view=REUSED,
        output=said,
        output_tail=said,
        identity=identity,
        reused_step=step,
        reused_event=event,
    )


def _collect(task: asyncio.Task[Any]) -> None:
    """Retrieve a stopped claim's outcome, so that its failure is not logged as unretrieved."""
    if not task.cancelled():
        task.exception()
