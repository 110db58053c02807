"""ASGI guards in front of every route: the bearer token and the body-size limit.

`TokenAuth`: when the server has a token, every request must carry
`Authorization: Bearer <token>` (compared in constant time), or it is refused
with 401 in the error envelope. Exempt: `/health`, and a GET or HEAD of the web
dashboard's static shell (`/` and `/web/<file>`: HTML, CSS, JS, no data; every
read the page makes sends the token).

`BodyLimit`: bodies above `MAX_BODY_BYTES` are refused with 413, checked from
`Content-Length` before the body is read and counted while reading chunked
uploads, so an oversized request never reaches a handler or the database.
"""

from __future__ import annotations

import hmac
import json
import re
from typing import Final

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from codefleet.api.wire import MAX_BODY_BYTES

__all__ = ["BodyLimit", "TokenAuth", "envelope", "send_json"]

# The web dashboard's static files: a flat directory, so no slash or `..` can follow `web/`.
PUBLIC_SHELL: Final = re.compile(r"/(?:web/[A-Za-z0-9_-]+\.[a-z]{1,4})?")


class _TooLarge(HTTPException):
    """Raised while a chunked body is read. An HTTPException, because FastAPI's body parser
    turns any other exception into a 400 but re-raises this one to the app's 413 handler."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"request body exceeds {limit} bytes")


def envelope(code: str, message: str) -> bytes:
    return json.dumps({"error": {"code": code, "message": message, "detail": {}}}).encode()


async def send_json(send: Send, status: int, body: bytes) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class TokenAuth:
    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode() if token else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.expected is None or scope["type"] != "http" or _public(scope):
            await self.app(scope, receive, send)
            return
        given = dict(scope.get("headers") or []).get(b"authorization", b"")
        if not hmac.compare_digest(given, self.expected):
            body = envelope("unauthorized", "a valid 'Authorization: Bearer <token>' is required")
            await send_json(send, 401, body)
            return
        await self.app(scope, receive, send)


def _public(scope: Scope) -> bool:
    path = str(scope.get("path", ""))
    if path == "/health":
        return True
    return scope.get("method") in ("GET", "HEAD") and PUBLIC_SHELL.fullmatch(path) is not None


class BodyLimit:
    def __init__(self, app: ASGIApp, limit: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.limit):
            await self._refuse(send)
            return
        seen = 0
        started = False

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise _TooLarge(self.limit)
            return message

        async def tracked_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, tracked_send)
        except _TooLarge:
            if not started:
                await self._refuse(send)

    async def _refuse(self, send: Send) -> None:
        message = f"request body exceeds {self.limit} bytes"
        await send_json(send, 413, envelope("too_large", message))
