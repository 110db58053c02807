"""`/state` and `/conflicts` equal what a full recomputation from `/events` and `/tasks` gives.

The two reads come from a projection kept encoded and refreshed off the event
loop (docs/decisions/0068-reads-are-projections.md, "Reads are projections"); here a scripted run with
vetoes is recomputed by hand from the record, before and after a server
restart, and after a reset (`tests/unit/test_projection.py` does the same byte
for byte after every kind of transition).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fleet_support import Runner, loopback_transport, register

from codefleet.api.client import FleetClient
from codefleet.attempt import AssignedTask, AttemptReport
from codefleet.models import ErrorKind
from codefleet.server.thread import ServerThread


async def take(client: FleetClient, agent: Runner) -> AssignedTask:
    task = await client.assignment(*agent, wait=5)
    assert task is not None
    await client.start(task.id, *agent)
    return task


async def vetoed_run(client: FleetClient) -> None:
    """H holds `a.py` and `b.py`; R1 and R2 are refused them and veto; H succeeds, R1 retries."""
    await client.create_tasks(
        [
            {"id": "H", "title": "holder", "description": "do it", "priority": 5},
            {"id": "R1", "title": "rival one", "description": "do it", "priority": 3},
            {"id": "R2", "title": "rival two", "description": "do it", "priority": 1},
        ]
    )
    holder, one, two = [await register(client, f"runner-{n}") for n in (1, 2, 3)]
    assert (await take(client, holder)).id == "H"
    await client.acquire(*holder, "H", ["a.py", "b.py"], "Write")
    for agent, task_id, path in ((one, "R1", "a.py"), (two, "R2", "b.py")):
        assert (await take(client, agent)).id == task_id
        assert (await client.acquire(*agent, task_id, [path], "Edit"))["decision"] == "deny"
        veto = AttemptReport(attempt=1, ok=False, error_kind=ErrorKind.VETO, blocked_on_path=path)
        await client.complete(task_id, *agent, veto)
    usage = AttemptReport(attempt=1, ok=True, input_tokens=11, output_tokens=4, cost_usd=0.25)
    await client.complete("H", *holder, usage)
    assert (await take(client, one)).id == "R1"
    await client.complete("R1", *one, AttemptReport(attempt=2, ok=True, cost_usd=0.5))


async def recomputed(client: FleetClient) -> dict[str, Any]:
    """The conflicts and counters recomputed from the full record."""
    tasks = await client.tasks(limit=100_000)
    status = {t["id"]: t["status"] for t in tasks}
    events = await client.all_events()
    conflicts = [
        (e["id"], e["task_id"], e["payload"]["path"], status[e["task_id"]] == "succeeded")
        for e in events
        if e["type"] == "lease_denied"
    ]
    counters = {
        "tasks": dict(Counter(status.values())),
        "input_tokens": sum(t["input_tokens"] for t in tasks),
        "output_tokens": sum(t["output_tokens"] for t in tasks),
        "cost_usd": round(sum(t["cost_usd"] for t in tasks), 6),
    }
    return {
        "conflicts": conflicts,
        "counters": counters,
        "tasks": tasks,
        "last_event_id": events[-1]["id"],
    }


async def served(client: FleetClient) -> dict[str, Any]:
    state = await client.state()
    conflicts = [
        (c["event_id"], c["task_id"], c["path"], c["resolved"]) for c in await client.conflicts()
    ]
    return {
        "conflicts": conflicts,
        "counters": state["counters"],
        "tasks": state["tasks"],
        "last_event_id": state["last_event_id"],
    }


async def test_state_and_conflicts_equal_the_recomputation_across_a_restart_and_a_reset(
    make_server: Callable[..., ServerThread], tmp_path: Path
) -> None:
    db = tmp_path / "reads.sqlite"
    first = make_server(db=db)
    async with FleetClient(first.url, transport=loopback_transport()) as client:
        await vetoed_run(client)
        before = await served(client)
        assert before == await recomputed(client)
        unresolved = await client.conflicts(resolved=False)
    first.stop()

    assert [c[1:] for c in before["conflicts"]] == [("R1", "a.py", True), ("R2", "b.py", False)]
    assert [(c["task_id"], c["resolved"]) for c in unresolved] == [("R2", False)]
    second = make_server(db=db, allow_reset=True)
    async with FleetClient(second.url, transport=loopback_transport()) as client:
        after = await served(client)
        assert after == await recomputed(client)
        await client.reset()
        await client.create_tasks([{"id": "N", "title": "new", "description": "after reset"}])
        reset = await served(client)
        assert reset == await recomputed(client)
    assert after["conflicts"] == before["conflicts"]
    assert after["counters"] == before["counters"]
    assert [t["id"] for t in reset["tasks"]] == ["N"] and reset["conflicts"] == []
