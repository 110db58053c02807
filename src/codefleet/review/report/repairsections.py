"""The report's repair section: failed checks repaired in their own session, and the reworks.

Read from the event log (decision 0161): each `repair_started` (cause, check, what
the change had cost so far: `spent_usd`) with its `repair_finished` (outcome, the
repair turn's cost), and each requeue that rolled a change back because a check
failed it (`verify_failed`, `integration_failed`): a rework. What a repair saved
is an estimate: a rework spends the change's cost again, a repair spends its turn;
a repair that failed saved nothing (the rework followed). A run with neither has
no repair section.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from codefleet.models import ErrorKind, EventType
from codefleet.review.facts import RunFacts
from codefleet.review.report.reportblocks import Facts, Para, Section, Table
from codefleet.wording import cost_text

__all__ = ["Repair", "repair_section", "repairs_of", "reworks_of"]

REWORKED: Final = frozenset({ErrorKind.VERIFY_FAILED, ErrorKind.INTEGRATION_FAILED})
FAILED: Final = "failed"


@dataclass(frozen=True, slots=True)
class Repair:
    """One repair turn: whose, for which check, how it ended, what it cost and saved."""

    task_id: str
    attempt: int
    cause: str
    check: str
    outcome: str  # fixed, landing, failed; "" while it runs
    cost_usd: float
    spent_usd: float  # the change's cost before it: what a rework would spend again

    @property
    def saved_usd(self) -> float:
        return 0.0 if self.outcome in (FAILED, "") else max(0.0, self.spent_usd - self.cost_usd)


def repairs_of(events: Sequence[Mapping[str, Any]]) -> list[Repair]:
    """Every repair turn in the log, in order, each started one with how it ended."""
    found: list[Repair] = []
    open_: dict[str, int] = {}  # task -> its repair not finished yet (index in `found`)
    for e in events:
        task, body = str(e.get("task_id") or ""), e.get("payload") or {}
        if e["type"] == EventType.REPAIR_STARTED:
            open_[task] = len(found)
            found.append(_started(task, body))
        elif e["type"] == EventType.REPAIR_FINISHED and task in open_:
            n, outcome = open_.pop(task), str(body.get("outcome") or "")
            found[n] = replace(found[n], outcome=outcome, cost_usd=float(body.get("cost_usd") or 0))
    return found


def _started(task: str, body: Mapping[str, Any]) -> Repair:
    return Repair(
        task_id=task,
        attempt=int(body.get("attempt") or 0),
        cause=str(body.get("cause") or ""),
        check=str(body.get("name") or ""),
        outcome="",
        cost_usd=0.0,
        spent_usd=float(body.get("spent_usd") or 0),
    )


def reworks_of(events: Sequence[Mapping[str, Any]]) -> int:
    """Changes rolled back for a new attempt because a check failed them."""
    return sum(
        1
        for e in events
        if e["type"] == EventType.TASK_REQUEUED
        and (e.get("payload") or {}).get("error_kind") in REWORKED
    )


def repair_section(facts: RunFacts) -> Section | None:
    """How many failed checks were repaired in their session, the reworks, the cost saved."""
    events = facts.record.events
    repairs, reworks = repairs_of(events), reworks_of(events)
    if not repairs and not reworks:
        return None
    sim = facts.simulated
    fixed = [r for r in repairs if r.outcome not in (FAILED, "")]
    spent = sum(r.cost_usd for r in repairs)
    saved = sum(r.saved_usd for r in repairs)
    summary = (
        ("repairs", f"{len(fixed)} of {len(repairs)} repaired in the same session"),
        ("reworks", f"{reworks} (rolled back and redone)"),
        ("repair turns cost", cost_text(spent, sim)),
        ("saved (estimate)", f"{cost_text(saved, sim)}: a rework spends the change's cost again"),
    )
    rows = tuple(
        (r.task_id, str(r.attempt), r.cause, r.check, r.outcome or "running",
         cost_text(r.cost_usd, sim), cost_text(r.saved_usd, sim))
        for r in repairs
    )  # fmt: skip
    columns = ("task", "attempt", "cause", "check", "then", "repair cost", "saved")
    tones = tuple("bad" if r.outcome == FAILED else "ok" for r in repairs)
    blocks = (
        Facts(summary),
        Para("A failed verify or landing check is told to the session that made the change."),
        Table(columns, rows, tones),
    )
    data = {"repairs": len(repairs), "fixed": len(fixed), "reworks": reworks}
    return Section("repairs", "Repairs", blocks, data | {"cost_usd": spent, "saved_usd": saved})
