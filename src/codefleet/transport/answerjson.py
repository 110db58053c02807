"""The JSON of the engine's answers to runner calls: one function per answer type.

The engine returns frozen values (`coord.policy.answers`); these turn them into the
wire's JSON, key for key in the order the API has always used, so a route
never builds an answer's dict itself (no model per request on the hot routes);
each answer's schema is its model in `api.answermodels`, which the rows declare.
A person's session's lease answer has its own shape, in `server.person_routes`.
"""

from __future__ import annotations

from typing import Any

from codefleet.api import answermodels
from codefleet.attempt import AssignedTask
from codefleet.config import Settings
from codefleet.coord.policy.answers import (
    Beat,
    Denial,
    LeaseAnswer,
    Registered,
    TaskAnswer,
    WaitReport,
)
from codefleet.models import Granularity, to_iso, utcnow

__all__ = [
    "assignment_json",
    "beat_json",
    "denial_json",
    "lease_json",
    "registered_json",
    "task_json",
]


def assignment_json(task: AssignedTask) -> dict[str, Any]:
    return task.to_wire()


def denial_json(denial: Denial, titled: bool = False) -> dict[str, Any]:
    """One denied row; a held one names its holder's kind (and, `titled`, its task's title)."""
    row: dict[str, Any] = {
        "path": denial.path,
        "holder_agent_id": denial.holder_agent_id,
        "holder_agent_name": denial.holder_agent_name,
        "holder_task_id": denial.holder_task_id,
    }
    if denial.holder_kind is not None:
        if titled:
            row["holder_task_title"] = denial.holder_task_title
        row["holder_kind"] = denial.holder_kind
    row["reason"] = denial.reason
    row["message"] = denial.message
    return row


def lease_json(answer: LeaseAnswer) -> dict[str, Any]:
    """`POST /leases/acquire`: allow with the granted keys, or deny with the rows and why."""
    waited = {} if answer.waited is None else {"waited": waited_json(answer.waited)}
    if answer.allowed:
        versions = {"versions": dict(answer.versions)} if answer.versions else {}
        return {"decision": "allow", "granted": list(answer.granted), **waited, **versions}
    return {
        "decision": "deny",
        "denied": [denial_json(d) for d in answer.denied],
        "message": answer.message,
        **waited,
    }


def waited_json(report: WaitReport) -> dict[str, Any]:
    """How a parked request's wait ended: `granted`, `changed`, `timed_out`, `deadlock`..."""
    return {
        "outcome": report.outcome,
        "waited_s": report.waited_s,
        "holder_task_id": report.holder_task_id,
    }


def task_json(answer: TaskAnswer, handed: AssignedTask | None = None) -> dict[str, Any]:
    """`POST /tasks/{id}/complete`: the task as stored now, and the caller's next task if ready."""
    return {
        "status": answer.status,
        "attempts": answer.attempts,
        "backoff_until": answer.backoff_until,
        "duplicate": answer.duplicate,
        "next": None if handed is None else assignment_json(handed),
    }


def registered_json(
    answer: Registered, settings: Settings, granularity: Granularity
) -> answermodels.Registered:
    """`POST /agents/register`: the agent's id and epoch, the timings its runner keeps, and
    what a write leases by default (`auto` resolved: `part` or `file`)."""
    return answermodels.Registered(
        agent_id=answer.agent_id,
        epoch=answer.epoch,
        status=answer.status,
        heartbeat_interval_s=settings.heartbeat_interval,
        stale_after_s=settings.stale_after,
        poll_interval_s=settings.poll_interval,
        task_timeout_s=settings.task_timeout,
        question_timeout_s=settings.question_timeout,
        lease_wait_s=settings.lease_wait,
        lease_granularity=granularity.value,
        server_time=to_iso(utcnow()),
    )


def beat_json(answer: Beat) -> dict[str, Any]:
    """The heartbeat's answer; `messages` only when the running task has some waiting."""
    body: dict[str, Any] = {"status": answer.status, "epoch": answer.epoch}
    if answer.messages:
        body["messages"] = [m.to_wire() for m in answer.messages]
    if answer.answers:
        body["answers"] = [{"question_id": q, "text": text} for q, text in answer.answers]
    return body
