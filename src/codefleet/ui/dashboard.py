"""`codefleet watch`: the live terminal dashboard, and a compact event printer for runs.

The dashboard holds no state the server does not have. It seeds its tables
from `GET /state`, follows `GET /events/stream` from a cursor, and re-fetches
`/state` (at most every `REFRESH_MIN_S`) when an event says something changed,
instead of re-deriving the engine's rules. The event log is built from the
stream alone. The cursor is the last event id seen: an event at or below it is
ignored, and after a dropped connection (`ServerUnavailable` or the stream
ending) the stream is reopened with `since=cursor`, backing off up to
`BACKOFF_MAX_S`, so no log line is lost or shown twice. The dashboard follows the
server it watches, not the first one it met: when the server that answers a
reconnect keeps another record (its `database_id` differs, or its events end
before the cursor: `codefleet runs new` and a fresh `serve`), it starts over.

Landing is folded from the stream too: the events that say something of
landing (`LANDING_EVENTS`) are kept, and each frame folds them
(`review.landinglog.landing_of`) into the landing panel.

The pure half is `codefleet.ui.viewmodel` (the view model, event wording) and
`codefleet.ui.dashboardrender` (drawing it with Rich).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field, replace
from typing import Any, Final, Protocol

from rich.console import Console
from rich.text import Text

from codefleet.api.client import FleetClient, ServerUnavailable
from codefleet.errors import DomainError
from codefleet.models import EventType, ReleaseReason, utcnow
from codefleet.review.landinglog import LandingFacts, landing_of
from codefleet.ui.dashboardrender import log_text, render
from codefleet.ui.outofscope import ScopeWatch
from codefleet.ui.viewmodel import LogLine, ViewModel, build_view, describe

__all__ = ["LANDING_EVENTS", "NOTABLE_EVENTS", "follow_compact", "watch"]

LIVE: Final = "live"
CONNECTING: Final = "connecting…"
RECONNECTING: Final = "reconnecting…"
LOG_KEEP: Final = 500  # log lines kept in memory; the frame shows the newest that fit
BACKLOG_EVENTS: Final = 300  # history replayed into the log when the dashboard opens
REFRESH_MIN_S: Final = 0.1  # at most one `/state` fetch per this interval
REFRESH_IDLE_S: Final = 2.0  # re-fetch anyway, so heartbeat ages and stale flags move
REPAINT_IDLE_S: Final = 1.0
MIN_TASK_ROWS: Final = 5
BACKOFF_FIRST_S: Final = 0.1
BACKOFF_MAX_S: Final = 2.0
DRAIN_TIMEOUT_S: Final = 2.0
REQUEST_TIMEOUT_S: Final = 3.0  # for `/state` and friends; the stream itself has none
# Events that do not change what `/state` returns.
_STATELESS: Final = frozenset({EventType.FILE_CHANGED})
# What the landing panel is folded from: the landing events, and what ends a wait to land.
LANDING_EVENTS: Final = frozenset(
    {
        EventType.LANDING_QUEUED,
        EventType.LANDING_CHECK_STARTED,
        EventType.LANDING_CHECK_FINISHED,
        EventType.LANDED,
        EventType.INTEGRATION_FAILED,
        EventType.REPAIR_STARTED,
        EventType.LANDING_HALTED,
        EventType.LANDING_RESUMED,
        EventType.TASK_SUCCEEDED,
        EventType.TASK_REQUEUED,
        EventType.TASK_FAILED,
        EventType.TASK_CANCELLED,
    }
)
# A landing reads in its `task_succeeded` line (`· landed #N`): `landed` is not printed twice.
NOTABLE_EVENTS: Final = frozenset(
    {
        EventType.INTEGRATION_FAILED,
        EventType.LANDING_HALTED,
        EventType.LANDING_RESUMED,
        EventType.TASK_ASSIGNED,
        EventType.LEASE_DENIED,
        EventType.TASK_REQUEUED,
        EventType.TASK_SUCCEEDED,
        EventType.TASK_FAILED,
        EventType.TASK_BLOCKED_UPSTREAM,
        EventType.TASK_CANCELLED,
        EventType.CHECK_FINISHED,
        EventType.COMMAND_FINISHED,
        EventType.TASK_COMMITTED,
        EventType.FLEET_PAUSED,
        EventType.FLEET_RESUMED,
        EventType.FLEET_BUDGET_EXHAUSTED,
        EventType.STALE_READ,
        EventType.RECONCILED,
        EventType.REPAIR_STARTED,
        EventType.REPAIR_FINISHED,
        EventType.OPERATOR_MESSAGE,
        EventType.QUESTION_ASKED,
        EventType.QUESTION_ANSWERED,
    }
)


def _notable(event: dict[str, Any]) -> bool:
    """Worth a line in the compact printer: an outcome, a veto, or a runner lost mid-run."""
    if event["type"] == EventType.AGENT_OFFLINE:
        return bool(event["payload"].get("reason") != ReleaseReason.AGENT_LEFT)
    return event["type"] in NOTABLE_EVENTS


class _Subscriber(Protocol):
    """What `_follow` drives: a cursor, and what to do on connect, per event and on status."""

    def cursor(self) -> int: ...
    async def on_connect(self, client: FleetClient) -> None: ...
    async def while_connected(self, client: FleetClient) -> None: ...
    def on_event(self, event: dict[str, Any]) -> None: ...
    def on_status(self, status: str) -> None: ...


async def _follow(url: str, token: str | None, subscriber: _Subscriber) -> None:
    """Stream events after the subscriber's cursor forever, reconnecting with backoff.

    Each attempt opens a fresh client, so a reconnect never reuses a pooled
    socket to a server that went away (a request on one can hang unanswered);
    `while_connected` runs beside the stream on that client. Cancel to stop.
    """
    delay = BACKOFF_FIRST_S
    while True:
        try:
            async with FleetClient(url, token=token, timeout=REQUEST_TIMEOUT_S) as client:
                await subscriber.on_connect(client)
                subscriber.on_status(LIVE)
                beside = asyncio.create_task(subscriber.while_connected(client))
                try:
                    async for event in client.stream(since=subscriber.cursor()):
                        subscriber.on_event(event)
                        delay = BACKOFF_FIRST_S
                finally:
                    beside.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await beside
            reason = "stream ended"
        except ServerUnavailable:
            reason = "server unreachable"
        except DomainError as err:  # e.g. a wrong token: say so, keep trying
            reason = getattr(err, "error_code", err.code)
        subscriber.on_status(f"{RECONNECTING} ({reason})")
        await asyncio.sleep(delay)
        delay = min(delay * 2, BACKOFF_MAX_S)


@dataclass
class _Watch:
    """The dashboard's loop state: the last `/state`, the cursor, and the log built from events."""

    server: str
    state: dict[str, Any] | None = None
    database: str | None = None  # the `database_id` of the record the frame shows
    last_id: int | None = None
    vetoes: int = 0
    veto_cursor: int = 0
    connection: str = CONNECTING
    log: deque[LogLine] = field(default_factory=lambda: deque(maxlen=LOG_KEEP))
    landing: list[dict[str, Any]] = field(default_factory=list)  # the `LANDING_EVENTS` seen
    landing_fold: tuple[int, LandingFacts] = (0, LandingFacts())
    names: dict[str, str] = field(default_factory=dict)
    stale: asyncio.Event = field(default_factory=asyncio.Event)
    dirty: bool = True

    def cursor(self) -> int:
        return self.last_id or 0

    async def on_connect(self, client: FleetClient) -> None:
        """Fetch `/state` and the veto count; the first time (or on another record), also
        place the cursor."""
        state = await client.state()
        if self._another_record(state):
            self._start_over()
        self.database = state.get("database_id")
        conflicts = await client.conflicts()
        self._take(state)
        self.vetoes = len(conflicts)
        self.veto_cursor = max((c["event_id"] for c in conflicts), default=0)
        if self.last_id is None:
            self.last_id = max(0, int(state["last_event_id"]) - BACKLOG_EVENTS)

    def _another_record(self, state: dict[str, Any]) -> bool:
        """The server now answering keeps another record than the one shown."""
        if self.last_id is None:
            return False
        said = state.get("database_id")
        return said != self.database or int(state["last_event_id"]) < self.last_id

    def _start_over(self) -> None:
        """Forget the last record's log, landing, names and cursor (`on_connect` re-seeds)."""
        self.last_id, self.state = None, None
        self.log.clear()
        self.landing.clear()
        self.landing_fold = (0, LandingFacts())
        self.names.clear()

    def _take(self, state: dict[str, Any]) -> None:
        if state.get("database_id") != self.database:
            return  # another server answered between reconnects: `on_connect` starts over
        self.state = state
        self.names.update({a["id"]: a["name"] for a in state["agents"]})
        self.dirty = True

    def on_event(self, event: dict[str, Any]) -> None:
        """Log one streamed event once; ask for a `/state` re-fetch if it changed anything."""
        event_id = int(event["id"])
        if event_id <= self.cursor():
            return
        self.last_id = event_id
        kind = event["type"]
        if kind == EventType.AGENT_REGISTERED:
            self.names[event["agent_id"]] = event["payload"]["name"]
        if kind == EventType.LEASE_DENIED and event_id > self.veto_cursor:
            self.vetoes, self.veto_cursor = self.vetoes + 1, event_id
        self.log.append(describe(event, self.names))
        if kind in LANDING_EVENTS:
            self.landing.append(event)
        if kind not in _STATELESS:
            self.stale.set()
        self.dirty = True

    def on_status(self, status: str) -> None:
        self.connection, self.dirty = status, True

    async def while_connected(self, client: FleetClient) -> None:
        """Re-fetch `/state` when an event asks for it (throttled) or every few seconds."""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stale.wait(), REFRESH_IDLE_S)
            self.stale.clear()
            with contextlib.suppress(ServerUnavailable, DomainError):  # the stream shows outages
                self._take(await client.state())
            await asyncio.sleep(REFRESH_MIN_S)

    def view(self, height: int) -> ViewModel:
        """The frame for a terminal `height` rows tall: the task table gets about a third."""
        return build_view(
            self.state,
            self.log,
            server=self.server,
            connection=self.connection,
            vetoes=self.vetoes,
            last_event_id=self.cursor(),
            now=utcnow(),
            max_task_rows=max(MIN_TASK_ROWS, height // 3),
            landing=self._landing(),
        )

    def _landing(self) -> LandingFacts:
        """The landing fold of the events seen, folded again only when one arrived."""
        if self.landing_fold[0] != len(self.landing):
            self.landing_fold = (len(self.landing), landing_of(self.landing))
        return self.landing_fold[1]


async def _until(stop: asyncio.Event, *jobs: Coroutine[Any, Any, None]) -> None:
    """Run `jobs` until `stop` is set (or one of them ends), then cancel the rest."""
    tasks = [asyncio.create_task(job) for job in jobs]
    waiter = asyncio.create_task(stop.wait())
    try:
        done, _ = await asyncio.wait([waiter, *tasks], return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            if task is not waiter:
                task.result()  # surface a crash instead of freezing the view
    finally:
        for task in [waiter, *tasks]:
            task.cancel()
        await asyncio.gather(waiter, *tasks, return_exceptions=True)


async def watch(
    url: str,
    token: str | None,
    console: Console,
    *,
    stop: asyncio.Event | None = None,
    refresh_per_second: float = 8,
    on_view: Callable[[ViewModel], object] | None = None,
) -> None:
    """Show the live dashboard of the server at `url` until `stop` is set (or cancelled).

    `on_view` receives every painted view model (tests wait on it).
    """
    from rich.live import Live  # on use: the demo's compact log never paints the dashboard

    stop = stop or asyncio.Event()
    model = _Watch(url)
    with Live(
        render(model.view(console.size.height)),
        console=console,
        auto_refresh=False,
        redirect_stdout=False,
        redirect_stderr=False,
        vertical_overflow="crop",
    ) as live:

        def paint() -> None:
            view = model.view(console.size.height)
            model.dirty = False
            live.update(render(view), refresh=True)
            if on_view is not None:
                on_view(view)

        async def paint_forever() -> None:
            last = 0.0
            while True:
                if model.dirty or time.monotonic() - last >= REPAINT_IDLE_S:
                    paint()
                    last = time.monotonic()
                await asyncio.sleep(1 / refresh_per_second)

        try:
            await _until(stop, _follow(url, token, model), paint_forever())
        finally:
            paint()


@dataclass
class _Printer:
    """`follow_compact`'s loop state: the cursor, the connection, and runner names."""

    console: Console
    last_id: int
    status: str = LIVE
    names: dict[str, str] = field(default_factory=dict)
    moved: asyncio.Event = field(default_factory=asyncio.Event)
    scopes: ScopeWatch = field(default_factory=ScopeWatch)

    def cursor(self) -> int:
        return self.last_id

    async def on_connect(self, client: FleetClient) -> None:
        self.names.update({a["id"]: a["name"] for a in await client.agents()})
        seeded = ScopeWatch.of(await client.tasks())
        self.scopes.declared.update(seeded.declared)

    async def while_connected(self, client: FleetClient) -> None:
        return None

    def on_event(self, event: dict[str, Any]) -> None:
        if event["id"] <= self.last_id:
            return
        self.last_id = int(event["id"])
        if event["type"] == EventType.AGENT_REGISTERED:
            self.names[event["agent_id"]] = event["payload"]["name"]
        if _notable(event):
            self.console.print(log_text(describe(event, self.names)))
        outside = self.scopes.take(event)
        if outside is not None:
            line = describe(event, self.names)
            text = self.scopes.line(str(event["task_id"]), outside)
            self.console.print(log_text(replace(line, text=text, style="yellow")))
        self.moved.set()

    def on_status(self, status: str) -> None:
        if status != self.status and status != LIVE:
            self.console.print(Text(f"event stream: {status}", style="yellow"))
        self.status = status

    async def catch_up(self, url: str, token: str | None) -> None:
        """Wait (bounded) until the cursor reaches the server's last event id."""
        with contextlib.suppress(ServerUnavailable, DomainError, TimeoutError):
            async with FleetClient(url, token=token, timeout=REQUEST_TIMEOUT_S) as client:
                target = int((await client.health())["last_event_id"])
            async with asyncio.timeout(DRAIN_TIMEOUT_S):
                while self.last_id < target:
                    self.moved.clear()
                    await self.moved.wait()


async def follow_compact(
    url: str, token: str | None, console: Console, stop: asyncio.Event, *, since: int = 0
) -> int:
    """Print one line per notable event after `since` until `stop`, then catch up and return.

    After `stop` is set it keeps printing up to the server's last event (bounded by
    `DRAIN_TIMEOUT_S`), so a run's final events are not cut off. Returns the cursor.
    """
    printer = _Printer(console, since)
    follower = asyncio.create_task(_follow(url, token, printer))
    try:
        await stop.wait()
        await printer.catch_up(url, token)
    finally:
        follower.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await follower
    return printer.last_id
