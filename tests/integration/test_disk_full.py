"""A full disk over the wire: 503 in the error envelope, nothing granted that is not stored.

The real server on loopback, with SQLite's "database or disk is full" injected
at COMMIT on the store's connection (every other statement runs for real). The
by-hand run on a 2 MiB tmpfs is in docs/history/reliability-log.md.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from codefleet.api.client import FleetClient, ServerUnavailable
from codefleet.server.thread import ServerThread


class DiskFills:
    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        self.full = False

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        if self.full and sql.strip().upper() == "COMMIT":
            raise sqlite3.OperationalError("database or disk is full")
        return self.db.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.db, name)


async def test_a_write_the_database_cannot_commit_is_a_503_and_the_server_recovers(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    server = make_server()
    store = server.app.state.engine.store
    disk = store._db = DiskFills(store._db)
    async with FleetClient(server.url) as client, httpx.AsyncClient(base_url=server.url) as http:
        await client.create_tasks([{"id": "T", "title": "t", "description": "do it"}])
        agent = await client.register("r", str(workdir), None)
        ident, epoch = agent["agent_id"], agent["epoch"]
        assert await client.assignment(ident, epoch, wait=5)
        body = {"agent_id": ident, "task_id": "T", "paths": ["a.py"], "tool": "Write"}

        disk.full = True
        refused = await http.post(
            "/leases/acquire", json=body, headers={"X-Agent-Epoch": str(epoch)}
        )
        leases_meanwhile = await client.leases()
        try:
            await client.acquire(ident, epoch, "T", ["a.py"], "Write")
            raise AssertionError("a grant the database could not store was answered")
        except ServerUnavailable as err:
            told = str(err)
        disk.full = False
        granted = await client.acquire(ident, epoch, "T", ["a.py"], "Write")
        leases = await client.leases()

    assert refused.status_code == 503
    assert refused.json()["error"]["code"] == "store_unavailable"
    assert "disk is full" in refused.json()["error"]["message"]
    assert leases_meanwhile == []
    assert "disk is full" in told
    assert granted["decision"] == "allow"
    assert [(x["path"], x["task_id"]) for x in leases] == [("a.py", "T")]
