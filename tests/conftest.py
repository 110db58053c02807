"""Shared fixtures: a scratch working tree, a real server on loopback, and its client.

`server` is a real `ServerThread` (uvicorn on 127.0.0.1, a free port, SQLite in
`tmp_path`); `make_server` builds one with other settings. `client` is the one
wire client, `FleetClient`, pointed at `server`; `http` is a raw httpx client for
requests the typed client would not send. The `wait_until` fixture is the only way a
test waits: it polls a condition with a bound, it never sleeps a fixed time.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fleet_support import loopback_transport

from codefleet.api.client import FleetClient
from codefleet.config import Settings
from codefleet.server.thread import ServerThread

WAIT_TIMEOUT_S = 5.0


Predicate = Callable[[], Any | Awaitable[Any]]


async def _wait_until(predicate: Predicate, timeout: float = WAIT_TIMEOUT_S) -> Any:
    """Poll `predicate` (sync or async) until it returns something truthy; return it.

    Fails the test when `timeout` seconds pass first. Yields to the loop between
    polls, so a condition driven by the server thread or this loop can progress.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met within {timeout} s: {predicate}")
        await asyncio.sleep(0.01)


@pytest.fixture
def wait_until() -> Callable[..., Awaitable[Any]]:
    """The bounded condition-wait (see `_wait_until`), as a fixture."""
    return _wait_until


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A small working tree: two source files and a `.git` directory."""
    root = tmp_path / "tree"
    (root / "pkg").mkdir(parents=True)
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]\n")
    (root / "a.py").write_text("A = 1\n")
    (root / "pkg" / "b.py").write_text("B = 2\n")
    return root


@pytest.fixture(scope="session")
def _stopping() -> Iterator[list[threading.Thread]]:
    """Servers stop in the background while the next test runs; all are joined at the end."""
    stoppers: list[threading.Thread] = []
    yield stoppers
    for stopper in stoppers:
        stopper.join()


@pytest.fixture
def make_server(
    tmp_path: Path, workdir: Path, _stopping: list[threading.Thread]
) -> Iterator[Callable[..., ServerThread]]:
    """Start a real server; keyword arguments override the test `Settings`."""
    started: list[ServerThread] = []

    def make(**overrides: Any) -> ServerThread:
        fields: dict[str, Any] = {
            "host": "127.0.0.1",
            "port": 0,
            "db": tmp_path / f"db{len(started)}.sqlite",
            "workdir": workdir,
            "run_dir": tmp_path / "runs",
            "stale_after": 60.0,
            "tick_interval": 0.05,
            "backoff_base": 0.0,
        }
        fields.update(overrides)
        thread = ServerThread(Settings(_env_file=None, **fields)).start()  # type: ignore[call-arg]
        started.append(thread)
        return thread

    yield make
    for thread in started:
        stopper = threading.Thread(target=thread.stop, name="stop-server")
        stopper.start()
        _stopping.append(stopper)


@pytest.fixture
def server(make_server: Callable[..., ServerThread]) -> ServerThread:
    return make_server()


@pytest.fixture
async def client(server: ServerThread) -> AsyncIterator[FleetClient]:
    async with FleetClient(server.url, transport=loopback_transport()) as fleet:
        yield fleet


@pytest.fixture
async def http(server: ServerThread) -> AsyncIterator[httpx.AsyncClient]:
    """A raw HTTP client on `server`, for requests the typed client would not send."""
    async with httpx.AsyncClient(base_url=server.url, transport=loopback_transport()) as raw:
        yield raw
