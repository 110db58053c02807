"""The HTTP surface: a thin FastAPI layer over the engine, plus the SSE stream.

Routes parse and validate (Pydantic, in `wire`), call ONE engine method, and
shape the answer. Every error leaves in the one envelope
`{"error": {"code", "message", "detail"}}`: domain refusals with their own
status, validation problems as 422 (without echoing the input back), an
oversized body as 413, and anything unexpected as a logged 500.

Handlers are `async` and call the engine synchronously, so each transition
runs whole on the event loop thread: the engine needs no locks. Each route is
one row (`transport.routetable.Route`), grouped by the object it calls: the
runner's (`transport.routes`), the operator's, the reads and the events (here,
over `Served`), a person's session (`person_routes`), the landing queue
(`landing_routes`), the landed line (`landed_routes`), the metrics.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final, NamedTuple

from fastapi import FastAPI, Header, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Receive, Scope, Send

from codefleet import __version__
from codefleet.api.answermodels import (
    Budget,
    ChecksDefined,
    CommitsRecorded,
    Created,
    EventRecorded,
    FleetResumed,
    Health,
    MessageKept,
    Question,
    Questions,
    ResetDone,
    TaskStatusNow,
)
from codefleet.api.readanswers import (
    Agents,
    Checks,
    Conflicts,
    Events,
    GraphAnalysis,
    Leases,
    Patch,
    Resources,
    State,
    Stats,
    TaskDetail,
    Tasks,
)
from codefleet.api.wire import (
    AnswerBody,
    BudgetBody,
    ChecksBody,
    CommitsBody,
    FleetBody,
    GraphBody,
    MessageBody,
    SequenceSpec,
    TaskSpec,
    check_commands,
    check_resources,
    check_reuse,
)
from codefleet.config import Settings
from codefleet.coord.engine import Engine
from codefleet.coord.engineview import EngineReads
from codefleet.coord.opening import close_engine, open_engine
from codefleet.coord.policy.engineconfig import engine_config
from codefleet.coord.tables.sequences import first_value
from codefleet.coord.tables.validation import NewTask
from codefleet.errors import DomainError, Forbidden, InvalidGraph
from codefleet.gcpolicy import collector_off
from codefleet.models import MAX_INT, EventType, ShellMode, TaskStatus
from codefleet.paths import MAX_PATH_CHARS, TreeRoot
from codefleet.readmodel.readapi import Reads
from codefleet.review.runrecord import RunRecord
from codefleet.server.front import Front
from codefleet.server.landed_routes import install_landed_routes
from codefleet.server.landing_routes import install_landing_routes
from codefleet.server.linefollower import LineFollower
from codefleet.server.lock import ServerLock
from codefleet.server.loopwatch import LoopWatch
from codefleet.server.metrics import install_metrics
from codefleet.server.pages import install_web
from codefleet.server.person_routes import install_interactive
from codefleet.server.sse import EventHub, EventStream
from codefleet.statedir import ensure_tree_id
from codefleet.transport.fastpath import FastPath
from codefleet.transport.guards import Guards
from codefleet.transport.hostcheck import HostNames
from codefleet.transport.routes import install_runner_routes
from codefleet.transport.routetable import Answer, Args, Param, Route, install_routes
from codefleet.treelock import TreeLock

if TYPE_CHECKING:
    from codefleet.analysis.graphanalysis import PlannedTask

__all__ = ["FleetApp", "create_app"]

log = logging.getLogger(__name__)


def sequence_starts(root: Path, specs: Mapping[str, SequenceSpec]) -> dict[str, int]:
    """Each sequence's first value (`start_after` globs the tree: off the loop)."""
    return {name: first_value(root, name, spec.model_dump()) for name, spec in specs.items()}


def new_task(spec: TaskSpec) -> NewTask:
    """The engine's record of one validated task spec (its fields, read once)."""
    return NewTask(
        spec.title,
        spec.id,
        spec.description,
        spec.priority,
        spec.file_scope,
        spec.depends_on,
        spec.max_attempts,
        spec.verify,
        spec.estimate_min,
        None if spec.agent is None else spec.agent.value,
        None if spec.on_stale_read is None else spec.on_stale_read.value,
        None if spec.lease_granularity is None else spec.lease_granularity.value,
        spec.ask,
        ShellMode.of(spec.shell, spec.shell_network),
        tuple(spec.resources),
    )


class FleetApp(FastAPI):
    """FastAPI behind `front`: uvicorn's every request meets the guards and the fast path first."""

    front: Front | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.front is None:
            await super().__call__(scope, receive, send)
        else:
            await self.front(scope, receive, send)

    async def behind(self, scope: Scope, receive: Receive, send: Send) -> None:
        """FastAPI itself: what `front` hands on."""
        await super().__call__(scope, receive, send)


class PartsResponse(Response):
    """A JSON body sent in its parts, in order: the cached 6 MB is never copied into one."""

    media_type = "application/json"

    def __init__(self, parts: tuple[bytes, ...]) -> None:
        self.parts = parts
        super().__init__(headers={"content-length": str(sum(len(p) for p in parts))})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        last = len(self.parts) - 1
        for n, part in enumerate(self.parts):
            await send({"type": "http.response.body", "body": part, "more_body": n < last})


def _json(data: Any, status: int = 200) -> JSONResponse:
    return JSONResponse(data, status_code=status)


def _raw_json(body: bytes) -> Response:
    return Response(body, media_type="application/json")


def _require_dirs(settings: Settings) -> None:
    if not settings.workdir.is_dir():
        raise FileNotFoundError(
            f"working tree {settings.workdir} does not exist or is not a directory"
        )
    if not settings.db.parent.is_dir():
        raise FileNotFoundError(f"the database's directory {settings.db.parent} does not exist")


def listen_url(settings: Settings) -> str:
    """Where this server listens, as a client on this host reaches it (its tree's record)."""
    return settings.model_copy(update={"server_url": None}).url


def build_engine(settings: Settings, hub: EventHub | None = None) -> Engine:
    """The engine over the settings' database (checked first) and tree."""
    tree = TreeRoot(
        settings.workdir, protected=[settings.db, settings.run_dir], names=settings.protected_names
    )
    tree_id = ensure_tree_id(tree.root)  # what a runner on any mount of the tree registers with
    publish = hub.publish if hub else None
    engine = open_engine(settings.db, tree, engine_config(settings), publish, tree_id=tree_id)
    if hub is not None:  # a parked landing claim does not hold up the server's stop
        hub.when_closed(engine.landing_queue.close)
    return engine


def _locked_engine(settings: Settings, hub: EventHub) -> tuple[TreeLock, ServerLock, Engine]:
    """The tree's lock, then the database's, then the engine; what was taken is let go
    when a later step fails (docs/decisions/0003-one-lock-per-tree.md, "One lock per tree")."""
    tree_lock = TreeLock.acquire(settings.workdir, listen_url(settings), settings.db.resolve())
    try:
        lock = ServerLock.acquire(settings.db)  # before anything reads or repairs the database
    except BaseException:
        tree_lock.release()
        raise
    try:
        return tree_lock, lock, build_engine(settings, hub)
    except BaseException:
        lock.release()
        tree_lock.release()
        raise


def create_app(settings: Settings, early_line: bool = False) -> FleetApp:
    """The app over its engine; holds the tree's lock and the database's until shutdown.
    `early_line`: the app will be served; its landed line opens while the routes are built."""
    hub = EventHub(max_streams=settings.max_streams)
    _require_dirs(settings)
    tree_lock, lock, engine = _locked_engine(settings, hub)
    reads = Reads(EngineReads(engine), settings.stale_after)
    follower = LineFollower(reads, hub, engine.tree.root, remote=settings.line_remote)
    if early_line:
        follower.open_early()

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        engine.attach(asyncio.get_running_loop())
        hub.attach(asyncio.get_running_loop())
        watch.attach(asyncio.get_running_loop())
        await follower.open()  # before anyone is served: the line starts at the tree as is
        ticker = asyncio.create_task(engine.run_ticker())
        line = asyncio.create_task(follower.run(), name="landed-line")
        engine.kick()
        try:
            yield
        finally:
            watch.close()
            for task in (line, ticker):
                task.cancel()
                with suppress(asyncio.CancelledError):
                    await task
            hub.close()
            reads.close()
            close_engine(engine)
            lock.release()
            tree_lock.release()

    watch = LoopWatch()  # the time the loop could not run does not count against heartbeats
    engine.agents.deaf_seconds = watch.deaf_seconds
    app = FleetApp(title="CodeFleet", version=__version__, lifespan=lifespan)
    app.state.engine = engine
    app.state.hub = hub
    app.state.lock = lock
    app.state.tree_lock = tree_lock
    _install_errors(app)
    guards = Guards.of(settings.token, HostNames(settings.allowed_host_names, settings.host))
    app.front = Front(app.behind, guards, FastPath(engine), _internal)
    # the routes, grouped by the object each calls: the runner's calls (`transport.routes`),
    # the operator's, the reads, the events, a person's session, the landing queue, the line
    install_runner_routes(app, engine, settings)
    served = Served(engine, reads, hub, settings)
    for rows in (OPERATOR_TASK_ROUTES, OPERATOR_FLEET_ROUTES, TASK_READS, FLEET_READS, EVENT_READS):
        install_routes(app, served, rows)
    install_interactive(app, engine)
    install_landing_routes(app, engine)
    install_landed_routes(app, follower)
    install_metrics(app, reads)
    install_web(app)
    return app


def _install_errors(app: FastAPI) -> None:
    @app.exception_handler(DomainError)
    async def domain_error(_: Request, exc: DomainError) -> JSONResponse:
        return _json(exc.envelope(), exc.status)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [
            {"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")}
            for e in exc.errors()
        ]
        first = errors[0] if errors else {"loc": [], "msg": "invalid request"}
        where = ".".join(str(p) for p in first["loc"])
        message = f"{where}: {first['msg']}" if where else str(first["msg"])
        body = {
            "error": {"code": "invalid_request", "message": message, "detail": {"errors": errors}}
        }
        return _json(body, 422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed", 413: "too_large"}.get(
            exc.status_code, "http_error"
        )
        return _json(
            {"error": {"code": code, "message": str(exc.detail), "detail": {}}}, exc.status_code
        )

    app.add_exception_handler(Exception, _internal)


async def _internal(_: Request, exc: Exception) -> Response:
    """The answer to an unexpected exception, on FastAPI's routes and on the fast path."""
    log.exception("unhandled error")  # an infrastructure fault, never a refusal
    body = {"error": {"code": "internal", "message": type(exc).__name__, "detail": {}}}
    return _json(body, 500)


def _checks_answer(reads: Reads, source: str | None) -> dict[str, Any]:
    """`GET /checks`: the checks, and with `source` the task whose write left that file
    (the graph the checks come from) as it is now (`run` names it before a change)."""
    answer: dict[str, Any] = {"checks": reads.engine.checks()}
    if source is not None:
        answer["written_by"] = reads.engine.check_written_by(source)
    return answer


class Served(NamedTuple):
    """What the operator's and the read rows are installed over: the engine (its operator),
    the read model, the event hub and the settings a few answers carry."""

    engine: Engine
    reads: Reads
    hub: EventHub
    settings: Settings


# -- the operator's calls on the graph and its tasks (`engine.operator`) ---------------------


async def _create(s: Served, a: Args) -> Answer:
    body: GraphBody = a.body
    engine = s.engine
    with collector_off():  # a load's allocations would set off full collections
        specs = [new_task(spec) for spec in body.tasks]
    # The heavy half (a stat per scope path) runs off the loop, so heartbeats are still
    # read meanwhile; the commit re-checks against the state of the moment, on the loop.
    commands = check_commands(body.checks)
    known = sorted({str(r["name"]) for r in s.reads.engine.checks()} | set(commands))
    if body.integration is not None and body.integration not in known:
        raise InvalidGraph(
            f"integration: there is no check named {body.integration!r}; the known "
            f"checks are: {', '.join(known) or '(none)'}",
            {"problem": "unknown_check", "check": body.integration, "known": known},
        )
    prepared = await asyncio.to_thread(engine.operator.prepare_tasks, specs, commands)
    starts = await asyncio.to_thread(sequence_starts, engine.tree.root, body.sequences)
    engine.operator.define_sequences(
        starts
    )  # a counter only ever rises: harmless if the load fails
    with collector_off():
        created = engine.operator.commit_tasks(prepared, frozenset(body.redefine), body.source)
    engine.operator.define_check_resources(check_resources(body.checks), check_reuse(body.checks))
    if body.integration is not None:
        engine.landing_queue.set_integration(body.integration)
    made = set(created)
    redefined = [t for t in prepared.ids if t not in made]
    return 201, Created(created=created, redefined=redefined)


async def _define_checks(s: Served, a: Args) -> Answer:
    body: ChecksBody = a.body
    defined = s.engine.operator.define_checks(check_commands(body.checks), body.source)
    s.engine.operator.define_check_resources(check_resources(body.checks), check_reuse(body.checks))
    return 200, ChecksDefined.model_validate(defined)


async def _cancel(s: Served, a: Args) -> Answer:
    return 200, TaskStatusNow.model_validate(s.engine.operator.cancel(a.param))


async def _retry(s: Served, a: Args) -> Answer:
    return 200, TaskStatusNow.model_validate(s.engine.operator.retry(a.param))


async def _say(s: Served, a: Args) -> Answer:
    return 201, MessageKept.model_validate(s.engine.operator.say(a.param, a.body.text))


async def _answer(s: Served, a: Args) -> Answer:
    answered = s.engine.operator.answer(a.param, a.body.text, a.body.question_id)
    return 200, Question.model_validate(answered.to_json())


async def _questions(s: Served, _: Args) -> Answer:
    asked = [q.to_json() for q in s.engine.operator.open_questions()]
    return 200, Questions.model_validate({"questions": asked})


# The operator's calls on the graph and its tasks: a load, the checks, cancel and retry, a
# message to a task, an answer to an agent's question, the questions. (Operator actions: the
# token when the server has one.)
OPERATOR_TASK_ROUTES: Final = (
    Route("create", "POST", "/tasks", _create, GraphBody, status=201, answer=Created),
    Route("define_checks", "POST", "/checks", _define_checks, ChecksBody, answer=ChecksDefined),
    Route("cancel", "POST", "/tasks/{task_id}/cancel", _cancel, answer=TaskStatusNow),
    Route("retry", "POST", "/tasks/{task_id}/retry", _retry, answer=TaskStatusNow),
    Route(
        "say",
        "POST",
        "/tasks/{task_id}/messages",
        _say,
        MessageBody,
        status=201,
        answer=MessageKept,
    ),
    Route("answer", "POST", "/tasks/{task_id}/answers", _answer, AnswerBody, answer=Question),
    Route("questions", "GET", "/questions", _questions, answer=Questions),
)


# -- the operator's calls on the fleet (`engine.operator`; `engine.reset`) -------------------


async def _fleet_started(s: Served, a: Args) -> Answer:
    fields = a.body.model_dump(exclude_none=True)
    return 200, EventRecorded.model_validate(s.engine.operator.fleet_event("fleet_started", fields))


async def _fleet_finished(s: Served, a: Args) -> Answer:
    fields = a.body.model_dump(exclude_none=True)
    return 200, EventRecorded.model_validate(s.engine.operator.fleet_event("run_finished", fields))


async def _commits(s: Served, a: Args) -> Answer:
    body: CommitsBody = a.body
    pairs = [(c.task_id, c.commit) for c in body.commits]
    return 200, CommitsRecorded.model_validate(s.engine.operator.record_commits(body.branch, pairs))


async def _resume(s: Served, _: Args) -> Answer:
    return 200, FleetResumed.model_validate(s.engine.operator.resume())


async def _budget(s: Served, a: Args) -> Answer:
    return 200, Budget.model_validate(
        s.engine.operator.set_budget(a.body.max_cost_usd, a.body.hard)
    )


async def _reset(s: Served, _: Args) -> Answer:
    if not s.settings.allow_reset:
        raise Forbidden("reset is disabled; set CODEFLEET_ALLOW_RESET=1 on the server")
    s.engine.reset()
    return 200, ResetDone(reset=True)


# The operator's calls on the fleet: a fleet's start and end, its commits, a usage-limit pause
# lifted by hand, the budget, a reset.
OPERATOR_FLEET_ROUTES: Final = (
    Route(
        "fleet_started", "POST", "/fleet/started", _fleet_started, FleetBody, answer=EventRecorded
    ),
    Route(
        "fleet_finished",
        "POST",
        "/fleet/finished",
        _fleet_finished,
        FleetBody,
        answer=EventRecorded,
    ),
    Route("commits", "POST", "/commits", _commits, CommitsBody, answer=CommitsRecorded),
    Route("resume", "POST", "/fleet/resume", _resume, answer=FleetResumed),
    Route("budget", "POST", "/fleet/budget", _budget, BudgetBody, answer=Budget),
    Route("reset", "POST", "/reset", _reset, answer=ResetDone),
)


# -- the reads of the graph and its tasks (`readmodel.readapi.Reads`) ------------------------


async def _tasks(s: Served, a: Args) -> Answer:
    q = a.query
    return 200, Tasks.model_validate({"tasks": s.reads.tasks(q["status"], q["limit"], q["offset"])})


async def _task(s: Served, a: Args) -> Answer:
    return 200, TaskDetail.model_validate(s.reads.task(a.param))


async def _patch(s: Served, a: Args) -> Answer:
    found = s.reads.patch(a.param)
    if a.query["format"] == "json":
        return 200, Patch.model_validate(found)
    text = "".join(f["diff"] for f in found["files"])
    return 200, Response(text, media_type="text/x-diff")


async def _checks(s: Served, a: Args) -> Answer:
    return 200, Checks.model_validate(_checks_answer(s.reads, a.query["source"]))


async def _graph(s: Served, a: Args) -> Answer:
    """`graph check`'s analysis of the stored graph, computed off the event loop."""
    runners = a.query["runners"] or s.settings.runners
    planned = s.reads.planned()  # a snapshot, read on the loop like every other read
    found = await asyncio.to_thread(_analysis_of, planned, runners)
    return 200, GraphAnalysis.model_validate({"runners": runners, **found})


async def _stats(s: Served, _: Args) -> Answer:
    """`codefleet stats`' figures for the dashboard: read on the loop, computed off it."""
    record = s.reads.record()
    return 200, Stats.model_validate(await asyncio.to_thread(_stats_of, record))


TASKS_QUERY = (
    Param("status", TaskStatus | None),
    Param("limit", Annotated[int, Query(ge=1, le=100_000)], 1000),
    Param("offset", Annotated[int, Query(ge=0, le=MAX_INT)], 0),
)
PATCH_FORMAT = Param("format", Annotated[str, Query(pattern="^(text|json)$")], "text")
CHECK_SOURCE = Param(
    "source", Annotated[str | None, Query(min_length=1, max_length=MAX_PATH_CHARS)]
)
GRAPH_RUNNERS = Param("runners", Annotated[int | None, Query(ge=1, le=256)])
TASK_READS: Final = (
    Route("tasks", "GET", "/tasks", _tasks, query=TASKS_QUERY, answer=Tasks),
    Route("task", "GET", "/tasks/{task_id}", _task, answer=TaskDetail),
    # `format=json`'s answer; the default, `text`, is a `Response` of its own (the diff)
    Route("patch", "GET", "/tasks/{task_id}/patch", _patch, query=(PATCH_FORMAT,), answer=Patch),
    Route("checks", "GET", "/checks", _checks, query=(CHECK_SOURCE,), answer=Checks),
    Route("graph", "GET", "/graph", _graph, query=(GRAPH_RUNNERS,), answer=GraphAnalysis),
    Route("stats", "GET", "/stats", _stats, answer=Stats),
)


# -- the reads of the fleet: its runners, leases, resources, conflicts, the state, its health --


async def _agents(s: Served, _: Args) -> Answer:
    return 200, Agents.model_validate({"agents": s.reads.agents()})


async def _leases(s: Served, _: Args) -> Answer:
    return 200, Leases.model_validate({"leases": s.reads.leases()})


async def _resources(s: Served, _: Args) -> Answer:
    """Named resources' holders and waiters, and the sequences (the operator's read)."""
    return 200, Resources.model_validate(s.reads.resources())


async def _conflicts(s: Served, a: Args) -> Answer:
    return 200, _raw_json(await s.reads.conflicts_json(a.query["resolved"]))


async def _state(s: Served, _: Args) -> Answer:
    return 200, PartsResponse(await s.reads.state_json())


async def _health(s: Served, _: Args) -> Answer:
    return 200, Health.model_validate(s.reads.health())


FLEET_READS: Final = (
    Route("agents", "GET", "/agents", _agents, answer=Agents),
    Route("leases", "GET", "/leases", _leases, answer=Leases),
    Route("resources", "GET", "/resources", _resources, answer=Resources),
    # `/conflicts` and `/state` send the projection's encoded JSON as it is (a `Response`):
    # `answer` is its schema, which the fleet test holds that JSON to
    Route(
        "conflicts",
        "GET",
        "/conflicts",
        _conflicts,
        query=(Param("resolved", bool | None),),
        answer=Conflicts,
    ),
    Route("state", "GET", "/state", _state, answer=State),
    Route("health", "GET", "/health", _health, answer=Health),
)


def _analysis_of(planned: list[PlannedTask], runners: int) -> dict[str, Any]:
    from codefleet.analysis.graphanalysis import analyse  # on use: the demo never asks

    return analyse(planned, runners).to_json()


def _stats_of(record: RunRecord) -> dict[str, Any]:
    from codefleet.review.collisionstats import fleet_stats  # on use, as `_analysis_of`
    from codefleet.review.facts import run_facts
    from codefleet.review.statsjson import stats_json

    return stats_json(fleet_stats(run_facts(record)))


async def _events(s: Served, a: Args) -> Answer:
    q = a.query
    if q["wait"]:
        events = await _next_events(s, q)
    else:
        events = s.reads.engine.events(q["since"], q["limit"], q["type"])
    return 200, Events.model_validate({"events": events})


async def _next_events(s: Served, q: Mapping[str, Any]) -> list[dict[str, Any]]:
    """`/events?wait=S`: the page once an event after `since` (of `type`) is logged, or none
    after S s (a scripted wait's doorbell: it asks again at once, not at its next poll)."""
    with s.hub.woken() as wakeup, suppress(TimeoutError):
        async with asyncio.timeout(q["wait"]):
            while not s.hub.closed:
                wakeup.clear()  # before the read: a commit after it wakes the wait below
                if events := s.reads.engine.events(q["since"], q["limit"], q["type"]):
                    return events
                await wakeup.wait()
    return []


async def _stream(s: Served, a: Args) -> Answer:
    last = a.query["last_event_id"]
    cursor = last if last is not None else a.query["since"]
    return 200, EventStream(s.hub, s.reads.engine, cursor)


SINCE = Param("since", Annotated[int, Query(ge=0, le=MAX_INT)], 0)
MAX_EVENTS_WAIT_S: Final = 30.0  # the longest `/events?wait=` holds its answer
LAST_EVENT_ID = Param(
    "last_event_id", Annotated[int | None, Header(alias="Last-Event-ID", ge=0, le=MAX_INT)]
)
# The event log's reads (`EngineReads.events`, the hub): a page of it, and the SSE stream.
EVENT_READS: Final = (
    Route(
        "events",
        "GET",
        "/events",
        _events,
        query=(
            SINCE,
            Param("limit", Annotated[int, Query(ge=1, le=10_000)], 1000),
            Param("type", EventType | None),
            Param("wait", Annotated[float, Query(ge=0, le=MAX_EVENTS_WAIT_S)], 0.0),
        ),
        answer=Events,
    ),
    # the SSE stream: a `Response` of its own, no answer to declare
    Route("stream", "GET", "/events/stream", _stream, query=(SINCE, LAST_EVENT_ID)),
)
