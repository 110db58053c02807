"""What the server recorded about a run: one frozen value for `commit`, `report` and `stats`.

The CLI reads it through the wire (`review.fetch.fetch_record`); the server
builds the same value from its own store for `GET /stats`. The pure code in
`review.history`, `review.facts` and `review.report.runreport` works from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Row", "RunRecord"]

Row = dict[str, Any]


@dataclass(frozen=True, slots=True)
class RunRecord:
    tasks: tuple[Row, ...]
    events: tuple[Row, ...]
    workdir: str  # the server's working tree
    patches: dict[str, Row] = field(default_factory=dict)  # succeeded task id -> its patch
    ledgers: dict[str, list[Row]] = field(default_factory=dict)  # other task id -> file changes
    agents: tuple[Row, ...] = ()

    def task(self, task_id: str) -> Row | None:
        return next((t for t in self.tasks if t["id"] == task_id), None)
