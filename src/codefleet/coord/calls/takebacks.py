"""Ending an attempt: fence its owner, release its leases, free its agent, requeue the task.

Every transition that ends an attempt composes these steps: a tick's take-back
of a stale or overdue runner, a budget stop, a report, a registration that
replaces an incarnation, a leave, a cancel. Invariants: a take-back bumps the
owner's epoch exactly once (going offline counts as the bump), so a fenced
runner can never report for the attempt again; the leases go with the attempt
(a failed attempt's files are put back first, `preimages`); the agent is freed only
if it is still on this task. Each step writes inside the caller's transaction
and opens none. It owns no state; it is handed the agent registry, the task
table and the lease table (`CallParts`).
"""

from __future__ import annotations

from datetime import datetime

from codefleet.coord.calls.callparts import CallParts
from codefleet.coord.tables.agentregistry import AgentState
from codefleet.coord.tables.liveindex import LiveTask
from codefleet.coord.tables.tasktable import INTERRUPT_HOLD_S
from codefleet.models import AgentStatus, ErrorKind, EventType, ReleaseReason, TaskStatus

__all__ = ["TakeBacks", "release_for"]

IN_FLIGHT = (TaskStatus.ASSIGNED, TaskStatus.RUNNING)


class TakeBacks:
    """The steps that end an attempt, inside the caller's transaction; on the engine's thread."""

    def __init__(self, parts: CallParts) -> None:
        self.store = parts.store
        self.clock = parts.clock
        self.agents = parts.agents
        self.tasks = parts.tasks
        self.leases = parts.leases

    def unwind_stacked(self, victims: list[str], under: str) -> None:
        """End the attempts of `victims`, stacked on `under`, which is rolled back: their work
        was built on its change (`policy.stacks`). Not charged: the failure was not theirs."""
        now = self.clock()
        for task_id in victims:
            task = self.tasks.index.live.get(task_id)
            if task is None or task.status not in (*IN_FLIGHT, TaskStatus.LANDING):
                continue
            self.store.emit(
                EventType.STACK_UNWOUND,
                task_id=task_id,
                agent_id=task.agent_id,
                attempt=task.attempts,
                under_task_id=under,
            )
            why = (
                f"Task {under}, whose change in a file this attempt took over while {under} "
                "waited to land, did not land: this attempt's work, built on that change, was "
                "undone with it. Start again on the tree as it is now."
            )
            if task.status is TaskStatus.LANDING:
                if task.agent_id:  # its report counted a success the unwinding takes back
                    self.store.success_taken_back(task.agent_id)
                self.leases.release(task.id, ReleaseReason.TASK_ENDED)
                self.tasks.requeue(task, ErrorKind.STACK_UNWOUND, why, now, charged=False)
            else:
                self.take_back(task, ErrorKind.STACK_UNWOUND, why, now, charged=False)

    def take_back(
        self, task: LiveTask, kind: ErrorKind, reason: str, now: datetime, charged: bool = True
    ) -> None:
        """Requeue an in-flight task the server itself takes away from its agent.

        An operator's interrupt holds it briefly: its run's other runners are leaving too.
        """
        self.fence_owner(task, now)
        self.end_attempt(task, release_for(reason), now)
        hold = INTERRUPT_HOLD_S if reason == ReleaseReason.INTERRUPTED else 0.0
        self.tasks.requeue(task, kind, reason, now, charged=charged, hold_s=hold)

    def fence_owner(self, task: LiveTask, now: datetime) -> None:
        """Bump the owner's epoch, unless going offline already did (one bump per take-back)."""
        agent = self.agents.get(task.agent_id or "")
        if agent is not None and agent.status is not AgentStatus.OFFLINE:
            self.agents.fence(agent.id, now)

    def end_attempt(
        self, task: LiveTask, reason: ReleaseReason, now: datetime, succeeded: bool = False
    ) -> None:
        """Settle files, release the attempt's leases, free its agent: the caller's transaction."""
        self.leases.release(task.id, reason, succeeded)
        self.free_agent(task, now)

    def free_agent(self, task: LiveTask, now: datetime) -> None:
        """Free the task's agent, if it is still on this task (the caller's transaction)."""
        agent = self.agents.get(task.agent_id or "")
        if agent and agent.current_task_id == task.id:
            self.agents.free(agent, now)

    def mark_offline(self, agent_id: str, reason: ReleaseReason, now: datetime) -> None:
        """Offline + fence + release; a graceful leave also requeues its task here."""
        agent = self.agents.by_id[agent_id]
        if reason in (ReleaseReason.AGENT_LEFT, ReleaseReason.INTERRUPTED):
            self.take_back_current(agent, reason, now)
        elif agent.current_task_id is not None:
            self.leases.release(agent.current_task_id, reason)
        self.agents.go_offline(agent, reason, now)

    def take_back_current(self, agent: AgentState, reason: ReleaseReason, now: datetime) -> None:
        """Take back the agent's in-flight task; charged only if it started and was not
        interrupted (docs/decisions/0082-an-attempt-is-charged-only-for-its-own-failure.md, "An attempt is charged only for its own failure")."""
        task = self.tasks.index.in_flight.get(agent.current_task_id or "")
        if task is not None and task.agent_id == agent.id:
            started = task.status is TaskStatus.RUNNING
            charged = started and reason is not ReleaseReason.INTERRUPTED
            self.take_back(task, ErrorKind.INFRA, reason, now, charged=charged)


def release_for(reason: str) -> ReleaseReason:
    """The release reason of a take-back's reason text (`task_ended` when it names none)."""
    known = {r.value for r in ReleaseReason}
    return ReleaseReason(reason) if reason in known else ReleaseReason.TASK_ENDED
