"""Helpers of the bad-input corpus (tests/integration/test_corpus_*.py).

`Witness` takes the before/after picture a corpus item is judged by: every
table of the database (read through a second SQLite connection) and every
file of the tree, bytes included. `assert_envelope` checks the one wire error
shape.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TABLES = (
    "tasks",
    "task_dependencies",
    "agents",
    "file_leases",
    "file_changes",
    "events",
    "preimages",
    "patches",
)


@dataclass(frozen=True)
class Witness:
    db: Path
    tree: Path
    skip: tuple[str, ...] = ()  # files the server itself writes (a database inside the tree)

    def picture(self) -> dict[str, Any]:
        """Every row of every table and every file of the tree, as they are now."""
        with sqlite3.connect(self.db) as other:
            rows = {t: other.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall() for t in TABLES}
        files = {
            p.relative_to(self.tree).as_posix(): _content(p)
            for p in sorted(self.tree.rglob("*"))
            if p.name not in self.skip
        }
        return {"rows": rows, "files": files}


def _content(path: Path) -> bytes:
    if path.is_symlink():
        return f"-> {os.readlink(path)}".encode()
    return path.read_bytes() if path.is_file() else b"<dir>"


def assert_envelope(
    response: Any, status: int | None = None, code: str | None = None
) -> dict[str, Any]:
    """The one error shape, with a code and a readable message; returns the error."""
    if status is not None:
        assert response.status_code == status, response.text[:500]
    assert 400 <= response.status_code < 500, response.text[:500]
    body = response.json()
    assert set(body) == {"error"}, body
    error = body["error"]
    assert set(error) == {"code", "message", "detail"}, error
    assert isinstance(error["message"], str) and error["message"]
    assert isinstance(error["detail"], dict)
    if code is not None:
        assert error["code"] == code, error
    return dict(error)
