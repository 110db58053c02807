"""A lean keep-alive HTTP/1.1 lane for every JSON call of the wire API, over asyncio streams.

Every write of every agent waits on one `POST /leases/acquire`, and every
check reads the pre-images other tasks hold. Through httpx a call costs about
0.6 to 1 ms of client CPU on the project's machine (request, URL and header
objects, h11, the response wrapper), more than the server's answer; over a
bare keep-alive socket it costs about a tenth of that (decisions 0172, 0176). The lane
speaks only what the server's JSON answers need: plain http, one request at a
time per connection (a small pool of idle connections for concurrent calls),
`Content-Length` bodies. Anything else it cannot read raises `LaneError`. The
HTTP it speaks is `api.http1`'s, shared with the blocking client of the
person's hook and the fast commands (`api.blockingclient`).
`FleetClient` owns the lane (paths, headers and error decoding stay there) and
uses it only for an http:// server it reaches without an injected transport.

A request sent on a reused connection that the server had closed meanwhile
(its keep-alive timeout) is sent once more on a fresh connection, only when
not a byte of an answer came back and only when the caller says it may be
(`resend`: a GET, a task re-acquiring its own path). A call that changes
something is sent once: an idle connection the server is known to have closed
is skipped, and one that closes under the request is a `LaneError`, as httpx
fails such a call.

`frames` reads the event stream (`GET /events/stream`, a chunked answer of
server-sent events) on a connection of its own, frame by frame: a follower
that wants some event types parses only theirs (decision 0176).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any, Final

from codefleet.api.http1 import Head, Origin, header_lines, parse_head, request_bytes

__all__ = ["Frame", "Lane", "LaneError", "LaneRefused"]

MAX_IDLE: Final = 4  # idle connections kept per lane; a runner asks one lease at a time


Frame = tuple[str, bytes]  # one server-sent event: its `event:` type, its `data:` lines


class LaneError(Exception):
    """The server could not be reached, timed out, or answered outside the lane's subset."""


class LaneRefused(LaneError):
    """The server answered a stream with an error: its status and body (the envelope)."""

    def __init__(self, status: int, body: bytes) -> None:
        super().__init__(f"HTTP {status}")
        self.status, self.body = status, body


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    def close(self) -> None:
        with contextlib.suppress(OSError, RuntimeError):  # RuntimeError: its loop is closed
            self.writer.close()

    def closed_by_server(self) -> bool:
        """The server's end of this idle connection is known to be closed."""
        return self.reader.at_eof() or self.writer.is_closing()


class Lane:
    """Keep-alive requests to one http:// origin; `request` returns (status, body bytes)."""

    def __init__(self, base_url: str, headers: dict[str, str], timeout: float) -> None:
        origin = Origin.of(base_url)
        if origin.scheme != "http":
            raise ValueError(f"the lane speaks plain http to a host, not {base_url!r}")
        self._host, self._port, self._prefix = origin.host, origin.port, origin.prefix
        self._fixed = header_lines(
            {"Host": origin.netloc, **headers, "Content-Type": "application/json"}
        )
        self._timeout = timeout
        self._idle: list[_Connection] = []

    async def request(
        self,
        method: str,
        path: str,
        body: Any,
        headers: dict[str, str] | None = None,
        timeout: float | None = None,
        *,
        resend: bool = True,
    ) -> tuple[int, bytes]:
        """(status, body) of one call; `resend`: it may go again if a reused connection
        closes before a byte of the answer (only for a call that changes nothing)."""
        extra = header_lines(headers) if headers else ""
        message = request_bytes(method, self._prefix + path, self._fixed + extra, json_body(body))
        bound = self._timeout if timeout is None else timeout
        try:
            async with asyncio.timeout(bound):
                return await self._send(message, resend)
        except TimeoutError:
            raise LaneError(f"{method} {path}: no answer in {bound}s") from None
        except (OSError, asyncio.IncompleteReadError, ValueError) as err:
            raise LaneError(f"{method} {path}: {type(err).__name__}: {err}") from err

    async def _send(self, message: bytes, resend: bool) -> tuple[int, bytes]:
        while self._idle:
            connection = self._idle.pop()
            if connection.closed_by_server():
                connection.close()
                continue
            try:
                return await self._exchange(connection, message)
            except _ClosedBeforeAnswer:
                if not resend:  # it may have been read: a write is never sent twice
                    raise LaneError("the server closed the connection") from None
                continue  # the server closed it while idle: it never read this request
        return await self._exchange(await self._open(), message)

    async def _open(self) -> _Connection:
        reader, writer = await asyncio.open_connection(self._host, self._port)
        return _Connection(reader, writer)

    async def _exchange(self, connection: _Connection, message: bytes) -> tuple[int, bytes]:
        keep = False
        try:
            connection.writer.write(message)
            status, length, keep = await _read_head(connection.reader)
            payload = await connection.reader.readexactly(length) if length else b""
        finally:  # on any failure or cancellation its state is unknown: never reuse it
            if keep and len(self._idle) < MAX_IDLE:
                self._idle.append(connection)
            else:
                connection.close()
        return status, payload

    async def frames(
        self, path: str, headers: dict[str, str] | None, read_timeout: float
    ) -> AsyncIterator[Frame]:
        """The server-sent events of `GET path`, on a connection of its own, until the answer
        ends; silence past `read_timeout` is a `LaneError`, an error answer `LaneRefused`."""
        extra = header_lines(headers) if headers else ""
        message = request_bytes("GET", self._prefix + path, self._fixed + extra, b"")
        connection: _Connection | None = None
        try:
            async with asyncio.timeout(self._timeout):
                connection = await self._open()
                connection.writer.write(message)
                await _stream_head(connection.reader)
            buffer = b""
            async for chunk in _chunks(connection.reader, read_timeout):
                buffer += chunk
                if b"\n\n" in buffer:
                    found, buffer = _split_frames(buffer)
                    for frame in found:
                        yield frame
        except TimeoutError:
            raise LaneError(f"GET {path}: silent for {read_timeout}s") from None
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as err:
            raise LaneError(f"GET {path}: {type(err).__name__}: {err}") from err
        finally:
            if connection is not None:
                connection.close()

    async def aclose(self) -> None:
        idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()


def json_body(body: Any) -> bytes:
    """A request's JSON body, the bytes httpx sends for `json=body` (none for None)."""
    if body is None:
        return b""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


class _ClosedBeforeAnswer(LaneError):
    """The connection ended before the first byte of an answer."""


async def _read_head(reader: asyncio.StreamReader) -> tuple[int, int, bool]:
    """(status, content length, keep-alive) of a sized answer's head."""
    parsed = await _head(reader)
    if parsed.transfer_encoding:
        raise LaneError(f"transfer-encoding {parsed.transfer_encoding} is not for the lane")
    return parsed.status, parsed.length or 0, parsed.keep_alive


async def _stream_head(reader: asyncio.StreamReader) -> None:
    """Read a stream's head; an error answer (sized, with its envelope) is `LaneRefused`."""
    parsed = await _head(reader)
    if parsed.status >= 400 and not parsed.transfer_encoding:
        body = await reader.readexactly(parsed.length) if parsed.length else b""
        raise LaneRefused(parsed.status, body)
    if parsed.status != 200 or parsed.transfer_encoding != "chunked":
        raise LaneError(f"HTTP {parsed.status}, {parsed.transfer_encoding or 'sized'}: no stream")


async def _chunks(reader: asyncio.StreamReader, read_timeout: float) -> AsyncIterator[bytes]:
    """The data of each chunk of a chunked body, each waited for at most `read_timeout`."""
    while True:
        async with asyncio.timeout(read_timeout):
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            if size == 0:
                return
            data = await reader.readexactly(size + 2)
        yield data[:-2]


def _split_frames(buffer: bytes) -> tuple[list[Frame], bytes]:
    """The whole frames at the head of `buffer` that carry data, and what follows them."""
    *whole, rest = buffer.split(b"\n\n")
    frames: list[Frame] = []
    for text in whole:
        kind, data = "message", []
        for line in text.split(b"\n"):
            if line.startswith(b"data:"):
                data.append(line[5:].strip())
            elif line.startswith(b"event:"):
                kind = line[6:].strip().decode()
        if data:
            frames.append((kind, b"\n".join(data)))
    return frames, rest


async def _head(reader: asyncio.StreamReader) -> Head:
    """The answer's head, parsed."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as err:
        if not err.partial:
            raise _ClosedBeforeAnswer("the server closed the connection") from None
        raise LaneError("the answer was cut short") from None
    except ConnectionResetError:  # the server reset it (closed while idle, data unread)
        raise _ClosedBeforeAnswer("the server reset the connection") from None
    except asyncio.LimitOverrunError as err:
        raise LaneError(f"unreadable answer: {err}") from None
    try:
        return parse_head(head)
    except ValueError as err:
        raise LaneError(f"unreadable answer: {err}") from None
