"""The content oracle: what each succeeded task wrote is what the final tree holds.

The runner hashes a file right after every write it made and sends the hash
with the ledger row (`POST /changes`, `sha256`; the pre-write gate's `record`,
called from `PostToolUse` in a real session). So the record of what an
attempt produced comes from the writer, not from the tree the server later
reads to build patches: a take-back that put files back under a task that
still went on to succeed (a crash at the wrong moment), a lost edit, a stray
write afterwards, all leave a path whose content is not the one recorded,
which the patch replay (computed from the damaged tree) cannot see.

`expected_contents` replays the event log: the writes of an attempt count
once that attempt ends in `task_succeeded`, and for each path the last such
write wins (by event id: leases serialize the writers of a path, so that is
its last successful holder). Writers of different parts of one file share it: a
later write by an attempt that then failed, or a restore of its parts, leaves a
content no writer hashed, so such a file is expected only when its last write or
restore is a succeeded attempt's write. `check_contents` compares the tree with it. A
write recorded without a hash makes its path unknown (skipped), never a
guess.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codefleet.models import EventType
from codefleet.rollback import content_sha256
from codefleet.testing.invariants import Violation
from codefleet.toolcalls.leasekeys import PART_SEPARATOR, file_of

__all__ = ["Expected", "check_contents", "expected_contents"]

Row = dict[str, Any]
Attempt = tuple[str, int, int]  # task, generation (bumped by a retry), attempt number


@dataclass(frozen=True, slots=True)
class Expected:
    sha256: str | None  # None: the last successful write of the path was recorded without one
    task_id: str
    event_id: int


def expected_contents(events: Iterable[Row]) -> dict[str, Expected]:
    """Path -> the content its last succeeded writer recorded, from the event log alone."""
    current: dict[str, Attempt] = {}
    generation: dict[str, int] = {}
    writes: dict[Attempt, dict[str, tuple[int, str | None]]] = {}
    expected: dict[str, Expected] = {}
    parted: set[str] = set()  # files some task held parts of
    touched: dict[str, int] = {}  # path -> the last event that wrote or put back its content
    for event in sorted(events, key=lambda e: int(e["id"])):
        kind, task_id, body = event["type"], event.get("task_id"), event.get("payload") or {}
        if not task_id:
            continue
        if kind == EventType.LEASE_ACQUIRED and PART_SEPARATOR in str(body.get("path")):
            parted.add(file_of(str(body.get("path"))))
        if kind in (EventType.FILE_CHANGED, EventType.FILE_RESTORED):
            touched[str(body.get("path"))] = int(event["id"])
        if kind == EventType.TASK_RETRIED:
            generation[task_id] = generation.get(task_id, 0) + 1
        elif kind == EventType.TASK_ASSIGNED:
            current[task_id] = (task_id, generation.get(task_id, 0), int(body.get("attempt", 0)))
        elif kind == EventType.FILE_CHANGED and task_id in current:
            written = writes.setdefault(current[task_id], {})
            written[str(body.get("path"))] = (int(event["id"]), body.get("sha256"))
        elif kind == EventType.TASK_SUCCEEDED and task_id in current:
            _succeeded(expected, task_id, writes.pop(current[task_id], {}))
    for path in parted & expected.keys():  # writers of parts share the file: no last writer
        want = expected[path]
        if touched[path] != want.event_id:  # a later write or restore left content none hashed
            expected[path] = Expected(None, want.task_id, want.event_id)
    return expected


def _succeeded(
    expected: dict[str, Expected], task_id: str, written: Mapping[str, tuple[int, str | None]]
) -> None:
    for path, (event_id, digest) in written.items():
        known = expected.get(path)
        if known is None or event_id > known.event_id:
            expected[path] = Expected(digest, task_id, event_id)


def check_contents(expected: Mapping[str, Expected], tree: Path) -> list[Violation]:
    """Every path whose content in `tree` is not what its last succeeded writer recorded."""
    found: list[Violation] = []
    for path, want in sorted(expected.items()):
        if want.sha256 is None:
            continue
        have = content_sha256(tree / path)
        if have != want.sha256:
            held = f"content {have[:12]}" if have else "no file"
            found.append(
                Violation(
                    "content",
                    f"{path}: {want.task_id} succeeded having written content "
                    f"{want.sha256[:12]}, the tree holds {held}",
                    want.event_id,
                    want.task_id,
                )
            )
    return found
