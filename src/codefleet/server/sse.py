"""The live event stream: replay after a cursor, then follow, in one code path.

A subscriber reads events with `id > cursor` from the store in pages and
yields them as SSE frames (`id:`, `event:`, `data:`); when it has caught up it
waits on a wake-up that the store's commit hook sets, or sends a `: ping`
comment after 15 s of silence. Because live delivery is "read from the table
again", replay and live are the same code and `GET /events?since=0` returns
exactly what the stream delivered. Subscribers at the same cursor share one
read and one encoding of each page until the next commit.

At most `max_streams` streams are open at once (`EventStream` holds one of the
hub's slots while it is answered); past it a new stream is refused 503
`too_many_streams`. A client that stops reading keeps what the server had
buffered for it (a page and the transport's write buffer, a few hundred KiB),
so the cap, not the number of connections, bounds what streams can hold
(docs/decisions/0100-a-cap-on-event-streams.md, "A cap on event streams").
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, Final, Protocol

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from codefleet.config import DEFAULT_MAX_STREAMS
from codefleet.transport.guards import envelope, send_json

__all__ = ["PING_INTERVAL_S", "EventHub", "EventStream", "frame"]

PING_INTERVAL_S: Final = 15.0
PAGE: Final = 500
Row = dict[str, Any]


class EventLog(Protocol):
    """The committed events, as the engine's read interface (`coord.engineview.EngineReads`) gives them."""

    @property
    def commits(self) -> int: ...  # outer COMMITs so far: a page read between two is the same

    def events(self, since: int, limit: int) -> list[Row]: ...


def frame(event: Row) -> str:
    data = json.dumps(event, separators=(",", ":"), default=str)
    return f"id: {event['id']}\nevent: {event['type']}\ndata: {data}\n\n"


class EventHub:
    """Wakes every subscriber after each commit that emitted events."""

    def __init__(
        self, ping_interval: float = PING_INTERVAL_S, max_streams: int = DEFAULT_MAX_STREAMS
    ) -> None:
        self._wakeups: set[asyncio.Event] = set()
        self.max_streams = max_streams
        self._open = 0  # streams being answered: slots taken
        self._closed = False
        self.ping_interval = ping_interval
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pages: dict[tuple[int, int], tuple[int, str]] = {}  # (commits, cursor) -> page
        self._on_close: list[Callable[[], object]] = []  # the other waits a shutdown ends

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    @property
    def closed(self) -> bool:
        """The server is stopping: no wait on the hub goes on."""
        return self._closed

    def publish(self, events: list[Row]) -> None:
        for wakeup in self._wakeups:
            wakeup.set()

    def close(self) -> None:
        """End every stream (their responses complete, so a shutdown is not held up), and
        the other long waits registered with `when_closed`."""
        self._closed = True
        self.publish([])
        for end in self._on_close:
            end()

    def when_closed(self, end: Callable[[], object]) -> None:
        """Call `end` when the hub closes: another long wait a shutdown must not wait out."""
        self._on_close.append(end)

    def close_threadsafe(self) -> None:
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self.close)

    @contextlib.contextmanager
    def woken(self) -> Iterator[asyncio.Event]:
        """An event set after each commit that emitted events, for as long as the block runs."""
        wakeup = asyncio.Event()
        self._wakeups.add(wakeup)
        try:
            yield wakeup
        finally:
            self._wakeups.discard(wakeup)

    def take_slot(self) -> bool:
        """Count one more open stream, unless `max_streams` are open (then False)."""
        if self._open >= self.max_streams:
            return False
        self._open += 1
        return True

    def free_slot(self) -> None:
        self._open -= 1

    def _page(self, record: EventLog, cursor: int) -> tuple[int, str]:
        """The frames of the next page after `cursor` and its last id, read once per commit.

        Subscribers that caught up wake together at the same cursor; the first one
        reads and encodes the page, the others are handed the same text until the
        record commits again (`EventLog.commits`), so what they get is the table's.
        """
        key = (record.commits, cursor)
        found = self._pages.get(key)
        if found is None:
            if self._pages and next(iter(self._pages))[0] != record.commits:
                self._pages.clear()
            page = record.events(cursor, PAGE)
            text = "".join(frame(e) for e in page)
            found = self._pages[key] = (page[-1]["id"] if page else cursor, text)
        return found

    async def frames(self, record: EventLog, cursor: int) -> AsyncIterator[str]:
        with self.woken() as wakeup:
            yield ": connected\n\n"
            while not self._closed:
                wakeup.clear()
                after, text = self._page(record, cursor)
                if text:
                    cursor = after
                    yield text
                    continue
                try:
                    await asyncio.wait_for(wakeup.wait(), timeout=self.ping_interval)
                except TimeoutError:
                    yield ": ping\n\n"


class EventStream(StreamingResponse):
    """`/events/stream`'s answer: the hub's frames while it holds a slot, else 503."""

    def __init__(self, hub: EventHub, record: EventLog, cursor: int) -> None:
        super().__init__(
            hub.frames(record, cursor),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
        self.hub = hub

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        hub = self.hub
        if not hub.take_slot():
            message = (
                f"{hub.max_streams} event streams are open, the most this server serves "
                "(CODEFLEET_MAX_STREAMS); close one, or try again later"
            )
            await send_json(send, 503, envelope("too_many_streams", message))
            return
        try:
            await super().__call__(scope, receive, send)
        finally:
            hub.free_slot()
