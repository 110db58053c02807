"""The report's landing section: the tasks in landing order, the integration breaks, the halts.

Built from `RunFacts.landing` (`review.landinglog`, derived once from the event log);
`review.report.runreport` lists it after the task table. A run recorded before landing
(no landing event, no `order`) has no landing section.
"""

from __future__ import annotations

from codefleet.failuretext import GAP, failure_excerpt
from codefleet.review.facts import RunFacts, since_start
from codefleet.review.landinglog import LandingFacts
from codefleet.review.report.reportblocks import (
    Block,
    Code,
    Facts,
    Para,
    Section,
    Table,
    seconds,
)
from codefleet.wording import halt_cause

__all__ = ["landing_section", "landing_summary"]

EXCERPT_CHARS = 1_200  # of a failed check's output: its failing lines, then its last lines
EXCERPT_LABEL = "the failing lines, then the last lines of its output"
CELL_CHARS = 200  # a break's output in the table: the first line of an excerpt this short


def landing_summary(landing: LandingFacts) -> str:
    """Landing in one line: how many landed, the breaks reworked, the halts."""
    breaks, reworked = len(landing.breaks), sum(b.reworked for b in landing.breaks)
    text = f"{len(landing.orders)} landed in order · {breaks} integration break(s), {reworked} reworked"
    halted = " (still halted)" if landing.halted else ""
    return f"{text} · {len(landing.halts)} halt(s){halted}"


def landing_section(facts: RunFacts) -> Section | None:
    """The tasks in landing order, the integration breaks and how they were reworked, the halts."""
    landing = facts.landing
    if not landing.seen:
        return None
    per = landing.checks_per_landed
    checks = sum(c.verdict is not None for c in landing.checks)
    blocks: list[Block] = [
        Facts(
            (
                ("landed", landing_summary(landing)),
                ("landing checks", f"{checks}" + (f" ({per:.2f} per landed task)" if per else "")),
            )
        )
    ]
    blocks += _order_table(facts)
    blocks += _breaks(landing)
    blocks += _halts(facts)
    return Section("landing", "Landing", tuple(blocks), _landing_data(landing, checks))


def _order_table(facts: RunFacts) -> list[Block]:
    """The landed tasks in landing order, when any landed."""
    titles = {t["id"]: str(t["title"]) for t in facts.record.tasks}
    order_rows = tuple(
        (
            f"#{x.order}",
            x.task_id,
            titles.get(x.task_id, ""),
            seconds(since_start(facts, x.at)),
            seconds(x.waited_s) if x.waited_s is not None else "—",
            ", ".join(x.checks) or "no check",
        )
        for x in facts.landing.landed
    )
    if not order_rows:
        return []
    columns = ("order", "task", "title", "landed at", "waited", "checks passed")
    return [Table(columns, order_rows, tuple("ok" for _ in order_rows))]


def _breaks(landing: LandingFacts) -> list[Block]:
    """The integration breaks and how each ended, when there were any."""
    if not landing.breaks:
        return []
    rows = tuple(
        (
            b.task_id,
            str(b.attempt),
            b.check,
            ", ".join(b.conflicts_with) or "—",
            "reworked and landed" if b.reworked else "not landed",
            _first_failing(b.output_tail),
        )
        for b in landing.breaks
    )
    columns = ("task", "attempt", "check", "conflicts with", "then", "output")
    excerpts: list[Block] = [
        Code(
            failure_excerpt(b.output_tail, EXCERPT_CHARS),
            f"{b.task_id}, attempt {b.attempt}: {EXCERPT_LABEL}",
        )
        for b in landing.breaks
        if b.output_tail
    ]
    return [
        Para("Integration breaks: the later task is rolled back and reworked."),
        Table(columns, rows, tuple("ok" if b.reworked else "bad" for b in landing.breaks)),
        *excerpts,
    ]


def _first_failing(output: str) -> str:
    """One line for a table cell: the first a short excerpt shows (what failed, when the
    output says)."""
    shown = failure_excerpt(output, CELL_CHARS).splitlines()
    return next((x.strip() for x in shown if x != GAP), "")


def _halts(facts: RunFacts) -> list[Block]:
    """One paragraph per landing halt: when, on which check, whether it resumed."""
    paras: list[Block] = []
    for h in facts.landing.halts:
        when = seconds(since_start(facts, h.at))
        then = (
            f"resumed at {seconds(since_start(facts, h.resumed_at))} ({h.reason or 'operator'})"
            if h.resumed_at
            else "still halted: `codefleet landing resume` after a fix"
        )
        text = (
            f"Landing halted at {when}: {halt_cause(f'`{h.check}`', h.why)} "
            f"(last landed {h.last_landed or '—'}); {then}."
        )
        paras.append(Para(text, "warn" if h.resumed_at else "bad"))
        if h.output_tail:
            paras.append(Code(failure_excerpt(h.output_tail, EXCERPT_CHARS), EXCERPT_LABEL))
    return paras


def _landing_data(landing: LandingFacts, checks: int) -> dict[str, object]:
    """The section's data (the report's JSON)."""
    per = landing.checks_per_landed
    return {
        "order": [
            {
                "order": x.order,
                "task_id": x.task_id,
                "waited_s": x.waited_s,
                "checks": list(x.checks),
            }
            for x in landing.landed
        ],
        "checks": checks,
        "checks_per_landed": round(per, 3) if per is not None else None,
        "breaks": [
            {
                "task_id": b.task_id,
                "attempt": b.attempt,
                "check": b.check,
                "conflicts_with": list(b.conflicts_with),
                "reworked": b.reworked,
            }
            for b in landing.breaks
        ],
        "halts": [
            {"check": h.check, "last_landed": h.last_landed, "resumed": h.resumed_at is not None}
            for h in landing.halts
        ],
        "waiting": list(landing.waiting),
    }
