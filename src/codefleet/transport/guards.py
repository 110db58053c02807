"""The guards every request meets: the Host check, the bearer token, the body-size limit.

`Guards.refusal` is one plain function over what `front.Front` read from the
headers in its one pass, checked in this order:

- the Host check (`hostcheck.HostNames`, only on a server without a token):
  403 `host_not_allowed`, on HTTP and WebSocket requests;
- the token: when the server has one, every HTTP request must carry
  `Authorization: Bearer <token>` (compared in constant time), or it is 401
  `unauthorized`. Exempt: `/health`, and a GET or HEAD of the web dashboard's
  static shell (`/` and `/web/<file>`: HTML, CSS, JS, no data; every read the
  page makes sends the token);
- the body limit: a `Content-Length` above `MAX_BODY_BYTES` (or not a number)
  is 413 `too_large` before the body is read. A body without a declared length
  (chunked) is counted while it is read (`counted`), so an oversized request
  never reaches a handler or the database.

Each refusal leaves in the error envelope, before any route runs.
"""

from __future__ import annotations

import hmac
import json
import re
from dataclasses import dataclass
from typing import Final

from starlette.exceptions import HTTPException
from starlette.types import Message, Receive, Send

from codefleet.api.wire import MAX_BODY_BYTES
from codefleet.transport.hostcheck import HostNames

__all__ = ["Guards", "TooLarge", "counted", "envelope", "send_json"]

# The web dashboard's static files: a flat directory, so no slash or `..` can follow `web/`.
PUBLIC_SHELL: Final = re.compile(r"/(?:web/[A-Za-z0-9_-]+\.[a-z]{1,4})?")
Refusal = tuple[int, bytes]  # status and envelope


class TooLarge(HTTPException):
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


UNAUTHORIZED: Final = envelope(
    "unauthorized", "a valid 'Authorization: Bearer <token>' is required"
)


@dataclass(frozen=True, slots=True)
class Guards:
    """The server's guards: `hosts` without a token, `expected` (b"Bearer <token>") with one."""

    hosts: HostNames | None
    expected: bytes | None
    limit: int = MAX_BODY_BYTES

    @classmethod
    def of(cls, token: str | None, hosts: HostNames) -> Guards:
        """With a token the token is the guard; without one, the Host check."""
        return cls(None, f"Bearer {token}".encode()) if token else cls(hosts, None)

    def refusal(
        self, method: str, path: str, host: bytes, authorization: bytes, length: bytes | None
    ) -> Refusal | None:
        """The HTTP request's refusal (status, envelope), or None when it may pass."""
        if self.hosts is not None and (refused := self.hosts.refusal(host)) is not None:
            return 403, envelope("host_not_allowed", refused)
        expected = self.expected
        if (
            expected is not None
            and not hmac.compare_digest(authorization, expected)
            and not _public(method, path)
        ):
            return 401, UNAUTHORIZED
        if length is not None and (not length.isdigit() or int(length) > self.limit):
            return 413, self.too_large()
        return None

    def too_large(self) -> bytes:
        return envelope("too_large", f"request body exceeds {self.limit} bytes")


def _public(method: str, path: str) -> bool:
    if path == "/health":
        return True
    return method in ("GET", "HEAD") and PUBLIC_SHELL.fullmatch(path) is not None


def counted(receive: Receive, limit: int) -> Receive:
    """`receive`, raising `TooLarge` once the request's body passes `limit` bytes."""
    seen = 0

    async def receive_counted() -> Message:
        nonlocal seen
        message = await receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > limit:
                raise TooLarge(limit)
        return message

    return receive_counted
