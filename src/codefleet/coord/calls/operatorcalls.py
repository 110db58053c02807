"""The operator's calls: checks, a graph load, the run's events, limits, a task's cancel and retry.

`define_checks` (and `define_check_resources`), `define_sequences`, `create_tasks` (`prepare_tasks` off the loop, then
`commit_tasks` on it, which may also redefine stored tasks that have not started), `fleet_event`, `record_commits`, and the fleet's
`set_budget` and `resume`. A load is checked whole before anything lands
(`graph`: pure), then inserted in one `transition` through the checks
registry and the task table. A task's own calls are `cancel` (fence its runner,
end its attempt: `takebacks`), `retry` (refused while a file of its last
attempt could not be restored), `say` (a message for a task not finished)
and `answer` (a running attempt's open question; an ended attempt's are
moot). It owns no state; it is handed the engine's parts, the take-back steps
and the restores.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from codefleet.coord.calls.callparts import CallParts
from codefleet.coord.calls.takebacks import TakeBacks
from codefleet.coord.policy.limitpolicy import Budget
from codefleet.coord.tables import validation
from codefleet.coord.tables.checkregistry import source_key, validated_checks
from codefleet.coord.tables.fleetlimits import ResumeReason
from codefleet.coord.tables.questions import Question
from codefleet.coord.tables.restores import Restores
from codefleet.coord.tables.validation import NewTask, PreparedBatch
from codefleet.errors import InvalidState
from codefleet.models import EventType, ReleaseReason, TaskStatus, to_iso

__all__ = ["OperatorCalls"]


class OperatorCalls:
    """One engine's operator calls; on its thread."""

    def __init__(
        self,
        parts: CallParts,
        take_backs: TakeBacks,
        restores: Restores,
        *,
        max_attempts: int,
    ) -> None:
        self.store = parts.store
        self.tree = parts.tree
        self.clock = parts.clock
        self.agents = parts.agents
        self.tasks = parts.tasks
        self.preimages = parts.preimages
        self.checks = parts.checks
        self.limits = parts.limits
        self.messages = parts.messages
        self.questions = parts.questions
        self.sequences = parts.sequences
        self.transition = parts.transition
        self.kick = parts.kick
        self.take_backs = take_backs
        self.restores = restores
        self.max_attempts = max_attempts  # a task's attempts when its spec names none

    def define_check_resources(
        self, resources: Mapping[str, list[str]], reuse: Mapping[str, bool] | None = None
    ) -> None:
        """Set the resources each named check must hold to run (`[]`: none) and whether its
        passing result may be reused on the same content, in one transaction."""
        if resources or reuse:
            with self.transition():
                self.checks.define_resources(resources)
                self.checks.define_reuse(reuse or {})

    def define_sequences(self, starts: Mapping[str, int]) -> None:
        """Create or raise the graph's counters (`sequences:`), in one transaction."""
        if starts:
            with self.transition():
                self.sequences.define(starts)

    def define_checks(self, checks: Mapping[str, str], source: str | None = None) -> dict[str, Any]:
        """Define or redefine named checks (read from the file `source`, protected from
        then on); returns the names whose command changed."""
        valid = validated_checks(checks)
        key = None if source is None else source_key(source)
        with self.transition():
            changed = self.checks.define(valid, to_iso(self.clock()), key)
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

    def commit_tasks(
        self,
        batch: PreparedBatch,
        redefine: frozenset[str] = frozenset(),
        source: str | None = None,
    ) -> list[str]:
        """Check the batch against what is stored now, then insert it in one transaction.

        A task below an already-dead parent is born `blocked_upstream` (`TaskTable.create`).
        A stored id named in `redefine` is written over (`TaskTable.redefine`) if the task
        has not started (pending, never assigned); one that has started refuses the batch.
        Returns the ids created (the batch's others were redefined). `source` is the graph
        file the batch was read from (`define_checks`).
        """
        status = self.tasks.index.status
        asked = {t: self._not_started(t) for t in redefine if t in status}
        redefined = validation.check_against(batch, status, self.checks.known(), asked)
        if redefined:
            validation.reject_stored_cycles(batch, redefined, self.store.edges())
        key = None if source is None else source_key(source)
        at = to_iso(self.clock())
        rows, edges = validation.task_rows(batch, self.store.max_seq(), at, self.max_attempts)
        deps = [spec.depends_on for spec in batch.specs]
        new = [n for n, row in enumerate(rows) if row["id"] not in redefined]
        old = [n for n, row in enumerate(rows) if row["id"] in redefined]
        with self.transition():
            self.checks.define(batch.checks, at, key)
            if new:
                ids = {rows[n]["id"] for n in new}
                self.tasks.create(
                    [rows[n] for n in new],
                    [e for e in edges if e[0] in ids],
                    [deps[n] for n in new],
                )
            if old:
                self.tasks.redefine(
                    [rows[n] for n in old],
                    [e for e in edges if e[0] in redefined],
                    [deps[n] for n in old],
                )
        self.kick()
        return [str(rows[n]["id"]) for n in new]

    def _not_started(self, task_id: str) -> bool:
        """Pending and never assigned: no attempt, no history a redefinition would hide."""
        row = self.store.task(task_id)
        return (
            row is not None
            and row["status"] == TaskStatus.PENDING
            and row["attempts"] == 0
            and row["assigned_at"] is None
        )

    def fleet_event(self, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        """The run's bookends (`fleet_started`, `run_finished`): events only."""
        event_type = EventType(kind)
        if event_type not in (EventType.FLEET_STARTED, EventType.RUN_FINISHED):
            raise ValueError(f"{kind} is not a fleet event")
        with self.transition():
            event = self.store.emit(event_type, **payload)
        if event_type is EventType.FLEET_STARTED:
            self.limits.started(event)
        return {"event_id": event["id"]}

    def record_commits(self, branch: str, commits: list[tuple[str, str]]) -> dict[str, Any]:
        """One `task_committed` event per (task, commit); every task must have succeeded."""
        for task_id, _ in commits:
            if self.tasks.require(task_id) is not TaskStatus.SUCCEEDED:
                raise InvalidState(f"{task_id} has not succeeded", {"task_id": task_id})
        with self.transition():
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

    def cancel(self, task_id: str) -> dict[str, Any]:
        status = self.tasks.require(task_id)
        task = self.tasks.index.live.get(task_id)
        if task is None:
            raise InvalidState(f"task {task_id} is already {status}", {"status": status})
        now = self.clock()
        with self.transition():
            if task.agent_id and task.status in (TaskStatus.ASSIGNED, TaskStatus.RUNNING):
                self.agents.fence(task.agent_id, now)
            self.take_backs.end_attempt(task, ReleaseReason.CANCELLED, now)
            self.tasks.cancel(task, now)
        self.kick()
        return {"status": TaskStatus.CANCELLED}

    def say(self, task_id: str, text: str) -> dict[str, Any]:
        """Keep an operator message for a task that has not finished (`coord.tables.messages`)."""
        status = self.tasks.require(task_id)
        task = self.tasks.index.live.get(task_id)
        if task is None:
            raise InvalidState(
                f"task {task_id} is already {status}: a message reaches only a task that has "
                "not finished",
                {"status": status},
            )
        return self.messages.say(task, text)

    def answer(self, task_id: str, text: str, question_id: str | None = None) -> Question:
        """The operator answers a running task's open question (`coord.tables.questions`)."""
        status = self.tasks.require(task_id)
        if task_id not in self.tasks.index.live:
            raise InvalidState(f"task {task_id} is already {status}", {"status": status})
        waiting = [
            q
            for q in self.open_questions()
            if q.task_id == task_id and question_id in (None, q.question_id)
        ]
        return self.questions.answer(waiting, task_id, text)

    def open_questions(self) -> list[Question]:
        """The unanswered questions of attempts still running (an ended attempt's are moot)."""
        flight = self.tasks.index.in_flight
        return [
            q
            for q in self.questions.open()
            if q.task_id in flight and flight[q.task_id].attempts == q.attempt
        ]

    def retry(self, task_id: str) -> dict[str, Any]:
        """A failed or cancelled task starts over; its blocked dependents come back."""
        status = self.tasks.require(task_id)
        if status not in (TaskStatus.FAILED, TaskStatus.CANCELLED):
            raise InvalidState(
                f"only failed or cancelled tasks can be retried; {task_id} is {status}"
            )
        self.restores.finish([task_id])  # a file repaired since can now be put back
        stuck = self.preimages.unrestorable_of(task_id)
        if stuck:
            raise InvalidState(
                f"{task_id} still holds {', '.join(sorted(stuck))}, which could not be restored "
                f"({'; '.join(stuck.values())}); repair it, then retry",
                {"unrestorable": stuck},
            )
        with self.transition():
            self.tasks.retry(task_id, self.clock())
        self.kick()
        return {"status": TaskStatus.PENDING}
