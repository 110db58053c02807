"""The run report: one page per run, its sections built in order from the run's facts.

`build_report` derives the run's `RunFacts` once and calls each builder of
`SECTIONS`, in order; `report_json` is the machine-readable page (the verdict
and each section's data under its key). The page's shape is
`review.report.reportblocks`; the builders live in `review.report.outcomesections` (what the
run did), `review.report.landingsections` (how it landed) and `review.report.contentionsections`
(what got in its way).

Adding a section (as contention analytics, `stats_section`, was) is one function
`(RunFacts) -> Section | None` and one entry in `SECTIONS`; a builder that
has nothing to say returns None and the section is left out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from codefleet.review.facts import RunFacts, run_facts
from codefleet.review.report.checksections import checks_section
from codefleet.review.report.contentionsections import (
    commands_section,
    graph_section,
    rollbacks_section,
    stats_section,
    verify_section,
    vetoes_section,
)
from codefleet.review.report.landingsections import landing_section
from codefleet.review.report.outcomesections import (
    cost_section,
    history_section,
    operator_section,
    summary_section,
    tasks_section,
    timeline_section,
    verdict,
)
from codefleet.review.report.repairsections import repair_section
from codefleet.review.report.reportblocks import Report, Section
from codefleet.review.runrecord import RunRecord

__all__ = ["SECTIONS", "SectionBuilder", "build_report", "report_json"]

SectionBuilder = Callable[[RunFacts], Section | None]


SECTIONS: list[SectionBuilder] = [
    summary_section,
    timeline_section,
    tasks_section,
    landing_section,
    repair_section,
    operator_section,
    graph_section,
    vetoes_section,
    rollbacks_section,
    verify_section,
    checks_section,
    commands_section,
    cost_section,
    history_section,
    stats_section,
]


def build_report(record: RunRecord, builders: Sequence[SectionBuilder] = ()) -> Report:
    """The report of `record`, with `builders` (default: `SECTIONS`) in order."""
    facts = run_facts(record)
    sections = tuple(s for b in (builders or SECTIONS) if (s := b(facts)) is not None)
    stamp = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    return Report("CodeFleet run report", verdict(facts), stamp, sections)


def report_json(report: Report) -> dict[str, Any]:
    """The machine-readable report: the verdict and each section's data under its key."""
    return {
        "title": report.title,
        "verdict": report.verdict,
        "generated_at": report.generated_at,
        "sections": {s.key: s.data for s in report.sections if s.data is not None},
    }
