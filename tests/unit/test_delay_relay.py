"""The latency bench's relay (`codefleet.testing.delay`) passes bytes on whole and in order.

A real echo server on 127.0.0.1 behind a real relay: what one side writes, in
many small pieces, arrives at the other intact and in the order written, in
both directions, and the end of one side's stream reaches the other. With a
delay the same holds (no assertion on time: the bench measures that).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from codefleet.testing.delay import Relay


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(4096):
        writer.write(data)
        await writer.drain()
    writer.write_eof()


@pytest.fixture
async def echo_port() -> AsyncIterator[int]:
    server = await asyncio.start_server(_echo, "127.0.0.1", 0)
    async with server:
        yield server.sockets[0].getsockname()[1]


async def _through(relay: Relay, pieces: list[bytes]) -> bytes:
    front = await relay.serve("127.0.0.1", 0)
    async with front:
        reader, writer = await asyncio.open_connection(*front.sockets[0].getsockname()[:2])
        for piece in pieces:
            writer.write(piece)
            await writer.drain()
        writer.write_eof()
        back = await asyncio.wait_for(reader.read(), 10)  # everything, up to the echoed end
        writer.close()
        return back


@pytest.mark.parametrize("rtt_s", [0.0, 0.02], ids=["no delay", "20 ms"])
async def test_every_byte_comes_back_once_in_the_order_written_and_the_end_is_passed_on(
    echo_port: int, rtt_s: float
) -> None:
    pieces = [f"{n:05d};".encode() * (1 + n % 7) for n in range(300)]

    back = await _through(Relay(("127.0.0.1", echo_port), rtt_s), pieces)

    assert back == b"".join(pieces)


async def test_a_target_that_refuses_the_connection_closes_the_clients_side() -> None:
    probe = await asyncio.start_server(_echo, "127.0.0.1", 0)
    closed_port = probe.sockets[0].getsockname()[1]
    probe.close()
    await probe.wait_closed()

    back = await _through(Relay(("127.0.0.1", closed_port), 0.0), [b"hello"])

    assert back == b""
