"""The SSE hub over a real store: replay, ping on silence, live after a commit, close."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import aclosing
from pathlib import Path

from codefleet.coord.storage.store import Store
from codefleet.models import EventType
from codefleet.server.sse import EventHub, frame

STEP_S = 5.0


def emit_one(store: Store, task_id: str) -> None:
    with store.transaction():
        store.emit(EventType.TASK_CREATED, task_id=task_id, title=task_id)


async def next_frame(frames: AsyncIterator[str]) -> str:
    return await asyncio.wait_for(anext(frames), timeout=STEP_S)


def test_a_frame_carries_the_id_the_type_and_the_event_as_json():
    event = {
        "id": 7,
        "at": "x",
        "type": "task_created",
        "task_id": "A",
        "agent_id": None,
        "payload": {},
    }

    text = frame(event)

    assert text.endswith("\n\n")
    id_line, type_line, data_line = text.strip().split("\n")
    assert (id_line, type_line) == ("id: 7", "event: task_created")
    assert json.loads(data_line.removeprefix("data: ")) == event


async def test_a_subscriber_gets_the_replay_then_a_ping_on_silence_then_live_events(tmp_path: Path):
    hub = EventHub(ping_interval=0.05)
    store = Store(tmp_path / "db.sqlite", on_commit=hub.publish)
    emit_one(store, "A")
    emit_one(store, "B")

    async with aclosing(hub.frames(store, cursor=1)) as frames:
        assert await next_frame(frames) == ": connected\n\n"
        replay = await next_frame(frames)
        assert replay.startswith("id: 2\nevent: task_created\n")
        assert await next_frame(frames) == ": ping\n\n"
        emit_one(store, "C")
        live = await next_frame(frames)

    assert live.startswith("id: 3\n")
    assert '"task_id":"C"' in live
    store.close()


async def test_closing_the_hub_ends_every_stream(tmp_path: Path):
    hub = EventHub(ping_interval=60)
    store = Store(tmp_path / "db.sqlite", on_commit=hub.publish)

    async with aclosing(hub.frames(store, cursor=0)) as frames:
        assert await next_frame(frames) == ": connected\n\n"
        waiting = asyncio.ensure_future(anext(frames))
        await asyncio.sleep(0)  # let the subscriber reach its wait
        hub.close()
        done, _ = await asyncio.wait({waiting}, timeout=STEP_S)

    assert done and isinstance(waiting.exception(), StopAsyncIteration)
    store.close()


async def test_subscribers_at_one_cursor_share_a_page_until_the_store_commits_again(
    tmp_path: Path,
):
    hub = EventHub(ping_interval=60)
    store = Store(tmp_path / "db.sqlite", on_commit=hub.publish)
    emit_one(store, "A")
    reads: list[int] = []
    events = store.events

    def counted(since: int = 0, limit: int = 1000, type_: str | None = None) -> list:
        reads.append(since)
        return events(since, limit, type_)

    store.events = counted  # type: ignore[method-assign]
    async with aclosing(hub.frames(store, 0)) as one, aclosing(hub.frames(store, 0)) as two:
        assert [await next_frame(one), await next_frame(two)] == [": connected\n\n"] * 2
        first, second = await next_frame(one), await next_frame(two)
        assert first == second and first.startswith("id: 1\n")
        assert reads == [0]  # one read for both
        with store.transaction():
            store.reset()  # a commit that emits nothing: the shared page is gone with it
        assert hub._page(store, 0) == (0, "")
        emit_one(store, "B")
        live = [await next_frame(one), await next_frame(two)]

    assert live[0] == live[1] and live[0].startswith("id: 2\n")
    store.close()
