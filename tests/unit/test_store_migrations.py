"""An older database opens with the columns added since: every migration, and the newest.

Each column `MIGRATIONS` adds must also be in `schema.sql` (a fresh database has it),
and a database made before a column existed gains it on open, keeping its rows.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from codefleet.coord.storage.queries import MIGRATIONS
from codefleet.coord.storage.store import Store


def columns(db: Path, table: str) -> set[str]:
    with sqlite3.connect(db) as conn:
        return {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}


def test_every_migrated_column_is_in_a_fresh_database(tmp_path: Path) -> None:
    Store(tmp_path / "fresh.db").close()

    missing = [(t, c) for t, c, _ in MIGRATIONS if c not in columns(tmp_path / "fresh.db", t)]
    assert missing == []


def test_a_database_without_lease_granularity_gains_it_and_keeps_its_tasks(
    tmp_path: Path,
) -> None:
    db = tmp_path / "old.db"
    store = Store(db)
    with store.transaction():
        store.insert_tasks([_row("T1")], [])
    store.close()
    with sqlite3.connect(db) as conn:  # as a database written before part leases
        conn.execute("ALTER TABLE tasks DROP COLUMN lease_granularity")
    assert "lease_granularity" not in columns(db, "tasks")

    store = Store(db)
    with store.transaction():
        store.insert_tasks([{**_row("T2"), "lease_granularity": "part"}], [])
    old, new = store.task("T1"), store.task("T2")
    store.close()

    assert old is not None and old["lease_granularity"] is None
    assert new is not None and new["lease_granularity"] == "part"


def _row(task_id: str) -> dict[str, object]:
    at = "2026-12-03T00:00:00.000Z"
    return {
        "id": task_id,
        "seq": int(task_id[1:]),
        "title": task_id,
        "description": "d",
        "status": "pending",
        "priority": 3,
        "file_scope": [],
        "max_attempts": 3,
        "created_at": at,
        "updated_at": at,
    }
