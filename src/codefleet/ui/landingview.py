"""The live dashboard's landing: the queue in order, the check under way, the halt, as values.

Part of the view model (`ui.viewmodel`), pure like it and without Rich: `landing_panel`
turns the landing facts folded from the events the dashboard has seen
(`review.landinglog.landing_of`) and the `/state` tasks into a frozen `LandingPanel`;
`ui.dashboardrender` draws it (`landing_text`, `halt_text`). A task the server says is
`landing` but whose `landing_queued` came before the dashboard's backlog still shows in
the queue (after the ones whose order the events give). `now` is an argument.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from codefleet.models import TaskStatus
from codefleet.review.landinglog import LandingCheck, LandingFacts

__all__ = ["HaltBanner", "LandingPanel", "landing_panel"]


@dataclass(frozen=True, slots=True)
class HaltBanner:
    """Landing is halted on `check` (`why`: a `models.HaltCause`); nothing lands until resumed."""

    check: str
    last_landed: str
    output_tail: str
    why: str = ""


@dataclass(frozen=True, slots=True)
class LandingPanel:
    queue: tuple[str, ...]  # tasks waiting to land, in queue order
    checking: str  # the check under way (the latest started), in words ("" when none)
    checking_s: float
    last_order: int  # the last landing order number (0: nothing landed yet)
    last_task: str  # ... and the task that got it
    breaks: int
    reworked: int
    halt: HaltBanner | None = None
    also: tuple[str, ...] = ()  # the other checks under way at once, in words


def _checking(landing: LandingFacts, now: datetime) -> tuple[str, float]:
    c = landing.running
    if c is None:
        return "", 0.0
    return _words(c), max(0.0, (now - c.started_at).total_seconds())


def _words(c: LandingCheck) -> str:
    batch = ", ".join(c.batch) or "the landed tree alone"
    return f"{c.check} on {batch} ({c.purpose}) over {c.base} landed"


def landing_panel(
    landing: LandingFacts, tasks: Sequence[Mapping[str, Any]], now: datetime
) -> LandingPanel | None:
    """The panel, or None when neither the events nor the tasks say anything of landing."""
    statuses = {str(t["id"]): t["status"] for t in tasks}
    known = [
        t for t in landing.waiting if statuses.get(t, TaskStatus.LANDING) == TaskStatus.LANDING
    ]
    rest = [t for t, s in statuses.items() if s == TaskStatus.LANDING and t not in known]
    if not landing.seen and not rest:
        return None
    checking, checking_s = _checking(landing, now)
    halted = landing.halted
    last = landing.orders[-1] if landing.orders else ("", 0)
    return LandingPanel(
        queue=tuple(known + sorted(rest)),
        checking=checking,
        checking_s=checking_s,
        last_order=last[1],
        last_task=last[0],
        breaks=len(landing.breaks),
        reworked=sum(b.reworked for b in landing.breaks),
        halt=HaltBanner(halted.check, halted.last_landed, halted.output_tail, halted.why)
        if halted
        else None,
        also=tuple(_words(c) for c in landing.running_all if c is not landing.running),
    )
