"""The runner's routes: each declared once, as a row of one table, the hot ones for both paths.

Every runner route is a FastAPI route (the schema, and the reference behaviour
for every input), generated from its `routetable.Route` row: method, path, body
model, the epoch it is fenced by, declared status and one handler over the
engine. The hot ones (acquire, start, complete, assignment, heartbeat, changes)
are `HOT_ROUTES`, which `fastpath.FastPath` also compiles into the table it
answers from in front of FastAPI. An attempt's other calls (reads, checks,
commands, delivery, questions, a resource, a sequence's number) are rows of
`ATTEMPT_ROUTES`, FastAPI's alone, as are `register`, `leave` and the foreign
pre-images. A handler sees only `Args` (path parameter, body, epoch, wait,
query), so neither path has a copy of it
(docs/decisions/0062-hot-routes-a-fast-path-in-front-of-fastapi-that-hands-it.md,
docs/decisions/0121-the-transports-room.md).
"""

from __future__ import annotations

import base64
from typing import Annotated, Any, Final, Literal

from fastapi import FastAPI, Query
from fastapi.exceptions import RequestValidationError

from codefleet.api.answermodels import (
    Assignment,
    Beat,
    Completed,
    Delivered,
    EventRecorded,
    ForeignPreimages,
    LeaseDecision,
    NextNumber,
    NoNumber,
    Noted,
    Numbered,
    Question,
    ReadsRecorded,
    Registered,
    TaskStatusNow,
)
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
from codefleet.transport.routetable import Answer, Args, Handler, Param, Route, install_routes

__all__ = [
    "ATTEMPT_ROUTES",
    "HOT_ROUTES",
    "install_runner_routes",
    "runner_row",
]


def runner_row(name: str, method: str, path: str, handler: Handler, *more: Any, **kw: Any) -> Route:
    """A row of the runner's: it reads the agent's epoch (`X-Agent-Epoch`), which fences it."""
    return Route(name, method, path, handler, *more, **{**kw, "epoch": True})


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


# The hot rows' answers are built from the engine's frozen values (`transport.answerjson`),
# no model per request; `answer` is their schema, which the fleet test holds that JSON to.
HEARTBEAT = runner_row(
    "heartbeat",
    "POST",
    "/agents/{agent_id}/heartbeat",
    _heartbeat,
    HeartbeatBody,
    optional_body=True,
    answer=Beat,
)
ASSIGNMENT = runner_row(  # 204 when no task is handed out
    "assignment", "GET", "/agents/{agent_id}/assignment", _assignment, waits=True, answer=Assignment
)
START = runner_row(
    "start", "POST", "/tasks/{task_id}/start", _start, StartBody, answer=TaskStatusNow
)
ACQUIRE = runner_row(
    "acquire", "POST", "/leases/acquire", _acquire, AcquireBody, answer=LeaseDecision
)
CHANGE = runner_row("change", "POST", "/changes", _change, ChangeBody, status=202, answer=Noted)
COMPLETE = runner_row(
    "complete", "POST", "/tasks/{task_id}/complete", _complete, CompleteBody, answer=Completed
)
HOT_ROUTES: Final = (HEARTBEAT, ASSIGNMENT, START, ACQUIRE, CHANGE, COMPLETE)


# -- the attempt's other calls: rows of the same table, served by FastAPI alone -------------


async def _ask(engine: Engine, a: Args) -> Answer:
    # the owner's session asks the operator (`ask_operator`); answers ride the heartbeat
    b: QuestionBody = a.body
    return 201, Question.model_validate(
        engine.runner.ask(b.agent_id, a.epoch, a.param, b.text).to_json()
    )


async def _reads(engine: Engine, a: Args) -> Answer:
    b: ReadsBody = a.body
    rows = [r.model_dump() for r in b.reads]
    watch = [w.model_dump() for w in b.watch]
    stale = [s.model_dump() for s in b.stale]
    done = b.reconciled.model_dump() if b.reconciled else None
    changes = engine.runner.record_reads(
        a.param, b.agent_id, a.epoch, b.attempt, rows, watch, stale, done
    )
    return 200, ReadsRecorded.model_validate(changes)


async def _check_event(engine: Engine, a: Args) -> Answer:
    b: CheckEventBody = a.body
    recorded = engine.runner.record_check(a.param, b.agent_id, a.epoch, b.model_dump())
    return 200, EventRecorded.model_validate(recorded)


async def _command_event(engine: Engine, a: Args) -> Answer:
    b: CommandEventBody = a.body
    recorded = engine.runner.record_command(a.param, b.agent_id, a.epoch, b.model_dump())
    return 200, EventRecorded.model_validate(recorded)


async def _delivery(engine: Engine, a: Args) -> Answer:
    b: DeliveryBody = a.body
    files = [delivered_image(f) for f in b.files]
    delivered = engine.runner.deliver(a.param, b.agent_id, a.epoch, b.attempt, files)
    return 200, Delivered.model_validate(delivered)


async def _acquire_resource(engine: Engine, a: Args) -> Answer:
    b: ResourceBody = a.body
    return 200, lease_json(engine.runner.acquire_resource(b.agent_id, a.epoch, b.task_id, b.name))


async def _next_number(engine: Engine, a: Args) -> Answer:
    b: NumberBody = a.body
    found = engine.runner.next_number(b.agent_id, a.epoch, b.task_id, b.sequence)
    model = NoNumber if found["value"] is None else Numbered
    return 200, model.model_validate(found)


# An attempt's reads, checks, commands and a clone's delivery of its files; its questions;
# a session's calls for things that are not files (a few calls, not one per write).
ATTEMPT_ROUTES: Final = (
    runner_row("reads", "POST", "/tasks/{task_id}/reads", _reads, ReadsBody, answer=ReadsRecorded),
    runner_row(
        "check_event",
        "POST",
        "/tasks/{task_id}/checks",
        _check_event,
        CheckEventBody,
        answer=EventRecorded,
    ),
    runner_row(
        "command_event",
        "POST",
        "/tasks/{task_id}/commands",
        _command_event,
        CommandEventBody,
        answer=EventRecorded,
    ),
    runner_row(
        "delivery", "POST", "/tasks/{task_id}/delivery", _delivery, DeliveryBody, answer=Delivered
    ),
    runner_row(
        "ask",
        "POST",
        "/tasks/{task_id}/questions",
        _ask,
        QuestionBody,
        status=201,
        answer=Question,
    ),
    runner_row(  # a lease answer, from the engine's frozen value like the hot acquire's
        "acquire_resource",
        "POST",
        "/resources/acquire",
        _acquire_resource,
        ResourceBody,
        answer=LeaseDecision,
    ),
    runner_row(
        "next_number", "POST", "/sequences/next", _next_number, NumberBody, answer=NextNumber
    ),
)


# -- the calls that are not hot: a runner's arrival and leave, another task's pre-images ----


def register_route(settings: Settings) -> Route:
    """`POST /agents/register`: its answer carries the timings `settings` give a runner."""

    async def register(engine: Engine, a: Args) -> Answer:
        b: RegisterBody = a.body
        answer = engine.arrivals.register(
            b.name,
            b.workdir,
            b.pid,
            b.host,
            b.replace,
            b.agent.value,
            b.tree_id,
            b.probe,
            b.workspace.value,
        )
        return 200, registered_json(answer, settings, engine.runner.lease_granularity())

    return Route("register", "POST", "/agents/register", register, RegisterBody, answer=Registered)


async def _leave(engine: Engine, a: Args) -> Answer:
    engine.arrivals.leave(a.param, a.epoch, interrupted=a.query["reason"] == "interrupted")
    return 204, None


async def _foreign_preimages(engine: Engine, a: Args) -> Answer:
    return 200, ForeignPreimages.model_validate(engine.runner.foreign_preimages(a.param))


LEAVE_REASON = Param("reason", Annotated[Literal["interrupted"] | None, Query()], None)
LEAVE = runner_row(  # 204: no answer to declare
    "leave", "DELETE", "/agents/{agent_id}", _leave, status=204, query=(LEAVE_REASON,)
)
FOREIGN_PREIMAGES = Route(
    "foreign_preimages",
    "GET",
    "/tasks/{task_id}/foreign-preimages",
    _foreign_preimages,
    answer=ForeignPreimages,
)


def install_runner_routes(app: FastAPI, engine: Engine, settings: Settings) -> None:
    """Declare every runner route to FastAPI, each from its row, in the schema's order."""
    install_routes(
        app,
        engine,
        (
            register_route(settings),
            HEARTBEAT,
            LEAVE,
            ASSIGNMENT,
            START,
            ACQUIRE,
            CHANGE,
            COMPLETE,
            FOREIGN_PREIMAGES,
            *ATTEMPT_ROUTES,
        ),
    )


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
