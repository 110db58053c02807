"""Every JSON answer is typed: each row declares its model, and a real run's answers fit it.

A row that answers JSON declares its answer (`transport.routetable.Route.answer`);
only a 204 and a row sending a `Response` of its own (the SSE stream, the
metrics' text) declare none. Then the every-event fleet run
(`test_fleet.test_every_event_type_is_emitted_by_a_scripted_fleet`: the real
runner, server and store, only the brain scripted) runs behind a recorder in
front of the server's front door, so the fast path's answers are recorded too;
the reads, a person's calls and the landing queue's are asked once more after it.
Each recorded 2xx JSON answer is validated against the model its route's row
declared (the route's `response_model`), which forbids a key it does not name.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI
from fastapi.routing import APIRoute
from fleet_support import server_settings
from pydantic import TypeAdapter, ValidationError
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from test_fleet import drain
from test_fleet import test_every_event_type_is_emitted_by_a_scripted_fleet as every_event

from codefleet.api.client import FleetClient
from codefleet.api.readanswers import State
from codefleet.server.httpapp import create_app
from codefleet.server.thread import ServerThread

ROW_ENDPOINT = "install_route.<locals>.endpoint"
OWN_RESPONSE = {"stream", "scrape"}  # the SSE stream, the metrics' text: no JSON to declare
# Rows the run does not reach: a clone's delivery, a reset (off unless the server allows it),
# an operator's answer (the run's question is left to time out; `ask` answers the same model)
NOT_REACHED = {"delivery", "reset", "answer"}


def _app() -> FastAPI:
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "tree").mkdir()
        app = create_app(server_settings(Path(tmp), Path(tmp) / "tree"))
        app.state.engine.store.close()
    return app


def _app_routes() -> list[APIRoute]:
    return [r for r in _app().routes if isinstance(r, APIRoute)]


def _rows(routes: list[APIRoute]) -> list[APIRoute]:
    return [r for r in routes if r.endpoint.__qualname__ == ROW_ENDPOINT]


def test_every_row_that_answers_json_declares_its_answer() -> None:
    rows = _rows(_app_routes())
    untyped = {r.name for r in rows if r.response_model is None}
    empty = {r.name for r in rows if r.status_code == 204}

    assert untyped == OWN_RESPONSE | empty
    assert empty == {"leave"}


def test_the_schema_names_each_rows_answer() -> None:
    app = _app()
    paths = app.openapi()["paths"]
    unnamed = []
    for row in _rows([r for r in app.routes if isinstance(r, APIRoute)]):
        (method,) = row.methods
        answer = paths[row.path][method.lower()]["responses"][str(row.status_code or 200)]
        if row.response_model is not None and "schema" not in answer["content"]["application/json"]:
            unnamed.append(row.name)

    assert unnamed == []
    state = paths["/state"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert state == {"$ref": f"#/components/schemas/{State.__name__}"}


@dataclass(frozen=True, slots=True)
class Recorded:
    """One answer the server sent: the request's method and path, the status and the body."""

    method: str
    path: str
    status: int
    content_type: bytes
    body: bytes


class Recorder:
    """ASGI in front of the server's front door: records each finished answer."""

    def __init__(self, inner: ASGIApp, server: ServerThread) -> None:
        self.inner = inner
        self.server = server
        self.url = server.url
        self.answers: list[Recorded] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.inner(scope, receive, send)
            return
        head: dict[str, Any] = {}
        chunks: list[bytes] = []

        async def recording(message: Message) -> None:
            if message["type"] == "http.response.start":
                head.update(status=message["status"], headers=dict(message.get("headers", [])))
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
            await send(message)

        await self.inner(scope, receive, recording)
        kind = head.get("headers", {}).get(b"content-type", b"")
        self.answers.append(
            Recorded(scope["method"], scope["path"], head.get("status", 0), kind, b"".join(chunks))
        )


def recording(make_server: Callable[..., ServerThread], into: list[Recorder]) -> Any:
    """`make_server`, each server it starts behind a recorder (appended to `into`)."""

    def make(**overrides: Any) -> ServerThread:
        server = make_server(**overrides)
        recorder = Recorder(server.app.front, server)
        server.app.front = recorder
        into.append(recorder)
        return server

    return make


def route_of(routes: list[APIRoute], method: str, path: str) -> APIRoute:
    scope = {"type": "http", "method": method, "path": path, "root_path": ""}
    for route in routes:
        if route.matches(scope)[0] is Match.FULL:
            return route
    raise AssertionError(f"no route answers {method} {path}")


def misfits(routes: list[APIRoute], answers: list[Recorded]) -> tuple[set[str], list[str]]:
    """The rows whose JSON answers were seen, and each answer that is not its row's model."""
    seen: set[str] = set()
    wrong: list[str] = []
    for answer in answers:
        if not (200 <= answer.status < 300 and answer.content_type == b"application/json"):
            continue
        route = route_of(routes, answer.method, answer.path)
        seen.add(route.name)
        if route.response_model is None:
            wrong.append(f"{route.name}: answered JSON but declares no answer")
            continue
        try:
            TypeAdapter(route.response_model).validate_json(answer.body)
        except ValidationError as err:
            wrong.append(f"{answer.method} {answer.path}: {err}")
    return seen, wrong


def _ask_the_rest(url: str, workdir: Path) -> None:
    """The reads, a person's calls and the operator's that the fleet run does not make."""
    (workdir / "p.txt").write_text("p\n")
    person = {"session_id": "s-typed", "user": "alice"}
    with httpx.Client(base_url=url) as http:
        for path in (
            "/tasks", "/tasks/hold", "/tasks/hold/patch?format=json", "/checks",
            "/checks?source=a.py", "/graph", "/stats", "/agents", "/leases", "/resources",
            "/events?limit=50", "/questions", "/landed", "/landing", "/health", "/state",
            "/conflicts", "/conflicts?resolved=false",
        ):  # fmt: skip
            http.get(path).raise_for_status()
        for path, body in (
            ("/interactive/acquire", {**person, "paths": ["p.txt"]}),
            ("/interactive/changes", {**person, "paths": ["p.txt"]}),
            ("/interactive/acquire", {**person, "session_id": "s-other", "paths": ["p.txt"]}),
            ("/interactive/hold", {**person, "names": ["db"]}),
            ("/agents", None),  # a person's session among the agents
            ("/interactive/unhold", {"names": ["db", "cache"]}),
            ("/interactive/release", {"session_id": "s-typed"}),
            ("/fleet/resume", {}),
            ("/landing/resume", {}),
        ):
            answer = http.get(path) if body is None else http.post(path, json=body)
            answer.raise_for_status()


async def test_every_json_answer_of_a_fleet_run_is_the_model_its_row_declares(
    wait_until: Any, make_server: Callable[..., ServerThread], workdir: Path, tmp_path: Path
) -> None:
    recorders: list[Recorder] = []
    await every_event(wait_until, recording(make_server, recorders), workdir, tmp_path)
    (recorder,) = recorders
    async with FleetClient(recorder.url) as client:  # a session's resource, by the real runner
        await client.set_budget(None)  # the run ends with its budget spent
        await client.create_tasks([{"id": "res", "title": "r", "description": "do it"}])
    await drain(recorder.server, workdir, {"res": [{"acquire_resource": "cache"}]})
    _ask_the_rest(recorder.url, workdir)
    routes = _app_routes()

    seen, wrong = misfits(routes, recorder.answers)

    assert wrong == []
    typed = {r.name for r in _rows(routes) if r.response_model is not None}
    assert typed - seen == NOT_REACHED
