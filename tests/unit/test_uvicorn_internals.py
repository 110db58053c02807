"""The guarded protocol: the bytes uvicorn writes, in one write; deadlines by one sweep.

Each case feeds the same request bytes to uvicorn's own httptools protocol and
to the server's (`uvicorn_internals.guarded_protocol`) over a recording transport, and
compares what each wrote: the same bytes, in the same order, with the same
close; a response with a Content-Length leaves in one `write`, and a stream's
head leaves before its first chunk is produced. The sweep closes a connection
past its read deadline, or idle past the keep-alive timeout after an answer,
and never one whose request is being answered; the clock is an argument.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from codefleet.config import Settings
from codefleet.testing.transport import RecordingTransport
from codefleet.transport.uvicorn_internals import (
    HEAD_LIMIT,
    UVICORN_PIN,
    guarded_protocol,
    uvicorn_config,
)

App = Callable[[dict[str, Any], Any, Any], Awaitable[None]]


Recording = RecordingTransport


def connect(
    protocol_class: type[HttpToolsProtocol], app: App, keep_alive: float = 5.0
) -> tuple[Any, Recording]:
    config = uvicorn.Config(
        app, http=protocol_class, log_level="critical", timeout_keep_alive=keep_alive
    )
    protocol = protocol_class(config, ServerState(), {})  # type: ignore[call-arg]
    transport = Recording()
    protocol.connection_made(transport)
    return protocol, transport


async def settle() -> None:
    for _ in range(50):  # let the request tasks run to their end; no clock involved
        await asyncio.sleep(0)


async def exchange(protocol_class: type[HttpToolsProtocol], app: App, data: bytes) -> Recording:
    protocol, transport = connect(protocol_class, app)
    protocol.data_received(data)
    await settle()
    protocol.connection_lost(None)
    return transport


def sized(body: bytes = b'{"ok":true}', status: int = 200) -> App:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await receive()
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return app


async def empty_204(scope: dict[str, Any], receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 204, "headers": []})
    await send({"type": "http.response.body", "body": b""})


async def in_parts(scope: dict[str, Any], receive: Any, send: Any) -> None:
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"6")]}
    )
    await send({"type": "http.response.body", "body": b"abc", "more_body": True})
    await send({"type": "http.response.body", "body": b"def"})


async def fails_after_start(scope: dict[str, Any], receive: Any, send: Any) -> None:
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"6")]}
    )
    raise RuntimeError("boom")


async def fails_before_start(scope: dict[str, Any], receive: Any, send: Any) -> None:
    raise RuntimeError("boom")


async def echo(scope: dict[str, Any], receive: Any, send: Any) -> None:
    body = (await receive())["body"]
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-length", b"%d" % len(body))],
        }
    )
    await send({"type": "http.response.body", "body": body})


GET = b"GET /x HTTP/1.1\r\nHost: a\r\n\r\n"
CASES: list[tuple[str, App, bytes]] = [
    ("a sized JSON answer", sized(), GET),
    ("an error answer", sized(b'{"error":{}}', 409), GET),
    ("a 204 without a length", empty_204, GET),
    ("HEAD of a sized answer", sized(), b"HEAD /x HTTP/1.1\r\nHost: a\r\n\r\n"),
    (
        "a request asking to close",
        sized(),
        b"GET /x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    ),
    ("HTTP/1.0", sized(), b"GET /x HTTP/1.0\r\nHost: a\r\n\r\n"),
    ("a sized body in two parts", in_parts, GET),
    ("an exception after the start", fails_after_start, GET),
    ("an exception before the start", fails_before_start, GET),
    (
        "two pipelined requests",
        echo,
        b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\none"
        b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\ntwo",
    ),
    (
        "100-continue",
        echo,
        b"POST /x HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nhi",
    ),
    ("a malformed request", sized(), b"GET /x HTTP/1.1\r\nHost a\r\n\r\n"),
    (
        "a body past the head cap in the head's read",
        echo,
        b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 200000\r\n\r\n" + b"b" * 200_000,
    ),
    (
        "a pipelined request after a body past the head cap",
        echo,
        b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 100000\r\n\r\n"
        + b"b" * 100_000
        + b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\ntwo",
    ),
]


@pytest.mark.parametrize(("name", "app", "data"), CASES, ids=[c[0] for c in CASES])
async def test_the_guarded_protocol_writes_the_bytes_uvicorn_writes(
    name: str, app: App, data: bytes
) -> None:
    plain = await exchange(HttpToolsProtocol, app, data)
    guarded = await exchange(guarded_protocol(15.0, 2048), app, data)

    assert b"".join(guarded.writes) == b"".join(plain.writes)
    assert guarded.closed == plain.closed


@pytest.mark.parametrize("app", [sized(), sized(b"x" * 100_000), empty_204])
async def test_a_response_with_a_known_length_leaves_in_one_write(app: App) -> None:
    guarded = await exchange(guarded_protocol(15.0, 2048), app, GET)

    assert len(guarded.writes) == 1
    assert guarded.writes[0].startswith(b"HTTP/1.1 ")


async def test_a_sized_body_sent_in_parts_carries_its_head_in_the_first_part() -> None:
    guarded = await exchange(guarded_protocol(15.0, 2048), in_parts, GET)

    assert guarded.writes == [b"HTTP/1.1 200 OK\r\ncontent-length: 6\r\n\r\nabc", b"def"]


async def test_a_streamed_response_sends_its_head_before_its_first_chunk() -> None:
    seen_before_first_chunk: list[bytes] = []
    transport_of: list[Recording] = []

    async def stream(scope: dict[str, Any], receive: Any, send: Any) -> None:
        headers = [(b"content-type", b"text/event-stream")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        seen_before_first_chunk.extend(transport_of[0].writes)
        await send({"type": "http.response.body", "body": b"data: 1\n\n", "more_body": True})
        await send({"type": "http.response.body", "body": b""})

    protocol_class = guarded_protocol(15.0, 2048)
    config = uvicorn.Config(stream, http=protocol_class, log_level="critical")
    protocol = protocol_class(config, ServerState(), {})  # type: ignore[call-arg]
    transport_of.append(Recording())
    protocol.connection_made(transport_of[0])
    protocol.data_received(GET)
    for _ in range(20):
        await asyncio.sleep(0)

    assert len(seen_before_first_chunk) == 1
    assert b"transfer-encoding: chunked" in seen_before_first_chunk[0]
    assert transport_of[0].writes[1:] == [b"9\r\ndata: 1\n\n\r\n", b"0\r\n\r\n"]


# -- the head cap -------------------------------------------------------------------------------


@pytest.mark.parametrize("piece", [1, 1000, 65_536, 2**20])
async def test_a_head_past_the_cap_is_answered_431_once_and_closed_however_it_arrives(
    piece: int,
) -> None:
    protocol, transport = connect(guarded_protocol(15.0, 2048), sized())
    head = b"GET /x HTTP/1.1\r\nHost: a\r\nX-Pad: " + b"a" * (HEAD_LIMIT + piece)
    for start in range(0, len(head), piece):
        if transport.closed:
            break
        protocol.data_received(head[start : start + piece])
    await settle()

    assert transport.closed
    assert len(transport.writes) == 1
    assert transport.writes[0].startswith(b"HTTP/1.1 431 ")
    assert transport.writes[0].endswith(
        b'"code": "header_too_large", "message": '
        b'"the request line and headers exceed 65536 bytes", '
        b'"detail": {}}}'
    )


async def test_the_cap_counts_each_head_afresh_after_a_request_on_the_same_connection() -> None:
    protocol, transport = connect(guarded_protocol(15.0, 2048), sized())
    near = HEAD_LIMIT - 100
    for _ in range(3):
        protocol.data_received(b"GET /x HTTP/1.1\r\nHost: a\r\nX-Pad: " + b"a" * near + b"\r\n\r\n")
        await settle()

    assert not transport.closed
    assert [w[:15] for w in transport.writes] == [b"HTTP/1.1 200 OK"] * 3


async def test_a_head_past_the_cap_while_an_answer_is_being_sent_only_closes() -> None:
    release = asyncio.Event()

    async def slow(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await release.wait()
        await sized()(scope, receive, send)

    protocol, transport = connect(guarded_protocol(15.0, 2048), slow)
    protocol.data_received(GET)
    await settle()
    protocol.data_received(b"GET /x HTTP/1.1\r\nX-Pad: " + b"a" * HEAD_LIMIT)

    assert transport.closed
    assert transport.writes == []  # no 431 in the middle of another answer's bytes
    release.set()
    await settle()


# -- the sweep: read deadline and keep-alive ---------------------------------------------------


async def test_a_silent_connection_is_closed_at_its_read_deadline_not_before() -> None:
    protocol, transport = connect(guarded_protocol(15.0, 2048), sized())
    born = protocol.loop.time()

    protocol.close_if_due(born + 14.9)
    assert not transport.closed
    protocol.close_if_due(born + 15.0)
    assert transport.closed


async def test_after_an_answer_an_idle_connection_is_closed_at_the_keep_alive_timeout() -> None:
    protocol, transport = connect(guarded_protocol(15.0, 2048), sized(), keep_alive=5.0)
    protocol.data_received(GET)
    await settle()
    answered = protocol.loop.time()

    protocol.close_if_due(answered + 4.9)
    assert not transport.closed
    protocol.close_if_due(answered + 5.1)
    assert transport.closed
    assert b"".join(transport.writes).startswith(b"HTTP/1.1 200 OK")


async def test_a_half_sent_request_cancels_the_keep_alive_but_not_the_read_deadline() -> None:
    protocol, transport = connect(guarded_protocol(15.0, 2048), sized(), keep_alive=5.0)
    protocol.data_received(GET)
    await settle()
    answered = protocol.loop.time()
    protocol.data_received(b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Le")

    protocol.close_if_due(answered + 10.0)
    assert not transport.closed
    protocol.close_if_due(answered + 15.1)
    assert transport.closed


async def test_a_connection_being_answered_is_never_closed_by_the_sweep() -> None:
    release = asyncio.Event()

    async def slow(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await release.wait()
        await sized()(scope, receive, send)

    protocol, transport = connect(guarded_protocol(1.0, 2048), slow, keep_alive=1.0)
    protocol.data_received(GET)
    await settle()

    protocol.close_if_due(protocol.loop.time() + 3600.0)
    assert not transport.closed
    release.set()
    await settle()
    assert b"".join(transport.writes).startswith(b"HTTP/1.1 200 OK")


async def test_the_sweep_is_armed_while_connections_are_open_and_stops_after() -> None:
    protocol_class = guarded_protocol(15.0, 2048)
    protocol, _ = connect(protocol_class, sized())
    sweep = protocol_class.sweep  # type: ignore[attr-defined]
    assert sweep.handle is not None

    sweep.run(protocol.loop, protocol.connections)
    assert sweep.handle is not None  # re-armed: a connection is open
    protocol.connection_lost(None)
    sweep.handle.cancel()
    sweep.run(protocol.loop, protocol.connections)
    assert sweep.handle is None


async def test_the_servers_config_builds_no_access_log_lines() -> None:
    config = uvicorn_config(sized(), "127.0.0.1", 0, Settings(_env_file=None))  # type: ignore[call-arg]
    protocol = config.http(config, ServerState(), {})  # type: ignore[operator]

    assert protocol.access_log is False  # nothing is written at "warning" anyway


def test_the_installed_uvicorn_is_the_version_the_internals_are_written_for() -> None:
    assert uvicorn.__version__ == UVICORN_PIN, (
        f"uvicorn {uvicorn.__version__} is installed, transport/uvicorn_internals.py reaches into "
        f"{UVICORN_PIN}: read that module against the new uvicorn, run this file, then move the pin"
    )
