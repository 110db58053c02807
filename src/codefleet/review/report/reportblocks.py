"""The run report's shape: a verdict and sections of blocks any renderer can draw.

A `Report` is a title, a verdict and an ordered tuple of `Section`s. Each
section owns its data (what `--format json` prints under its key) and its
blocks: `Para`, `Facts`, `Table`, `Code` and `Timeline` (runner lanes of
`Bar`s). `review.report.reportrender` draws them as Markdown or self-contained HTML and
knows nothing else of a run; the section builders (`review.report.outcomesections`,
`review.report.contentionsections`) fill them from the run's facts.

`seconds` is how the report, and `codefleet stats`, say a duration. This
module imports nothing of codefleet, so the renderer and the command line can
use it without the facts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Bar",
    "Block",
    "Code",
    "Facts",
    "Para",
    "Report",
    "Section",
    "Table",
    "Timeline",
    "seconds",
]


@dataclass(frozen=True, slots=True)
class Para:
    text: str
    tone: str = ""  # "", "ok", "bad", "warn"


@dataclass(frozen=True, slots=True)
class Facts:
    items: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class Table:
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    tones: tuple[str, ...] = ()  # one per row, optional


@dataclass(frozen=True, slots=True)
class Code:
    text: str
    label: str = ""


@dataclass(frozen=True, slots=True)
class Bar:
    task_id: str
    attempt: int
    start_s: float
    end_s: float
    outcome: str


@dataclass(frozen=True, slots=True)
class Timeline:
    """Runner lanes of attempt bars and veto marks, in seconds from the run's start."""

    lanes: tuple[tuple[str, tuple[Bar, ...]], ...]
    vetoes: tuple[tuple[str, float, str], ...]  # (refused runner, at, path)
    span_s: float


Block = Para | Facts | Table | Code | Timeline


@dataclass(frozen=True, slots=True)
class Section:
    key: str
    title: str
    blocks: tuple[Block, ...]
    data: Any = None


@dataclass(frozen=True, slots=True)
class Report:
    title: str
    verdict: str  # PASS, FAIL, RUNNING
    generated_at: str
    sections: tuple[Section, ...] = field(default_factory=tuple)


def seconds(value: float | None) -> str:
    """A duration for people: 0.42 s, 12.3 s, 3 min 05 s; an em dash for none."""
    if value is None:
        return "—"
    if value < 10:
        return f"{value:.2f} s"
    if value < 60:
        return f"{value:.1f} s"
    minutes, rest = divmod(round(value), 60)
    return f"{minutes} min {rest:02d} s"
