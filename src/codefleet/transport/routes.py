"""The runner's routes: each declared once, as a row of one table, the hot ones for both paths.

Every runner route is a FastAPI route (the schema, and the reference behaviour
for every input). The hot ones (acquire, start, complete, assignment,
heartbeat, changes) are `HotRoute` rows of `HOT_ROUTES`: method, path, body
model, declared status and one handler over the engine; `install_runner_routes`
generates each one's FastAPI route from its row, and `fastpath.FastPath`
compiles the same rows into the table it answers from in front of FastAPI. An
attempt's other calls (reads, checks, commands, delivery, questions, a
resource, a sequence's number) are rows of `ATTEMPT_ROUTES`, FastAPI's alone;
`register`, `leave` and the foreign pre-images are written out. A handler sees
only `Args` (path parameter, body, epoch, wait), so neither path has a copy of it
(docs/decisions/0062-hot-routes-a-fast-path-in-front-of-fastapi-that-hands-it.md,
docs/decisions/0121-the-transports-room.md).
"""

from __future__ import annotations

import base64
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal, NamedTuple

from fastapi import FastAPI, Header, Query
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel

from codefleet.api.wire import (
    AcquireBody,
    ChangeBody,
    CheckEventBody,
    CommandEventBody,
    CompleteBody,
    DeliveredFile,
    DeliveryBody,
    HeartbeatBody,
    NumberBody,
    QuestionBody,
    ReadsBody,
    RegisterBody,
    ResourceBody,
    StartBody,
)
from codefleet.config import Settings
from codefleet.coord.engine import Engine
from codefleet.rollback import PreImage
from codefleet.transport.answerjson import (
    assignment_json,
    beat_json,
    lease_json,
    registered_json,
    task_json,
)

__all__ = [
    "ATTEMPT_ROUTES",
    "HOT_ROUTES",
    "MAX_WAIT_S",
    "Answer",
    "Args",
    "HotRoute",
    "install_runner_routes",
]

MAX_WAIT_S: Final = 30.0  # the long poll's longest wait
Epoch = Annotated[int, Header(alias="X-Agent-Epoch")]
Wait = Annotated[float, Query(ge=0, le=MAX_WAIT_S)]
Answer = tuple[int, Any]  # status and JSON data; (204, None) is an empty answer


class Args(NamedTuple):  # a tuple: built once per hot request, cheaper than a frozen dataclass
    """A hot request's inputs, validated: the same on the fast path and through FastAPI."""

    param: str  # the path parameter; "" when the path has none
    body: Any  # an instance of the route's body model; None when it has no (or no sent) body
    epoch: int
    wait: float


Handler = Callable[[Engine, Args], Awaitable[Answer]]


@dataclass(frozen=True, slots=True)
class HotRoute:
    """One runner route: everything both paths need to answer it (the fast path compiles
    the rows of `HOT_ROUTES` only; those of `ATTEMPT_ROUTES` FastAPI alone serves)."""

    name: str  # the FastAPI endpoint's name: its operationId and summary in the schema
    method: str
    path: str  # FastAPI's template; at most one `{parameter}` segment
    handler: Handler
    body: type[BaseModel] | None = None
    optional_body: bool = False  # the body may be left out (heartbeat)
    waits: bool = False  # reads `?wait=` (the long poll)
    status: int = 200  # the declared success status

    @property
    def param(self) -> str | None:
        """The path parameter's name, if the path has one."""
        found = [s[1:-1] for s in self.path.split("/") if s.startswith("{")]
        return found[0] if found else None


# -- the hot handlers: each the one answer of its route, on either path ---------------------


async def _acquire(engine: Engine, a: Args) -> Answer:
    b: AcquireBody = a.body
    if b.wait > 0:  # parked first when the caller may wait
        answer = await engine.waiting.acquire_waiting(
            b.agent_id, a.epoch, b.task_id, b.paths, b.tool, b.seen, b.wait
        )
    else:
        answer = engine.runner.acquire(b.agent_id, a.epoch, b.task_id, b.paths, b.tool)
    return 200, lease_json(engine.runner.versions(b.agent_id, answer))


async def _start(engine: Engine, a: Args) -> Answer:
    return 200, engine.runner.start(a.param, a.body.agent_id, a.epoch)


async def _complete(engine: Engine, a: Args) -> Answer:
    b: CompleteBody = a.body
    answer = engine.outcomes.complete(a.param, b.agent_id, a.epoch, b.report())
    return 200, task_json(answer, await engine.runner.handoff(b.agent_id, a.epoch))


async def _assignment(engine: Engine, a: Args) -> Answer:
    task = await engine.runner.wait_assignment(a.param, a.epoch, a.wait)
    return (200, {"task": assignment_json(task)}) if task else (204, None)


async def _heartbeat(engine: Engine, a: Args) -> Answer:
    delivered = a.body.delivery() if a.body else None  # the operator's messages it has
    head = a.body.head if a.body else None  # a clone's landed commit
    return 200, beat_json(engine.runner.heartbeat(a.param, a.epoch, delivered, head))


async def _change(engine: Engine, a: Args) -> Answer:
    b: ChangeBody = a.body
    engine.runner.record_change(b.agent_id, a.epoch, b.task_id, b.path, b.tool, b.sha256)
    return 202, {}


HEARTBEAT = HotRoute(
    "heartbeat",
    "POST",
    "/agents/{agent_id}/heartbeat",
    _heartbeat,
    HeartbeatBody,
    optional_body=True,
)
ASSIGNMENT = HotRoute("assignment", "GET", "/agents/{agent_id}/assignment", _assignment, waits=True)
START = HotRoute("start", "POST", "/tasks/{task_id}/start", _start, StartBody)
ACQUIRE = HotRoute("acquire", "POST", "/leases/acquire", _acquire, AcquireBody)
CHANGE = HotRoute("change", "POST", "/changes", _change, ChangeBody, status=202)
COMPLETE = HotRoute("complete", "POST", "/tasks/{task_id}/complete", _complete, CompleteBody)
HOT_ROUTES: Final = (HEARTBEAT, ASSIGNMENT, START, ACQUIRE, CHANGE, COMPLETE)


# -- the attempt's other calls: rows of the same table, served by FastAPI alone -------------


async def _ask(engine: Engine, a: Args) -> Answer:
    """The owner's session asks the operator (`ask_operator`); answers ride the heartbeat."""
    b: QuestionBody = a.body
    return 201, engine.runner.ask(b.agent_id, a.epoch, a.param, b.text).to_json()


async def _reads(engine: Engine, a: Args) -> Answer:
    b: ReadsBody = a.body
    rows = [r.model_dump() for r in b.reads]
    watch = [w.model_dump() for w in b.watch]
    stale = [s.model_dump() for s in b.stale]
    done = b.reconciled.model_dump() if b.reconciled else None
    return 200, engine.runner.record_reads(
        a.param, b.agent_id, a.epoch, b.attempt, rows, watch, stale, done
    )


async def _check_event(engine: Engine, a: Args) -> Answer:
    b: CheckEventBody = a.body
    return 200, engine.runner.record_check(a.param, b.agent_id, a.epoch, b.model_dump())


async def _command_event(engine: Engine, a: Args) -> Answer:
    b: CommandEventBody = a.body
    return 200, engine.runner.record_command(a.param, b.agent_id, a.epoch, b.model_dump())


async def _delivery(engine: Engine, a: Args) -> Answer:
    b: DeliveryBody = a.body
    files = [delivered_image(f) for f in b.files]
    return 200, engine.runner.deliver(a.param, b.agent_id, a.epoch, b.attempt, files)


async def _acquire_resource(engine: Engine, a: Args) -> Answer:
    b: ResourceBody = a.body
    return 200, lease_json(engine.runner.acquire_resource(b.agent_id, a.epoch, b.task_id, b.name))


async def _next_number(engine: Engine, a: Args) -> Answer:
    b: NumberBody = a.body
    return 200, engine.runner.next_number(b.agent_id, a.epoch, b.task_id, b.sequence)


# An attempt's reads, checks, commands and a clone's delivery of its files; its questions;
# a session's calls for things that are not files (a few calls, not one per write).
ATTEMPT_ROUTES: Final = (
    HotRoute("reads", "POST", "/tasks/{task_id}/reads", _reads, ReadsBody),
    HotRoute("check_event", "POST", "/tasks/{task_id}/checks", _check_event, CheckEventBody),
    HotRoute(
        "command_event", "POST", "/tasks/{task_id}/commands", _command_event, CommandEventBody
    ),
    HotRoute("delivery", "POST", "/tasks/{task_id}/delivery", _delivery, DeliveryBody),
    HotRoute("ask", "POST", "/tasks/{task_id}/questions", _ask, QuestionBody, status=201),
    HotRoute("acquire_resource", "POST", "/resources/acquire", _acquire_resource, ResourceBody),
    HotRoute("next_number", "POST", "/sequences/next", _next_number, NumberBody),
)


# -- the FastAPI declarations: the schema, and every answer the fast path leaves to them ----


def install_runner_routes(app: FastAPI, engine: Engine, settings: Settings) -> None:
    """Declare every runner route to FastAPI, the hot ones generated from `HOT_ROUTES`."""

    @app.post("/agents/register")
    async def register(body: RegisterBody) -> JSONResponse:
        answer = engine.arrivals.register(
            body.name,
            body.workdir,
            body.pid,
            body.host,
            body.replace,
            body.agent.value,
            body.tree_id,
            body.probe,
            body.workspace.value,
        )
        return JSONResponse(registered_json(answer, settings, engine.runner.lease_granularity()))

    install_hot_route(app, engine, HEARTBEAT)

    @app.delete("/agents/{agent_id}", status_code=204)
    async def leave(
        agent_id: str,
        epoch: Epoch,
        reason: Annotated[Literal["interrupted"] | None, Query()] = None,
    ) -> Response:
        engine.arrivals.leave(agent_id, epoch, interrupted=reason == "interrupted")
        return Response(status_code=204)

    for route in (ASSIGNMENT, START, ACQUIRE, CHANGE, COMPLETE):  # the schema's order
        install_hot_route(app, engine, route)

    @app.get("/tasks/{task_id}/foreign-preimages")
    async def foreign_preimages(task_id: str) -> JSONResponse:
        return JSONResponse(engine.runner.foreign_preimages(task_id))

    for route in ATTEMPT_ROUTES:
        install_hot_route(app, engine, route)


def delivered_image(file: DeliveredFile) -> PreImage:
    """A delivered file as the state the server writes into its tree (bad base64: 422)."""
    try:
        content = base64.b64decode(file.content, validate=True)
    except ValueError as err:
        raise RequestValidationError(
            [
                {
                    "loc": ("body", "files", "content"),
                    "msg": f"not base64: {err}",
                    "type": "value_error",
                }
            ]
        ) from None
    return PreImage(file.path, file.existed, content if file.existed else b"", file.mode)


def install_hot_route(app: FastAPI, engine: Engine, route: HotRoute) -> None:
    """Declare `route` to FastAPI: its signature says what FastAPI validates, as written out."""
    param = route.param

    async def endpoint(**values: Any) -> Response:
        args = Args(
            values[param] if param else "",
            values.get("body"),
            values["epoch"],
            values.get("wait", 0.0),
        )
        status, data = await route.handler(engine, args)
        return Response(status_code=204) if status == 204 else JSONResponse(data, status)

    endpoint.__signature__ = _signature(route)  # type: ignore[attr-defined]
    endpoint.__name__ = route.name
    status = None if route.status == 200 else route.status
    app.add_api_route(
        route.path, endpoint, methods=[route.method], status_code=status, name=route.name
    )


def _signature(route: HotRoute) -> inspect.Signature:
    def keyword(name: str, annotation: Any, default: Any = inspect.Parameter.empty) -> Any:
        return inspect.Parameter(
            name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation
        )

    params = [keyword(route.param, str)] if route.param else []
    if route.body is not None and route.optional_body:
        params.append(keyword("body", route.body | None, None))
    elif route.body is not None:
        params.append(keyword("body", route.body))
    params.append(keyword("epoch", Epoch))
    if route.waits:
        params.append(keyword("wait", Wait, 0))
    return inspect.Signature(params, return_annotation=Response)
