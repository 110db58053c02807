"""Run the coordination server in a background thread on a free loopback port.

Used by `codefleet demo` (which starts its own server) and by the tests (a
real server on 127.0.0.1, real SQLite, real HTTP). The thread owns its own
event loop; `stop()` asks uvicorn to exit and joins it; `request_stop()` only
asks, so that the caller can work while uvicorn winds down. The server speaks
no WebSocket (events are SSE), so uvicorn loads no WebSocket protocol.

`FleetServer` (also what `codefleet serve` runs) is uvicorn without its fixed
waits: uvicorn notices an exit request on its next 0.1 s tick and then pauses
0.1 s more before it even looks at the open connections; here a request to
exit wakes the main loop at once, and the shutdown polls the connections
every few milliseconds with the same rules (wait for the open responses, at
most `timeout_graceful_shutdown`, then the lifespan's shutdown).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import threading
import time
from types import FrameType

import uvicorn

from codefleet.config import Settings
from codefleet.server.app import create_app
from codefleet.server.httpguard import uvicorn_config
from codefleet.server.sse import EventHub

__all__ = ["FleetServer", "ServerThread", "free_port"]

TICK_S = 0.1  # uvicorn's main-loop tick: the date header, the request limit
DRAIN_POLL_S = 0.005  # how often a shutdown looks whether the open connections have finished
log = logging.getLogger("uvicorn.error")  # where uvicorn says it is shutting down


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


class FleetServer(uvicorn.Server):
    """uvicorn, ending the live event streams first when asked to exit.

    uvicorn waits for open responses before it shuts down, and an SSE stream
    never finishes on its own: without this, Ctrl-C (or `stop()`) would hang
    while a dashboard is connected.
    """

    def __init__(self, config: uvicorn.Config, hub: EventHub) -> None:
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
        log.info("Shutting down")
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


class ServerThread:
    def __init__(self, settings: Settings) -> None:
        if settings.port == 0:
            settings = settings.model_copy(update={"port": free_port(settings.host)})
        self.settings = settings
        self.app = create_app(settings)
        config = uvicorn_config(
            self.app,
            settings.host,
            settings.port,
            settings,
            lifespan="on",
            loop="asyncio",
            ws="none",
        )
        self._server = FleetServer(config, self.app.state.hub)
        self._thread = threading.Thread(
            target=self._server.run, name="codefleet-server", daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://{self.settings.host}:{self.settings.port}"

    def start(self, timeout: float = 10.0) -> ServerThread:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the server did not start on {self.url}")
            time.sleep(0.005)
        return self

    def request_stop(self) -> None:
        """Ask the server to exit (live streams first) without waiting for it."""
        self._server.exit_threadsafe()

    def stop(self) -> None:
        self.request_stop()
        self._thread.join(timeout=10)

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()
