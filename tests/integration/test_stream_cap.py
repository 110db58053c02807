"""The event-stream cap: past `max_streams` open streams, a new one is refused 503, and says why.

A stream whose client never reads keeps its connection and what the server
had buffered for it; 2,000 of them held about 0.9 GB (issue 24). Now at most
`CODEFLEET_MAX_STREAMS` streams are open at once (256 by default): the next
is answered 503 `too_many_streams` in the error envelope, and a slot frees
as soon as a stream ends. Streams are opened over raw loopback sockets that
never read past the answer's head, as such a client would.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Awaitable, Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from codefleet.api.client import FleetClient, ServerUnavailable
from codefleet.config import DEFAULT_MAX_STREAMS
from codefleet.server.thread import ServerThread

RECV_TIMEOUT_S = 20.0  # a bound on a hang, not a speed claim


@contextmanager
def stream(server: ServerThread) -> Iterator[tuple[int, bytes]]:
    """Open `/events/stream`, read the answer's status and first chunk, then never read again."""
    sock = socket.create_connection((server.settings.host, server.settings.port))
    with sock:
        sock.settimeout(RECV_TIMEOUT_S)
        sock.sendall(b"GET /events/stream?since=0 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        first = sock.recv(65_536)
        yield int(first.split(b" ", 2)[1]), first


def test_past_the_default_cap_a_new_stream_is_refused_503_with_a_reason(
    server: ServerThread,
) -> None:
    with ExitStack() as opened:
        statuses = [opened.enter_context(stream(server))[0] for _ in range(DEFAULT_MAX_STREAMS)]
        status, answer = opened.enter_context(stream(server))

    assert set(statuses) == {200}
    assert status == 503
    error = json.loads(answer.partition(b"\r\n\r\n")[2])["error"]
    assert error["code"] == "too_many_streams"
    assert f"{DEFAULT_MAX_STREAMS} event streams are open" in error["message"]


async def test_a_slot_frees_when_a_stream_ends(
    make_server: Callable[..., ServerThread], wait_until: Callable[..., Awaitable[Any]]
) -> None:
    server = make_server(max_streams=1)
    with stream(server) as (first, _), stream(server) as (second, _):
        pass

    def served() -> bool:  # the server notices the first stream's end a moment later
        with stream(server) as (status, _):
            return status == 200

    assert (first, second) == (200, 503)
    assert await wait_until(served)


async def test_the_client_reads_a_refused_stream_as_the_server_being_unavailable(
    make_server: Callable[..., ServerThread],
) -> None:
    server = make_server(max_streams=1)
    with stream(server):
        async with FleetClient(server.url) as client:
            try:
                await anext(client.stream())
            except ServerUnavailable as err:
                refused = str(err)

    assert refused.startswith("too_many_streams: 1 event streams are open")
