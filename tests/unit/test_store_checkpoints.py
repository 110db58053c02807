"""The writer's WAL is checkpointed by a thread of its own, which ends with the store."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from codefleet.coord.storage.sqlitefile import CHECKPOINT_EVERY_COMMITS
from codefleet.coord.storage.store import Store


def _wal_frames(path: Path) -> tuple[int, int]:
    """(frames in the WAL, frames of it checkpointed), as a passive checkpoint reports."""
    with sqlite3.connect(path) as other:
        _, log, done = other.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    return int(log), int(done)


def test_commits_ask_the_thread_for_a_checkpoint_and_close_stops_it(tmp_path: Path):
    store = Store(tmp_path / "s.sqlite", background_checkpoints=True)
    checkpointer = store._checkpointer
    assert checkpointer is not None and checkpointer.alive
    for n in range(CHECKPOINT_EVERY_COMMITS):
        with store.transaction():
            store.set_meta("n", str(n))

    assert checkpointer.ran.wait(timeout=10), "no checkpoint after the commits that ask for one"
    store.close()

    assert not checkpointer.alive
    assert Store(tmp_path / "s.sqlite").meta("n") == str(CHECKPOINT_EVERY_COMMITS - 1)


def test_a_store_without_the_thread_keeps_sqlites_own_checkpoints(tmp_path: Path):
    store = Store(tmp_path / "s.sqlite")
    assert store._checkpointer is None
    with store.transaction():
        store.set_meta("n", "1")
    log, done = _wal_frames(tmp_path / "s.sqlite")
    assert done == log  # nothing else holds the WAL: all of it checkpoints
    store.close()
