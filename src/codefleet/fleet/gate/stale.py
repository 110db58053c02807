"""Which of an attempt's reads are stale: one pass over its read set, at the end.

A read is stale when the file's content now differs from the content read
(its SHA-256), unless what is there now is the attempt's own last write of
that file (a file it read, then leased and wrote, is not stale because of its
own write). A file changed and changed back is not stale; a file deleted since
is. Only files that moved are hashed: those with a write by another task in
the server's ledger since the read, or whose size or mtime changed.

Each stale path names who changed it: the ledger's task ids in order, "a
person" for a person's session, or "outside the lock" when the ledger has no
write at all (a tool outside CodeFleet, a shell).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from codefleet.attempt import StaleRead
from codefleet.fleet.gate.readset import FileStamp, ReadRecord, observe, stamp_of

__all__ = ["A_PERSON", "OUTSIDE_THE_LOCK", "find_stale"]

A_PERSON: Final = "a person"
OUTSIDE_THE_LOCK: Final = "outside the lock"


def find_stale(
    reads: Mapping[str, ReadRecord],
    own_writes: Mapping[str, str | None],
    changes: Mapping[str, Sequence[Mapping[str, Any]]],
    root: Path,
) -> tuple[StaleRead, ...]:
    """The stale reads among `reads` (latest read per path), in path order.

    `own_writes`: path -> the hash of the attempt's own last write; `changes`:
    path -> the other tasks' ledger writes since the read (`POST /tasks/{id}/reads`).
    """
    return tuple(_stale(reads, own_writes, changes, root))


def _stale(
    reads: Mapping[str, ReadRecord],
    own_writes: Mapping[str, str | None],
    changes: Mapping[str, Sequence[Mapping[str, Any]]],
    root: Path,
) -> Iterator[StaleRead]:
    for path in sorted(reads):
        read = reads[path]
        writes = changes.get(path, ())
        if not writes and not _moved(read.stamp, stamp_of(root / path)):
            continue
        now = observe(root / path)[0].sha256
        if now == read.sha256 or (path in own_writes and now == own_writes[path]):
            continue
        yield StaleRead(
            path=path, changed_by=blame(writes), read_sha256=read.sha256, now_sha256=now
        )


def _moved(then: FileStamp, now: FileStamp) -> bool:
    return (then.size, then.mtime_ns) != (now.size, now.mtime_ns)


def blame(writes: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """Who changed a file: task ids in ledger order, "a person", or "outside the lock"."""
    names: list[str] = []
    for write in writes:
        name = A_PERSON if write.get("person") else str(write["task_id"])
        if name not in names:
            names.append(name)
    return tuple(names) or (OUTSIDE_THE_LOCK,)
