"""The event log and its SSE stream: replay equals live, cursors resume exactly.

The `client` fixture reads the stream through httpx (its injected transport);
a client with none reads it over the lane (`api.lane`), the same events, and
with `types` only those of the types it names. Every stream is opened inside `aclosing` so the server sees the disconnect and
can shut down without waiting on an open response.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import httpx

from codefleet.api.client import FleetClient
from codefleet.attempt import AttemptReport
from codefleet.server.thread import ServerThread

READ_TIMEOUT_S = 5.0


async def some_activity(client: FleetClient) -> None:
    """A short run: register, create, assign, start, lease, deny, report."""
    one = await client.register("runner-1", (await client.health())["workdir"], 1)
    await client.create_tasks(
        [
            {"id": "A", "title": "a", "description": "do it"},
            {"id": "B", "title": "b", "description": "do it", "depends_on": ["A"]},
        ]
    )
    task = await client.assignment(one["agent_id"], one["epoch"], wait=5)
    assert task is not None and task.id == "A"
    await client.start("A", one["agent_id"], one["epoch"])
    await client.acquire(one["agent_id"], one["epoch"], "A", ["a.py"], "Write")
    await client.record_change(one["agent_id"], one["epoch"], "A", "a.py", "Write")
    await client.complete("A", one["agent_id"], one["epoch"], AttemptReport(attempt=1, ok=True))


async def read_until(stream: AsyncIterator[dict[str, Any]], last_id: int) -> list[dict[str, Any]]:
    """Events from `stream` up to and including `last_id`, bounded in time."""
    seen: list[dict[str, Any]] = []

    async def consume() -> None:
        async for event in stream:
            seen.append(event)
            if event["id"] >= last_id:
                return

    await asyncio.wait_for(consume(), timeout=READ_TIMEOUT_S)
    return seen


async def test_the_stream_from_zero_delivers_exactly_what_the_log_holds(client: FleetClient):
    await some_activity(client)
    logged = await client.all_events(0)
    assert len({e["type"] for e in logged}) >= 8

    async with aclosing(client.stream(0)) as stream:
        streamed = await read_until(stream, logged[-1]["id"])

    assert streamed == logged
    assert [e["id"] for e in logged] == list(range(1, len(logged) + 1))


async def test_over_the_lane_the_stream_is_what_httpx_reads_replay_and_live(
    client: FleetClient, server: ServerThread
):
    await some_activity(client)
    logged = await client.all_events(0)
    async with FleetClient(server.url) as lane_client:
        assert lane_client._lane is not None and client._lane is None, "guard: one of each"
        async with aclosing(lane_client.stream(0)) as stream:
            streamed = await read_until(stream, logged[-1]["id"])
            await client.create_tasks([{"id": "LIVE", "title": "live", "description": "do"}])
            live = await read_until(stream, logged[-1]["id"] + 1)

    assert streamed == logged
    assert live == await client.events(since=logged[-1]["id"])


async def test_a_stream_of_some_types_yields_only_theirs(client: FleetClient, server: ServerThread):
    await some_activity(client)
    wanted = {"task_started", "file_changed", "task_succeeded"}
    kept = [e for e in await client.all_events(0) if e["type"] in wanted]
    assert {e["type"] for e in kept} == wanted, "guard: the run emits each"
    async with FleetClient(server.url) as lane_client:
        for reader in (lane_client, client):  # over the lane, and through httpx
            async with aclosing(reader.stream(0, wanted)) as stream:
                assert await read_until(stream, kept[-1]["id"]) == kept


async def test_a_stream_from_a_cursor_starts_right_after_it(client: FleetClient):
    await some_activity(client)
    logged = await client.all_events(0)
    cursor = logged[4]["id"]

    async with aclosing(client.stream(cursor)) as stream:
        streamed = await read_until(stream, logged[-1]["id"])

    assert streamed == logged[5:]
    assert await client.events(since=cursor) == logged[5:]


async def test_live_events_follow_the_replay_on_the_same_stream(client: FleetClient):
    await some_activity(client)
    last = (await client.state())["last_event_id"]

    async with aclosing(client.stream(0)) as stream:
        replayed = await read_until(stream, last)
        await client.create_tasks(
            [{"id": "LIVE", "title": "after the replay", "description": "do it"}]
        )
        live = await read_until(stream, last + 1)

    assert replayed[-1]["id"] == last
    assert [(e["id"], e["type"], e["task_id"]) for e in live] == [
        (last + 1, "task_created", "LIVE")
    ]
    assert live == await client.events(since=last)


async def test_the_last_event_id_header_resumes_the_stream_after_that_id(
    client: FleetClient, http: httpx.AsyncClient
):
    await some_activity(client)
    logged = await client.all_events(0)
    resume_after = logged[2]["id"]
    frames: list[tuple[int, str, dict[str, Any]]] = []

    async def consume() -> None:
        headers = {"Last-Event-ID": str(resume_after)}
        async with http.stream(
            "GET", "/events/stream", params={"since": 0}, headers=headers
        ) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            fields: dict[str, str] = {}
            async for line in response.aiter_lines():
                if line and not line.startswith(":"):
                    name, _, value = line.partition(": ")
                    fields[name] = value
                elif not line and fields:
                    frames.append((int(fields["id"]), fields["event"], json.loads(fields["data"])))
                    fields = {}
                    if frames[-1][0] >= logged[-1]["id"]:
                        return

    await asyncio.wait_for(consume(), timeout=READ_TIMEOUT_S)

    assert frames[0][0] == resume_after + 1
    assert [(i, kind, data) for i, kind, data in frames] == [
        (e["id"], e["type"], e) for e in logged[3:]
    ]


async def test_events_can_be_filtered_by_type_and_paged(client: FleetClient):
    await some_activity(client)
    logged = await client.all_events(0)

    created = await client.events(type_="task_created")
    first_two = await client.events(since=0, limit=2)

    assert [e["task_id"] for e in created] == ["A", "B"]
    assert first_two == logged[:2]


async def test_there_are_no_heartbeat_events(client: FleetClient):
    one = await client.register("runner-1", (await client.health())["workdir"], 1)
    before = (await client.state())["last_event_id"]

    for _ in range(3):
        await client.heartbeat(one["agent_id"], one["epoch"])

    assert (await client.state())["last_event_id"] == before


async def test_a_read_that_waits_answers_once_an_event_of_its_type_is_logged(
    client: FleetClient,
):
    last = (await client.health())["last_event_id"]
    waiting = asyncio.create_task(client.events(since=last, type_="task_succeeded", wait=20))
    await some_activity(client)  # its events are logged one by one; one of them succeeds A

    [succeeded] = await asyncio.wait_for(waiting, READ_TIMEOUT_S * 4)

    assert (succeeded["type"], succeeded["task_id"]) == ("task_succeeded", "A")


async def test_a_read_that_waits_for_an_event_none_logs_answers_none_at_its_limit(
    client: FleetClient,
):
    await some_activity(client)
    last = (await client.health())["last_event_id"]

    assert await client.events(since=last, type_="task_succeeded", wait=0.05) == []
    assert len(await client.events(since=0, type_="task_succeeded", wait=5)) == 1  # at once
