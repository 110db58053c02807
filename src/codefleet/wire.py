"""Pydantic models of the wire API: request bodies and the graph file.

Pydantic lives only here and in `config`. Request models forbid unknown keys
and use strict list types, so `file_scope: "a.py"` or `depends_on: {...}` is a
clear 422 instead of a silently reinterpreted value. Size limits are named
constants so the docs and the tests can cite them.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from codefleet.models import ErrorKind

__all__ = [
    "AcquireBody",
    "ChangeBody",
    "CompleteBody",
    "FleetBody",
    "GraphBody",
    "HeartbeatBody",
    "RegisterBody",
    "StartBody",
    "TaskSpec",
]

MAX_TITLE = 500
MAX_DESCRIPTION = 100_000
MAX_PATH = 4096
MAX_SCOPE = 1000
MAX_TASKS = 50_000
MAX_BODY_BYTES = 32 * 1024 * 1024

Path_ = Annotated[StrictStr, Field(min_length=1, max_length=MAX_PATH)]
TaskId = Annotated[StrictStr, Field(min_length=1, max_length=64)]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TaskSpec(_Body):
    """One task of a graph (the YAML file and `POST /tasks` share this shape)."""

    id: TaskId | None = None
    title: Annotated[StrictStr, Field(min_length=1, max_length=MAX_TITLE)]
    description: Annotated[StrictStr, Field(max_length=MAX_DESCRIPTION)] = ""
    priority: Annotated[StrictInt, Field(ge=1, le=5)] = 3
    file_scope: Annotated[list[Path_], Field(max_length=MAX_SCOPE)] = []
    depends_on: Annotated[list[TaskId], Field(max_length=MAX_SCOPE)] = []
    max_attempts: Annotated[StrictInt, Field(ge=1, le=100)] | None = None


class GraphBody(_Body):
    tasks: Annotated[list[TaskSpec], Field(min_length=1, max_length=MAX_TASKS)]


class RegisterBody(_Body):
    name: Annotated[StrictStr, Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.:-]+$")]
    workdir: Annotated[StrictStr, Field(max_length=MAX_PATH)] | None = None
    pid: StrictInt | None = None


class HeartbeatBody(_Body):
    pass


class StartBody(_Body):
    agent_id: StrictStr


class AcquireBody(_Body):
    agent_id: StrictStr
    task_id: TaskId
    paths: Annotated[list[Annotated[StrictStr, Field(max_length=MAX_PATH)]], Field(max_length=100)]
    tool: Annotated[StrictStr, Field(max_length=100)] = "Write"


class ChangeBody(_Body):
    agent_id: StrictStr
    task_id: TaskId
    path: Annotated[StrictStr, Field(min_length=1, max_length=MAX_PATH)]
    tool: Annotated[StrictStr, Field(max_length=100)] = "Write"


class CompleteBody(_Body):
    agent_id: StrictStr
    attempt: Annotated[StrictInt, Field(ge=1)]
    ok: StrictBool
    summary: Annotated[StrictStr, Field(max_length=MAX_DESCRIPTION)] | None = None
    error: Annotated[StrictStr, Field(max_length=MAX_DESCRIPTION)] | None = None
    error_kind: ErrorKind | None = None
    blocked_on_path: Annotated[StrictStr, Field(max_length=MAX_PATH)] | None = None
    input_tokens: Annotated[StrictInt, Field(ge=0)] = 0
    output_tokens: Annotated[StrictInt, Field(ge=0)] = 0
    cost_usd: Annotated[float, Field(ge=0)] = 0.0
    duration_ms: Annotated[StrictInt, Field(ge=0)] | None = None
    session_id: Annotated[StrictStr, Field(max_length=200)] | None = None
    files_written: Annotated[list[Path_], Field(max_length=10_000)] = []


class FleetBody(_Body):
    """`POST /fleet/started` and `/fleet/finished`: the run's own bookends."""

    runners: StrictInt | None = None
    ok: StrictBool | None = None
    verify: dict[str, Any] | None = None
    summary: dict[str, Any] | None = None
