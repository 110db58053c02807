"""Typed rows of the tables the engine reads back: agents, leases, restore intents.

The store hands the engine these frozen values where it rebuilds its memory
from SQLite (start-up, a rolled-back transaction) and where it finishes a
restore; the reads the server serves as JSON stay plain rows (`Row`). Each
type names exactly the columns the engine uses, decoded once here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from codefleet.models import AgentStatus, ReleaseReason

__all__ = ["AgentRow", "LeaseRow", "RestoreRow"]


@dataclass(frozen=True, slots=True)
class AgentRow:
    id: str
    name: str
    status: AgentStatus
    epoch: int
    last_heartbeat_at: str
    idle_since: str
    current_task_id: str | None
    fenced: bool
    host: str | None
    agent: str
    pid: int | None
    workspace: str = "tree"

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> AgentRow:
        return cls(
            id=row["id"],
            name=row["name"],
            status=AgentStatus(row["status"]),
            epoch=row["epoch"],
            last_heartbeat_at=row["last_heartbeat_at"],
            idle_since=row["idle_since"],
            current_task_id=row["current_task_id"],
            fenced=bool(row["fenced"]),
            host=row["host"],
            pid=row["pid"],
            agent=row["agent"] or "claude",
            workspace=row["workspace"] or "tree",
        )


@dataclass(frozen=True, slots=True)
class LeaseRow:
    path: str
    agent_id: str
    task_id: str
    acquired_at: str

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> LeaseRow:
        return cls(row["path"], row["agent_id"], row["task_id"], row["acquired_at"])


@dataclass(frozen=True, slots=True)
class RestoreRow:
    """One intent to put a failed attempt's file back; `error` is its last failure."""

    task_id: str
    path: str
    reason: ReleaseReason
    error: str | None

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> RestoreRow:
        return cls(row["task_id"], row["path"], ReleaseReason(row["reason"]), row["error"])
