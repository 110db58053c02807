"""Fetching a run's record through the wire API, once, for `commit`, `report` and `stats`.

The CLI never opens the database: this reads the tasks, every event, the patch
of each succeeded task (`GET /tasks/{id}/patch`) and the file ledger of every
task that did not succeed (`GET /tasks/{id}`) through the one client, at most
`CONCURRENT_READS` at a time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import TypeVar

from codefleet.api.client import FleetClient
from codefleet.models import TaskStatus
from codefleet.review.runrecord import RunRecord

__all__ = ["fetch_record"]

T = TypeVar("T")
CONCURRENT_READS = 8


async def fetch_record(client: FleetClient, with_ledgers: bool = True) -> RunRecord:
    """Tasks, events, agents, patches of succeeded tasks, ledgers of the others."""
    health, tasks, events, agents = await asyncio.gather(
        client.health(), client.tasks(), client.all_events(), client.agents()
    )
    done = [t["id"] for t in tasks if t["status"] == TaskStatus.SUCCEEDED]
    others = [t["id"] for t in tasks if t["status"] != TaskStatus.SUCCEEDED] if with_ledgers else []
    patches = await _bounded(done, client.patch)
    details = await _bounded(others, client.task)
    return RunRecord(
        tasks=tuple(tasks),
        events=tuple(events),
        workdir=str(health["workdir"]),
        patches=dict(zip(done, patches, strict=True)),
        ledgers={
            i: list(d.get("file_changes") or []) for i, d in zip(others, details, strict=True)
        },
        agents=tuple(agents),
    )


async def _bounded(ids: Iterable[str], read: Callable[[str], Awaitable[T]]) -> list[T]:
    gate = asyncio.Semaphore(CONCURRENT_READS)

    async def one(task_id: str) -> T:
        async with gate:
            return await read(task_id)

    return list(await asyncio.gather(*(one(i) for i in ids)))
