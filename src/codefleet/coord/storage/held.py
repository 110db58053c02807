"""Held row updates: one row's consecutive updates in a transaction, run as one `UPDATE`.

The store queues each `update_task`, `update_agent` and usage addition per
`(table, id)` and runs the merged statement before its next statement of any
kind (docs/decisions/0071-held-row-updates.md, "Held row updates"). Merging keeps what running
them one by one would store: a later update wins a column it sets, an
addition adds to what is set or added already. Pure: no SQL is run here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["HeldUpdate"]


@dataclass(slots=True)
class HeldUpdate:
    """One row's queued update: columns set, and columns added to (usage counters)."""

    sets: dict[str, Any] = field(default_factory=dict)
    adds: dict[str, float] = field(default_factory=dict)

    def merge(self, sets: Mapping[str, Any], adds: Mapping[str, float]) -> None:
        """The later update wins a column it sets; an addition adds to what is there."""
        for name in sets:
            self.adds.pop(name, None)
        self.sets.update(sets)
        for name, delta in adds.items():
            if name in self.sets:
                self.sets[name] += delta
            else:
                self.adds[name] = self.adds.get(name, 0) + delta

    def statement(self, table: str, row_id: str) -> tuple[str, dict[str, Any]]:
        """`UPDATE <table> SET ... WHERE id = :id` and its named parameters."""
        parts = [f"{name} = :{name}" for name in self.sets]
        parts += [f"{name} = {name} + :add_{name}" for name in self.adds]
        params = {**self.sets, **{f"add_{n}": v for n, v in self.adds.items()}, "id": row_id}
        return f"UPDATE {table} SET {', '.join(parts)} WHERE id = :id", params
