"""The engine's limits part: the fleet-wide usage-limit pause and the fleet's budget.

This part owns the one `LimitState` and the one `Budget` with the fleet's
recorded cost (the policy is `limits`, pure); the engine calls it inside its
own transactions and hands `paused_until` and the budget's state to the
scheduler's snapshot, which assigns nothing while either holds.

- `limited` runs when a runner reports an attempt that ended on a rate or
  usage limit: it starts, extends or joins the pause (`coord.policy.limitpolicy.on_limit`) and
  emits `fleet_paused` when the pause starts or moves later;
- `resume` lifts the pause (`fleet_resumed`): when it ran out (the
  scheduler's `ResumeFleet`) or by hand (`POST /fleet/resume`);
- `load` restores a pause still running from the event log after a restart:
  the events are the record, so there is no table for it;
- the budget: `spend` adds each attempt's cost as it is recorded; `set_budget`
  changes the cap (`fleet_budget_set`; the server's `--max-cost` at start, or
  `POST /fleet/budget`); `announce_exhausted` emits `fleet_budget_exhausted`
  once per exhaustion. A cap set live outlives a restart unless the restarted
  server was given one of its own (docs/decisions/0056-the-fleets-budget.md, "The fleet's budget").
  Whether that cost is simulated (`models.cost_simulated` over the fleet runs'
  `fleet_started`, read at `load`, added to by `started`) goes with it, and when
  the last run began (`last_start`: which runners are this run's, in the reads).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from enum import StrEnum
from typing import Any, Final

from codefleet.coord.policy.limitpolicy import (
    Budget,
    LimitState,
    Pause,
    PauseChange,
    on_limit,
    on_success,
)
from codefleet.coord.policy.scheduler import BudgetView
from codefleet.coord.storage.store import Store
from codefleet.models import EventType, cost_simulated, from_iso, to_iso

__all__ = ["FleetLimits", "ResumeReason"]

REASON_CHARS: Final = 300
ALL_RUNS: Final = 1_000_000  # fleet runs read at load: every one, in practice


class ResumeReason(StrEnum):
    ELAPSED = "elapsed"
    OPERATOR = "operator"


class FleetLimits:
    def __init__(self, store: Store, budget: Budget | None = None) -> None:
        self.store = store
        self.state = LimitState()
        self.budget = budget if budget is not None and budget.max_cost else self._logged_budget()
        self.spent = 0.0
        self.runs: list[dict[str, Any]] = []  # each fleet run's `fleet_started` payload
        self.last_start: datetime | None = None  # when the last fleet run began
        self.announced = True  # set per exhaustion; `load` decides the first value

    def _logged_budget(self) -> Budget:
        last = self.store.last_event_of((EventType.FLEET_BUDGET_SET,))
        if last is None:
            return Budget()
        body = last["payload"]
        return Budget(body.get("max_cost_usd"), bool(body.get("hard")))

    def load(self, now: datetime) -> None:
        """Re-read the recorded cost, and pick up a pause the log says is still on."""
        self.spent = self.store.usage_totals()[2]
        started = self.store.events(limit=ALL_RUNS, type_=EventType.FLEET_STARTED)
        self.runs = [event["payload"] for event in started]
        self.last_start = from_iso(started[-1]["at"]) if started else None
        self.announced = self.budget.exhausted(self.spent)  # said before the restart, if so
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
                retry_after_s=None if retry_after_s is None else round(retry_after_s, 3),
                change=change,
                strikes=self.state.strikes,
                pause_s=round((pause.until - now).total_seconds(), 3),
            )
        return pause.until

    def succeeded(self) -> None:
        self.state = on_success(self.state)

    def resume(self, reason: ResumeReason, now: datetime) -> bool:
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

    # -- the budget ----------------------------------------------------------------------

    def spend(self, cost_usd: float) -> None:
        self.spent += cost_usd

    def exhausted(self) -> bool:
        return self.budget.exhausted(self.spent)

    def started(self, event: dict[str, Any]) -> None:
        """A fleet run began (its `fleet_started` event): it says whether its cost is
        simulated, and its time which runners are its own."""
        self.runs.append(event["payload"])
        self.last_start = from_iso(event["at"])

    @property
    def simulated(self) -> bool:
        """No real model ran on this server: the cost is priced, not spent."""
        return cost_simulated(self.runs)

    def budget_view(self) -> BudgetView:
        return BudgetView(self.exhausted(), self.announced, self.budget.hard)

    def announce_exhausted(self, in_flight: list[str], pending: int) -> None:
        self.announced = True
        said: dict[str, Any] = {"simulated": True} if self.simulated else {}  # as fleet_started
        self.store.emit(
            EventType.FLEET_BUDGET_EXHAUSTED,
            max_cost_usd=self.budget.max_cost,
            spent_usd=round(self.spent, 6),
            hard=self.budget.hard,
            running=in_flight,
            not_started=pending,
            **said,
        )

    def set_budget(self, budget: Budget) -> None:
        """A new cap (`fleet_budget_set`); the next tick says so if it is already spent."""
        previous = self.budget
        self.store.emit(
            EventType.FLEET_BUDGET_SET,
            max_cost_usd=budget.max_cost,
            hard=budget.hard,
            previous_usd=previous.max_cost,
            spent_usd=round(self.spent, 6),
        )
        self.budget = budget
        self.announced = False

    @contextmanager
    def budget_kept(self) -> Iterator[None]:
        """Put the cap back if the transaction inside fails (the cap is memory after `load`)."""
        before = (self.budget, self.announced)
        try:
            yield
        except BaseException:
            self.budget, self.announced = before
            raise

    def budget_json(self) -> dict[str, Any]:
        return {
            "max_cost_usd": self.budget.max_cost,
            "hard": self.budget.hard,
            "spent_usd": round(self.spent, 6),
            "exhausted": self.exhausted(),
            "simulated": self.simulated,
        }

    def view(self, now: datetime) -> dict[str, Any]:
        """`paused_until` and its why, the budget, for `/health` and `/state`."""
        pause = self.state.pause
        if pause is None:
            return {"paused_until": None, "pause": None, "budget": self.budget_json()}
        return {
            "budget": self.budget_json(),
            "paused_until": to_iso(pause.until),
            "pause": {
                "since": to_iso(pause.since),
                "until": to_iso(pause.until),
                "reason": pause.reason,
                "task_id": pause.task_id,
                "remaining_s": round(max(0.0, (pause.until - now).total_seconds()), 3),
            },
        }
