"""Run the coordination server in a background thread on a free loopback port.

Used by `codefleet demo` (which starts its own server) and by the tests (a
real server on 127.0.0.1, real SQLite, real HTTP). The thread owns its own
event loop; `launch()` starts it without waiting, so that the caller can work
while it starts, and `start()` waits until it serves; `stop()` asks uvicorn to
exit and joins it; `request_stop()` only asks, so that the caller can work
while uvicorn winds down. The server speaks no WebSocket (events are SSE), so
uvicorn loads no WebSocket protocol. It runs
`transport.uvicorn_internals.FleetServer`, as `codefleet serve` does.
"""

from __future__ import annotations

import socket
import threading
import time

from codefleet.config import Settings
from codefleet.server.httpapp import create_app
from codefleet.transport.uvicorn_internals import FleetServer, uvicorn_config

__all__ = ["ServerThread", "free_port"]


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


class ServerThread:
    def __init__(self, settings: Settings) -> None:
        if settings.port == 0:
            settings = settings.model_copy(update={"port": free_port(settings.host)})
        self.settings = settings
        self.app = create_app(settings, early_line=True)  # it is served: see `launch`
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
        return self.settings.url

    def launch(self) -> None:
        """Start the server's thread (once) without waiting: it opens its database and its
        landed line while the caller works; `start` then waits for it to serve."""
        if self._thread.ident is None:
            self._thread.start()

    def start(self, timeout: float = 10.0) -> ServerThread:
        """Launch it (if not yet) and wait until it serves."""
        self.launch()
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
