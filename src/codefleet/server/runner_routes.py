"""The runner's routes: declared to FastAPI, and answered on a fast path in front of it.

Every runner route is declared with FastAPI (the OpenAPI schema, and the
reference behaviour for every input). The hot ones (acquire, start, complete,
assignment, heartbeat, changes) are also in `RunnerRoutes`, which `front.Front`
calls right after the guards (Host check, token, body limit), in front of all
of FastAPI: one pre-compiled table, `orjson` both ways, the same pydantic models.
It answers only a request it can answer exactly as FastAPI would: a JSON body
(`Content-Type: application/json`) that parses and validates, a canonical
integer `X-Agent-Epoch`, a plain `wait=`. Anything else (every 4xx of bad
input, every odd header) is handed to FastAPI with the body replayed, so
status codes and error envelopes cannot diverge. A domain refusal from the
engine leaves in the same envelope as FastAPI's handler sends; an unexpected
exception goes to the app's 500 handler (docs/decisions.md, "Hot routes").
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal, TypeVar

import orjson
from fastapi import FastAPI, Header, Query
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ValidationError
from starlette.types import Message, Receive, Scope, Send

from codefleet.api.wire import (
    AcquireBody,
    ChangeBody,
    CheckEventBody,
    CommandEventBody,
    CompleteBody,
    HeartbeatBody,
    QuestionBody,
    ReadsBody,
    RegisterBody,
    StartBody,
)
from codefleet.config import Settings
from codefleet.coord.answers import LeaseAnswer
from codefleet.coord.engine import Engine
from codefleet.errors import DomainError
from codefleet.server.answers import (
    assignment_json,
    beat_json,
    lease_json,
    registered_json,
    task_json,
)

__all__ = ["MAX_WAIT_S", "Head", "RunnerRoutes", "install_runner_routes"]

Epoch = Annotated[int, Header(alias="X-Agent-Epoch")]
MAX_WAIT_S: Final = 30.0
JSON_TYPE: Final = b"application/json"
# What FastAPI's lax int and float parsing read exactly like int() and float(); others go to it.
CANONICAL_INT: Final = re.compile(rb"0|-?[1-9][0-9]{0,17}")
PLAIN_WAIT: Final = re.compile(rb"wait=([0-9]{1,2}(?:\.[0-9]{1,6})?)")
PARAM: Final = "/"  # the path parameter's place in a table key: no segment contains a slash
M = TypeVar("M", bound=BaseModel)


# -- the FastAPI declarations: the schema, and every answer the fast path leaves to them ----


def _question_route(app: FastAPI, engine: Engine) -> None:
    """The owner's session asks the operator (`ask_operator`); answers ride the heartbeat."""

    @app.post("/tasks/{task_id}/questions", status_code=201)
    async def ask(task_id: str, body: QuestionBody, epoch: Epoch) -> JSONResponse:
        question = engine.ask(body.agent_id, epoch, task_id, body.text)
        return JSONResponse(question.to_json(), status_code=201)


def install_runner_routes(app: FastAPI, engine: Engine, settings: Settings) -> None:
    """Declare the runner routes to FastAPI (the fast path is `RunnerRoutes`, a middleware)."""
    _question_route(app, engine)

    @app.post("/agents/register")
    async def register(body: RegisterBody) -> JSONResponse:
        answer = engine.register(
            body.name, body.workdir, body.pid, body.host, body.replace, body.agent.value
        )
        return JSONResponse(registered_json(answer, settings))

    @app.post("/agents/{agent_id}/heartbeat")
    async def heartbeat(
        agent_id: str, epoch: Epoch, body: HeartbeatBody | None = None
    ) -> JSONResponse:
        delivered = body.delivery() if body else None
        return JSONResponse(beat_json(engine.heartbeat(agent_id, epoch, delivered)))

    @app.delete("/agents/{agent_id}", status_code=204)
    async def leave(
        agent_id: str,
        epoch: Epoch,
        reason: Annotated[Literal["interrupted"] | None, Query()] = None,
    ) -> Response:
        engine.leave(agent_id, epoch, interrupted=reason == "interrupted")
        return Response(status_code=204)

    @app.get("/agents/{agent_id}/assignment")
    async def assignment(
        agent_id: str, epoch: Epoch, wait: Annotated[float, Query(ge=0, le=MAX_WAIT_S)] = 0
    ) -> Response:
        task = await engine.wait_assignment(agent_id, epoch, wait)
        return JSONResponse({"task": assignment_json(task)}) if task else Response(status_code=204)

    @app.post("/tasks/{task_id}/start")
    async def start(task_id: str, body: StartBody, epoch: Epoch) -> JSONResponse:
        return JSONResponse(engine.start(task_id, body.agent_id, epoch))

    @app.post("/leases/acquire")
    async def acquire(body: AcquireBody, epoch: Epoch) -> JSONResponse:
        return JSONResponse(lease_json(await acquire_answer(engine, body, epoch)))

    @app.post("/changes", status_code=202)
    async def change(body: ChangeBody, epoch: Epoch) -> JSONResponse:
        engine.record_change(body.agent_id, epoch, body.task_id, body.path, body.tool, body.sha256)
        return JSONResponse({}, 202)

    @app.post("/tasks/{task_id}/complete")
    async def complete(task_id: str, body: CompleteBody, epoch: Epoch) -> JSONResponse:
        answer = engine.complete(task_id, body.agent_id, epoch, body.report())
        return JSONResponse(task_json(answer, await engine.handoff(body.agent_id, epoch)))

    _install_attempt_reports(app, engine)


def _install_attempt_reports(app: FastAPI, engine: Engine) -> None:
    """The routes an attempt uses as it goes: its reads, checks, commands, foreign pre-images."""

    @app.post("/tasks/{task_id}/reads")
    async def reads(task_id: str, body: ReadsBody, epoch: Epoch) -> JSONResponse:
        rows = [r.model_dump() for r in body.reads]
        watch = [w.model_dump() for w in body.watch]
        stale = [s.model_dump() for s in body.stale]
        done = body.reconciled.model_dump() if body.reconciled else None
        answer = engine.record_reads(
            task_id, body.agent_id, epoch, body.attempt, rows, watch, stale, done
        )
        return JSONResponse(answer)

    @app.post("/tasks/{task_id}/checks")
    async def check_event(task_id: str, body: CheckEventBody, epoch: Epoch) -> JSONResponse:
        return JSONResponse(engine.record_check(task_id, body.agent_id, epoch, body.model_dump()))

    @app.post("/tasks/{task_id}/commands")
    async def command_event(task_id: str, body: CommandEventBody, epoch: Epoch) -> JSONResponse:
        report = body.model_dump()
        return JSONResponse(engine.record_command(task_id, body.agent_id, epoch, report))

    @app.get("/tasks/{task_id}/foreign-preimages")
    async def foreign_preimages(task_id: str) -> JSONResponse:
        return JSONResponse(engine.foreign_preimages(task_id))


async def acquire_answer(engine: Engine, body: AcquireBody, epoch: int) -> LeaseAnswer:
    """The lease answer, parked first when the caller may wait (both paths call this)."""
    if body.wait > 0:
        return await engine.acquire_waiting(
            body.agent_id, epoch, body.task_id, body.paths, body.tool, body.seen, body.wait
        )
    return engine.acquire(body.agent_id, epoch, body.task_id, body.paths, body.tool)


# -- the fast path ----------------------------------------------------------------------------


class _Pass(Exception):
    """This request is not for the fast path: FastAPI answers it."""


@dataclass(slots=True)
class Call:
    """One request on the fast path: its path parameter, body, epoch header and query."""

    param: str
    body: bytes
    content_type: bytes | None
    epoch_raw: bytes | None
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


Answer = tuple[int, Any]  # status and JSON data; (204, None) is an empty answer
Head = tuple[bytes | None, bytes | None]  # the first Content-Type and X-Agent-Epoch values
Handler = Callable[[Call], Awaitable[Answer]]


def _handlers(engine: Engine) -> dict[tuple[str, str], Handler]:
    """(method, path template) -> handler, each the twin of its FastAPI declaration above."""

    async def acquire(c: Call) -> Answer:
        b = c.json(AcquireBody)
        return 200, lease_json(await acquire_answer(engine, b, c.epoch()))

    async def start(c: Call) -> Answer:
        b = c.json(StartBody)
        return 200, engine.start(c.param, b.agent_id, c.epoch())

    async def complete(c: Call) -> Answer:
        b, epoch = c.json(CompleteBody), c.epoch()
        answer = engine.complete(c.param, b.agent_id, epoch, b.report())
        return 200, task_json(answer, await engine.handoff(b.agent_id, epoch))

    async def assignment(c: Call) -> Answer:
        epoch, wait = c.epoch(), c.wait()
        task = await engine.wait_assignment(c.param, epoch, wait)
        return (200, {"task": assignment_json(task)}) if task else (204, None)

    async def heartbeat(c: Call) -> Answer:
        delivered = c.json(HeartbeatBody).delivery() if c.body else None
        return 200, beat_json(engine.heartbeat(c.param, c.epoch(), delivered))

    async def change(c: Call) -> Answer:
        b = c.json(ChangeBody)
        engine.record_change(b.agent_id, c.epoch(), b.task_id, b.path, b.tool, b.sha256)
        return 202, {}

    return {
        ("POST", "/leases/acquire"): acquire,
        ("POST", "/tasks/{}/start"): start,
        ("POST", "/tasks/{}/complete"): complete,
        ("GET", "/agents/{}/assignment"): assignment,
        ("POST", "/agents/{}/heartbeat"): heartbeat,
        ("POST", "/changes"): change,
    }


def compile_table(handlers: dict[tuple[str, str], Handler]) -> dict[tuple[str, ...], Handler]:
    """Key each route by (method, *segments), its one `{}` segment as "/" (never a segment)."""
    table: dict[tuple[str, ...], Handler] = {}
    for (method, template), handler in handlers.items():
        segments = template[1:].split("/")
        assert segments.count("{}") <= 1, template
        table[(method, *(PARAM if s == "{}" else s for s in segments))] = handler
    return table


def _match(
    table: dict[tuple[str, ...], Handler], method: str, path: str
) -> tuple[Handler, str] | None:
    """The handler and path parameter for this request, as Starlette's `[^/]+` would match."""
    segments = path[1:].split("/")
    found = table.get((method, *segments))
    if found is not None:
        return found, ""
    if len(segments) == 3 and segments[1]:
        found = table.get((method, segments[0], PARAM, segments[2]))
        if found is not None:
            return found, segments[1]
    return None


class RunnerRoutes:
    """The hot runner routes answered from the table, called by `front.Front` after the guards."""

    def __init__(self, engine: Engine) -> None:
        self.table = compile_table(_handlers(engine))

    def match(self, scope: Scope) -> tuple[Handler, str] | None:
        """The handler and path parameter of a request this path may answer, else None."""
        if scope.get("root_path"):
            return None
        return _match(self.table, scope["method"], scope["path"])

    async def answer(
        self, found: tuple[Handler, str], head: Head, scope: Scope, receive: Receive, send: Send
    ) -> Receive | None:
        """Answer the request; or return its body, replayed, for FastAPI to answer instead.

        An unexpected exception propagates before anything is sent (the caller answers it
        as the app's 500 handler does)."""
        handler, param = found
        messages, body, whole = await _read(receive)
        try:
            if not whole:
                raise _Pass
            call = Call(param, body, head[0], head[1], scope.get("query_string", b""))
            status, data = await handler(call)
        except _Pass:
            return _replay(messages, receive)
        except DomainError as exc:  # the app's DomainError handler's answer, exactly
            await JSONResponse(exc.envelope(), exc.status)(scope, receive, send)
            return None
        await _send(send, status, data)
        return None


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
