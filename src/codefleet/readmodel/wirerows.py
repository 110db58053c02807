"""The wire's row shapes and their derived fields: tasks, agents, leases, conflicts, sessions.

A row read from the record is decorated here, at read time, and never stored:
a task's `unmet_dependencies`, `depends_on` and `runnable` (by the engine's own
rule, `coord.policy.readiness`), an agent's `stale`, a lease's holder and `age_s`, a
conflict's `resolved`. `encode` renders JSON exactly as the app's
`JSONResponse` does, so an encoded row is byte-identical to a rendered one.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any, Final

from codefleet.coord.engineview import SessionView
from codefleet.coord.policy.readiness import charged, runnable
from codefleet.models import from_iso, to_iso

__all__ = ["Row", "conflict_head", "decorate", "encode", "session_row"]

Row = dict[str, Any]
PERSON_KIND: Final = "interactive"  # the wire's `kind` of a person's session's agent row
_ENCODER: Final = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def encode(body: Any) -> bytes:
    """JSON bytes exactly as the app's `JSONResponse` renders them."""
    return _ENCODER.encode(body).encode("utf-8")


def decorate(task: Row, parents: list[str], done: Callable[[str], bool], now: datetime) -> Row:
    """Add a task's derived fields, given its parents and which tasks have succeeded."""
    unmet = [p for p in parents if not done(p)]
    backoff = task["backoff_until"]
    task["unmet_dependencies"] = unmet
    task["depends_on"] = parents
    task["runnable"] = runnable(
        task["status"],
        unmet=len(unmet),
        charged=charged(task["attempts"], task.get("uncharged_attempts") or 0),
        max_attempts=task["max_attempts"],
        backoff_until=from_iso(backoff) if backoff else None,
        now=now,
    )
    return task


def conflict_head(event: Row) -> bytes:
    """A `lease_denied` event as its conflict's JSON, without `resolved` and the brace."""
    body = event["payload"]
    return encode(
        {
            "event_id": event["id"],
            "at": event["at"],
            "path": body.get("path"),
            "task_id": event["task_id"],
            "agent_id": event["agent_id"],
            "agent_name": body.get("requester_name"),
            "holder_task_id": body.get("holder_task_id"),
            "holder_agent_id": body.get("holder_agent_id"),
            "holder_agent_name": body.get("holder_agent_name"),
        }
    )[:-1]


def session_row(session: SessionView, workdir: str) -> Row:
    """A person's session in the shape of a `GET /agents` row, plus its session id and state."""
    wrote = to_iso(session.last_write_at)
    return {
        "id": session.agent_id,
        "name": session.name,
        "kind": PERSON_KIND,
        "status": "busy" if session.active else "offline",
        "epoch": 0,
        "current_task_id": session.task_id if session.active else None,
        "current_task_title": session.title,
        "session_id": session.session_id,
        "workdir": workdir,
        "pid": None,
        "last_heartbeat_at": wrote,
        "last_write_at": wrote,
        "idle_since": wrote,
        "last_assigned_at": None,
        "registered_at": to_iso(session.started_at),
        "updated_at": wrote,
        "ended_at": to_iso(session.ended_at) if session.ended_at else None,
        "end_reason": session.end_reason,
        "leases": session.leases,
        "tasks_succeeded": 0,
        "tasks_failed": 0,
        "input_tokens": 0,
        "output_tokens": 0,
        "cost_usd": 0.0,
        "stale": False,
    }
