"""The live dashboard's landing: the queue in order, the check under way, the halt, as text.

Pure, like `ui.viewmodel`: `landing_panel` turns the landing facts folded from the events
the dashboard has seen (`review.landinglog.landing_of`) and the `/state` tasks into a frozen
`LandingPanel`; `landing_text` and `halt_text` render it. A task the server says is
`landing` but whose `landing_queued` came before the dashboard's backlog still shows in
the queue (after the ones whose order the events give). `now` is an argument.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from rich.text import Text

from codefleet.models import TaskStatus
from codefleet.review.landinglog import LandingFacts

__all__ = [
    "HALT_STYLE",
    "LANDING_STYLE",
    "HaltBanner",
    "LandingPanel",
    "halt_text",
    "landing_panel",
    "landing_text",
]

LANDING_STYLE: Final = "bold magenta"
HALT_STYLE: Final = "bold white on red"
MAX_QUEUE_SHOWN: Final = 12
TAIL_CHARS: Final = 160


@dataclass(frozen=True, slots=True)
class HaltBanner:
    """Landing is halted: the landed tree alone fails `check`; nothing lands until resumed."""

    check: str
    last_landed: str
    output_tail: str


@dataclass(frozen=True, slots=True)
class LandingPanel:
    queue: tuple[str, ...]  # tasks waiting to land, in queue order
    checking: str  # the check under way, in words ("" when none)
    checking_s: float
    last_order: int  # the last landing order number (0: nothing landed yet)
    last_task: str  # ... and the task that got it
    breaks: int
    reworked: int
    halt: HaltBanner | None = None


def _checking(landing: LandingFacts, now: datetime) -> tuple[str, float]:
    c = landing.running
    if c is None:
        return "", 0.0
    batch = ", ".join(c.batch) or "the landed tree alone"
    words = f"{c.check} on {batch} ({c.purpose}) over {c.base} landed"
    return words, max(0.0, (now - c.started_at).total_seconds())


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
        halt=HaltBanner(halted.check, halted.last_landed, halted.output_tail) if halted else None,
    )


def landing_text(panel: LandingPanel) -> Text:
    """`queue T3 → T4 · checking test on T3 (batch) over 2 landed, 3s · last landed #2 (T2)`."""
    line = Text("queue ", style="bold")
    shown = panel.queue[:MAX_QUEUE_SHOWN]
    more = f" (+{len(panel.queue) - len(shown)})" if len(panel.queue) > len(shown) else ""
    line.append(" → ".join(shown) + more if shown else "empty", LANDING_STYLE if shown else "dim")
    line.append(" · ", style="dim")
    if panel.checking:
        line.append("checking ", style="bold")
        line.append(f"{panel.checking}, {panel.checking_s:.0f}s", style="cyan")
    else:
        line.append("no check running", style="dim")
    line.append(" · ", style="dim")
    if panel.last_order:
        line.append(f"last landed #{panel.last_order} ({panel.last_task})", style="green")
    else:
        line.append("nothing landed yet", style="dim")
    if panel.breaks:
        line.append(" · ", style="dim")
        line.append(f"{panel.breaks} integration break(s), {panel.reworked} reworked", "yellow")
    return line


def halt_text(halt: HaltBanner) -> Text:
    """The halt, loud: what fails, the last landing, and how to resume."""
    line = Text("⛔ LANDING HALTED", style=HALT_STYLE)
    line.append(f" · the landed tree alone fails {halt.check} (last landed {halt.last_landed})")
    line.append(" · nothing lands until `codefleet landing resume`", style="bold red")
    last = next((x for x in reversed(halt.output_tail.splitlines()) if x.strip()), "")
    if last:
        line.append(f"\n{last.strip()[-TAIL_CHARS:]}", style="red")
    return line
