"""Which tasks held different parts of one file at the same time, read from the event log.

With leases by part (decision 0145) two tasks may hold and write different parts of
one Python file at once. `side_by_side` replays the `lease_acquired` and
`lease_released` events in log order and returns, per file and pair of tasks, the
parts each held while the other held some too: what `codefleet demo` prints as its
SIDE BY SIDE line. Whole-file leases never overlap (they exclude every part), so a run
leased by file has none. Pure: events in, frozen values out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from codefleet.models import EventType
from codefleet.toolcalls.leasekeys import split_part_key

__all__ = ["SideBySide", "side_by_side"]


@dataclass(frozen=True, slots=True)
class SideBySide:
    """Two tasks that held parts of `file` at once; `parts[i]` is what `tasks[i]` held."""

    file: str
    tasks: tuple[str, str]
    parts: tuple[tuple[str, ...], tuple[str, ...]]

    def describe(self) -> str:
        """`api.py: T3 held <header>, ROUTES while T4 held create_app`."""
        (first, second), (mine, theirs) = self.tasks, self.parts
        return (
            f"{self.file}: {first} held {', '.join(mine)} while {second} held {', '.join(theirs)}"
        )


def side_by_side(events: Iterable[Mapping[str, Any]]) -> list[SideBySide]:
    """Every pair of tasks that held different parts of one file at once, by file and tasks."""
    held: dict[str, dict[str, set[str]]] = {}  # file -> task -> parts it holds now
    seen: dict[tuple[str, str, str], tuple[set[str], set[str]]] = {}
    for event in sorted(events, key=lambda e: int(e["id"])):
        kind, task = event["type"], event.get("task_id")
        key = str((event.get("payload") or {}).get("path", ""))
        path, name = split_part_key(key) if key else (key, None)
        if name is None or task is None:
            continue
        holders = held.setdefault(path, {})
        if kind == EventType.LEASE_RELEASED:
            holders.get(task, set()).discard(name)
        elif kind == EventType.LEASE_ACQUIRED:
            holders.setdefault(task, set()).add(name)
            for other, parts in holders.items():
                if other != task and parts:
                    _note(seen, path, task, other, holders)
    return [
        SideBySide(path, (a, b), (tuple(sorted(pa)), tuple(sorted(pb))))
        for (path, a, b), (pa, pb) in sorted(seen.items())
    ]


def _note(
    seen: dict[tuple[str, str, str], tuple[set[str], set[str]]],
    path: str,
    task: str,
    other: str,
    holders: Mapping[str, set[str]],
) -> None:
    first, second = sorted((task, other))
    parts = seen.setdefault((path, first, second), (set(), set()))
    parts[0].update(holders[first])
    parts[1].update(holders[second])
