"""The operator's calls that write one part: checks, a graph load, the run's events, limits.

`define_checks`, `create_tasks` (`prepare_tasks` off the loop, then
`commit_tasks` on it), `fleet_event`, `record_commits`, and the fleet's
`set_budget` and `resume`. A load is checked whole before anything lands
(`graph`: pure), then inserted in one `transition` through the checks
registry and the task table; nothing here touches an agent, a lease or an
attempt (cancel and retry do, and stay in the engine). It is handed the
engine's `transition` and `kick`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from codefleet.coord import validation
from codefleet.coord.checks import validated_checks
from codefleet.coord.limitpolicy import Budget
from codefleet.coord.limits import ResumeReason
from codefleet.coord.parts import CallParts
from codefleet.coord.validation import NewTask, PreparedBatch
from codefleet.errors import InvalidState
from codefleet.models import EventType, TaskStatus, to_iso

__all__ = ["OperatorCalls"]


class OperatorCalls:
    """One engine's operator calls that add tasks, checks and events; on its thread."""

    def __init__(self, parts: CallParts, *, max_attempts: int) -> None:
        self.store = parts.store
        self.tree = parts.tree
        self.clock = parts.clock
        self.tasks = parts.tasks
        self.checks = parts.checks
        self.limits = parts.limits
        self.transition = parts.transition
        self.kick = parts.kick
        self.max_attempts = max_attempts  # a task's attempts when its spec names none

    def define_checks(self, checks: Mapping[str, str]) -> dict[str, Any]:
        """Define or redefine named checks; returns the names whose command changed."""
        valid = validated_checks(checks)
        with self.transition():
            changed = self.checks.define(valid, to_iso(self.clock()))
        return {"defined": sorted(valid), "changed": changed}

    def create_tasks(
        self, specs: Sequence[NewTask], checks: Mapping[str, str] | None = None
    ) -> list[str]:
        """Validate the whole batch, then insert it (and its checks) in one transaction."""
        return self.commit_tasks(self.prepare_tasks(specs, checks))

    def prepare_tasks(
        self, specs: Sequence[NewTask], checks: Mapping[str, str] | None = None
    ) -> PreparedBatch:
        """The heavy, state-free half of a load (`graph`); safe to run off the loop thread."""
        return validation.prepare_tasks(self.tree, specs, checks)

    def commit_tasks(self, batch: PreparedBatch) -> list[str]:
        """Check the batch against what is stored now, then insert it in one transaction.

        A task below an already-dead parent is born `blocked_upstream` (`TaskTable.create`).
        """
        validation.check_against(batch, self.tasks.index.status, self.checks.known())
        at = to_iso(self.clock())
        rows, edges = validation.task_rows(batch, self.store.max_seq(), at, self.max_attempts)
        with self.transition():
            self.checks.define(batch.checks, at)
            self.tasks.create(rows, edges, [spec.depends_on for spec in batch.specs])
        self.kick()
        return batch.ids

    def fleet_event(self, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        """The run's bookends (`fleet_started`, `run_finished`): events only."""
        event_type = EventType(kind)
        if event_type not in (EventType.FLEET_STARTED, EventType.RUN_FINISHED):
            raise ValueError(f"{kind} is not a fleet event")
        with self.transition():
            event = self.store.emit(event_type, **payload)
        if event_type is EventType.FLEET_STARTED:
            self.limits.started(payload)
        return {"event_id": event["id"]}

    def record_commits(self, branch: str, commits: list[tuple[str, str]]) -> dict[str, Any]:
        """One `task_committed` event per (task, commit); every task must have succeeded."""
        for task_id, _ in commits:
            if self.tasks.require(task_id) is not TaskStatus.SUCCEEDED:
                raise InvalidState(f"{task_id} has not succeeded", {"task_id": task_id})
        with self.store.transaction():
            for task_id, commit in commits:
                self.store.emit(
                    EventType.TASK_COMMITTED, task_id=task_id, branch=branch, commit=commit
                )
        return {"recorded": len(commits)}

    def set_budget(self, max_cost: float | None, hard: bool) -> dict[str, Any]:
        """Change the fleet's budget live (`codefleet budget`); a higher cap resumes assignment."""
        with self.limits.budget_kept(), self.transition():
            self.limits.set_budget(Budget(max_cost, hard))
        self.tasks.rearm_idle()  # the fleet may run again: its drain is news again
        self.kick()
        return self.limits.budget_json()

    def resume(self) -> dict[str, Any]:
        """Lift a usage-limit pause by hand (`codefleet resume`)."""
        now = self.clock()
        was = self.limits.view(now)["pause"]
        with self.transition():
            resumed = self.limits.resume(ResumeReason.OPERATOR, now)
        self.kick()
        return {"resumed": resumed, "paused_until": None, "was": was}
