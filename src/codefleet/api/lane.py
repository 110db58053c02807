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
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any, Final

from codefleet.api.http1 import Origin, header_lines, parse_head, request_bytes

__all__ = ["Lane", "LaneError"]

MAX_IDLE: Final = 4  # idle connections kept per lane; a runner asks one lease at a time


class LaneError(Exception):
    """The server could not be reached, timed out, or answered outside the lane's subset."""


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
    """(status, content length, keep-alive) of the answer's head."""
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
        parsed = parse_head(head)
    except ValueError as err:
        raise LaneError(f"unreadable answer: {err}") from None
    if parsed.transfer_encoding:
        raise LaneError(f"transfer-encoding {parsed.transfer_encoding} is not for the lane")
    return parsed.status, parsed.length or 0, parsed.keep_alive
