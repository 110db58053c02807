"""SQLite persistence: the only module that speaks SQL.

One connection, owned by the server process (the single writer), in WAL mode
with a busy timeout. Every write runs inside `transaction()`, a re-entrant
`BEGIN IMMEDIATE` block: nested calls join the outer transaction, and the
events emitted inside it are handed to the `on_commit` listener only after
COMMIT succeeds, so a subscriber never sees an event that was rolled back.

A rolled-back transaction calls `on_rollback`, so a caller that mirrors rows
in memory (the engine's live index) can re-read them instead of drifting; a
committed one calls `on_committed` with the same record, so a read cache (the
projection) knows which rows to refresh.

Invariants held by the schema, not by code: one lease row per path (primary
key), no self-dependency, event ids strictly increasing. Statements are named
constants (`queries`) so a grep finds every query.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import datetime
from importlib import resources
from operator import itemgetter
from pathlib import Path
from typing import Any

from codefleet.coord import queries as q
from codefleet.coord.held import HeldUpdate
from codefleet.coord.jsontext import payload_json, plain_json
from codefleet.coord.rows import AgentRow, LeaseRow, RestoreRow
from codefleet.errors import DatabaseDamaged, StoreUnavailable
from codefleet.models import EventType, ReleaseReason, to_iso, utcnow
from codefleet.rollback import PatchFile, PreImage

# One `read` row of the ledger: task, agent, path, tool, at, attempt, sha256.
ReadRow = tuple[str, str, str, str, str, int | None, str | None]

__all__ = ["Checkpointer", "Row", "Store", "Touched", "check_database"]

Row = dict[str, Any]
WRITER_CACHE_KIB = 32_768  # the writer's page cache (SQLite's default is 2,000 KiB)
CHECKPOINT_EVERY_COMMITS = 256  # a background checkpoint is asked for after this many commits
CHECKPOINT_IDLE_S = 1.0  # ... and at least this often while the server runs
CHECKPOINT_JOIN_S = 5.0
BACKSTOP_CHECKPOINT_PAGES = 16_384  # the writer checkpoints itself only past this WAL (64 MiB)
CHECK_BUDGET_S = 10.0  # the start-up check stops here: ~1 GB of pages (docs/reliability.md)
CHECK_PROGRESS_EVERY = 100  # SQLite VM steps between two looks at the clock
log = logging.getLogger(__name__)
_INSERT_TASK_PARAMS = itemgetter(*q.INSERT_TASK_COLUMNS)


@dataclass(slots=True)
class Touched:
    """The keys a transaction wrote so far: what an in-memory mirror must re-read if it fails."""

    tasks: set[str] = field(default_factory=set)
    agents: set[str] = field(default_factory=set)
    lease_tasks: set[str] = field(default_factory=set)  # tasks whose leases or restores changed
    interactive: bool = False
    reset: bool = False  # every table was emptied


class Checkpointer:
    """Checkpoints the writer's WAL from a thread of its own connection.

    A checkpoint copies the WAL into the database file and syncs it; on the
    writer's thread (SQLite's auto-checkpoint) that sync stalled the event loop
    for milliseconds every few hundred commits. Here it runs beside it (the
    sqlite3 module lets go of the GIL while SQLite works), `PASSIVE`, so it
    never waits for or blocks the writer (docs/decisions.md, "Checkpoints off
    the loop"). A failed checkpoint is tried again at the next; the WAL keeps
    every commit meanwhile.
    """

    def __init__(self, path: Path) -> None:
        self.due = threading.Event()
        self._stopping = False
        self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA busy_timeout=5000")
        self.ran = threading.Event()  # set after each checkpoint (a test waits on it)
        self._thread = threading.Thread(target=self._run, name="sqlite-checkpoint", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            self.due.wait(CHECKPOINT_IDLE_S)
            self.due.clear()
            if self._stopping:
                break
            try:
                self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
                self.ran.set()
            except sqlite3.Error:  # a thread's loop boundary: the next checkpoint tries again
                log.warning("WAL checkpoint failed", exc_info=True)
        self._conn.close()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def close(self) -> None:
        self._stopping = True
        self.due.set()
        self._thread.join(timeout=CHECKPOINT_JOIN_S)


def check_database(path: Path, budget_s: float = CHECK_BUDGET_S) -> bool:
    """Run SQLite's `PRAGMA quick_check` on `path`; raise `DatabaseDamaged` if it fails.

    True when the check ran in full (or there is no file yet: a new database),
    False when it passed `budget_s` and stopped (docs/reliability.md, "A damaged database").
    """
    if not path.exists():
        return True
    deadline = time.monotonic() + budget_s
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    # The index checks are VM steps (the handler sees them); the b-tree walk is one step,
    # which only `interrupt()` from another thread stops.
    conn.set_progress_handler(lambda: int(time.monotonic() >= deadline), CHECK_PROGRESS_EVERY)
    timer = threading.Timer(budget_s, conn.interrupt)
    timer.start()
    try:
        verdict = [str(row[0]) for row in conn.execute("PRAGMA quick_check")]
    except sqlite3.OperationalError as err:
        if "interrupted" not in str(err):
            raise DatabaseDamaged(path, str(err), _newest_kept(path)) from None
        return False
    except sqlite3.DatabaseError as err:  # not a database, malformed: what SQLite says is the news
        raise DatabaseDamaged(path, str(err), _newest_kept(path)) from None
    finally:
        timer.cancel()
        timer.join()  # never interrupts a closed connection
        conn.close()
    if verdict != ["ok"]:
        said = "; ".join(" ".join(v.split()) for v in verdict)
        raise DatabaseDamaged(path, said, _newest_kept(path))
    return True


def _newest_kept(path: Path) -> Path | None:
    """The newest earlier run's database `codefleet runs new` kept beside `path` (by its stamp)."""
    kept = sorted(path.parent.glob(f"{path.stem}-*{path.suffix}"))
    return kept[-1] if kept else None


def _decode_event(row: sqlite3.Row) -> Row:
    event = dict(row)
    event["payload"] = json.loads(event["payload"])
    return event


def _preimage(row: sqlite3.Row) -> PreImage:
    return PreImage(
        path=row["path"],
        existed=bool(row["existed"]),
        content=bytes(row["content"] or b""),
        mode=row["mode"],
        created_dirs=tuple(json.loads(row["created_dirs"])),
    )


def _task_params(task: Row) -> tuple[Any, ...]:
    """`INSERT_TASK`'s parameters, in order; `verify`, `agent`, `on_stale_read` and `shell`
    may be left out (NULL)."""
    row = {
        "verify": None,
        "agent": None,
        "on_stale_read": None,
        "ask": None,
        "shell": None,
        **task,
        "file_scope": plain_json(task["file_scope"]),
        "resources": plain_json(task.get("resources") or []),
    }
    params: tuple[Any, ...] = _INSERT_TASK_PARAMS(row)
    return params


def _decode_task(row: sqlite3.Row) -> Row:
    task = dict(row)
    task["file_scope"] = json.loads(task["file_scope"])
    task["resources"] = json.loads(task.get("resources") or "[]")
    return task


class Store:
    """A SQLite database file with CodeFleet's schema."""

    def __init__(
        self,
        path: Path | str,
        on_commit: Callable[[list[Row]], None] | None = None,
        on_rollback: Callable[[Touched], None] | None = None,
        on_committed: Callable[[Touched], None] | None = None,
        *,
        read_only: bool = False,
        background_checkpoints: bool = False,
    ):
        self.path = Path(path)
        self._depth = 0
        self._pending: list[Row] = []
        self.commits = 0  # outer COMMITs so far: between two, every table read gives the same
        self.clock: Callable[[], datetime] = utcnow  # the engine sets its own
        self.on_commit = on_commit
        self.on_rollback = on_rollback
        self.on_committed = on_committed  # after each outer COMMIT: what it wrote (read caches)
        self.touched = Touched()
        self._held: dict[tuple[str, str], HeldUpdate] = {}  # row updates not yet run (`_flush`)
        self._checkpointer: Checkpointer | None = None
        if read_only:  # a reader beside the server's connection: no schema work, no writes
            uri = f"{self.path.resolve().as_uri()}?mode=ro"
            self._db = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
            self._db.row_factory = sqlite3.Row
            self._db.execute("PRAGMA busy_timeout=5000")
            return
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        # a 10,000-task load dirties ~8 MB in one transaction: the 2 MB default spills it
        self._db.execute(f"PRAGMA cache_size=-{WRITER_CACHE_KIB}")
        self._db.execute("PRAGMA busy_timeout=5000")
        self._db.execute("PRAGMA foreign_keys=ON")
        self._db.executescript(
            resources.files("codefleet.coord").joinpath("schema.sql").read_text()
        )
        for table, column, statement in q.MIGRATIONS:
            if column not in {r[0] for r in self._db.execute(q.TABLE_COLUMNS, (table,))}:
                self._db.execute(statement)
        if background_checkpoints:  # the writer checkpoints only if the thread falls far behind
            self._db.execute(f"PRAGMA wal_autocheckpoint={BACKSTOP_CHECKPOINT_PAGES}")
            self._checkpointer = Checkpointer(self.path)

    def _hold(
        self,
        table: str,
        row_id: str,
        sets: Mapping[str, Any],
        adds: Mapping[str, float] | None = None,
    ) -> None:
        """Queue one row's update; consecutive updates of a row run as ONE `UPDATE`.

        A held update runs (`_flush`) before the next statement of its transaction
        (a read, an insert, the COMMIT), so the order of what the database sees is
        kept; only the number of statements shrinks (docs/decisions.md, "Held row updates").
        """
        if not self._depth:
            raise RuntimeError("store writes must run inside transaction()")
        held = self._held.get((table, row_id))
        if held is None:
            held = self._held[(table, row_id)] = HeldUpdate()
        held.merge(sets, adds or {})

    def _flush(self) -> None:
        """Run the held row updates: before any statement of their transaction, and its COMMIT."""
        held, self._held = self._held, {}
        for (table, row_id), update in held.items():
            sql, params = update.statement(table, row_id)
            self._db.execute(sql, params)

    def close(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.close()
        self._db.close()

    @contextmanager
    def read_transaction(self) -> Iterator[None]:
        """One read transaction: every read inside it sees the same committed state (WAL)."""
        self._db.execute("BEGIN")
        try:
            yield
        finally:
            self._db.execute("ROLLBACK")

    @property
    def in_transaction(self) -> bool:
        return self._depth > 0

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Re-entrant BEGIN IMMEDIATE; events are published after the outer COMMIT.

        Anything that fails, the COMMIT included (a full disk), rolls the whole
        transaction back and hands `on_rollback` the rows it had touched; a
        SQLite error then leaves as `StoreUnavailable` (nothing was stored).
        """
        if self._depth:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        self._begin()
        try:
            yield
            self._flush()
            self._db.execute("COMMIT")
        except BaseException as err:
            touched = self._abort()
            if self.on_rollback:
                self.on_rollback(touched)  # whoever mirrors these rows in memory re-reads them
            if isinstance(err, sqlite3.Error):
                raise StoreUnavailable(
                    f"the database could not store the change ({err}); nothing was changed",
                    {"sqlite_error": str(err)},
                ) from err
            raise
        finally:
            self._depth = 0
        # Committed: nothing below may report the change as undone.
        self.commits += 1
        if self.on_committed:
            self.on_committed(self.touched)
        if self._checkpointer is not None and not self.commits % CHECKPOINT_EVERY_COMMITS:
            self._checkpointer.due.set()
        published, self._pending = self._pending, []
        if published and self.on_commit:
            self.on_commit(published)

    def _begin(self) -> None:
        try:
            self._db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as err:
            raise StoreUnavailable(
                f"the database could not start a transaction ({err})", {"sqlite_error": str(err)}
            ) from err
        self._depth = 1
        self.touched = Touched()

    def _abort(self) -> Touched:
        """ROLLBACK whatever is still open (a failed COMMIT may have ended it already)."""
        self._held.clear()  # never run: the transaction they belonged to is gone
        if self._db.in_transaction:
            with suppress(sqlite3.Error):  # the connection rolls back on its own if this fails
                self._db.execute("ROLLBACK")
        self._pending.clear()
        self._depth = 0
        touched, self.touched = self.touched, Touched()
        return touched

    def _write(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> sqlite3.Cursor:
        if not self._depth:
            raise RuntimeError("store writes must run inside transaction()")
        self._flush()
        return self._db.execute(sql, params)

    def _read(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        """Run a query. Inside a transaction its held updates run first (it reads its own
        writes); outside one nothing is held, so a read never writes."""
        if self._depth:
            self._flush()
        elif self._held:
            raise RuntimeError("row updates held outside a transaction")  # never: COMMIT runs them
        return self._db.execute(sql, params)

    def _one(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Row | None:
        row: sqlite3.Row | None = self._read(sql, params).fetchone()
        return row

    # -- events ---------------------------------------------------------------

    def emit(
        self,
        type_: EventType | str,
        *,
        task_id: str | None = None,
        agent_id: str | None = None,
        **payload: Any,
    ) -> Row:
        """Append one event; the type must be a known `EventType`."""
        kind = EventType(type_)
        at = to_iso(self.clock())
        body = payload_json(payload)
        cur = self._write(q.INSERT_EVENT, (at, kind.value, task_id, agent_id, body))
        event: Row = {
            "id": cur.lastrowid,
            "at": at,
            "type": kind.value,
            "task_id": task_id,
            "agent_id": agent_id,
            "payload": payload,
        }
        self._pending.append(event)
        return event

    def emit_many(self, type_: EventType, items: Sequence[tuple[str, dict[str, Any]]]) -> None:
        """`emit` of one type for each (task id, payload of plain values), in one `executemany`.

        The events share one `at` (one batch, one transaction) and take consecutive
        ids: nothing else writes between the statement and `last_insert_rowid()`.
        """
        at = to_iso(self.clock())
        kind = type_.value
        params = [(at, kind, task_id, None, plain_json(payload)) for task_id, payload in items]
        if not self._depth:
            raise RuntimeError("store writes must run inside transaction()")
        self._flush()
        self._db.executemany(q.INSERT_EVENT, params)
        last = int(self._db.execute(q.LAST_ROWID).fetchone()[0])
        for n, (task_id, payload) in enumerate(items, start=last - len(items) + 1):
            self._pending.append(
                {
                    "id": n,
                    "at": at,
                    "type": kind,
                    "task_id": task_id,
                    "agent_id": None,
                    "payload": payload,
                }
            )

    def events(self, since: int = 0, limit: int = 1000, type_: str | None = None) -> list[Row]:
        if type_:
            rows = self._read(q.SELECT_EVENTS_OF_TYPE, (since, type_, limit))
        else:
            rows = self._read(q.SELECT_EVENTS, (since, limit))
        return [_decode_event(r) for r in rows]

    def last_event_id(self) -> int:
        row = self._one(q.SELECT_LAST_EVENT_ID)
        return int(row[0]) if row else 0

    def last_event_of(self, types: Iterable[EventType]) -> Row | None:
        """The most recent event of any of `types`, or None."""
        row = self._one(q.SELECT_LAST_EVENT_OF_TYPES, (json.dumps([t.value for t in types]),))
        return _decode_event(row) if row else None

    # -- tasks ----------------------------------------------------------------

    def insert_tasks(self, tasks: Iterable[Row], edges: Iterable[tuple[str, str]]) -> None:
        rows = [_task_params(t) for t in tasks]
        if not self._depth:
            raise RuntimeError("store writes must run inside transaction()")
        self.touched.tasks.update(str(row[0]) for row in rows)
        self._flush()
        self._db.executemany(q.INSERT_TASK, rows)
        self._db.executemany(q.INSERT_DEPENDENCY, list(edges))

    def update_task(self, task_id: str, **fields: Any) -> None:
        unknown = set(fields) - q.TASK_COLUMNS
        if unknown:
            raise ValueError(f"unknown task columns: {sorted(unknown)}")
        self.touched.tasks.add(task_id)
        for listed in ("file_scope", "resources"):
            if listed in fields:
                fields[listed] = plain_json(fields[listed])
        self._hold("tasks", task_id, fields)

    def add_usage(
        self,
        task_id: str,
        agent_id: str,
        tokens_in: int,
        tokens_out: int,
        cost: float,
        *,
        succeeded: bool,
    ) -> None:
        """Add one attempt's usage to the task's and the agent's running totals."""
        self.touched.tasks.add(task_id)
        self.touched.agents.add(agent_id)
        usage = {"input_tokens": tokens_in, "output_tokens": tokens_out, "cost_usd": cost}
        self._hold("tasks", task_id, {}, usage)
        done = {"tasks_succeeded": 1} if succeeded else {"tasks_failed": 1}
        self._hold("agents", agent_id, {}, {**usage, **done})

    def task(self, task_id: str) -> Row | None:
        row = self._one(q.SELECT_TASK, (task_id,))
        return _decode_task(row) if row else None

    def tasks_of(self, task_ids: Iterable[str]) -> list[Row]:
        """The tasks among `task_ids` that exist, by seq."""
        rows = self._read(q.SELECT_TASKS_OF_IDS, (json.dumps(list(task_ids)),))
        return [_decode_task(r) for r in rows]

    def tasks(self, status: str | None = None, limit: int = 1000, offset: int = 0) -> list[Row]:
        if status:
            rows = self._read(q.SELECT_TASKS_BY_STATUS, (status, limit, offset))
        else:
            rows = self._read(q.SELECT_TASKS_PAGE, (limit, offset))
        return [_decode_task(r) for r in rows]

    def live_tasks(self) -> list[Row]:
        return [_decode_task(r) for r in self._read(q.SELECT_LIVE_TASKS)]

    def task_statuses(self) -> dict[str, str]:
        return {r[0]: r[1] for r in self._read(q.SELECT_TASK_STATUSES)}

    def max_seq(self) -> int:
        row = self._one(q.SELECT_MAX_SEQ)
        return int(row[0]) if row else 0

    def edges(self) -> list[tuple[str, str]]:
        return [(r[0], r[1]) for r in self._read(q.SELECT_ALL_EDGES)]

    def task_counts(self) -> dict[str, int]:
        return {r[0]: r[1] for r in self._read(q.COUNT_TASKS_BY_STATUS)}

    def usage_totals(self) -> tuple[int, int, float]:
        row = self._one(q.SUM_TASK_USAGE)
        assert row is not None
        return int(row[0]), int(row[1]), float(row[2])

    # -- agents ---------------------------------------------------------------

    def insert_agent(self, agent: Row) -> None:
        self.touched.agents.add(str(agent["id"]))
        self._write(q.INSERT_AGENT, agent)

    def update_agent(self, agent_id: str, **fields: Any) -> None:
        unknown = set(fields) - q.AGENT_COLUMNS
        if unknown:
            raise ValueError(f"unknown agent columns: {sorted(unknown)}")
        self.touched.agents.add(agent_id)
        self._hold("agents", agent_id, fields)

    def agent(self, agent_id: str) -> Row | None:
        row = self._one(q.SELECT_AGENT, (agent_id,))
        return dict(row) if row else None

    def agents(self) -> list[Row]:
        return [dict(r) for r in self._read(q.SELECT_AGENTS)]

    def agent_row(self, agent_id: str) -> AgentRow | None:
        row = self._one(q.SELECT_AGENT, (agent_id,))
        return AgentRow.of(dict(row)) if row else None

    def agent_rows(self) -> list[AgentRow]:
        return [AgentRow.of(r) for r in self._read(q.SELECT_AGENTS)]

    # -- leases and the change ledger -------------------------------------------

    def insert_lease(self, path: str, agent_id: str, task_id: str, at: str) -> bool:
        """Insert-or-nothing; True when the row is now ours (the PK decides)."""
        self.touched.lease_tasks.add(task_id)
        cur = self._write(q.INSERT_LEASE, (path, agent_id, task_id, at))
        return cur.rowcount == 1

    def leases(self) -> list[Row]:
        return [dict(r) for r in self._read(q.SELECT_LEASES)]

    def leases_of_task(self, task_id: str) -> list[Row]:
        return [dict(r) for r in self._read(q.SELECT_LEASES_OF_TASK, (task_id,))]

    def lease_rows(self, task_id: str | None = None) -> list[LeaseRow]:
        """Every lease (or the task's), typed: what the engine's lease mirror is built from."""
        rows = (
            self._read(q.SELECT_LEASES)
            if task_id is None
            else self._read(q.SELECT_LEASES_OF_TASK, (task_id,))
        )
        return [LeaseRow.of(r) for r in rows]

    def delete_lease(self, path: str, task_id: str) -> None:
        self.touched.lease_tasks.add(task_id)
        self._write(q.DELETE_LEASE, (path, task_id))

    def insert_change(
        self,
        task_id: str,
        agent_id: str,
        path: str,
        tool: str,
        at: str,
        attempt: int | None = None,
        sha256: str | None = None,
    ) -> None:
        self._write(q.INSERT_CHANGE, (task_id, agent_id, path, tool, at, attempt, sha256))

    def changes_of_task(self, task_id: str) -> list[Row]:
        return [dict(r) for r in self._read(q.SELECT_CHANGES_OF_TASK, (task_id,))]

    def insert_reads(self, rows: Sequence[ReadRow]) -> None:
        """`read` rows of the ledger: (task, agent, path, tool, at, attempt, sha256) each."""
        if not self._depth:
            raise RuntimeError("store writes must run inside transaction()")
        if rows:
            self._db.executemany(q.INSERT_READ, rows)

    def reads_of_task(self, task_id: str) -> list[Row]:
        return [dict(r) for r in self._db.execute(q.SELECT_READS_OF_TASK, (task_id,))]

    def writes_since(self, path: str, at: str, other_than: str) -> list[Row]:
        """Writes of `path` at or after `at` by tasks other than `other_than`, in ledger order."""
        rows = self._db.execute(q.SELECT_WRITES_SINCE, (path, at, other_than))
        return [dict(r) for r in rows]

    # -- pre-images and patches ---------------------------------------------------------

    def insert_preimage(self, task_id: str, image: PreImage, at: str) -> None:
        """First capture wins: a re-grant within the attempt never overwrites it."""
        dirs = json.dumps(list(image.created_dirs))
        content = image.content if image.existed else None
        self._write(
            q.INSERT_PREIMAGE,
            (task_id, image.path, int(image.existed), content, image.mode, dirs, at),
        )

    def preimages_of_task(self, task_id: str) -> list[PreImage]:
        return [_preimage(r) for r in self._read(q.SELECT_PREIMAGES_OF_TASK, (task_id,))]

    def foreign_preimages(self, task_id: str) -> list[tuple[str, PreImage]]:
        """(holder task, pre-image) of every path leased by a task other than `task_id`."""
        rows = self._read(q.SELECT_FOREIGN_PREIMAGES, (task_id,))
        return [(r["task_id"], _preimage(r)) for r in rows]

    def delete_preimages_of_task(self, task_id: str) -> None:
        self._write(q.DELETE_PREIMAGES_OF_TASK, (task_id,))

    def preimage_paths_of_task(self, task_id: str) -> list[str]:
        return [r[0] for r in self._read(q.SELECT_PREIMAGE_PATHS_OF_TASK, (task_id,))]

    # -- restores: the intent to put a failed attempt's files back ----------------------

    def insert_restores(
        self, task_id: str, paths: Iterable[str], reason: ReleaseReason, at: str
    ) -> None:
        self.touched.lease_tasks.add(task_id)
        for path in paths:
            self._write(q.INSERT_RESTORE, (task_id, path, reason, at))

    def restore_rows(self, task_id: str | None = None) -> list[RestoreRow]:
        """Every restore intent (or the task's), by task and path."""
        rows = (
            self._read(q.SELECT_RESTORES)
            if task_id is None
            else self._read(q.SELECT_RESTORES_OF_TASK, (task_id,))
        )
        return [RestoreRow.of(r) for r in rows]

    def delete_restored(self, task_id: str, path: str) -> None:
        """The file is back: its restore row, pre-image and lease go in one step."""
        self.touched.lease_tasks.add(task_id)
        self._write(q.DELETE_RESTORE, (task_id, path))
        self._write(q.DELETE_PREIMAGE, (task_id, path))
        self._write(q.DELETE_LEASE, (path, task_id))

    def fail_restore(self, task_id: str, path: str, error: str) -> None:
        self.touched.lease_tasks.add(task_id)
        self._write(q.FAIL_RESTORE, (error, task_id, path))

    def insert_patch(self, task_id: str, patch: PatchFile) -> None:
        self._write(
            q.INSERT_PATCH,
            (task_id, patch.path, patch.diff, patch.added, patch.removed, int(patch.binary)),
        )

    def patches_of_task(self, task_id: str) -> list[Row]:
        rows = [dict(r) for r in self._read(q.SELECT_PATCHES_OF_TASK, (task_id,))]
        for row in rows:
            row["binary"] = bool(row["binary"])
        return rows

    # -- checks ---------------------------------------------------------------------------

    def upsert_check(self, name: str, command: str, at: str) -> None:
        self._write(q.UPSERT_CHECK, (name, command, at))

    def checks(self) -> list[Row]:
        rows = [dict(r) for r in self._read(q.SELECT_CHECKS)]
        for row in rows:
            row["resources"] = json.loads(row.get("resources") or "[]")
        return rows

    def set_check_resources(self, name: str, resources: list[str]) -> None:
        self._write(q.SET_CHECK_RESOURCES, (plain_json(resources), name))

    # -- sequences (`next_number`) ---------------------------------------------------------

    def define_sequence(self, name: str, last_value: int, at: str) -> None:
        """Create the counter, or raise its last value to `last_value` (never lower it)."""
        self._write(q.UPSERT_SEQUENCE, (name, last_value, at))

    def next_in_sequence(self, name: str) -> int | None:
        """The counter's next value, taken (None: no such sequence)."""
        row = self._write(q.NEXT_IN_SEQUENCE, (name,)).fetchone()
        return None if row is None else int(row[0])

    def sequences(self) -> list[Row]:
        return [dict(r) for r in self._read(q.SELECT_SEQUENCES)]

    # -- interactive sessions (a person's own Claude Code session) ------------------------

    def upsert_interactive(self, session: Row) -> None:
        self.touched.interactive = True
        self._write(q.UPSERT_INTERACTIVE, session)

    def interactive_sessions(self) -> list[Row]:
        return [dict(r) for r in self._read(q.SELECT_INTERACTIVE)]

    # -- the server's own record ------------------------------------------------------------

    def set_meta(self, key: str, value: str) -> None:
        self._write(q.UPSERT_META, (key, value))

    def meta(self, key: str) -> str | None:
        row = self._one(q.SELECT_META, (key,))
        return str(row[0]) if row else None

    def reset(self) -> None:
        self.touched.reset = True
        for table in q.RESET_TABLES:
            self._write(f"DELETE FROM {table}")  # event ids stay monotonic: cursors survive
