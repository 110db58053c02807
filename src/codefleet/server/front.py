"""The one ASGI layer in front of the app: the guards as calls, then a shortcut, then the app.

Every request from uvicorn reaches `Front` first. One pass over the headers
reads what the guards need (`Host`, `Authorization` and `Content-Length`, the
last value given of each); `guards.Guards` refuses (403, 401, 413) before
anything else runs; then the `Shortcut` (the transport's fast path,
`transport.fastpath.FastPath`, wired by the app factory) may answer the
request with no other layer between it and the engine; every other request,
and every one the shortcut hands back, goes to FastAPI (its middleware,
router and handlers) as before. The front knows nothing of the shortcut's
routes or headers. A body without a declared length is counted while it is
read on either path, and one that passes the limit is refused 413 as before.

An unexpected exception on the fast path is answered by the app's own 500
handler and re-raised, as Starlette's `ServerErrorMiddleware` does for routes
(docs/decisions/0063-the-lease-path-one-layer-in-front-of-the-app.md, "The lease path: one layer in front of the app").
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from codefleet.transport.guards import Guards, TooLarge, counted, envelope, send_json

__all__ = ["Front", "Shortcut"]

ErrorHandler = Callable[[Request, Exception], Awaitable[Response]]


class Shortcut(Protocol):
    """A layer that may answer a request itself, before the app (the front's one interface)."""

    async def answer(self, scope: Scope, receive: Receive, send: Send) -> Receive | None:
        """None once answered; else the request is the app's, its body read from the result."""
        ...


class Front:
    """ASGI: guards, then the fast path's routes, then `app` (FastAPI) for the rest."""

    def __init__(
        self, app: ASGIApp, guards: Guards, fast: Shortcut | None, on_error: ErrorHandler
    ) -> None:
        self.app = app
        self.guards = guards
        self.fast = fast  # None: FastAPI answers every route (the fast path's reference)
        self.on_error = on_error

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._not_http(scope, receive, send)
            return
        host = authorization = b""
        length = None
        for name, value in scope["headers"]:
            if name == b"host":
                host = value
            elif name == b"authorization":
                authorization = value
            elif name == b"content-length":
                length = value
        refused = self.guards.refusal(scope["method"], scope["path"], host, authorization, length)
        if refused is not None:
            await send_json(send, *refused)
        elif length is None:  # chunked, or no body at all: count what arrives
            await self._counted(scope, receive, send)
        else:
            await self._route(scope, receive, send)

    async def _route(self, scope: Scope, receive: Receive, send: Send) -> None:
        fast = self.fast
        if fast is None:
            await self.app(scope, receive, send)
            return
        try:
            replay = await fast.answer(scope, receive, send)
        except TooLarge:
            raise
        except Exception as exc:  # not a refusal: the app's 500 answer, then uvicorn's log
            response = await self.on_error(Request(scope), exc)
            await response(scope, receive, send)
            raise
        if replay is not None:
            await self.app(scope, replay, send)

    async def _counted(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = False

        async def tracked_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self._route(scope, counted(receive, self.guards.limit), tracked_send)
        except TooLarge:
            if not started:
                await send_json(send, 413, self.guards.too_large())

    async def _not_http(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The lifespan passes; a WebSocket meets the Host check alone, as every route did."""
        hosts = self.guards.hosts
        if scope["type"] == "websocket" and hosts is not None:
            raw = dict(scope.get("headers") or []).get(b"host", b"")
            refused = hosts.refusal(raw)
            if refused is not None:
                await send_json(send, 403, envelope("host_not_allowed", refused))
                return
        await self.app(scope, receive, send)
