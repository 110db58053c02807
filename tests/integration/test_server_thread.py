"""The in-process server: launched to start beside the caller's work; stopped in uvicorn's
shutdown steps, without its fixed waits."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
from fleet_support import server_settings

from codefleet.api.client import FleetClient, ServerUnavailable
from codefleet.server.thread import ServerThread


async def test_a_stop_with_a_keep_alive_connection_open_ends_in_the_lifespans_shutdown(
    make_server: Callable[..., ServerThread],
) -> None:
    server = make_server()
    async with FleetClient(server.url) as client:
        tree = (await client.health())["workdir"]  # the connection stays open, idle
        await asyncio.to_thread(server.stop)
        with pytest.raises(ServerUnavailable):
            await client.health()
    # The lifespan's shutdown released the database's one-server lock: it opens again.
    again = make_server(db=server.settings.db)
    async with FleetClient(again.url) as client:
        assert (await client.health())["workdir"] == tree


def test_an_exit_asked_twice_and_from_another_thread_stops_once(
    make_server: Callable[..., ServerThread],
) -> None:
    server = make_server()
    server.request_stop()
    server.request_stop()
    server.stop()
    server.stop()  # joining a stopped server is a no-op


async def test_a_launched_server_starts_once_and_start_waits_until_it_serves(
    tmp_path: Path, workdir: Path
) -> None:
    server = ServerThread(server_settings(tmp_path, workdir))
    server.launch()
    server.launch()  # one thread: a second launch (or the `start` after it) starts nothing
    try:
        assert server.start() is server  # it serves once `start` returns
        async with FleetClient(server.url) as client:
            assert (await client.health())["status"] == "ok"
    finally:
        server.stop()
