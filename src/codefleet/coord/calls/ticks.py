"""The tick: snapshot the fleet, call the pure scheduler, apply its decisions.

A tick first marks the server alive, finishes restores a failed release left
due and expires the idle sessions of people; then it snapshots the live index,
the agents, the leases and the limits (`snapshot`), lets `scheduler` decide,
and applies every decision in order in ONE `transition`. The state may have
moved since the snapshot, so each decision is checked again as it is applied
and a stale one is skipped with a logged reason, never half done. What ends an
attempt goes through `takebacks`; an assignment takes the task's resources
with it. When a decision can free work for another, the tick asks for the
next (`kick`). It owns no state (the engine keeps when the next tick runs); it
is handed the engine's parts, the take-back steps and the parts a tick alone
uses (recovery's alive mark, the restores, the persons' sessions, the settings).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime, timedelta

from codefleet.coord.calls.callparts import CallParts
from codefleet.coord.calls.takebacks import TakeBacks, release_for
from codefleet.coord.policy import scheduler as sched
from codefleet.coord.policy.engineconfig import EngineConfig
from codefleet.coord.policy.stacks import may_stack
from codefleet.coord.tables.fleetlimits import ResumeReason
from codefleet.coord.tables.liveindex import LiveTask
from codefleet.coord.tables.persons import Persons
from codefleet.coord.tables.recovery import Recovery
from codefleet.coord.tables.restores import Restores
from codefleet.models import AgentStatus, ErrorKind, ReleaseReason, TaskStatus, to_iso

__all__ = ["BASE_WINDOW", "Ticks"]

log = logging.getLogger(__name__)
BASE_WINDOW = 64


class Ticks:
    """One engine's ticks: the snapshot and the decision applier; on its thread."""

    def __init__(
        self,
        parts: CallParts,
        take_backs: TakeBacks,
        *,
        recovery: Recovery,
        restores: Restores,
        persons: Persons,
        config: EngineConfig,
    ) -> None:
        self.clock = parts.clock
        self.agents = parts.agents
        self.tasks = parts.tasks
        self.leases = parts.leases
        self.limits = parts.limits
        self.questions = parts.questions
        self.transition = parts.transition
        self.kick = parts.kick
        self.take_backs = take_backs
        self.recovery = recovery
        self.restores = restores
        self.persons = persons
        self.config = config

    def tick(self) -> list[sched.Decision]:
        """Snapshot, schedule, apply in one transaction; returns what was decided."""
        self.recovery.mark()
        self.restores.finish_due()  # left over when a release could not commit: finish them first
        now = self.clock()
        self.persons.expire_idle(now)
        window = sched.first_window(self.agents.idle_count())
        decisions = sched.schedule_widening(lambda w: self.snapshot(now, w), now, window)
        if not decisions:
            return decisions
        with self.transition():
            for decision in decisions:
                self._apply(decision, now)
        if any(not isinstance(d, sched.Assign | sched.FleetIdle) for d in decisions):
            self.kick()
        return decisions

    def snapshot(self, now: datetime, window: int = BASE_WINDOW) -> sched.FleetState:
        idx = self.tasks.index
        idx.promote_backoff(now)
        candidates, more = idx.candidates(window)
        return sched.FleetState(
            candidates=tuple(candidates),
            more_candidates=more,
            exhausted=tuple(idx.live[t].view() for t in sorted(idx.exhausted)),
            in_flight=tuple(self._view(t, now) for t in idx.in_flight.values()),
            agents=self.agents.views(),
            leases=self._busy_leases(),
            live_tasks=len(idx.live),
            idle_announced=self.tasks.idle_announced,
            stale_after=timedelta(seconds=self.config.stale_after),
            task_timeout=timedelta(seconds=self.config.task_timeout),
            paused_until=self.limits.paused_until(),
            budget=self.limits.budget_view(),
        )

    def _busy_leases(self) -> tuple[tuple[str, str], ...]:
        """(key, holder) of each lease a new task must wait for: not a whole file held by a task
        waiting to land when its next writer may stack on it (every runner in the tree)."""
        held = self.leases.holders.items()
        live = self.tasks.index.live
        landing = [t for t in self.leases.of_task if _landing(live, t)]  # a few tasks at most
        if not landing or not self.config.landing_stack or self.agents.any_in_clones():
            return tuple((key, holder[1]) for key, holder in held)
        free = {
            key
            for task_id in landing
            for key in self.leases.of_task[task_id]
            if may_stack([(key, ("", task_id))], lambda _: True)
        }
        return tuple((key, holder[1]) for key, holder in held if key not in free)

    def _view(self, task: LiveTask, now: datetime) -> sched.TaskView:
        """An in-flight task as the scheduler sees it; its questions' wait moves its deadline."""
        view = task.view()
        asked = self.questions.waited(task.id, task.attempts, now)
        return replace(view, asked=asked) if asked else view

    def _apply(self, decision: sched.Decision, now: datetime) -> None:
        idx = self.tasks.index
        match decision:
            case sched.MarkOffline(agent_id):
                self.take_backs.mark_offline(agent_id, ReleaseReason.AGENT_STALE, now)
            case sched.Requeue(task_id, kind, reason):
                task = idx.in_flight.get(task_id)
                if task is None:
                    log.info("skip stale Requeue of %s: no longer in flight", task_id)
                    return
                self.take_backs.take_back(task, kind, reason, now, charged=decision.charged)
            case sched.FailTask(task_id, kind, reason):
                live = idx.live.get(task_id)
                if live is None:
                    log.info("skip stale FailTask of %s: already terminal", task_id)
                    return
                if task_id in idx.in_flight:
                    self.take_backs.fence_owner(live, now)  # an overdue last attempt: a take-back
                self.take_backs.end_attempt(live, release_for(reason), now)
                self.tasks.fail(live, kind, reason, now)
            case sched.ResumeFleet():
                self.limits.resume(ResumeReason.ELAPSED, now)
            case sched.BudgetExhausted():
                pending = sum(t.status is TaskStatus.PENDING for t in idx.live.values())
                self.limits.announce_exhausted(sorted(idx.in_flight), pending)
            case sched.StopForBudget(task_id):
                self._stop_for_budget(task_id, now)
            case sched.Assign(task_id, agent_id):
                self._assign(task_id, agent_id, now)
            case sched.FleetIdle():
                self.tasks.announce_idle(
                    **({"stopped": "budget"} if self.limits.exhausted() else {})
                )
            case _:
                raise TypeError(f"unknown decision {decision!r}")

    def _assign(self, task_id: str, agent_id: str, now: datetime) -> None:
        task = self.tasks.index.live.get(task_id)
        agent = self.agents.get(agent_id)
        if task is None or task.status is not TaskStatus.PENDING or task.ready_key is None:
            log.info("skip stale Assign of %s: not ready", task_id)
            return
        if agent is None or agent.status is not AgentStatus.IDLE:
            log.info("skip stale Assign to %s: agent not idle", agent_id)
            return
        if self.leases.paths_of(task_id) and task.repair_session is None:  # a repair keeps them
            log.info("skip Assign of %s: its last attempt's files are not restored yet", task_id)
            return
        held = self.leases.held_by_others(sorted(task.resources), task_id)
        if held:
            log.info("skip stale Assign of %s: %s is held by %s", task_id, *held[0])
            return
        self.tasks.assign(task, agent_id, agent.name, now)
        self.leases.grant(sorted(task.resources), agent_id, task_id, "assign")  # taken with it
        self.agents.busy(agent, task_id, to_iso(now))
        self.agents.wake(agent_id)

    def _stop_for_budget(self, task_id: str, now: datetime) -> None:
        """A hard budget stop: take the attempt back, roll it back, do not charge it."""
        task = self.tasks.index.in_flight.get(task_id)
        if task is None:
            log.info("skip stale StopForBudget of %s: no longer in flight", task_id)
            return
        self.take_backs.fence_owner(task, now)
        self.take_backs.end_attempt(task, ReleaseReason.FLEET_BUDGET, now)
        reason = "the fleet's budget is spent (hard stop)"
        self.tasks.requeue(task, ErrorKind.BUDGET, reason, now, charged=False)


def _landing(live: Mapping[str, LiveTask], task_id: str) -> bool:
    return task_id in live and live[task_id].status is TaskStatus.LANDING
