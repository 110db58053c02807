"""The route table: every route is one row but the few written out, and a row's inputs and answer.

The app is built the way the server builds it; a route generated from a row
(`transport.routetable.install_route`) is told from a written-out one by its
endpoint. A row on a bare FastAPI app shows what its typed query parameter and
its typed answer do over HTTP. Each row's place for FastAPI's error messages is
handed over at install, and is what FastAPI itself would read (the pinned version).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated

import fastapi
import fastapi.routing
from fastapi import FastAPI, Query
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from fleet_support import server_settings

from codefleet.api.answermodels import Acknowledged
from codefleet.server.httpapp import create_app
from codefleet.transport.routetable import (
    FASTAPI_PIN,
    Answer,
    Args,
    Param,
    Route,
    install_route,
)

ROW_ENDPOINT = "install_route.<locals>.endpoint"
# git hands its backend the raw request, on two methods; the pages are GET and HEAD, off the schema
WRITTEN_OUT = {
    ("GET", "/git/landed.git/{rest:path}"),
    ("POST", "/git/landed.git/{rest:path}"),
    ("GET", "/"),
    ("GET", "/web/{name}"),
}


def _routes() -> list[APIRoute]:
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "tree").mkdir()
        app = create_app(server_settings(Path(tmp), Path(tmp) / "tree"))
        app.state.engine.store.close()
    return [r for r in app.routes if isinstance(r, APIRoute)]


def test_every_route_but_git_and_the_pages_is_a_row() -> None:
    routes = _routes()
    written = {
        (sorted(r.methods - {"HEAD"})[0], r.path)
        for r in routes
        if r.endpoint.__qualname__ != ROW_ENDPOINT
    }
    rows = [r for r in routes if r.endpoint.__qualname__ == ROW_ENDPOINT]

    assert written == WRITTEN_OUT
    assert len(rows) == 58
    assert all(len(r.methods) == 1 for r in rows), "a row is one method on one path"


def test_each_rows_place_is_handed_to_fastapi_as_it_would_read_it() -> None:
    assert fastapi.__version__ == FASTAPI_PIN, "read transport/routetable.py before upgrading"
    rows = [r for r in _routes() if r.endpoint.__qualname__ == ROW_ENDPOINT]
    cache = fastapi.routing._endpoint_context_cache
    handed = {r.name: cache.pop(id(r.endpoint)) for r in rows}  # as `install_route` left it
    read = {r.name: fastapi.routing._extract_endpoint_context(r.endpoint) for r in rows}
    assert handed == read
    assert handed["acquire"]["function"] == "acquire" and handed["acquire"]["line"] > 0


async def _echo(_: object, a: Args) -> Answer:
    return 200, Acknowledged(ok=a.query["n"] > 1)


def test_a_row_validates_its_typed_query_and_sends_its_typed_answer() -> None:
    app = FastAPI()
    n = Param("n", Annotated[int, Query(ge=1, le=9)], 1)
    install_route(app, None, Route("echo", "GET", "/echo", _echo, query=(n,), answer=Acknowledged))
    client = TestClient(app)

    assert client.get("/echo?n=2").json() == {"ok": True}
    assert client.get("/echo").json() == {"ok": False}
    assert client.get("/echo?n=10").status_code == 422
    schema = app.openapi()["paths"]["/echo"]["get"]
    assert schema["parameters"][0]["schema"]["maximum"] == 9
    answer = schema["responses"]["200"]["content"]["application/json"]["schema"]
    assert answer == {"$ref": "#/components/schemas/Acknowledged"}
