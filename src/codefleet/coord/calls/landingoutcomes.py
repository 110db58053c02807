"""What a landing round's decision does to its tasks, and how each outcome is told.

The landing queue (`landingqueue`) sequences rounds and steps; when the landing
policy decides (`landingpolicy.Outcome`), this part carries it out, in the
caller's transaction. A landing task's files are patched and released and it
`succeeds` with its order number (`landed`, then `task_succeeded`). A blamed
task is first handed back to the session that made its change, its files kept
(`repair_started`, decision 0161), else its files are put back (like any failed
attempt) and it is requeued as `integration_failed`, its error naming the tasks
that landed since its attempt started and the failing output (`rework_text`). A
halt is recorded (`landing_halted`, its `why` a `models.HaltCause`) for the
queue to stop on. What a worker's check run says in `landing_check_finished`,
and the tail of its output a person and a blamed task are shown, are said here;
a run that stands for a task's own pass says whose, read from the log
(`reused_source`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final

from codefleet.api.landingrecords import CheckRun
from codefleet.coord.calls.callparts import CallParts
from codefleet.coord.policy import landingpolicy as policy
from codefleet.coord.tables.liveindex import LiveTask
from codefleet.failuretext import failure_excerpt
from codefleet.models import ErrorKind, EventType, HaltCause, ReleaseReason, RepairCause, Workspace

__all__ = ["HALT_KEY", "LandingOutcomes", "failure_tail", "finished_fields"]

HALT_KEY: Final = "landing_halted"
CONFLICTS_SHOWN: Final = 10
FILES_SHOWN: Final = 20
OUTPUT_SHOWN: Final = 4_000
TAIL_CHARS: Final = 2_000


class LandingOutcomes:
    """Landing, blaming and halting, as a round decides them; see the module docstring."""

    def __init__(self, parts: CallParts, repair_turns: int = 0) -> None:
        self.store = parts.store
        self.tasks = parts.tasks
        self.leases = parts.leases
        self.agents = parts.agents
        self.repair_turns = repair_turns  # a blamed task's session repairs its change first

    def land(self, rnd: policy.Round, tasks: Sequence[str], now: datetime) -> None:
        """Land `tasks` in order, on the landed tree the passing prefix was checked on."""
        first = rnd.candidates.index(tasks[0])
        checks = list(policy.checks_for(rnd, first + len(tasks)))
        for task_id in tasks:
            task = self.tasks.index.live[task_id]
            self.leases.release(task_id, ReleaseReason.TASK_ENDED, succeeded=True)
            self.tasks.land(task, now, checks=checks, batch=list(tasks), base=rnd.base + first)

    def blame(self, task_id: str, check: str, output: str, now: datetime) -> None:
        """Roll the task back and rework it, told what broke and who landed before it."""
        task = self.tasks.index.live[task_id]
        row = self.store.task(task_id) or {}
        since = self.store.landed_since(str(row.get("started_at") or row.get("assigned_at") or ""))
        error = self.rework_text(check, since, output)
        if self._repair(task, row, check, since, error, now):
            return  # its session repairs the change in place: nothing is rolled back
        self.store.emit(
            EventType.INTEGRATION_FAILED,
            task_id=task_id,
            agent_id=task.agent_id,
            attempt=task.attempts,
            check=check,
            blamed=[task_id],
            conflicts_with=[str(r["id"]) for r in since],
            output_tail=output[-TAIL_CHARS:],
        )
        if task.agent_id:  # its report counted a success the landing takes back
            self.store.success_taken_back(task.agent_id)
        self.leases.release(task_id, ReleaseReason.TASK_ENDED)  # its files are put back
        if task.charged >= task.max_attempts:
            spent = f"out of attempts ({task.charged}/{task.max_attempts}); last: {error}"
            self.tasks.fail(
                task,
                ErrorKind.ATTEMPTS_EXHAUSTED,
                spent,
                now,
                last_error_kind=ErrorKind.INTEGRATION_FAILED,
            )
        else:
            self.tasks.requeue(task, ErrorKind.INTEGRATION_FAILED, error, now)

    def _repair(
        self,
        task: LiveTask,
        row: Mapping[str, Any],
        check: str,
        since: Sequence[Mapping[str, Any]],
        error: str,
        now: datetime,
    ) -> bool:
        """Hand the change back to the session that made it (`repair_started`): True when the
        task waits for its repair attempt, its change on the tree and its leases kept; False
        when it is to be rolled back and reworked (`policy.may_repair`; decision 0161)."""
        agent = self.agents.get(task.agent_id or "")
        session = row.get("session_id")
        kind, workspace = (agent.agent, agent.workspace) if agent else (task.agent, Workspace.TREE)
        stacked_on = bool(self.leases.stacks.files_under(task.id))
        if not policy.may_repair(
            session, task.repairs, self.repair_turns, kind, workspace, stacked_on
        ):
            return False
        self.store.emit(
            EventType.REPAIR_STARTED,
            task_id=task.id,
            agent_id=task.agent_id,
            attempt=task.attempts,
            cause=RepairCause.INTEGRATION,
            name=check,
            session_id=session,
            turn=task.repairs + 1,
            conflicts_with=[str(r["id"]) for r in since],
            spent_usd=task.landed_cost_usd,  # the change so far: what a rework spends again
        )
        if task.agent_id:  # its report counted a success the landing takes back
            self.store.success_taken_back(task.agent_id)
        self.tasks.await_repair(task, str(session), error, now)
        return True

    def rework_text(self, check: str, since: Sequence[Mapping[str, Any]], output: str) -> str:
        """The next attempt's error: what failed, who landed meanwhile and what they changed."""
        lines = [
            f"Integration failed: check `{check}` failed on the landed tree with your work "
            "on it (the work that landed before yours stays: adapt yours to it)."
        ]
        lines.append(
            "Landed since your attempt started:"
            if since
            else "Nothing landed since "
            "your attempt started: your work fails the check on the tree it began on."
        )
        for row in since[:CONFLICTS_SHOWN]:
            paths = [p["path"] for p in self.store.patches_of_task(str(row["id"]))]
            shown = ", ".join(paths[:FILES_SHOWN]) + (" …" if len(paths) > FILES_SHOWN else "")
            lines.append(f'- {row["id"]} "{row["title"]}" changed: {shown or "(no files)"}')
        if len(since) > CONFLICTS_SHOWN:
            lines.append(f"- … and {len(since) - CONFLICTS_SHOWN} more")
        lines.append(f"Output of `{check}` (tail):")
        lines.append(output[-OUTPUT_SHOWN:] or "(no output)")
        return "\n".join(lines)

    def halt(self, check: str, output: str, why: HaltCause | str) -> dict[str, Any]:
        """Record a halt (`landing_halted`) and return what it says: the check, why, the last
        task that landed, the output's tail."""
        last = self.store.landed_since("")[-1:] or [{}]
        halted = {
            "check": check,
            "why": why,
            "last_landed": last[0].get("id"),
            "output_tail": output[-TAIL_CHARS:],
        }
        self.store.set_meta(HALT_KEY, json.dumps(halted))
        self.store.emit(EventType.LANDING_HALTED, **halted)
        return halted

    def reused_source(self, run: CheckRun) -> dict[str, Any]:
        """Whose pass a run not run stands for (`reused_event`), as the log recorded it: the
        task and purpose of that `check_finished` (none when it is no such event)."""
        if run.reused_event is None:
            return {}
        named = self.store.events(since=run.reused_event - 1, limit=1)
        event = named[0] if named else {}
        if (event.get("id"), event.get("type")) != (run.reused_event, EventType.CHECK_FINISHED):
            return {}
        return {"reused_task": event["task_id"], "reused_purpose": event["payload"]["purpose"]}


def finished_fields(run: CheckRun) -> dict[str, Any]:
    """The fields of `landing_check_finished` a worker's run reports, bounded."""
    keys = (
        "verdict", "exit_code", "duration_ms", "view_ms", "view", "error", "identity", "resolution",
        "command", "reused_step", "reused_event",
    )  # fmt: skip
    found = {k: getattr(run, k) for k in keys if getattr(run, k) is not None}
    found["output_tail"] = run.output_tail[-TAIL_CHARS:]
    return found


def failure_tail(runs: Sequence[CheckRun], check: str) -> str:
    """What a person and the blamed task are shown of `check`'s output: its failing lines
    first, then its last lines (`failuretext.failure_excerpt`)."""
    for run in runs:
        if run.check == check:
            return failure_excerpt(run.output or run.output_tail or run.error or "", TAIL_CHARS)
    return ""
