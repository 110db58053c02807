"""The store's one connection: opening it, its transactions, held row updates.

One connection, owned by the server process (the single writer), in WAL mode
with a busy timeout; opening it applies the schema and its migrations. Every
write runs inside `transaction()`, a re-entrant `BEGIN IMMEDIATE` block:
nested calls join the outer transaction, and the events queued inside it
(`eventlog`) are handed to the `on_commit` listener only after COMMIT
succeeds, so a subscriber never sees an event that was rolled back. A row's
updates are held and run as one `UPDATE` before the next statement of their
transaction (`held`), so a read inside it reads its own writes and a read
outside one never writes. A rolled-back transaction calls `on_rollback` with
what it `Touched`, so a mirror in memory (the engine's live index) re-reads
it; a committed one calls `on_committed` with the same record (the
projection's cache). It knows no table's rows: `store` adds them.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any

from codefleet.coord.storage.held import HeldUpdate
from codefleet.coord.storage.queries import MIGRATIONS, TABLE_COLUMNS
from codefleet.coord.storage.sqlitefile import (
    BACKSTOP_CHECKPOINT_PAGES,
    CHECKPOINT_EVERY_COMMITS,
    Checkpointer,
    refuse_links,
)
from codefleet.errors import StoreUnavailable
from codefleet.models import utcnow

__all__ = ["Database", "Row", "Touched"]

Row = dict[str, Any]
WRITER_CACHE_KIB = 32_768  # the writer's page cache (SQLite's default is 2,000 KiB)


@dataclass(slots=True)
class Touched:
    """The keys a transaction wrote so far: what an in-memory mirror must re-read if it fails."""

    tasks: set[str] = field(default_factory=set)
    agents: set[str] = field(default_factory=set)
    lease_tasks: set[str] = field(default_factory=set)  # tasks whose leases or restores changed
    person_sessions: bool = False
    reset: bool = False  # every table was emptied


class Database:
    """A SQLite database file with CodeFleet's schema, and its writer's transactions."""

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
        refuse_links(self.path)  # SQLite follows a link: the database would live elsewhere
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        # a 10,000-task load dirties ~8 MB in one transaction: the 2 MB default spills it
        self._db.execute(f"PRAGMA cache_size=-{WRITER_CACHE_KIB}")
        self._db.execute("PRAGMA busy_timeout=5000")
        self._db.execute("PRAGMA foreign_keys=ON")
        self._db.executescript(
            resources.files("codefleet.coord.storage").joinpath("schema.sql").read_text()
        )
        for table, column, statement in MIGRATIONS:
            if column not in {r[0] for r in self._db.execute(TABLE_COLUMNS, (table,))}:
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
        kept; only the number of statements shrinks (docs/decisions/0071-held-row-updates.md, "Held row updates").
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
