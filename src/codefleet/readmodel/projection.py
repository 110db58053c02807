"""The reads that grow with the run, kept encoded: `/state`'s tasks and `/conflicts`.

Each task is kept as its JSON bytes (the stored row, its derived fields last)
and each `lease_denied` event as its conflict's bytes (`resolved` last); a
read joins them. What changed is known without looking: each committed
transaction's task ids reach `committed` (`coord.engineview.EngineReads.feed`),
which adds them to the dirty set. A read takes a `cut` on the event loop —
the dirty set, swapped for an empty one, and a read transaction on this projection's own read-only
connection, at one instant — and `state` or `conflicts` then re-reads off the
loop only the dirty rows and the denials after the last one seen, on that
snapshot. So every answer equals a recomputation at its cut (docs/
docs/decisions/0068-reads-are-projections.md, "Reads are projections").

A task's derived fields are re-derived when it changes, when a parent's
success changes, and when its backoff runs out (`_timed`); a conflict's
`resolved` when its task's success changes. A reset, a failed read and the
first read rebuild everything. The dirty set is the loop's (`committed`,
`cut`, `lost`); the cache is the reading thread's, one read at a time (the
caller serializes them).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Set
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from codefleet.coord.engineview import SnapshotReader
from codefleet.coord.policy.readiness import Standing, charged, standing
from codefleet.models import EventType, TaskStatus, from_iso
from codefleet.readmodel.wirerows import Row, conflict_head, encode

__all__ = ["Cut", "Projection", "Recorded"]

ALL: Final = 1_000_000_000  # "every row"
NO_LIST: Final = b"[]"
RUNNABLE: Final = {True: b',"runnable":true}', False: b',"runnable":false}'}
RESOLVED: Final = {True: b',"resolved":true}', False: b',"resolved":false}'}


def _list(items: list[str]) -> bytes:
    return encode(items) if items else NO_LIST


@dataclass(frozen=True, slots=True)
class Cut:
    """One read's view: the tasks changed since the last cut, on an open read snapshot."""

    tasks: set[str]
    everything: bool  # rebuild: nothing cached can be trusted
    last_event_id: int  # the snapshot's last event
    snapshot: ExitStack  # holds the read transaction; the read closes it


@dataclass(frozen=True, slots=True)
class Recorded:
    """`/state`'s recorded part at one cut: the tasks array's inside, the counters."""

    tasks: bytes
    counters: Row
    last_event_id: int


@dataclass(frozen=True, slots=True)
class _Task:
    seq: int
    status: str
    charged: int  # attempts that count against `max_attempts` (`coord.policy.readiness`)
    max_attempts: int
    backoff: datetime | None
    parents: tuple[str, ...]
    body: bytes  # the task's JSON; its last `tail` bytes are the derived fields
    tail: int


@dataclass(frozen=True, slots=True)
class _Conflict:
    task_id: str
    resolved: bool
    body: bytes  # the conflict's JSON, `resolved` last


class Projection:
    """Encoded tasks and conflicts of one database, refreshed from its commits."""

    _tasks: dict[str, _Task]  # by seq
    _children: dict[str, list[str]]
    _timed: dict[str, datetime]  # not yet runnable only for their backoff: until when
    _conflicts: list[_Conflict]  # by event id
    _denied: dict[str, list[int]]  # task → its conflicts' indexes
    _through: int  # the last event read for denials
    _counters: Row
    _joined_tasks: bytes | None
    _joined_conflicts: bytes | None

    def __init__(
        self, open_reader: Callable[[], SnapshotReader], parents: Callable[[str], list[str]]
    ) -> None:
        self._open_reader = open_reader  # a read-only connection of its own, opened at first cut
        self._parents = parents  # a task's parents, fixed at its insert (the live index)
        self._reader: SnapshotReader | None = None
        self._dirty: set[str] = set()
        self._everything = True
        self._clear()

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()

    # -- on the loop: the dirty set ------------------------------------------------------

    def committed(self, tasks: Set[str], reset: bool) -> None:
        """After each COMMIT: the tasks it wrote are dirty (a reset: everything)."""
        if reset:
            self._everything = True
            self._dirty.clear()
        elif tasks and not self._everything:
            self._dirty |= tasks

    def cut(self) -> Cut:
        """Open a read snapshot and take the dirty set at the same instant."""
        if self._reader is None:
            self._reader = self._open_reader()
        snapshot = ExitStack()
        snapshot.enter_context(self._reader.read_transaction())
        try:
            last = self._reader.last_event_id()  # the first read fixes the snapshot
        except BaseException:
            snapshot.close()
            raise
        dirty, self._dirty = self._dirty, set()
        everything, self._everything = self._everything, False
        return Cut(dirty, everything, last, snapshot)

    def lost(self, _: Cut) -> None:
        """A read failed after its cut: what it took is not in the cache, so rebuild next time."""
        self._everything = True

    # -- off the loop: the reads -----------------------------------------------------------

    def state(self, cut: Cut, now: datetime) -> Recorded:
        """The tasks (derived at `now`) and counters at `cut`; closes its snapshot."""
        self._refresh(cut, now, denials=False)  # the conflicts' own read catches up on those
        if self._joined_tasks is None:
            self._joined_tasks = b",".join([t.body for t in self._tasks.values()])
        return Recorded(self._joined_tasks, self._counters, cut.last_event_id)

    def conflicts(self, cut: Cut, now: datetime, resolved: bool | None) -> bytes:
        """`/conflicts` at `cut`, all of them or those whose `resolved` is `resolved`."""
        self._refresh(cut, now, denials=True)
        if resolved is not None:
            found = b",".join([c.body for c in self._conflicts if c.resolved is resolved])
        else:
            if self._joined_conflicts is None:
                self._joined_conflicts = b",".join([c.body for c in self._conflicts])
            found = self._joined_conflicts
        return b'{"conflicts":[' + found + b"]}"

    # -- the refresh -------------------------------------------------------------------------

    def _clear(self) -> None:
        self._tasks = {}
        self._children = {}
        self._timed = {}
        self._conflicts = []
        self._denied = {}
        self._through = 0
        self._counters = {}
        self._joined_tasks = None
        self._joined_conflicts = None

    def _refresh(self, cut: Cut, now: datetime, denials: bool) -> None:
        rows, denied = self._read(cut, denials)
        flipped = self._apply(rows)
        due = [task_id for task_id, until in self._timed.items() if until <= now]
        below = (child for parent in flipped for child in self._children.get(parent, ()))
        self._derive({*(r["id"] for r in rows), *below, *due}, now)
        self._resolve(flipped, denied)

    def _read(self, cut: Cut, denials: bool) -> tuple[list[Row], list[Row]]:
        """The changed rows, the counters if they moved, any new denials; ends the snapshot."""
        reader = self._reader
        assert reader is not None
        with cut.snapshot:
            everything = cut.everything
            rows: list[Row] = []
            if cut.tasks and not everything:
                rows = reader.tasks_of(cut.tasks)
                gone = (cut.tasks & self._tasks.keys()) - {r["id"] for r in rows}
                everything = bool(gone)  # only a reset deletes a task, but be sure
            if everything:
                self._clear()
                rows = reader.tasks(None, ALL, 0)
            if rows or everything:
                self._counters = self._counted(reader)
            denied: list[Row] = []
            if denials and cut.last_event_id > self._through:
                denied = reader.events(self._through, ALL, EventType.LEASE_DENIED)
                self._through = cut.last_event_id
        return rows, denied

    @staticmethod
    def _counted(reader: SnapshotReader) -> Row:
        tokens_in, tokens_out, cost = reader.usage_totals()
        return {
            "tasks": reader.task_counts(),
            "input_tokens": tokens_in,
            "output_tokens": tokens_out,
            "cost_usd": round(cost, 6),
        }

    def _apply(self, rows: list[Row]) -> set[str]:
        """Cache each row's stored part; the tasks whose success changed."""
        flipped: set[str] = set()
        last = next(reversed(self._tasks.values())).seq if self._tasks else 0
        unordered = False
        for row in rows:
            task_id, status = row["id"], row["status"]
            old = self._tasks.get(task_id)
            if old is None:
                parents = tuple(self._parents(task_id))
                for parent in parents:
                    self._children.setdefault(parent, []).append(task_id)
                unordered = unordered or row["seq"] < last
                last = max(last, row["seq"])
            else:
                parents = old.parents
            if (old is not None and old.status == TaskStatus.SUCCEEDED) != (
                status == TaskStatus.SUCCEEDED
            ):
                flipped.add(task_id)
            backoff = row["backoff_until"]
            self._tasks[task_id] = _Task(
                row["seq"],
                status,
                charged(row["attempts"], row.get("uncharged_attempts") or 0),
                row["max_attempts"],
                from_iso(backoff) if backoff else None,
                parents,
                encode(row)[:-1],
                0,
            )
        if unordered:
            self._tasks = dict(sorted(self._tasks.items(), key=lambda item: item[1].seq))
        if rows:
            self._joined_tasks = None
        return flipped

    def _derive(self, task_ids: Iterable[str], now: datetime) -> None:
        """Re-derive `unmet_dependencies`, `depends_on` and `runnable` of `task_ids` at `now`."""
        tasks = self._tasks
        for task_id in task_ids:
            task = tasks.get(task_id)
            if task is None:
                continue
            unmet = [p for p in task.parents if self._status(p) != TaskStatus.SUCCEEDED]
            stands = standing(
                unmet=len(unmet),
                charged=task.charged,
                max_attempts=task.max_attempts,
                backoff_until=task.backoff,
                now=now,
            )
            pending = task.status == TaskStatus.PENDING
            if pending and stands is Standing.BACKING_OFF:
                assert task.backoff is not None
                self._timed[task_id] = task.backoff
            else:
                self._timed.pop(task_id, None)
            tail = b"".join(
                (
                    b',"unmet_dependencies":',
                    _list(unmet),
                    b',"depends_on":',
                    _list(list(task.parents)),
                    RUNNABLE[pending and stands is Standing.READY],
                )
            )
            head = task.body[: len(task.body) - task.tail]
            tasks[task_id] = _Task(
                task.seq,
                task.status,
                task.charged,
                task.max_attempts,
                task.backoff,
                task.parents,
                head + tail,
                len(tail),
            )
            self._joined_tasks = None

    def _status(self, task_id: str) -> str | None:
        task = self._tasks.get(task_id)
        return task.status if task is not None else None

    def _resolve(self, flipped: set[str], denials: list[Row]) -> None:
        """Re-derive the conflicts of tasks whose success changed; add the new denials."""
        for task_id in flipped:
            done = self._status(task_id) == TaskStatus.SUCCEEDED
            for n in self._denied.get(task_id, ()):
                old = self._conflicts[n]
                if old.resolved is not done:
                    head = old.body[: -len(RESOLVED[old.resolved])]
                    self._conflicts[n] = _Conflict(task_id, done, head + RESOLVED[done])
                    self._joined_conflicts = None
        for event in denials:
            task_id = event["task_id"] or ""
            done = self._status(task_id) == TaskStatus.SUCCEEDED
            self._denied.setdefault(task_id, []).append(len(self._conflicts))
            self._conflicts.append(_Conflict(task_id, done, conflict_head(event) + RESOLVED[done]))
            self._joined_conflicts = None
