"""One route table's row: each route declared once, and its FastAPI route generated from it.

A `Route` is one row: its name (the operation id), method, path (at most one
`{parameter}`, typed), body model, typed query (or header) parameters, whether it
reads the runner's epoch header and the long poll's `?wait=`, its declared status,
its answer model for the schema, and one handler over the object the route calls.
Rows are grouped by that object: the runner's (`transport.routes`), the
operator's and the reads (`server.httpapp`), a person's (`server.person_routes`),
the landing queue's (`server.landing_routes`), the landed line's
(`server.landed_routes`). `install_routes` gives FastAPI each row as the signature
it would have had written out, so the schema and every validation answer are the
same. A handler sees only `Args`; it answers `(status, data)`: its row's typed
answer (its JSON the keys it set), JSON or an object with `to_wire()` (a hot row's,
whose `answer` is the schema), or a `Response` of its own (docs/decisions/0168-*.md).

FastAPI (pinned: `FASTAPI_PIN`) reads an endpoint's source lines on its first
request, for its error messages; every row's endpoint is the one closure here,
so `install_route` hands each the place read once (`_known_place`, decision 0176).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from types import CodeType, MappingProxyType
from typing import Annotated, Any, Final, NamedTuple

import fastapi.routing
from fastapi import FastAPI, Header, Query
from fastapi.exceptions import EndpointContext
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel

__all__ = [
    "FASTAPI_PIN",
    "MAX_WAIT_S",
    "Answer",
    "Args",
    "Handler",
    "Param",
    "Route",
    "install_route",
    "install_routes",
]

FASTAPI_PIN: Final = "0.163.2"  # `_known_place` fills `fastapi.routing`'s private cache
MAX_WAIT_S: Final = 30.0  # the long poll's longest wait
JSON: Final = "application/json"
Epoch = Annotated[int, Header(alias="X-Agent-Epoch")]
Wait = Annotated[float, Query(ge=0, le=MAX_WAIT_S)]
Answer = tuple[int, Any]  # status and data; (204, None) is an empty answer
NO_QUERY: Final[Mapping[str, Any]] = MappingProxyType({})


class Args(NamedTuple):  # a tuple: built once per hot request, cheaper than a frozen dataclass
    """A request's inputs, validated: the same on the fast path and through FastAPI."""

    param: Any  # the path parameter (its declared type); "" when the path has none
    body: Any  # an instance of the route's body model; None when it has no (or no sent) body
    epoch: int  # the runner's `X-Agent-Epoch`; 0 when the route reads none
    wait: float
    query: Mapping[str, Any] = NO_QUERY  # the row's `query` parameters, by name


class Param(NamedTuple):
    """One typed query parameter (a `Header(...)` in `annotation` makes it a header)."""

    name: str
    annotation: Any
    default: Any = None


Handler = Callable[[Any, Args], Awaitable[Answer]]


@dataclass(frozen=True, slots=True)
class Route:
    """One route: everything FastAPI (and, for `routes.HOT_ROUTES`, the fast path) needs."""

    name: str  # the FastAPI endpoint's name: its operationId and summary in the schema
    method: str
    path: str  # FastAPI's template; at most one `{parameter}` segment
    handler: Handler  # over the object the route's group is installed with
    body: type[BaseModel] | None = None
    optional_body: bool = False  # the body may be left out (heartbeat)
    waits: bool = False  # reads `?wait=` (the long poll)
    status: int = 200  # the declared success status
    epoch: bool = False  # reads the runner's `X-Agent-Epoch` header
    query: tuple[Param, ...] = ()
    param_type: type = str  # the path parameter's type
    answer: Any = None  # the answer's model, for the schema (FastAPI does not re-validate it);
    # None only for a row answering 204 or a `Response` of its own (the stream, the metrics)

    @property
    def param(self) -> str | None:
        """The path parameter's name, if the path has one."""
        found = [s[1:-1] for s in self.path.split("/") if s.startswith("{")]
        return found[0] if found else None


def install_routes(app: FastAPI, target: Any, routes: Iterable[Route]) -> None:
    """Declare each of `routes` to FastAPI, in order, their handlers over `target`."""
    for route in routes:
        install_route(app, target, route)


def install_route(app: FastAPI, target: Any, route: Route) -> None:
    """Declare `route` to FastAPI: its signature says what FastAPI validates, as written out."""
    param = route.param
    names = [q.name for q in route.query]

    async def endpoint(**values: Any) -> Response:
        args = Args(
            values[param] if param else "",
            values.get("body"),
            values.get("epoch", 0),
            values.get("wait", 0.0),
            {n: values[n] for n in names} if names else NO_QUERY,
        )
        return response(*await route.handler(target, args))

    endpoint.__signature__ = _signature(route)  # type: ignore[attr-defined]
    endpoint.__name__ = route.name
    endpoint.__doc__ = route.handler.__doc__  # the schema's description, when it has one
    _known_place(endpoint)
    status = None if route.status == 200 else route.status
    app.add_api_route(
        route.path,
        endpoint,
        methods=[route.method],
        status_code=status,
        name=route.name,
        response_model=route.answer,
    )


def _known_place(endpoint: Callable[..., Any]) -> None:
    """Hand FastAPI the endpoint's place as its first request would read it (file, line,
    name): the source is read once for the one closure, not once per row mid-run."""
    code = endpoint.__code__
    if code not in _PLACES:
        file, line = inspect.getsourcefile(endpoint), inspect.getsourcelines(endpoint)[1]
        _PLACES[code] = (
            EndpointContext(line=line) if file is None else EndpointContext(file=file, line=line)
        )
    place = EndpointContext(**_PLACES[code], function=endpoint.__name__)
    fastapi.routing._endpoint_context_cache[id(endpoint)] = place


_PLACES: dict[CodeType, EndpointContext] = {}  # a code object's file and line, read once


def response(status: int, data: Any) -> Response:
    """A handler's answer as FastAPI sends it."""
    if isinstance(data, Response):
        return data
    if status == 204:
        return Response(status_code=204)
    if isinstance(data, BaseModel):  # a row's typed answer: the keys its handler set, the
        # bytes `JSONResponse` renders, by pydantic's serializer (half the time of `model_dump`)
        return Response(data.model_dump_json(exclude_unset=True), status, media_type=JSON)
    wire = getattr(data, "to_wire", None)
    return JSONResponse(wire() if wire is not None else data, status)


def _signature(route: Route) -> inspect.Signature:
    def keyword(name: str, annotation: Any, default: Any = inspect.Parameter.empty) -> Any:
        return inspect.Parameter(
            name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation
        )

    params = [keyword(route.param, route.param_type)] if route.param else []
    if route.body is not None and route.optional_body:
        params.append(keyword("body", route.body | None, None))
    elif route.body is not None:
        params.append(keyword("body", route.body))
    if route.epoch:
        params.append(keyword("epoch", Epoch))
    if route.waits:
        params.append(keyword("wait", Wait, 0))
    params += [keyword(q.name, q.annotation, q.default) for q in route.query]
    return inspect.Signature(params, return_annotation=Response)
