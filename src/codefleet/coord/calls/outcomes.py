"""An attempt's report applied: success, a failure settled, a usage limit.

`complete` applies one attempt's outcome once: an outdated report is a
duplicate and changes nothing; a report from a runner that does not own the
attempt is refused (`NotOwner`). In one `transition` it records the usage,
spends the budget, ends the attempt (`takebacks`) and then succeeds the task
or settles the failure: a kind that is not retryable fails it, the last
attempt fails it as out of attempts, a usage limit pauses the fleet without
charging the attempt, and anything else requeues it (a veto widening it by
the lease key it names). A success does not succeed the task: it waits to land
(`landing`), keeping its leases, and its agent is free. The answer is read from the live index, not the
database. It owns no state; it is handed the engine's parts.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Final

from codefleet.attempt import AttemptReport
from codefleet.coord.calls.callparts import CallParts
from codefleet.coord.calls.landingqueue import LandingQueue
from codefleet.coord.calls.takebacks import TakeBacks
from codefleet.coord.policy.answers import TaskAnswer
from codefleet.coord.tables.liveindex import LiveTask
from codefleet.errors import NotOwner
from codefleet.models import (
    RETRYABLE_KINDS,
    ErrorKind,
    EventType,
    ReleaseReason,
    RepairCause,
    TaskStatus,
    to_iso,
)
from codefleet.resources import is_resource_key, resource_name, valid_resource_name

__all__ = ["Outcomes"]

# A failed repair attempt is reworked as the landing failure it repaired, unless its own
# failure says more: a usage limit (not charged), a veto (its scope widened), a check that
# cannot start (not retried).
KEPT_KINDS: Final = frozenset({ErrorKind.RATE_LIMITED, ErrorKind.VETO, ErrorKind.CHECK_UNRUNNABLE})


class Outcomes:
    """One engine's attempt reports; on its thread."""

    def __init__(
        self, parts: CallParts, take_backs: TakeBacks, landing_queue: LandingQueue
    ) -> None:
        self.tree = parts.tree
        self.store = parts.store
        self.clock = parts.clock
        self.agents = parts.agents
        self.tasks = parts.tasks
        self.leases = parts.leases
        self.limits = parts.limits
        self.transition = parts.transition
        self.kick = parts.kick
        self.take_backs = take_backs
        self.landing_queue = landing_queue

    def complete(
        self, task_id: str, agent_id: str, epoch: int, report: AttemptReport
    ) -> TaskAnswer:
        """Apply one attempt's outcome, once; an outdated report is a no-op duplicate."""
        self.agents.check_epoch(agent_id, epoch)
        self.tasks.require(task_id)
        task = self.tasks.index.live.get(task_id)
        if task is None or report.attempt < task.attempts:
            return self.tasks.answer(task_id, duplicate=True)
        if (
            task.agent_id != agent_id
            or task.status not in (TaskStatus.ASSIGNED, TaskStatus.RUNNING)
            or report.attempt != task.attempts
        ):
            raise NotOwner(
                f"agent {agent_id} does not own attempt {report.attempt} of {task_id}",
                {"task_id": task_id, "attempt": task.attempts},
            )
        now = self.clock()
        with self.transition():
            report = self._repair_ended(task, report)
            self.tasks.record_usage(task, agent_id, report)
            self.limits.spend(report.cost_usd)
            if report.ok:  # it lands (maybe at once): its leases stay until it has
                self.take_backs.free_agent(task, now)
                if report.duration_ms:
                    self.leases.waits.note_finished(report.duration_ms / 1000)
                self.limits.succeeded()
                self.landing_queue.enqueue(task, report, now)
            else:
                self.take_backs.end_attempt(task, ReleaseReason.TASK_ENDED, now)
                self._settle_failure(task, report, now)
        self.kick()
        return self.tasks.answered(task)  # from the live index: what was just stored, unread

    def _repair_ended(self, task: LiveTask, report: AttemptReport) -> AttemptReport:
        """A repair attempt's end (`repair_finished`): its change lands again, or, failed, it
        is rolled back and reworked as the landing failure it repaired (decision 0161)."""
        if task.repair_session is None:
            return report
        self.tasks.end_repair(task)
        self.store.emit(
            EventType.REPAIR_FINISHED,
            task_id=task.id,
            agent_id=task.agent_id,
            attempt=task.attempts,
            cause=RepairCause.INTEGRATION,
            outcome="landing" if report.ok else "failed",
            turn=task.repairs,
            cost_usd=report.cost_usd,
            input_tokens=report.input_tokens,
            output_tokens=report.output_tokens,
        )
        if report.ok or report.error_kind in KEPT_KINDS:
            return report
        said = f"{report.error_kind or 'failed'}: {report.error or ''}".strip()
        error = f"{task.error or ''}\n\nIts repair in the same session failed too ({said})."
        return replace(report, error=error, error_kind=ErrorKind.INTEGRATION_FAILED)

    def _settle_failure(self, task: LiveTask, report: AttemptReport, now: datetime) -> None:
        kind = report.error_kind or ErrorKind.AGENT_ERROR
        error = report.error or kind.value
        if kind not in RETRYABLE_KINDS:
            self.tasks.fail(task, kind, error, now)
            return
        if kind is ErrorKind.RATE_LIMITED:
            self._limit_reached(task, report, error, now)
            return
        if task.charged >= task.max_attempts:  # the last attempt: no requeue to wait out
            spent = f"out of attempts ({task.charged}/{task.max_attempts}); last: {kind}: {error}"
            self.tasks.fail(task, ErrorKind.ATTEMPTS_EXHAUSTED, spent, now, last_error_kind=kind)
            return
        widen = None
        if kind is ErrorKind.VETO and report.blocked_on_path:
            widen = self._canonical_or_none(report.blocked_on_path)
        self.tasks.requeue(task, kind, error, now, blocked_on_path=widen)

    def _canonical_or_none(self, raw: str) -> str | None:
        """The lease key a veto names: a resource's own key, or a path canonicalized."""
        if is_resource_key(raw):
            return raw if valid_resource_name(resource_name(raw)) else None
        try:
            return self.tree.canonical(raw)
        except ValueError:
            return None

    def _limit_reached(
        self, task: LiveTask, report: AttemptReport, error: str, now: datetime
    ) -> None:
        """A usage limit: the fleet pauses and the attempt is not charged.

        Docs: docs/decisions/0054-a-usage-limit-pauses-the-fleet.md, "A usage limit pauses the fleet".
        """
        agent = self.agents.get(task.agent_id or "")
        who = agent.name if agent else "a runner"
        until = self.limits.limited(task.id, report.retry_after_s, f"{who}: {error}", now)
        self.tasks.requeue(
            task, ErrorKind.RATE_LIMITED, error, now, charged=False, paused_until=to_iso(until)
        )
