"""uvicorn's internals, used in this one module: the connection guard, one write, the serve loop.

Pinned: uvicorn 0.54.0 (pyproject.toml; httptools 0.9 in uv.lock). Every
private name of uvicorn the server leans on is used here and nowhere else,
and tests/unit/test_uvicorn_internals.py checks this module against uvicorn's
own protocol byte for byte, and that the installed uvicorn is `UVICORN_PIN`:
a uvicorn upgrade starts by reading this file and running that test.

The connection guard: one slow client must not stall the fleet.

uvicorn puts no deadline on a request's head and no cap on connections:
a thousand connections that each send half a request hold a thousand file
descriptors for ever, the next `accept` fails, and every runner's heartbeat
and lease request with it. This module wraps uvicorn's HTTP protocol with:

- **a read deadline**: a connection must deliver a whole request (head and
  body) within `read_timeout` seconds of connecting or of its previous answer,
  or it is closed. uvicorn's `timeout_keep_alive` still closes idle
  keep-alive connections sooner. Both are checked by one sweep of the
  connections every `SWEEP_S`, not by timers armed for each request;
- **a head cap**: a request line and headers longer than `HEAD_LIMIT` bytes
  in all are answered 431 and the connection closed, before the parser has
  seen more than that much of them (httptools builds a long header by
  appending each fragment to what it has, so its work grows with the square
  of the header's length: one 80 MB header held the event loop for seconds);
- **a connection cap** below the descriptor limit: when a new connection
  would pass it, the connection that has waited longest without a request to
  answer is closed, never-served ones first. A connection whose request is
  being answered (a long poll, an event stream, a handler) is never evicted,
  so the cap costs a slow or idle client its connection, not the fleet its
  answers. Only when every connection is busy is the new one refused.

It also sends each sized response in one `transport.write`: uvicorn writes
a response's head on `http.response.start` and its body on the first
`http.response.body`, two system calls and two wake-ups of the client; here
the head of a response that is not chunked waits for the first body write
and leaves joined with it. A chunked response (an event stream) sends its
head at once, as before (docs/decisions/0064-one-write-per-response.md, "One write per response").

The head cap, the deadline and the cap reach into uvicorn's httptools protocol.

`uvicorn_config` builds the one `uvicorn.Config` that `serve` and
`ServerThread` both run; `raise_descriptor_limit` lifts the process's soft
limit to its hard limit at `serve` (docs/decisions/0059-connection-guard-a-read-deadline-and-a-cap-that-evicts-the.md, "Connection guard").

`FleetServer` (what `codefleet serve` and `ServerThread` run) is uvicorn's
`Server` without its fixed waits: uvicorn notices an exit request on its next
0.1 s tick and then pauses 0.1 s more before it even looks at the open
connections; here a request to exit wakes the main loop at once, and the
shutdown polls the connections every few milliseconds with the same rules
(wait for the open responses, at most `timeout_graceful_shutdown`, then the
lifespan's shutdown). It ends the live event streams first.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import resource
import socket
from types import FrameType
from typing import Any, Final, Protocol

import uvicorn
from uvicorn._types import ASGISendEvent
from uvicorn.protocols.http.httptools_impl import (
    STATUS_LINE,
    HttpToolsProtocol,
    RequestResponseCycle,
)

from codefleet.transport.guards import envelope

__all__ = [
    "HEAD_LIMIT",
    "UVICORN_PIN",
    "FleetServer",
    "connection_cap",
    "guarded_protocol",
    "raise_descriptor_limit",
    "uvicorn_config",
]

UVICORN_PIN: Final = "0.54.0"  # the version this module's reach into uvicorn is written for
log = logging.getLogger(__name__)
uvicorn_log = logging.getLogger("uvicorn.error")  # where uvicorn says it is shutting down
TICK_S: Final = 0.1  # uvicorn's main-loop tick: the date header, the request limit
DRAIN_POLL_S: Final = 0.005  # how often a shutdown looks whether the connections have finished
RESERVED_FDS: Final = 128  # the database and its side files, logs, the lock, the event loop
MAX_SOFT_FDS: Final = 65_536
SWEEP_S: Final = 0.5  # how often overdue connections are looked for (read deadline, keep-alive)
HEAD_LIMIT: Final = 64 * 1024  # bytes: a request line and its headers, in all
HEAD_TOO_LARGE: Final = envelope(
    "header_too_large", f"the request line and headers exceed {HEAD_LIMIT} bytes"
)


def raise_descriptor_limit() -> int:
    """Lift the soft RLIMIT_NOFILE to the hard limit (capped); return the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = MAX_SOFT_FDS if hard == resource.RLIM_INFINITY else min(hard, MAX_SOFT_FDS)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = target
    return MAX_SOFT_FDS if soft == resource.RLIM_INFINITY else soft


def connection_cap(wanted: int) -> int:
    """`wanted`, lowered to what the descriptor limit leaves after the server's own files."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    room = MAX_SOFT_FDS if soft == resource.RLIM_INFINITY else soft - RESERVED_FDS
    cap = max(16, min(wanted, room))
    if cap < wanted:
        log.warning("connection cap %d lowered to %d by the descriptor limit %d", wanted, cap, soft)
    return cap


def guarded_protocol(read_timeout: float, max_connections: int) -> type[HttpToolsProtocol]:
    """uvicorn's httptools protocol with a read deadline and a connection cap."""

    class Guarded(_GuardedProtocol):
        deadline_s = read_timeout
        cap = max_connections
        sweep = _Sweep()

    return Guarded


def uvicorn_config(app: Any, host: str, port: int, settings: Any, **extra: Any) -> uvicorn.Config:
    """The server's `uvicorn.Config`: keep-alive timeout, read deadline, connection cap, and
    TLS when the settings name a certificate (the guard wraps the protocol above asyncio's
    TLS transport, so every rule and the fast path hold unchanged over https)."""
    protocol = guarded_protocol(settings.read_timeout, connection_cap(settings.max_connections))
    if settings.tls_cert is not None:
        extra = {"ssl_certfile": settings.tls_cert, "ssl_keyfile": settings.tls_key, **extra}
    # access_log=False: at "warning" no access line is ever written, but while the access
    # logger has a handler uvicorn builds each line's arguments (the quoted path) per answer.
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        http=protocol,
        timeout_keep_alive=settings.keep_alive_timeout,
        **extra,
    )


class _HeadFirst:
    """A cycle's view of its connection's transport: a held head goes out with the next write.

    One per connection: uvicorn starts a pipelined request's cycle only once the previous
    response is complete, so at most one response on a connection is being written.
    """

    __slots__ = ("held", "hold_next", "real")

    def __init__(self, real: asyncio.Transport) -> None:
        self.real = real
        self.held = b""
        self.hold_next = False

    def write(self, data: bytes) -> None:
        if self.hold_next:
            self.hold_next = False
            self.held = data
            return
        if self.held:
            data, self.held = self.held + data, b""
        self.real.write(data)

    def flush(self) -> None:
        if self.held:
            held, self.held = self.held, b""
            if not self.real.is_closing():
                self.real.write(held)

    def close(self) -> None:
        self.flush()
        self.real.close()

    def is_closing(self) -> bool:
        return self.real.is_closing()


class _OneWriteCycle(RequestResponseCycle):
    """uvicorn's request cycle whose sized responses leave in one write (head and body)."""

    transport: _HeadFirst  # type: ignore[assignment]

    async def send(self, message: ASGISendEvent) -> None:
        starting = not self.response_started and message["type"] == "http.response.start"
        self.transport.hold_next = starting
        try:
            await super().send(message)
        finally:
            self.transport.hold_next = False
            if not starting or self.chunked_encoding:  # a stream's head leaves at once
                self.transport.flush()


class _Sweep:
    """One timer for all of a server's connections: each period, close the ones past due.

    A connection waiting for a request is past due once `deadline_s` has passed since it
    connected or was last answered, or, after an answer, once uvicorn's keep-alive timeout
    has passed without a byte from the client. Checked every `SWEEP_S`, so a connection is
    closed up to that much later than its due time; a timer armed and cancelled per request
    (two of them, ours and uvicorn's keep-alive) cost more than the answer's engine work.
    """

    __slots__ = ("handle",)

    def __init__(self) -> None:
        self.handle: asyncio.TimerHandle | None = None

    def ensure(self, loop: asyncio.AbstractEventLoop, connections: set[Any]) -> None:
        if self.handle is None:
            self.handle = loop.call_later(SWEEP_S, self.run, loop, connections)

    def run(self, loop: asyncio.AbstractEventLoop, connections: set[Any]) -> None:
        self.handle = None
        now = loop.time()
        for connection in list(connections):
            if isinstance(connection, _GuardedProtocol):
                connection.close_if_due(now)
        if connections:
            self.ensure(loop, connections)


class _GuardedProtocol(HttpToolsProtocol):
    deadline_s: float = 15.0
    cap: int = 2048
    sweep: _Sweep  # one per server: `guarded_protocol` makes a class per server
    _served: int = 0  # requests answered on this connection
    _reading: bool = True  # waiting for (the rest of) a request, not answering one
    _reading_since: float = 0.0
    _heard: bool = False  # a byte arrived since `_reading_since`
    _in_head: bool = True  # the parser is reading a request line and headers
    _head_bytes: int = 0  # bytes of the current head handed to the parser so far
    _view: _HeadFirst

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._view = _HeadFirst(transport)
        self._await_request()
        self.sweep.ensure(self.loop, self.connections)
        if len(self.connections) > self.cap and self._open_connections() > self.cap:
            self._evict()

    def data_received(self, data: bytes) -> None:
        """uvicorn's, parsing at most `HEAD_LIMIT` bytes of a head; past them, 431 and close."""
        self._heard = True
        if not self._in_head:
            super().data_received(data)
            return
        room = HEAD_LIMIT - self._head_bytes
        if room <= 0:
            self._refuse_head()
            return
        self._head_bytes += min(room, len(data))
        super().data_received(data[:room] if len(data) > room else data)
        if len(data) > room and self.parser is not None and not self.transport.is_closing():
            self.data_received(data[room:])  # refused if the head is still open, else parsed

    def on_headers_complete(self) -> None:
        self._in_head = False
        before = self.cycle
        super().on_headers_complete()
        cycle = self.cycle
        if cycle is not before and type(cycle) is RequestResponseCycle:
            # The cycle's task has been created but has not run: from its first step on it
            # is a one-write cycle writing through the connection's view.
            cycle.__class__ = _OneWriteCycle
            cycle.transport = self._view  # type: ignore[assignment]

    def on_message_complete(self) -> None:
        self._reading = False
        self._in_head, self._head_bytes = True, 0  # what follows is the next request's head
        super().on_message_complete()

    def on_response_complete(self) -> None:
        """uvicorn's, except that the sweep, not a timer per answer, does the keep-alive."""
        self.server_state.total_requests += 1
        self._served += 1
        if self.transport.is_closing():
            return
        self.flow.resume_reading()
        if self.pipeline:  # the next pipelined request was read already: answer it
            cycle, app = self.pipeline.pop()
            self._start_asgi_task(cycle, app)
        else:
            self._await_request()

    def _refuse_head(self) -> None:
        """431 in the error envelope, then close; only close while an answer is being sent."""
        cycle = self.cycle
        if cycle is None or cycle.response_complete:
            headers = b"".join(b"%s: %s\r\n" % pair for pair in self.server_state.default_headers)
            self.transport.write(
                STATUS_LINE[431] + headers + b"content-type: application/json\r\n"
                b"content-length: %d\r\nconnection: close\r\n\r\n"
                % len(HEAD_TOO_LARGE)
                + HEAD_TOO_LARGE
            )
        self.transport.close()

    # -- the deadline, the keep-alive and the cap -----------------------------------------

    def _await_request(self) -> None:
        self._reading = True
        self._reading_since = self.loop.time()
        self._heard = False

    def close_if_due(self, now: float) -> None:
        if not self._reading or self.transport.is_closing():
            return
        waited = now - self._reading_since
        idle = self._served > 0 and not self._heard and waited >= self.timeout_keep_alive
        if idle or waited >= self.deadline_s:
            self.transport.close()

    def _open_connections(self) -> int:
        return sum(1 for c in self.connections if not c.transport.is_closing())

    def _evict(self) -> None:
        """Close the connection that waited longest for a request (never-served ones first)."""
        waiting = [
            c
            for c in self.connections
            if isinstance(c, _GuardedProtocol) and c._reading and not c.transport.is_closing()
        ]
        if not waiting:  # every connection is being answered: refuse the newcomer
            self.transport.close()
            return
        victim = min(waiting, key=lambda c: (c._served > 0, c._reading_since))
        victim.transport.close()


# -- the serve loop -----------------------------------------------------------------------------


class Closable(Protocol):
    """What must end before uvicorn can: the live event streams (`server.sse.EventHub`)."""

    def close_threadsafe(self) -> None: ...


class FleetServer(uvicorn.Server):
    """uvicorn, ending the live event streams first when asked to exit.

    uvicorn waits for open responses before it shuts down, and an SSE stream
    never finishes on its own: without this, Ctrl-C (or `stop()`) would hang
    while a dashboard is connected.
    """

    def __init__(self, config: uvicorn.Config, hub: Closable) -> None:
        super().__init__(config)
        self.hub = hub
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.hub.close_threadsafe()
        super().handle_exit(sig, frame)
        self.wake_threadsafe()

    def exit_threadsafe(self) -> None:
        """Ask the server to exit (live streams first), from any thread, without waiting."""
        self.hub.close_threadsafe()
        self.should_exit = True
        self.wake_threadsafe()

    def wake_threadsafe(self) -> None:
        """Make the main loop look at `should_exit` now rather than on its next tick."""
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None and not loop.is_closed():
            loop.call_soon_threadsafe(wake.set)

    async def main_loop(self) -> None:
        """uvicorn's loop (`on_tick` every 0.1 s), woken at once by an exit request."""
        self._loop, self._wake = asyncio.get_running_loop(), asyncio.Event()
        counter = 0
        should_exit = await self.on_tick(counter)
        while not should_exit:
            counter = (counter + 1) % 864000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), TICK_S)
            self._wake.clear()
            should_exit = await self.on_tick(counter)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """uvicorn's shutdown without its fixed pauses: the same steps, polled every 5 ms."""
        uvicorn_log.info("Shutting down")
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        for connection in list(self.server_state.connections):
            connection.shutdown()
        try:
            await asyncio.wait_for(self._drained(), self.config.timeout_graceful_shutdown)
        except TimeoutError:
            for task in self.server_state.tasks:
                task.cancel(msg="Task cancelled, timeout graceful shutdown exceeded")
        if not self.force_exit:
            await self.lifespan.shutdown()

    async def _drained(self) -> None:
        state = self.server_state
        while (state.connections or state.tasks) and not self.force_exit:
            await asyncio.sleep(DRAIN_POLL_S)
        for server in self.servers:
            await server.wait_closed()
