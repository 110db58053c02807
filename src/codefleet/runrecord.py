"""What the server recorded about a run, fetched once for `commit` and `report`.

The CLI never opens the database: this reads the wire API through the one
client (`client.FleetClient`): the tasks, every event, the patch of each
succeeded task (`GET /tasks/{id}/patch`) and the file ledger of every task
that did not succeed (`GET /tasks/{id}`). The result is a frozen value the
pure code in `history` and `runreport` works from.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from codefleet.client import FleetClient
from codefleet.models import TaskStatus

__all__ = ["RunRecord", "fetch_record"]

Row = dict[str, Any]
T = TypeVar("T")
CONCURRENT_READS = 8


@dataclass(frozen=True, slots=True)
class RunRecord:
    tasks: tuple[Row, ...]
    events: tuple[Row, ...]
    workdir: str  # the server's working tree
    patches: dict[str, Row] = field(default_factory=dict)  # succeeded task id -> its patch
    ledgers: dict[str, list[Row]] = field(default_factory=dict)  # other task id -> file changes
    agents: tuple[Row, ...] = ()

    def task(self, task_id: str) -> Row | None:
        return next((t for t in self.tasks if t["id"] == task_id), None)


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
