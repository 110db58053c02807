"""Pydantic models of the server's answers: the typed answer a route's row declares.

A route whose row names one of these (`transport.routetable.Route.answer`) builds
it in its handler, and the route table sends its `model_dump(mode="json")`: the
model is both what the handler must fill and the answer's schema in the OpenAPI
document. The JSON is the one the route answered before it was typed. Answers
that are already frozen records with `to_wire` (`api.landingrecords`, the lease
answer's JSON in `transport.answerjson`) need no model here.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from codefleet.models import AgentStatus

__all__ = ["Acknowledged", "Created", "Health", "LandingHealth", "Registered", "ResetDone"]


class _Answer(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Registered(_Answer):
    """`POST /agents/register`: the agent's id and epoch, the timings its runner keeps, and
    what a write leases by default (`auto` resolved: `part` or `file`)."""

    agent_id: str
    epoch: int
    status: AgentStatus
    heartbeat_interval_s: float
    stale_after_s: float
    poll_interval_s: float
    task_timeout_s: float
    question_timeout_s: float
    lease_wait_s: float
    lease_granularity: str
    server_time: str


class Created(_Answer):
    """`POST /tasks`: the ids the load created, and those it redefined."""

    created: list[str]
    redefined: list[str]


class LandingHealth(_Answer):
    """How many tasks wait to land, and whether landing is halted (and nothing else runs)."""

    queued: int
    halted: bool
    stuck: bool


class Health(_Answer):
    """`GET /health`: the server's identity and version, its tree and database, and how it is."""

    status: str
    version: str
    workdir: str
    tree_id: str | None
    database_id: str
    last_event_id: int
    live_tasks: int
    loop_stalled_s: float
    server_time: str
    paused_until: str | None
    in_flight: int
    budget: dict[str, Any]
    landing: LandingHealth


class Acknowledged(_Answer):
    """A call that only says it was taken (`POST /landing/steps/{id}/started`)."""

    ok: bool


class ResetDone(_Answer):
    """`POST /reset`: the state is gone."""

    reset: bool
