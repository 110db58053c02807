"""When a pending task may be assigned: the one readiness rule.

The live index files tasks by it (`LiveIndex.place_pending`), and every read
that says `runnable` (the projection, `GET /tasks`, `GET /tasks/{id}`) derives
it from the same function, so a read can never disagree with the next tick
(docs/decisions/0094-one-readiness-rule.md, "One readiness rule"). Only *charged* attempts count
against `max_attempts`: an attempt a usage limit ended is not the task's fault.
Whether the whole fleet is paused is the fleet's state, not the task's.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from codefleet.models import TaskStatus

__all__ = ["Standing", "charged", "runnable", "standing"]


class Standing(StrEnum):
    """Where a pending task stands, first match wins."""

    EXHAUSTED = "exhausted"  # no charged attempt left: the next tick fails it
    WAITING = "waiting"  # a dependency has not succeeded
    BACKING_OFF = "backing_off"  # after a failed attempt, until `backoff_until`
    READY = "ready"


def charged(attempts: int, uncharged: int) -> int:
    """The attempts that count against `max_attempts`."""
    return attempts - uncharged


def standing(
    *,
    unmet: int,
    charged: int,
    max_attempts: int,
    backoff_until: datetime | None,
    now: datetime | None,
) -> Standing:
    """A pending task's standing at `now` (None: any backoff still counts, as the index files it)."""
    if charged >= max_attempts:
        return Standing.EXHAUSTED
    if unmet:
        return Standing.WAITING
    if backoff_until is not None and (now is None or backoff_until > now):
        return Standing.BACKING_OFF
    return Standing.READY


def runnable(
    status: str,
    *,
    unmet: int,
    charged: int,
    max_attempts: int,
    backoff_until: datetime | None,
    now: datetime,
) -> bool:
    """What a read says as `runnable`: pending and ready at `now`."""
    ready = standing(
        unmet=unmet,
        charged=charged,
        max_attempts=max_attempts,
        backoff_until=backoff_until,
        now=now,
    )
    return status == TaskStatus.PENDING and ready is Standing.READY
