"""The engine's limits part: the fleet-wide usage-limit pause.

This part owns the one `LimitState` (the policy is `limits`, pure); the
engine calls it inside its own transactions and hands `paused_until` to the
scheduler's snapshot, which assigns nothing before that time.

- `limited` runs when a runner reports an attempt that ended on a rate or
  usage limit: it starts, extends or joins the pause (`limits.on_limit`) and
  emits `fleet_paused` when the pause starts or moves later;
- `resume` lifts the pause (`fleet_resumed`): when it ran out (the
  scheduler's `ResumeFleet`) or by hand (`POST /fleet/resume`);
- `load` restores a pause still running from the event log after a restart:
  the events are the record, so there is no table for it.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from codefleet.limits import LimitState, Pause, PauseChange, on_limit, on_success
from codefleet.models import EventType, from_iso, to_iso

if TYPE_CHECKING:
    from codefleet.store import Store

__all__ = ["FleetLimits", "ResumeReason"]

REASON_CHARS: Final = 300


class ResumeReason:
    ELAPSED = "elapsed"
    OPERATOR = "operator"


class FleetLimits:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.state = LimitState()

    def load(self, now: datetime) -> None:
        """Pick up a pause the log says is still on (a `fleet_paused` not followed by a resume)."""
        self.state = LimitState()
        last = self.store.last_event_of((EventType.FLEET_PAUSED, EventType.FLEET_RESUMED))
        if last is None or last["type"] != EventType.FLEET_PAUSED:
            return
        body = last["payload"]
        until = from_iso(str(body["until"]))
        if until > now:
            since = from_iso(str(body.get("since") or last["at"]))
            pause = Pause(since, until, str(body.get("reason") or ""), last["task_id"])
            self.state = LimitState(pause, int(body.get("strikes") or 0))

    def paused_until(self) -> datetime | None:
        return self.state.paused_until()

    def limited(
        self, task_id: str, retry_after_s: float | None, reason: str, now: datetime
    ) -> datetime:
        """One attempt hit a limit: pause (or keep pausing) the fleet; returns the resume time."""
        self.state, change = on_limit(
            self.state, now, retry_after_s, reason[:REASON_CHARS], task_id
        )
        pause = self.state.pause
        assert pause is not None
        if change is not PauseChange.JOINED:
            self.store.emit(
                EventType.FLEET_PAUSED,
                task_id=task_id,
                since=to_iso(pause.since),
                until=to_iso(pause.until),
                reason=pause.reason,
                retry_after_s=retry_after_s,
                change=change,
                strikes=self.state.strikes,
                pause_s=round((pause.until - now).total_seconds(), 3),
            )
        return pause.until

    def succeeded(self) -> None:
        self.state = on_success(self.state)

    def resume(self, reason: str, now: datetime) -> bool:
        """Lift the pause (`fleet_resumed`); False when the fleet was not paused."""
        pause = self.state.pause
        if pause is None:
            return False
        self.state = replace(self.state, pause=None)
        self.store.emit(
            EventType.FLEET_RESUMED,
            reason=reason,
            paused_since=to_iso(pause.since),
            paused_s=round((now - pause.since).total_seconds(), 3),
            was_until=to_iso(pause.until),
        )
        return True

    def view(self, now: datetime) -> dict[str, Any]:
        """`paused_until` and its why, for `/health` and `/state` (None values when running)."""
        pause = self.state.pause
        if pause is None:
            return {"paused_until": None, "pause": None}
        return {
            "paused_until": to_iso(pause.until),
            "pause": {
                "since": to_iso(pause.since),
                "until": to_iso(pause.until),
                "reason": pause.reason,
                "task_id": pause.task_id,
                "remaining_s": round(max(0.0, (pause.until - now).total_seconds()), 3),
            },
        }
