"""Fleet-wide counters: `sequences:` in the graph, `next_number(sequence)` for a session.

A sequence is one row of `sequences` (name, last value handed out). A value
is taken with one `UPDATE ... RETURNING` inside the caller's transaction and
answered only after that transaction commits, so no value is handed out
twice, whatever rolls back, crashes or restarts (a value whose answer was
lost is a gap; gaps are fine). Defining a sequence again only ever raises its
last value. `start_after` is a glob relative to the tree: the first value
follows the highest number any matching file's name starts with (0 when none
matches). A value is at most `MAX_INT` (SQLite's largest INTEGER): a file whose
number leaves no room past it is a load error naming the file, and a counter
that handed `MAX_INT` out is exhausted (a refusal, never a repeated value).
The part keeps only the known names in memory.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from codefleet.coord.storage.store import Store
from codefleet.errors import InvalidGraph
from codefleet.models import MAX_INT, EventType, to_iso
from codefleet.resources import glob_inside_tree

__all__ = ["Sequences", "first_value", "highest_number"]

LEADING_DIGITS = re.compile(r"^[0-9]+")


def first_value(root: Path, name: str, spec: Mapping[str, Any]) -> int:
    """The first value of a sequence spec (`start: N` or `start_after: GLOB`), or InvalidGraph."""
    if spec.get("start") is not None:
        return int(spec["start"])
    highest, path = _highest(root, name, str(spec["start_after"]))
    if highest >= MAX_INT:
        raise InvalidGraph(
            f"sequence {name}: {path} is numbered {highest}; the next number would be past "
            f"{MAX_INT}, the largest a sequence can hand out",
            {"problem": "sequence_overflow", "sequence": name, "path": path},
        )
    return highest + 1


def highest_number(root: Path, name: str, pattern: str) -> int:
    """The largest number a file matching `pattern` (relative to `root`) starts its name with."""
    return _highest(root, name, pattern)[0]


def _highest(root: Path, name: str, pattern: str) -> tuple[int, str]:
    """The largest leading number among the files `pattern` matches, and that file ("": none)."""
    if not glob_inside_tree(pattern):
        raise InvalidGraph(
            f"sequence {name}: start_after {pattern!r} must be a glob inside the tree",
            {"problem": "invalid_sequence", "sequence": name},
        )
    tree = root.resolve()
    best = (0, "")
    for found in root.glob(pattern):
        if not found.resolve().is_relative_to(tree):
            continue  # a symlink out of the tree counts for nothing
        digits = LEADING_DIGITS.match(found.name)
        if digits and int(digits.group()) > best[0]:
            best = (int(digits.group()), found.relative_to(root).as_posix())
    return best


class Sequences:
    """The sequences of one engine; every method runs on the engine's thread."""

    def __init__(self, store: Store, clock: Callable[[], datetime]) -> None:
        self.store = store
        self.clock = clock
        self.known: set[str] = set()

    def load(self) -> None:
        self.known = {str(row["name"]) for row in self.store.sequences()}

    def define(self, starts: Mapping[str, int]) -> None:
        """Create or raise each counter (caller's transaction); `sequence_defined` each."""
        at = to_iso(self.clock())
        for name, start in sorted(starts.items()):
            self.store.define_sequence(name, start - 1, at)
            self.known.add(name)
            self.store.emit(EventType.SEQUENCE_DEFINED, sequence=name, start=start)

    def take(self, name: str, task_id: str, agent_id: str) -> int | None:
        """The next value, taken in the caller's transaction (None: no such sequence, or exhausted)."""
        value = self.store.next_in_sequence(name) if name in self.known else None
        if value is not None:
            self.store.emit(
                EventType.NUMBER_ALLOCATED,
                task_id=task_id,
                agent_id=agent_id,
                sequence=name,
                value=value,
            )
        return value

    def exhausted(self, name: str) -> bool:
        """Whether the counter has handed out `MAX_INT` (or an older server overflowed it)."""
        rows = [row for row in self.store.sequences() if row["name"] == name]
        return bool(rows) and rows[0]["last_value"] >= MAX_INT
