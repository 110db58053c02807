"""The runner's routes: each hot route declared once, in one table, for both paths.

Every runner route is a FastAPI route (the OpenAPI schema, and the reference
behaviour for every input). The hot ones (acquire, start, complete,
assignment, heartbeat, changes) are declared once, as `HotRoute` rows of
`HOT_ROUTES`: their method, path, body model, declared status and one
handler over the engine. `install_runner_routes` generates each one's FastAPI
route from its row; `fastpath.FastPath` compiles the same rows into the table
it answers from in front of FastAPI. A handler sees only `Args` (the path
parameter, the validated body, the epoch, the wait), so it cannot tell the
two paths apart and neither path has a copy of it (docs/decisions/0062-hot-routes-a-fast-path-in-front-of-fastapi-that-hands-it.md and docs/decisions/0121-the-transports-room.md, "Hot
routes", "The transport's room").
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

__all__ = ["HOT_ROUTES", "MAX_WAIT_S", "Answer", "Args", "HotRoute", "install_runner_routes"]

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
    """One hot runner route: everything both paths need to answer it."""

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
        return JSONResponse(registered_json(answer, settings))

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
    _install_attempt_reports(app, engine)
    _install_question_route(app, engine)
    _install_resource_routes(app, engine)


def _install_question_route(app: FastAPI, engine: Engine) -> None:
    """The owner's session asks the operator (`ask_operator`); answers ride the heartbeat."""

    @app.post("/tasks/{task_id}/questions", status_code=201)
    async def ask(task_id: str, body: QuestionBody, epoch: Epoch) -> JSONResponse:
        question = engine.runner.ask(body.agent_id, epoch, task_id, body.text)
        return JSONResponse(question.to_json(), status_code=201)


def _install_resource_routes(app: FastAPI, engine: Engine) -> None:
    """A session's calls for things that are not files: a named resource, a sequence's next
    number (fenced by `X-Agent-Epoch`; not on the fast path: a few calls, not every write)."""

    @app.post("/resources/acquire")
    async def acquire_resource(body: ResourceBody, epoch: Epoch) -> JSONResponse:
        answer = engine.runner.acquire_resource(body.agent_id, epoch, body.task_id, body.name)
        return JSONResponse(lease_json(answer))

    @app.post("/sequences/next")
    async def next_number(body: NumberBody, epoch: Epoch) -> JSONResponse:
        return JSONResponse(
            engine.runner.next_number(body.agent_id, epoch, body.task_id, body.sequence)
        )


def _install_attempt_reports(app: FastAPI, engine: Engine) -> None:
    """The routes an attempt uses as it goes: its reads, checks, commands, foreign pre-images,
    and a clone runner's delivery of its files."""

    @app.post("/tasks/{task_id}/reads")
    async def reads(task_id: str, body: ReadsBody, epoch: Epoch) -> JSONResponse:
        rows = [r.model_dump() for r in body.reads]
        watch = [w.model_dump() for w in body.watch]
        stale = [s.model_dump() for s in body.stale]
        done = body.reconciled.model_dump() if body.reconciled else None
        answer = engine.runner.record_reads(
            task_id, body.agent_id, epoch, body.attempt, rows, watch, stale, done
        )
        return JSONResponse(answer)

    @app.post("/tasks/{task_id}/checks")
    async def check_event(task_id: str, body: CheckEventBody, epoch: Epoch) -> JSONResponse:
        return JSONResponse(
            engine.runner.record_check(task_id, body.agent_id, epoch, body.model_dump())
        )

    @app.post("/tasks/{task_id}/commands")
    async def command_event(task_id: str, body: CommandEventBody, epoch: Epoch) -> JSONResponse:
        report = body.model_dump()
        return JSONResponse(engine.runner.record_command(task_id, body.agent_id, epoch, report))

    @app.post("/tasks/{task_id}/delivery")
    async def delivery(task_id: str, body: DeliveryBody, epoch: Epoch) -> JSONResponse:
        files = [delivered_image(f) for f in body.files]
        return JSONResponse(
            engine.runner.deliver(task_id, body.agent_id, epoch, body.attempt, files)
        )

    @app.get("/tasks/{task_id}/foreign-preimages")
    async def foreign_preimages(task_id: str) -> JSONResponse:
        return JSONResponse(engine.runner.foreign_preimages(task_id))


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
