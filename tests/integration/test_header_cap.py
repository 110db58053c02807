"""The request-head cap: a request line and headers past 64 KiB are refused 431, then closed.

Against a real server with a token, over a raw loopback socket (no client
library would send such a request): a head that passes `HEAD_LIMIT` is
answered `431` in the error envelope and the connection is closed, whatever
the request would otherwise have been (no token, a huge URL, a header that
never ends); a head just under the cap is served as before. Before the cap the
server read any head to its end, with parsing work that grew with its square
(issue 24, item 1).
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Callable, Iterator

import pytest

from codefleet.server.thread import ServerThread
from codefleet.transport.uvicorn_internals import HEAD_LIMIT

TOKEN = "s3cret-token-for-tests"
RECV_TIMEOUT_S = 20.0  # a bound on a hang, not a speed claim


@pytest.fixture
def guarded(make_server: Callable[..., ServerThread]) -> ServerThread:
    return make_server(token=TOKEN)


def exchange(server: ServerThread, request: bytes) -> bytes:
    """Send `request` from a thread while reading everything the server says until it closes."""
    sock = socket.create_connection((server.settings.host, server.settings.port))
    sock.settimeout(RECV_TIMEOUT_S)

    def send() -> None:
        with contextlib.suppress(OSError):  # the server closed while the rest was being sent
            sock.sendall(request)

    sender = threading.Thread(target=send)
    sender.start()
    try:
        return b"".join(_until_closed(sock))
    finally:
        sender.join(RECV_TIMEOUT_S)
        sock.close()


def _until_closed(sock: socket.socket) -> Iterator[bytes]:
    while True:
        try:
            chunk = sock.recv(65_536)
        except ConnectionResetError:  # a reset after the answer: the answer was read already
            return
        if not chunk:
            return
        yield chunk


def status_and_body(answer: bytes) -> tuple[int, dict[str, object]]:
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), json.loads(body)


def test_a_header_past_the_cap_is_refused_431_and_the_connection_closed(
    guarded: ServerThread,
) -> None:
    request = b"GET /state HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: " + b"a" * 2**20 + b"\r\n\r\n"

    answer = exchange(guarded, request)

    status, body = status_and_body(answer)
    assert status == 431
    assert body["error"]["code"] == "header_too_large"  # type: ignore[index]
    assert b"connection: close" in answer.lower()


def test_a_request_line_past_the_cap_is_refused_431(guarded: ServerThread) -> None:
    request = b"GET /health?" + b"q" * (HEAD_LIMIT + 1) + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"

    status, _ = status_and_body(exchange(guarded, request))

    assert status == 431


def test_many_small_headers_past_the_cap_in_all_are_refused_431(guarded: ServerThread) -> None:
    headers = b"".join(b"X-H%d: %s\r\n" % (i, b"v" * 100) for i in range(1000))
    request = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n" + headers + b"\r\n"

    status, _ = status_and_body(exchange(guarded, request))

    assert status == 431


def test_a_head_just_under_the_cap_is_served_as_before(guarded: ServerThread) -> None:
    start = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nX-Pad: "
    pad = b"a" * (HEAD_LIMIT - len(start) - 4 - 200)
    request = start + pad + b"\r\n\r\n"

    status, body = status_and_body(exchange(guarded, request))

    assert status == 200
    assert body["status"] == "ok"
