"""The live event stream: replay after a cursor, then follow, in one code path.

A subscriber reads events with `id > cursor` from the store in pages and
yields them as SSE frames (`id:`, `event:`, `data:`); when it has caught up it
waits on a wake-up that the store's commit hook sets, or sends a `: ping`
comment after 15 s of silence. Because live delivery is "read from the table
again", replay and live are the same code and `GET /events?since=0` returns
exactly what the stream delivered. Subscribers at the same cursor share one
read and one encoding of each page.
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
PAGES_KEPT: Final = 32  # pages kept for sharing; past that all are dropped and read again


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
        self._pages: dict[tuple[int, int], tuple[int, str]] = {}  # (resets, cursor) -> page

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
        """The frames of the next page after `cursor` and its last id, read once.

        The event log only grows (ids are never reused), so the page read after a
        cursor stays a true page after it until a reset empties the log: every
        subscriber at that cursor is handed the same text, and one that arrives
        later, when more has been committed, reads the rest from the page's end.
        Subscribers thus follow the same page boundaries and share each read and
        encoding; an empty page is not kept (the next commit fills it).
        """
        key = (store.resets, cursor)
        found = self._pages.get(key)
        if found is None:
            page = store.events(cursor, PAGE)
            if not page:
                return cursor, ""
            if len(self._pages) >= PAGES_KEPT:
                self._pages.clear()
            found = self._pages[key] = (page[-1]["id"], "".join(frame(e) for e in page))
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
                    async with asyncio.timeout(self.ping_interval):
                        await wakeup.wait()
                except TimeoutError:
                    yield ": ping\n\n"
        finally:
            self._wakeups.discard(wakeup)
