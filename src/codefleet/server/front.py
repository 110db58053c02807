"""The one ASGI layer in front of the app: the guards as calls, then the runner fast path.

Every request from uvicorn reaches `Front` first. One pass over the headers
reads what the guards and the fast path need (`Host`, `Authorization` and
`Content-Length` as the last value given, `Content-Type` and `X-Agent-Epoch`
as the first, as the guards and FastAPI each read them); `guards.Guards`
refuses (403, 401, 413) before anything else runs; a hot runner route is
answered by `runner_routes.RunnerRoutes` with no other layer between it and
the engine; every other request, and every one the fast path hands back, goes
to FastAPI (its middleware, router and handlers) as before. A body without a
declared length is counted while it is read on either path, and one that
passes the limit is refused 413 as before.

An unexpected exception on the fast path is answered by the app's own 500
handler and re-raised, as Starlette's `ServerErrorMiddleware` does for routes
(docs/decisions.md, "The lease path: one layer in front of the app").
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from codefleet.server.guards import Guards, TooLarge, counted, envelope, send_json
from codefleet.server.runner_routes import Head, RunnerRoutes

__all__ = ["Front"]

ErrorHandler = Callable[[Request, Exception], Awaitable[Response]]


class Front:
    """ASGI: guards, then the fast path's routes, then `app` (FastAPI) for the rest."""

    def __init__(
        self, app: ASGIApp, guards: Guards, fast: RunnerRoutes | None, on_error: ErrorHandler
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
        length = content_type = epoch = None
        for name, value in scope["headers"]:
            if name == b"host":
                host = value
            elif name == b"authorization":
                authorization = value
            elif name == b"content-length":
                length = value
            elif name == b"content-type":
                content_type = value if content_type is None else content_type
            elif name == b"x-agent-epoch":
                epoch = value if epoch is None else epoch
        refused = self.guards.refusal(scope["method"], scope["path"], host, authorization, length)
        if refused is not None:
            await send_json(send, *refused)
        elif length is None:  # chunked, or no body at all: count what arrives
            await self._counted(scope, receive, send, (content_type, epoch))
        else:
            await self._route(scope, receive, send, (content_type, epoch))

    async def _route(self, scope: Scope, receive: Receive, send: Send, head: Head) -> None:
        fast = self.fast
        found = fast.match(scope) if fast is not None else None
        if found is None:
            await self.app(scope, receive, send)
            return
        assert fast is not None
        try:
            replay = await fast.answer(found, head, scope, receive, send)
        except TooLarge:
            raise
        except Exception as exc:  # not a refusal: the app's 500 answer, then uvicorn's log
            response = await self.on_error(Request(scope), exc)
            await response(scope, receive, send)
            raise
        if replay is not None:
            await self.app(scope, replay, send)

    async def _counted(self, scope: Scope, receive: Receive, send: Send, head: Head) -> None:
        started = False

        async def tracked_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self._route(scope, counted(receive, self.guards.limit), tracked_send, head)
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
