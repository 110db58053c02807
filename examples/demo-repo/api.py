"""A transport-free API over the bookmark store.

Handlers are plain functions `(store, request) -> Response`, listed in the
`ROUTES` table. `App.handle` matches a method and path against the table,
runs the request through the registered middleware (first added runs
outermost) and translates domain errors into status codes:
`ValidationError` -> 400, `NotFound` or an unknown path -> 404, a known path
with the wrong method -> 405. There is no HTTP server here on purpose: tests
call `App.handle` directly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from models import ValidationError
from store import BookmarkStore, NotFound


@dataclass
class Request:
    method: str
    path: str
    body: dict[str, Any] = field(default_factory=dict)
    query: dict[str, str] = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)


@dataclass
class Response:
    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


Handler = Callable[[BookmarkStore, Request], Response]
CallNext = Callable[[Request], Response]
Middleware = Callable[[Request, CallNext], Response]


def bookmark_id(request: Request) -> int:
    """Return the `{id}` path parameter as an int; a non-number is a 404."""
    try:
        return int(request.params["id"])
    except ValueError:
        raise NotFound(f"no bookmark with id {request.params['id']!r}") from None


def list_bookmarks(store: BookmarkStore, request: Request) -> Response:
    return Response(200, [bookmark.to_dict() for bookmark in store.list_bookmarks()])


def create_bookmark(store: BookmarkStore, request: Request) -> Response:
    body = request.body
    bookmark = store.add(body.get("url", ""), body.get("title", ""), body.get("tags", ()))
    return Response(201, bookmark.to_dict())


def get_bookmark(store: BookmarkStore, request: Request) -> Response:
    return Response(200, store.get(bookmark_id(request)).to_dict())


# Route table: (method, path pattern, handler). `{name}` matches one segment.
ROUTES: list[tuple[str, str, Handler]] = [
    ("GET", "/bookmarks", list_bookmarks),
    ("POST", "/bookmarks", create_bookmark),
    ("GET", "/bookmarks/{id}", get_bookmark),
]


def match_path(pattern: str, path: str) -> dict[str, str] | None:
    """Return the captured parameters if `path` fits `pattern`, else None."""
    want, got = pattern.strip("/").split("/"), path.strip("/").split("/")
    if len(want) != len(got):
        return None
    params: dict[str, str] = {}
    for expected, actual in zip(want, got, strict=True):
        if expected.startswith("{") and expected.endswith("}"):
            params[expected[1:-1]] = actual
        elif expected != actual:
            return None
    return params


class App:
    """The route table bound to one store, plus its middleware stack."""

    def __init__(self, store: BookmarkStore) -> None:
        self.store = store
        self.routes = list(ROUTES)
        self.middleware: list[Middleware] = []

    def add_middleware(self, middleware: Middleware) -> None:
        self.middleware.append(middleware)

    def handle(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        query: dict[str, str] | None = None,
    ) -> Response:
        """Serve one request through the middleware stack."""
        call: CallNext = self.dispatch
        for middleware in reversed(self.middleware):
            call = _wrap(middleware, call)
        return call(Request(method.upper(), path, dict(body or {}), dict(query or {})))

    def dispatch(self, request: Request) -> Response:
        """Find the handler for `request` and run it, mapping errors to statuses."""
        path_known = False
        for method, pattern, handler in self.routes:
            params = match_path(pattern, request.path)
            if params is None:
                continue
            path_known = True
            if method == request.method:
                request.params = params
                try:
                    return handler(self.store, request)
                except ValidationError as exc:
                    return Response(400, {"error": str(exc)})
                except NotFound as exc:
                    return Response(404, {"error": str(exc)})
        if path_known:
            return Response(405, {"error": f"{request.method} not allowed on {request.path}"})
        return Response(404, {"error": f"no route for {request.path}"})


def _wrap(middleware: Middleware, call_next: CallNext) -> CallNext:
    return lambda request: middleware(request, call_next)


def create_app(store: BookmarkStore | None = None) -> App:
    """Build an app over `store` (a fresh one by default) with the default middleware."""
    app = App(store if store is not None else BookmarkStore())
    # Default middleware is registered here; the first one added runs outermost.
    return app
