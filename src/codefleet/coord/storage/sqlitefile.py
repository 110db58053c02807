"""The database file's upkeep beside the writer: WAL checkpoints and the start-up check.

Each runs on a connection of its own, never the writer's. `Checkpointer`
copies the WAL into the database file from a thread (`PASSIVE`: it never waits
for the writer nor blocks it), asked for after `CHECKPOINT_EVERY_COMMITS`
commits and at least every `CHECKPOINT_IDLE_S`; the writer's own
auto-checkpoint stays as a backstop at `BACKSTOP_CHECKPOINT_PAGES`.
`check_database` runs SQLite's `quick_check` before the server opens the file,
bounded by a time budget: a damaged file is refused (`DatabaseDamaged`, naming
the newest earlier run's database kept beside it), an unfinished check lets it
open. Neither writes a row. SQLite follows a link to the database (and puts its WAL
beside the link's target), so `refuse_links` is asked first: the file and its side files
are regular files or absent (docs/decisions/0149-the-state-directory-follows-no-link.md).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import stat
import threading
import time
from pathlib import Path

from codefleet.errors import DatabaseDamaged
from codefleet.statedir import UnsafeStateDir

__all__ = [
    "BACKSTOP_CHECKPOINT_PAGES",
    "CHECKPOINT_EVERY_COMMITS",
    "Checkpointer",
    "check_database",
    "refuse_links",
]

CHECKPOINT_EVERY_COMMITS = 256  # a background checkpoint is asked for after this many commits
CHECKPOINT_IDLE_S = 1.0  # ... and at least this often while the server runs
CHECKPOINT_JOIN_S = 5.0
BACKSTOP_CHECKPOINT_PAGES = 16_384  # the writer checkpoints itself only past this WAL (64 MiB)
CHECK_BUDGET_S = (
    10.0  # the start-up check stops here: ~1 GB of pages (docs/reliability-restarts.md)
)
CHECK_PROGRESS_EVERY = 100  # SQLite VM steps between two looks at the clock
SIDE_SUFFIXES = ("", "-wal", "-shm", "-journal")  # the files SQLite opens for a database
log = logging.getLogger(__name__)


class Checkpointer:
    """Checkpoints the writer's WAL from a thread of its own connection.

    A checkpoint copies the WAL into the database file and syncs it; on the
    writer's thread (SQLite's auto-checkpoint) that sync stalled the event loop
    for milliseconds every few hundred commits. Here it runs beside it (the
    sqlite3 module lets go of the GIL while SQLite works), `PASSIVE`, so it
    never waits for or blocks the writer (docs/decisions/0072-checkpoints-off-the-loop.md, "Checkpoints off
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
    False when it passed `budget_s` and stopped (docs/reliability-restarts.md, "A damaged database").
    """
    refuse_links(path)
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


def refuse_links(path: Path) -> None:
    """`UnsafeStateDir` unless the database `path` and its side files are regular files or
    absent: SQLite would open a link's target, outside the tree."""
    for side in SIDE_SUFFIXES:
        named = path.with_name(path.name + side)
        try:
            info = os.lstat(named)
        except FileNotFoundError:
            continue
        if not stat.S_ISREG(info.st_mode):
            kind = (
                f"a symbolic link (to {os.readlink(named)})"
                if stat.S_ISLNK(info.st_mode)
                else "not a regular file"
            )
            raise UnsafeStateDir(named, kind)


def _newest_kept(path: Path) -> Path | None:
    """The newest earlier run's database `codefleet runs new` kept beside `path` (by its stamp)."""
    kept = sorted(path.parent.glob(f"{path.stem}-*{path.suffix}"))
    return kept[-1] if kept else None
