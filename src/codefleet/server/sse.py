"""The live event stream: replay after a cursor, then follow, in one code path.

A subscriber reads events with `id > cursor` from the store in pages and
yields them as SSE frames (`id:`, `event:`, `data:`); when it has caught up it
waits on a wake-up that the store's commit hook sets, or sends a `: ping`
comment after 15 s of silence. Because live delivery is "read from the table
again", replay and live are the same code and `GET /events?since=0` returns
exactly what the stream delivered. Subscribers at the same cursor share one
read and one encoding of each page until the next commit.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Final

from codefleet.coord.store import Row, Store

__all__ = ["PING_INTERVAL_S", "EventHub", "frame"]

PING_INTERVAL_S: Final = 15.0
PAGE: Final = 500


def frame(event: Row) -> str:
    data = json.dumps(event, separators=(",", ":"), default=str)
    return f"id: {event['id']}\nevent: {event['type']}\ndata: {data}\n\n"


class EventHub:
    """Wakes every subscriber after each commit that emitted events."""

    def __init__(self, ping_interval: float = PING_INTERVAL_S) -> None:
        self._wakeups: set[asyncio.Event] = set()
        self._closed = False
        self.ping_interval = ping_interval
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pages: dict[tuple[int, int], tuple[int, str]] = {}  # (commits, cursor) -> page

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def publish(self, events: list[Row]) -> None:
        for wakeup in self._wakeups:
            wakeup.set()

    def close(self) -> None:
        """End every stream (their responses complete, so a shutdown is not held up)."""
        self._closed = True
        self.publish([])

    def close_threadsafe(self) -> None:
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self.close)

    def _page(self, store: Store, cursor: int) -> tuple[int, str]:
        """The frames of the next page after `cursor` and its last id, read once per commit.

        Subscribers that caught up wake together at the same cursor; the first one
        reads and encodes the page, the others are handed the same text until the
        store commits again (`Store.commits`), so what they get is the table's.
        """
        key = (store.commits, cursor)
        found = self._pages.get(key)
        if found is None:
            if self._pages and next(iter(self._pages))[0] != store.commits:
                self._pages.clear()
            page = store.events(cursor, PAGE)
            text = "".join(frame(e) for e in page)
            found = self._pages[key] = (page[-1]["id"] if page else cursor, text)
        return found

    async def frames(self, store: Store, cursor: int) -> AsyncIterator[str]:
        wakeup = asyncio.Event()
        self._wakeups.add(wakeup)
        try:
            yield ": connected\n\n"
            while not self._closed:
                wakeup.clear()
                after, text = self._page(store, cursor)
                if text:
                    cursor = after
                    yield text
                    continue
                try:
                    await asyncio.wait_for(wakeup.wait(), timeout=self.ping_interval)
                except TimeoutError:
                    yield ": ping\n\n"
        finally:
            self._wakeups.discard(wakeup)
