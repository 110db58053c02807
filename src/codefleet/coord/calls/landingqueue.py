"""The landing queue: a finished task waits, keeping its leases, until its checks pass on the landed base.

A task whose session ended well (reconciled, its own `verify` passed) is not
`succeeded` yet: `enqueue` puts it in the landing queue, in the order tasks
finish, its files still leased (nobody can change them) and its runner free.
Rounds of the merge queue (`landingpolicy`) decide what lands; this part owns
the queue, the round in progress, the halt; `landingsteps` the steps handed
out, up to `parallel` at once, one per worker (decision 0160). A step is run by a
landing worker (`fleet.landingworker`, never in the server and never on the
hook's path): `claim` hands it out under a fresh step id, `result` applies its
verdict; a result for a step that is no longer current (the server restarted,
the step was handed out again, a candidate was cancelled, a shorter prefix
failed under it) is `NotOwner` and changes nothing, so nothing lands twice. A
claim holds while its worker is heard from (the claim, `beat`, `started`,
`preimages`) within `stale_after`: a worker that died loses the step to the
next worker that asks (docs/decisions/0152-a-landing-claim-lapses-with-its-worker.md).

What a decision does to its tasks (landing, a blamed task's repair or rework,
a halt) and how each is told is `landingoutcomes`; this class only sequences.
Landing order is the order tasks finished (`queue`, stored as `landing_seq`):
`waiting` is the queue's tasks still waiting, and `landingpolicy.joining` says
which of them join a round (the one place the order is cut to a round's
window). A round whose checks are empty lands at once, inside the transaction
that queued it: a graph without checks lands every task the moment it
finishes, as before. The step a worker claims and the runs it reports are
typed (`api.landingrecords`).

Memory only: the round, its steps and their claims (a restart starts a new
round). Stored: each task's status, queue and order number (`tasks`), the
integration check and the halt (`server_meta`). On the engine's thread; its
writes run in the caller's transaction or its own.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Final

from codefleet.api.landingrecords import CheckRun, LandingStep, StepCheck
from codefleet.attempt import AttemptReport
from codefleet.coord.calls.callparts import CallParts
from codefleet.coord.calls.landingoutcomes import (
    HALT_KEY,
    LandingOutcomes,
    failure_tail,
    finished_fields,
)
from codefleet.coord.calls.landingsteps import Handed, HandedSteps
from codefleet.coord.policy import landingpolicy as policy
from codefleet.coord.policy.waits import WaitOutcome
from codefleet.coord.tables.liveindex import LiveTask
from codefleet.coord.tables.preimages import uncovered
from codefleet.errors import InvalidGraph, InvalidState, NotOwner
from codefleet.models import CheckVerdict, EventType, HaltCause, TaskStatus

__all__ = ["LandingQueue"]

log = logging.getLogger(__name__)
INTEGRATION_KEY: Final = "integration"
STEP_KEY: Final = "landing_step"  # the last step number handed out
BEATS_PER_STALE: Final = 4  # a worker running a step says it is alive this often per stale_after
INFRA_RETRIES: Final = 3  # a step that could not run this many times halts landing
# A step's verdict that is no verdict: the check did not run; the step is handed out again.
DID_NOT_RUN: Final = CheckVerdict.DID_NOT_RUN
# The check of a step whose answer stopped mattering (a shorter prefix failed under it, the
# round ended): said by the server when it drops the step; its worker stops it.
STOPPED: Final = CheckVerdict.STOPPED


class LandingQueue:
    """The landing queue of one engine; see the module docstring."""

    def __init__(
        self,
        parts: CallParts,
        batch: int,
        stale_after: float,
        parallel: int,
        repair_turns: int = 0,
    ) -> None:
        self.store = parts.store
        self.clock = parts.clock
        self.tasks = parts.tasks
        self.leases = parts.leases
        self._preimages = parts.preimages  # the pre-images part (`preimages` is the step route)
        self.checks = parts.checks
        self.transition = parts.transition
        self.kick = parts.kick
        self.outcomes = LandingOutcomes(parts, repair_turns)  # what a decision does, and says
        self.batch = max(1, batch)
        self.parallel = max(1, parallel)  # the most steps in flight at once
        self.stale_after = stale_after
        self.steps = HandedSteps(self.clock, parts.agents.deaf_seconds, stale_after)
        self.queue: list[str] = []
        self.integration: str | None = None
        self.halted: dict[str, Any] | None = None
        self.round: policy.Round | None = None
        self.failure: tuple[str, str] = ("", "")  # the round's latest failing check, output
        # set when the queue, the round or the halt changed: what a parked claim waits on
        self.claimable = asyncio.Event()
        self.closing = False  # the server is stopping: a parked claim answers at once

    def load(self) -> None:
        """From the record: the queue in order, the integration check, the halt."""
        self.queue = self.store.landing_queue()
        self.integration = self.store.meta(INTEGRATION_KEY) or None
        halted = self.store.meta(HALT_KEY)
        self.halted = json.loads(halted) if halted else None
        self.round = None
        self.steps.clear()  # a restart: nothing was running in this process

    # -- configuration ------------------------------------------------------------------------

    def set_integration(self, name: str | None) -> None:
        """The check every landing must pass (None: none); an unknown name is `InvalidGraph`."""
        known = self.checks.known()
        if name is not None and name not in known:
            raise InvalidGraph(
                f"integration: there is no check named {name!r}; the known checks are: "
                f"{', '.join(sorted(known)) or '(none)'}",
                {"problem": "unknown_check", "check": name, "known": sorted(known)},
            )
        if name == self.integration:
            return
        with self.transition():
            self.store.set_meta(INTEGRATION_KEY, name or "")
            self.integration = name
            self._void_round()
            self.settle()

    # -- queueing and settling ------------------------------------------------------------------

    def enqueue(self, task: LiveTask, report: AttemptReport, now: datetime) -> None:
        """The task waits to land (caller's transaction); lands at once if nothing is checked."""
        self.leases.waits.end(task.id, WaitOutcome.ENDED)  # a parked write of it ends
        self.tasks.queue_landing(task, report, now)
        self.queue.append(task.id)
        checks = policy.checks_for(self._round_of([task.id]), 1)
        self.store.emit(
            EventType.LANDING_QUEUED,
            task_id=task.id,
            agent_id=task.agent_id,
            attempt=task.attempts,
            checks=list(checks),
            position=len(self.queue),
        )
        self.settle()

    def settle(self) -> None:
        """Land at once what has nothing to check, in order; a round that needs a check is
        started only when a worker claims it (`claim`), so its batch is as long as can be.
        Parked claims are woken: what they may take has changed."""
        while self.round is None and self.halted is None and self._start_round(hand=False):
            pass
        self._wake()

    def close(self) -> None:
        """The server is stopping: every parked claim answers now (no step), not after its
        `wait`, so that a shutdown is not held up by an idle worker's long-poll."""
        self.closing = True
        self._wake()

    def _wake(self) -> None:
        """Wake every parked claim: what it may take changed (`claimable`)."""
        self.claimable.set()
        self.claimable = asyncio.Event()  # set once: a claim parked from now on waits anew

    def _start_round(self, hand: bool) -> bool:
        """A round over the queue's head: applied at once if it checks nothing (True), else,
        with `hand`, its first step handed out (True); False when there is nothing to do."""
        candidates = policy.joining(self.waiting(), None, self._window())
        if not candidates:
            return False
        rnd, _, outcome = policy.propose(self._round_of(candidates), 1)
        if not hand and not rnd.over:
            return False
        self.round, self.failure = rnd, ("", "")
        self._follow(rnd)
        if outcome is not None:
            self._apply(outcome)
        if rnd.over:
            self._end_round()
        return True

    def _window(self) -> int:
        """The most candidates a round holds: a batch for each step that may run at once."""
        return self.batch * self.parallel

    def _round_of(self, candidates: Sequence[str]) -> policy.Round:
        live = self.tasks.index.live
        return policy.Round(
            candidates=tuple(candidates),
            base=self.tasks.landed,
            integration=self.integration,
            verify={t: live[t].verify for t in candidates if t in live},
            verified_on={t: live[t].verified_on for t in candidates if t in live},
            batch=self.batch,
        )

    def _extended(self, rnd: policy.Round) -> policy.Round:
        """`rnd` with the tasks queued since it started after its own, up to the window."""
        fresh = self._round_of(policy.joining(self.waiting(), rnd, self._window()))
        return policy.extend(rnd, fresh.candidates, fresh.verify, fresh.verified_on)

    def _propose(self) -> None:
        """One more step of the round in progress, beside those running."""
        assert self.round is not None
        self.round, _, outcome = policy.propose(self._extended(self.round), 1)
        self._follow(self.round)
        if outcome is not None:
            self._apply(outcome)
        if self.round is not None and self.round.over:
            self._end_round()

    def _landing(self, task_id: str) -> bool:
        task = self.tasks.index.live.get(task_id)
        return task is not None and task.status is TaskStatus.LANDING

    def waiting(self) -> list[str]:
        """The tasks waiting to land, in landing order (the order they finished)."""
        return [t for t in self.queue if self._landing(t)]

    def _next_step_id(self) -> int:
        """A step number never handed out before, not even before a restart (stored)."""
        last = int(self.store.meta(STEP_KEY) or 0) + 1
        self.store.set_meta(STEP_KEY, str(last))
        return last

    def _follow(self, rnd: policy.Round | None) -> None:
        """The steps follow the round: a dropped step's check under way is said stopped."""
        for handed in self.steps.sync(rnd):
            self._restarted(handed)

    def _restarted(self, handed: Handed) -> None:
        """A step dropped or handed out again: the check its last worker started is said
        stopped (its `landing_check_finished`, verdict `stopped`)."""
        if handed.check is not None:
            fields = {**handed.fields(), "check": handed.check}
            self.store.emit(EventType.LANDING_CHECK_FINISHED, **fields, verdict=STOPPED)
            handed.check = None

    def _end_round(self) -> None:
        """The round is over: its steps stop mattering, the queue keeps those still waiting."""
        self.round = None
        self._follow(None)
        self.queue = self.waiting()

    def _void_round(self) -> None:
        """Forget the round (a candidate left the queue, the check changed): start again."""
        self._end_round()

    # -- a worker's calls -------------------------------------------------------------------------

    def claim(self, worker: str, timeout_s: float) -> LandingStep | None:
        """The step to run now, for `worker`: its own again, one nobody holds, or one more of
        the round (up to `parallel` at once); None when there is nothing for it."""
        self._check_round()
        now = self.clock()
        handed = self.steps.claimable(worker, now) if self.halted is None else None
        if handed is None and self._may_add(now):
            with self.transition():
                self._add_step()
            handed = self.steps.claimable(worker, now)
        if handed is None or self.round is None:
            return None
        if handed.worker not in (None, worker):
            log.info("landing step %s: %s fell silent; handed to %s", handed.id, handed.worker,
                     worker)  # fmt: skip
        with self.transition():  # a lapsed claim's result is refused from now on
            self._restarted(handed)
            step_id = self._next_step_id()
        per_check = timeout_s + self.stale_after
        self.steps.claim(handed, worker, step_id, per_check * max(1, len(handed.step.checks)))
        self._wake()  # another free worker may take the next step of this round now
        commands = self.checks.known()
        return LandingStep(
            step=step_id,
            purpose=handed.step.purpose,
            batch=handed.batch,
            base=handed.base,
            checks=tuple(StepCheck(n, commands.get(n, "")) for n in handed.step.checks),
            beat_s=self.stale_after / BEATS_PER_STALE,
        )

    def _may_add(self, now: datetime) -> bool:
        """Whether a claim may start a round or add a step to the one in progress."""
        if self.halted is not None or self.steps.claimed(now) >= self.parallel:
            return False
        return self.round is not None or any(map(self._landing, self.queue))

    def _add_step(self) -> None:
        """Start a round (rounds with nothing to check land on the way) or add one step."""
        if self.round is None:
            while self.round is None and self._start_round(hand=True):
                pass
        elif len(self.steps.steps) < self.parallel:
            self._propose()

    def beat(self, step_id: int) -> dict[str, Any]:
        """The worker running step `step_id` is alive (memory only); `NotOwner` once it is over."""
        handed, _ = self._current(step_id)
        self.steps.heard(handed)
        return {"step": step_id}

    def _check_round(self) -> None:
        """A round whose candidate left (cancelled, reset) or whose base moved starts again."""
        rnd = self.round
        if rnd is None:
            return
        waiting = rnd.candidates[rnd.landed :]
        if rnd.base + rnd.landed != self.tasks.landed or not all(map(self._landing, waiting)):
            with self.transition():
                self._void_round()
                self.settle()

    def _current(self, step_id: int) -> tuple[Handed, policy.Round]:
        self._check_round()
        handed, rnd = self.steps.find(step_id), self.round
        if handed is None or rnd is None:
            raise NotOwner(
                f"landing step {step_id} is over (the queue moved on); claim a new one",
                {"step": step_id},
            )
        return handed, rnd

    def started(self, step_id: int, check: str) -> None:
        """`landing_check_started` for one check of the step."""
        handed, _ = self._current(step_id)
        self.steps.heard(handed)
        handed.check = check
        with self.transition():
            self.store.emit(EventType.LANDING_CHECK_STARTED, **handed.fields(), check=check)

    def preimages(self, step_id: int) -> dict[str, Any]:
        """What the step's view puts back: every leased file not held by its candidates."""
        handed, _ = self._current(step_id)
        self.steps.heard(handed)
        keep = handed.batch
        rows = self.store.preimages_except(keep)
        files = self._preimages.view_files(rows, self.leases.holders_on)
        unrestorable = uncovered(self.leases.holders, files, lambda holder: holder not in keep)
        return {"step": step_id, "files": files, "unrestorable": unrestorable}

    def result(self, step_id: int, results: Sequence[CheckRun]) -> dict[str, Any]:
        """Apply a step's verdicts (one per check run, in order; a failure may end it early)."""
        handed, rnd = self._current(step_id)
        verdicts = {r.check: str(r.verdict) for r in results}
        handed.check = None
        with self.transition():
            for r in results:
                fields = {**handed.fields(), "check": r.check}
                fields.update(self.outcomes.reused_source(r))
                self.store.emit(EventType.LANDING_CHECK_FINISHED, **fields, **finished_fields(r))
            if any(v == DID_NOT_RUN for v in verdicts.values()):
                return self._could_not_run(handed, results)
            failed = [n for n, v in verdicts.items() if v != policy.PASSED]
            if not failed and not all(n in verdicts for n in handed.step.checks):
                raise InvalidState(
                    f"landing step {step_id}: checks {list(handed.step.checks)} not all reported",
                    {"step": step_id},
                )
            if failed:  # the latest failure is the one the blamed task is told
                self.failure = (failed[0], failure_tail(results, failed[0]))
            self._recorded(*policy.record(rnd, handed.step, verdicts))
            self.settle()
        self.kick()
        return {"applied": True}

    def _recorded(self, rnd: policy.Round, outcome: policy.Outcome | None) -> None:
        """The round after a step's verdicts: land what it decided, end it or go on."""
        self.round = rnd
        self._follow(rnd)
        if outcome is not None:
            self._apply(outcome, *self.failure)
        if self.round is None or self.round.over:
            self._end_round()
        elif not self.steps.steps:
            self._propose()

    def _could_not_run(self, handed: Handed, results: Sequence[CheckRun]) -> dict[str, Any]:
        """No verdict: hand the step out again; too many times halts landing."""
        handed.infra += 1
        handed.worker = handed.until = None
        if handed.infra >= INFRA_RETRIES:
            check = results[-1].check if results else "?"
            self._halt(check, failure_tail(results, check), HaltCause.COULD_NOT_RUN)
        return {"applied": False}

    # -- a decision carried out (`landingoutcomes`) ---------------------------------------------

    def _apply(self, outcome: policy.Outcome, check: str = "", output: str = "") -> None:
        """Land what lands, rework the blamed task, or halt (which ends the round)."""
        rnd = self.round
        assert rnd is not None
        now = self.clock()
        if outcome.land:
            self.outcomes.land(rnd, outcome.land, now)
        if outcome.blamed is not None:
            self.outcomes.blame(outcome.blamed, check, output, now)
        if outcome.halt is not None:
            self._halt(check, output, outcome.halt)

    def _halt(self, check: str, output: str, why: HaltCause) -> None:
        self.halted = self.outcomes.halt(check, output, why)
        self._end_round()

    # -- the operator's calls -------------------------------------------------------------------

    def resume(self, reason: str = "operator") -> dict[str, Any]:
        """Lift a halt: the next round checks the landed base again before anything lands."""
        was = self.halted
        with self.transition():
            if was is not None:
                self.halted = None
                self.store.set_meta(HALT_KEY, "")
                self.store.emit(EventType.LANDING_RESUMED, reason=reason)
            self.settle()
        self.kick()
        return {"resumed": was is not None, "was": was}

    def state(self) -> dict[str, Any]:
        """The queue, the steps in progress, the halt: what `codefleet landing` shows (`step`
        is the first of `steps`, as before steps ran in parallel)."""
        self._check_round()
        steps = [self.steps.shown(h) for h in self.steps.steps] if self.round else []
        return {
            "integration": self.integration,
            "queue": self.waiting(),
            "landed": self.tasks.landed,
            "step": steps[0] if steps else None,
            "steps": steps,
            "halted": self.halted,
            "batch": self.batch,
            "parallel": self.parallel,
        }
