"""A read never writes: every read the server answers runs only queries on the database.

Row updates are held inside a write transaction and run by `Store._flush`
before its next statement and its COMMIT; outside a transaction nothing is
held, so a read (a `GET` route, the projection) runs queries and nothing else.
SQLite's trace callback records every statement the server's connection runs
while each read of `readmodel.readapi.Reads` answers over a fleet in mid-run.
"""

from __future__ import annotations

import asyncio
import sqlite3

import pytest
import test_engine
from test_engine import Fleet
from test_readiness import LIMITED, reads_of

from codefleet.coord.storage.store import Store
from codefleet.models import ErrorKind

make_fleet = test_engine.make_fleet
fleet = test_engine.fleet

QUERY_WORDS = ("SELECT", "WITH", "BEGIN", "ROLLBACK")  # a read snapshot is BEGIN ... ROLLBACK


def test_every_read_of_the_server_runs_queries_only(fleet: Fleet) -> None:
    fleet.add("T1", "a.py", max_attempts=1)
    fleet.add("T2", "b.py", deps=("T1",))
    fleet.add("T3", "c.py")
    fleet.register("runner-1")
    fleet.register("runner-2")
    reads = reads_of(fleet)
    fleet.run("T1", ok=True, cost_usd=0.25)
    fleet.tick()
    fleet.start("T2")
    fleet.acquire("T2", "b.py")
    fleet.start("T3")
    fleet.finish("T3", **LIMITED, retry_after_s=5)
    ran: list[str] = []
    fleet.engine.store._db.set_trace_callback(ran.append)

    reads.tasks(None, 100, 0)
    reads.task("T2")
    reads.patch("T1")
    reads.agents()
    reads.leases()
    reads.health()
    reads.record()
    reads.planned()
    asyncio.run(reads.state_json())
    asyncio.run(reads.conflicts_json(None))

    fleet.engine.store._db.set_trace_callback(None)
    assert ran, "the reads should have run queries"
    writes = [sql for sql in ran if not sql.lstrip().upper().startswith(QUERY_WORDS)]
    assert writes == []
    reads.close()


def test_a_row_update_is_never_held_outside_a_transaction(fleet: Fleet) -> None:
    fleet.add("T1")
    fleet.register("runner-1")
    fleet.run("T1", ok=False, error_kind=ErrorKind.AGENT_ERROR)  # held updates, then COMMIT
    store: Store = fleet.engine.store

    assert not store.in_transaction
    assert store._held == {}
    with pytest.raises(RuntimeError, match="inside transaction"):
        store.update_task("T1", error="outside")
    assert isinstance(store._db, sqlite3.Connection)
