"""The fleet's limits policy: usage-limit pauses, and the fleet's budget.

Pure: values in, values out, time is an argument. The engine's `FleetLimits`
part holds the current `LimitState`, calls `on_limit` when a runner reports an
attempt that hit a rate or usage limit (`rate_limited`), and hands
`paused_until` to the scheduler, which assigns nothing while it lies ahead.

Rules (docs/decisions/0054-a-usage-limit-pauses-the-fleet.md, "A usage limit pauses the fleet"):

- a limit with a stated retry time pauses the fleet until then;
- a limit without one pauses for `DEFAULT_PAUSE_S`, doubled for each pause
  in a row that also had none (`strikes`), capped at `MAX_PAUSE_S`; a
  succeeded attempt clears the strikes;
- a limit reported while a pause is on JOINS it: the pause only moves later
  when the new retry time lies past it, and never counts a strike (sessions
  in flight when the limit hit report it one by one, for one cause).

The budget (`Budget`): once the fleet's recorded cost reaches `max_cost`, the
scheduler assigns nothing more; running attempts finish, or with `hard` are
stopped (rolled back, not charged). Raising the cap resumes assignment.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Final

__all__ = [
    "DEFAULT_PAUSE_S",
    "MAX_PAUSE_S",
    "Budget",
    "LimitState",
    "Pause",
    "PauseChange",
    "on_limit",
    "on_success",
    "pause_seconds",
]

DEFAULT_PAUSE_S: Final = 30.0
MAX_PAUSE_S: Final = 15 * 60.0


class PauseChange(StrEnum):
    STARTED = "started"  # the fleet was running: it pauses now (`fleet_paused`)
    EXTENDED = "extended"  # a later retry time moved the pause on (`fleet_paused` again)
    JOINED = "joined"  # the pause already covers it: nothing to announce


@dataclass(frozen=True, slots=True)
class Pause:
    since: datetime
    until: datetime
    reason: str
    task_id: str | None = None  # the task whose attempt hit the limit first


@dataclass(frozen=True, slots=True)
class LimitState:
    pause: Pause | None = None
    strikes: int = 0  # pauses in a row that had no stated retry time

    def paused_until(self) -> datetime | None:
        return self.pause.until if self.pause else None

    def paused_at(self, now: datetime) -> bool:
        return self.pause is not None and now < self.pause.until


@dataclass(frozen=True, slots=True)
class Budget:
    max_cost: float | None = None  # USD; None: no cap
    hard: bool = False  # stop running attempts too when the cap is reached

    def exhausted(self, spent: float) -> bool:
        """The recorded cost has reached the cap (with a nano-dollar of slack for float sums)."""
        return self.max_cost is not None and spent >= self.max_cost - 1e-9


def pause_seconds(strikes: int) -> float:
    """How long a pause without a stated retry time lasts after `strikes` such pauses."""
    return min(DEFAULT_PAUSE_S * float(2 ** min(strikes, 16)), MAX_PAUSE_S)


def on_limit(
    state: LimitState,
    now: datetime,
    retry_after_s: float | None,
    reason: str,
    task_id: str | None = None,
) -> tuple[LimitState, PauseChange]:
    """The state after one attempt reported a limit at `now`, and what changed."""
    stated = now + timedelta(seconds=retry_after_s) if retry_after_s is not None else None
    if state.pause is not None and state.paused_at(now):
        if stated is not None and stated > state.pause.until:
            moved = replace(state.pause, until=stated, reason=reason)
            return replace(state, pause=moved), PauseChange.EXTENDED
        return state, PauseChange.JOINED
    if stated is not None:
        return replace(state, pause=Pause(now, stated, reason, task_id)), PauseChange.STARTED
    until = now + timedelta(seconds=pause_seconds(state.strikes))
    return LimitState(Pause(now, until, reason, task_id), state.strikes + 1), PauseChange.STARTED


def on_success(state: LimitState) -> LimitState:
    """An attempt got through: the next limit without a retry time starts from the default."""
    return replace(state, strikes=0) if state.strikes else state
