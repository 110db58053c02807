"""The fast path: the hot runner routes answered in front of all of FastAPI.

`server.front.Front` calls `FastPath.answer` right after the guards (Host
check, token, body limit): one pre-compiled table built from
`routes.HOT_ROUTES`, `orjson` both ways, the same pydantic models. It answers
only a request it can answer exactly as FastAPI would: a JSON body
(`Content-Type: application/json`) that parses and validates, a canonical
integer `X-Agent-Epoch`, a plain `wait=`. Anything else (every 4xx of bad
input, every odd header) is handed to FastAPI with the body replayed, so
status codes and error envelopes cannot diverge. A domain refusal from the
engine leaves in the same envelope as FastAPI's handler sends; an unexpected
exception propagates to the front, which answers it as the app's 500 handler
does (docs/decisions/0062-hot-routes-a-fast-path-in-front-of-fastapi-that-hands-it.md, "Hot routes").
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final, TypeVar

import orjson
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ValidationError
from starlette.types import Message, Receive, Scope, Send

from codefleet.coord.engine import Engine
from codefleet.errors import DomainError
from codefleet.transport.routes import HOT_ROUTES
from codefleet.transport.routetable import MAX_WAIT_S, Args, Route

__all__ = ["Call", "FastPath", "compile_table", "match"]

JSON_TYPE: Final = b"application/json"
# What FastAPI's lax int and float parsing read exactly like int() and float(); others go to it.
CANONICAL_INT: Final = re.compile(rb"0|-?[1-9][0-9]{0,17}")
PLAIN_WAIT: Final = re.compile(rb"wait=([0-9]{1,2}(?:\.[0-9]{1,6})?)")
PARAM: Final = "/"  # the path parameter's place in a table key: no segment contains a slash
M = TypeVar("M", bound=BaseModel)
Table = dict[tuple[str, ...], Route]


class _Pass(Exception):
    """This request is not for the fast path: FastAPI answers it."""


@dataclass(slots=True)
class Call:
    """One request on the fast path: its path parameter, body, headers and query."""

    param: str
    body: bytes
    content_type: bytes | None  # the first value given, as FastAPI reads it
    epoch_raw: bytes | None  # the first X-Agent-Epoch given
    query: bytes

    def epoch(self) -> int:
        raw = self.epoch_raw
        if raw is None or CANONICAL_INT.fullmatch(raw) is None:
            raise _Pass
        return int(raw)

    def json(self, model: type[M]) -> M:
        if self.content_type != JSON_TYPE or not self.body:
            raise _Pass
        try:
            data = orjson.loads(self.body)
            if not isinstance(data, dict):
                raise _Pass
            return model.model_validate(data, from_attributes=True)
        except (orjson.JSONDecodeError, ValidationError):
            raise _Pass from None

    def wait(self) -> float:
        if not self.query:
            return 0.0
        found = PLAIN_WAIT.fullmatch(self.query)
        if found is None or float(found[1]) > MAX_WAIT_S:
            raise _Pass
        return float(found[1])

    def args(self, route: Route) -> Args:
        """What `route`'s handler gets, validated as FastAPI would; `_Pass` where it might not."""
        body = None
        if route.body is not None and (self.body or not route.optional_body):
            body = self.json(route.body)
        return Args(self.param, body, self.epoch(), self.wait() if route.waits else 0.0)


def compile_table(routes: Iterable[Route]) -> Table:
    """Key each route by (method, *segments), its one parameter segment as "/" (never a segment)."""
    table: Table = {}
    for route in routes:
        segments = route.path[1:].split("/")
        assert sum(s.startswith("{") for s in segments) <= 1, route.path
        table[(route.method, *(PARAM if s.startswith("{") else s for s in segments))] = route
    return table


def match(table: Table, method: str, path: str) -> tuple[Route, str] | None:
    """The route and path parameter for this request, as Starlette's `[^/]+` would match."""
    segments = path[1:].split("/")
    found = table.get((method, *segments))
    if found is not None:
        return found, ""
    if len(segments) == 3 and segments[1]:
        found = table.get((method, segments[0], PARAM, segments[2]))
        if found is not None:
            return found, segments[1]
    return None


class FastPath:
    """The hot runner routes answered from the table: `server.front.Shortcut` for `Front`."""

    def __init__(self, engine: Engine, routes: Iterable[Route] = HOT_ROUTES) -> None:
        self.engine = engine
        self.table = compile_table(routes)

    async def answer(self, scope: Scope, receive: Receive, send: Send) -> Receive | None:
        """Answer the request (None); or return the receive FastAPI reads its body from.

        An unexpected exception propagates before anything is sent."""
        found = (
            None if scope.get("root_path") else match(self.table, scope["method"], scope["path"])
        )
        if found is None:
            return receive
        route, param = found
        messages, body, whole = await _read(receive)
        try:
            if not whole:
                raise _Pass
            content_type, epoch = _head(scope["headers"])
            call = Call(param, body, content_type, epoch, scope.get("query_string", b""))
            status, data = await route.handler(self.engine, call.args(route))
        except _Pass:
            return _replay(messages, receive)
        except DomainError as exc:  # the app's DomainError handler's answer, exactly
            await JSONResponse(exc.envelope(), exc.status)(scope, receive, send)
            return None
        await _send(send, status, data)
        return None


def _head(headers: Iterable[tuple[bytes, bytes]]) -> tuple[bytes | None, bytes | None]:
    """The first `Content-Type` and `X-Agent-Epoch` values, as FastAPI reads each."""
    content_type = epoch = None
    for name, value in headers:
        if name == b"content-type":
            content_type = value if content_type is None else content_type
        elif name == b"x-agent-epoch":
            epoch = value if epoch is None else epoch
    return content_type, epoch


async def _read(receive: Receive) -> tuple[list[Message], bytes, bool]:
    """Every message of the request body, the body, and whether it arrived whole."""
    messages: list[Message] = []
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            return messages, b"", False  # a disconnect: FastAPI answers it as it would
        if not message.get("more_body", False):
            break
    body = b"".join(m.get("body", b"") for m in messages)
    return messages, body, True


def _replay(messages: list[Message], receive: Receive) -> Receive:
    pending = deque(messages)

    async def replayed() -> Message:
        return pending.popleft() if pending else await receive()

    return replayed


def _encode(data: Any) -> bytes:
    try:
        return orjson.dumps(data)
    except TypeError:  # what orjson does not take (a non-str key): as JSONResponse renders
        return json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


async def _send(send: Send, status: int, data: Any) -> None:
    if status == 204:
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        return
    body = _encode(data)
    headers = [(b"content-length", str(len(body)).encode()), (b"content-type", JSON_TYPE)]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
