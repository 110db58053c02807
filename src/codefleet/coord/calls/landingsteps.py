"""The landing steps handed out: one per worker, each with its own id, claim and view.

The landing policy (`coord.policy.landingpolicy`) keeps the round's running
steps; this part keeps who runs each of them. A step gets its number when a
worker claims it (stored by the caller, so a number is never handed out twice,
not even across a restart); it says the base and batch it checks as they were
when it was proposed (its view keeps exactly those candidates, which stays the
same content when the shorter prefix under it lands). A claim holds while its
worker is heard from within `stale_after` (decision 0152); a worker that
claims again gets its own step back, under a new number. `sync` follows the
round: a step the policy no longer runs is dropped (returned, so the caller can
say that the check it was running was stopped), and its late result, beat or
pre-images fetch finds no step (`NotOwner` for the caller). Memory only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from codefleet.coord.policy import landingpolicy as policy

__all__ = ["Handed", "HandedSteps"]


@dataclass(slots=True)
class Handed:
    """A step handed out: its id, what it checks on which base, who runs it, when heard of."""

    id: int
    step: policy.Step
    base: int  # the landed tasks under its view
    batch: tuple[str, ...]  # the candidates its view keeps, in order
    worker: str | None = None
    until: datetime | None = None  # the claim's hard end: each check's time limit + stale_after
    heard: datetime | None = None  # the worker's last sign of life (claim, beat, started, …)
    deaf_at: float = 0.0  # the server's deaf seconds then (`AgentRegistry.deaf_seconds`)
    infra: int = 0  # times it could not run
    check: str | None = None  # the check its worker said it started and has not answered

    def fields(self) -> dict[str, Any]:
        """What its events and its claim say of it."""
        return {
            "step": self.id,
            "purpose": self.step.purpose,
            "batch": list(self.batch),
            "base": self.base,
        }


class HandedSteps:
    """The steps of the round in progress and their claims; see the module docstring."""

    def __init__(
        self, clock: Callable[[], datetime], deaf_seconds: Callable[[], float], stale_after: float
    ) -> None:
        self.clock = clock
        self.deaf_seconds = deaf_seconds  # stale means unheard while listening
        self.stale_after = stale_after
        self.steps: list[Handed] = []

    def clear(self) -> list[Handed]:
        """Drop every step (the round is over); the dropped ones."""
        return self.sync(None)

    def sync(self, rnd: policy.Round | None) -> list[Handed]:
        """Keep the steps `rnd` still runs, in order; hand out (unclaimed) the ones it added.
        The dropped ones."""
        running = list(rnd.running) if rnd is not None else []
        kept = [h for h in self.steps if h.step in running]
        dropped = [h for h in self.steps if h.step not in running]
        known = [h.step for h in kept]
        self.steps = kept
        for step in running:
            if step not in known and rnd is not None:
                batch = rnd.candidates[rnd.landed : step.prefix]
                self.steps.append(Handed(0, step, rnd.base + rnd.landed, batch))
        return dropped

    def find(self, step_id: int) -> Handed | None:
        """The step numbered `step_id`, if it is still handed out."""
        return next((h for h in self.steps if h.id and h.id == step_id), None)

    def claimable(self, worker: str, now: datetime) -> Handed | None:
        """`worker`'s own step (it claims again), else one nobody holds, else one whose claim
        lapsed."""
        mine = next((h for h in self.steps if h.worker == worker), None)
        if mine is not None:
            return mine
        return next((h for h in self.steps if not self.held(h, now)), None)

    def claimed(self, now: datetime) -> int:
        """How many steps a live worker holds."""
        return sum(self.held(h, now) for h in self.steps)

    def heard(self, handed: Handed) -> None:
        handed.heard, handed.deaf_at = self.clock(), self.deaf_seconds()

    def claim(self, handed: Handed, worker: str, step_id: int, budget_s: float) -> None:
        """`worker` runs `handed` from now on, as step `step_id`, for at most `budget_s`."""
        handed.id = step_id
        handed.worker = worker
        handed.until = self.clock() + timedelta(seconds=budget_s)
        self.heard(handed)

    def held(self, handed: Handed, now: datetime) -> bool:
        """Whether `handed`'s claim holds: its worker was heard within `stale_after` (time the
        server could not listen not counted, as for a runner) and its hard end is not past."""
        if handed.worker is None or handed.heard is None or handed.until is None:
            return False
        deaf = max(0.0, self.deaf_seconds() - handed.deaf_at)
        heard = handed.heard + timedelta(seconds=deaf)
        return handed.until > now and heard >= now - timedelta(seconds=self.stale_after)

    def shown(self, handed: Handed) -> dict[str, Any]:
        """A step as `codefleet landing` shows it (its worker only while its claim holds)."""
        return {
            **handed.fields(),
            "checks": list(handed.step.checks),
            "worker": handed.worker if self.held(handed, self.clock()) else None,
        }
