"""The runner routes' fast path answers every request exactly as FastAPI's routes would.

Two servers in one state: one as served (`front.Front`'s guards, then
`FastPath`, in front of FastAPI), one with the fast path taken out
(`Front.fast` None), so FastAPI's routes, generated from the same table, answer. The
same sequence of good and bad requests goes to both; each pair of answers
must agree in status, content type and body (agent ids and timestamps aside).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute
from fleet_support import server_settings

from codefleet.coord.engine import Engine
from codefleet.server.thread import ServerThread
from codefleet.transport.fastpath import FastPath, compile_table, match
from codefleet.transport.routes import HOT_ROUTES
from codefleet.transport.routetable import Answer, Args, Route

TIME = re.compile(r"^\d{4}-\d\d-\d\dT")
JSON = {"content-type": "application/json"}


@dataclass
class Side:
    http: httpx.Client
    agent_id: str
    epoch: int
    fast_path: FastPath | None
    engine: Engine
    app: FastAPI

    def send(self, method: str, path: str, body: str | None, headers: dict[str, str]) -> Any:
        path = path.replace("{agent}", self.agent_id)
        content = None if body is None else body.replace("{agent}", self.agent_id).encode()
        wanted = {k: v.replace("{epoch}", str(self.epoch)) for k, v in headers.items()}
        wanted = {k: v.replace("{stale}", str(self.epoch + 1)) for k, v in wanted.items()}
        answer = self.http.request(method, path, content=content, headers=wanted)
        kind = answer.headers.get("content-type")
        data = answer.json() if kind == "application/json" and answer.content else answer.text
        return answer.status_code, kind, _normal(data, self.agent_id)


def _normal(data: Any, agent_id: str) -> Any:
    if isinstance(data, dict):
        return {k: _normal(v, agent_id) for k, v in data.items()}
    if isinstance(data, list):
        return [_normal(v, agent_id) for v in data]
    if isinstance(data, str):
        return "<time>" if TIME.match(data) else data.replace(agent_id, "<agent>")
    return data


def _side(root: Path, fast: bool) -> Iterator[Side]:
    tree = root / "tree"
    tree.mkdir()
    settings = server_settings(root, tree)
    server = ServerThread(settings)
    assert server.app.front is not None
    if not fast:
        server.app.front.fast = None
    with server, httpx.Client(base_url=server.url) as http:
        agent = http.post("/agents/register", json={"name": "r1", "workdir": str(tree)}).json()
        tasks = [{"id": t, "title": t, "description": "do it"} for t in ("T1", "T2")]
        http.post("/tasks", json={"tasks": tasks}).raise_for_status()
        front = server.app.front
        yield Side(
            http, agent["agent_id"], agent["epoch"], front.fast, server.app.state.engine, server.app
        )


@pytest.fixture(scope="module")
def sides(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Side, Side]]:
    fast = _side(tmp_path_factory.mktemp("fast"), fast=True)
    reference = _side(tmp_path_factory.mktemp("reference"), fast=False)
    yield next(fast), next(reference)
    for side in (fast, reference):
        next(side, None)


EPOCH = {"X-Agent-Epoch": "{epoch}"}
GOOD = {**JSON, **EPOCH}
ACQUIRE = '{"agent_id": "{agent}", "task_id": "T1", "paths": ["a.py"]}'
CASES: list[tuple[str, str, str | None, dict[str, str]]] = [
    ("GET", "/agents/{agent}/assignment?wait=1.5", None, EPOCH),
    ("GET", "/agents/{agent}/assignment?wait=0", None, EPOCH),
    ("GET", "/agents/{agent}/assignment", None, EPOCH),
    ("GET", "/agents/{agent}/assignment?wait=-1", None, EPOCH),
    ("GET", "/agents/{agent}/assignment?wait=31", None, EPOCH),
    ("GET", "/agents/{agent}/assignment?wait=abc", None, EPOCH),
    ("GET", "/agents/{agent}/assignment?wait=1e-1&x=1", None, EPOCH),
    ("GET", "/agents/{agent}/assignment?wait=0", None, {"X-Agent-Epoch": "{stale}"}),
    ("GET", "/agents/nobody/assignment", None, EPOCH),
    ("HEAD", "/agents/{agent}/assignment", None, EPOCH),
    ("POST", "/tasks/T1/start", '{"agent_id": "{agent}"}', {**JSON}),
    ("POST", "/tasks/T1/start", '{"agent_id": "{agent}"}', {**JSON, "X-Agent-Epoch": "x"}),
    ("POST", "/tasks/T1/start", '{"agent_id": "{agent}"}', {**JSON, "X-Agent-Epoch": "007"}),
    ("POST", "/tasks/T1/start", '{"agent_id": "{agent}"}', {**JSON, "X-Agent-Epoch": "1e9"}),
    ("POST", "/tasks/T1/start", '{"agent_id": "{agent}"}', {**JSON, "X-Agent-Epoch": "9" * 30}),
    ("POST", "/tasks/T1/start", '{"agent_id": "{agent}"}', {**JSON, "X-Agent-Epoch": "{stale}"}),
    ("POST", "/tasks/T1/start", None, GOOD),
    ("POST", "/tasks/T1/start", "", GOOD),
    ("POST", "/tasks/T1/start", "{", GOOD),
    ("POST", "/tasks/T1/start", "[]", GOOD),
    ("POST", "/tasks/T1/start", "null", GOOD),
    ("POST", "/tasks/T1/start", '{"agent_id": 1}', GOOD),
    ("POST", "/tasks/T1/start", '{"agent_id": "{agent}", "x": 1}', GOOD),
    ("POST", "/tasks/T1/start", '{"agent_id": "{agent}"}', {**EPOCH, "content-type": "text/plain"}),
    ("POST", "/tasks/T1/start", '{"agent_id": "{agent}"}', EPOCH),
    ("POST", "/tasks/T404/start", '{"agent_id": "{agent}"}', GOOD),
    ("POST", "/tasks//start", '{"agent_id": "{agent}"}', GOOD),
    ("POST", "/tasks/T1/start", '{"agent_id": "{agent}"}', {**EPOCH, "content-type": "application/json; charset=utf-8"}),
    ("POST", "/tasks/T1/start", '{"agent_id": "{agent}"}', GOOD),
    ("GET", "/tasks/T1/start", None, GOOD),
    ("POST", "/leases/acquire", ACQUIRE, GOOD),
    ("POST", "/leases/acquire", ACQUIRE, GOOD),
    ("POST", "/leases/acquire", ACQUIRE.replace("a.py", "../out.py"), GOOD),
    ("POST", "/leases/acquire", ACQUIRE.replace("T1", "T2"), GOOD),
    ("POST", "/leases/acquire", ACQUIRE.replace('"a.py"', "NaN"), GOOD),
    ("POST", "/leases/acquire", ACQUIRE.replace("a.py", "\\ud800"), GOOD),
    ("POST", "/leases/acquire", ACQUIRE.replace('["a.py"]', '"a.py"'), GOOD),
    ("POST", "/leases/acquire", ACQUIRE.replace("a.py", "a" * 5000), GOOD),
    ("POST", "/leases/acquire", "\ufeff" + ACQUIRE, GOOD),
    ("POST", "/leases/acquire", ACQUIRE, {**JSON, "X-Agent-Epoch": "{stale}"}),
    ("POST", "/leases/acquire/", ACQUIRE, GOOD),
    ("POST", "/changes", '{"agent_id": "{agent}", "task_id": "T1", "path": "a.py"}', GOOD),
    ("POST", "/changes", '{"agent_id": "{agent}", "task_id": "T1", "path": ""}', GOOD),
    ("POST", "/changes", '{"agent_id": "{agent}", "task_id": "T1", "sha256": "x"}', GOOD),
    ("POST", "/agents/{agent}/heartbeat", None, EPOCH),
    ("POST", "/agents/{agent}/heartbeat", "{}", GOOD),
    ("POST", "/agents/{agent}/heartbeat", "null", GOOD),
    ("POST", "/agents/{agent}/heartbeat", '{"x": 1}', GOOD),
    ("POST", "/agents/{agent}/heartbeat", "{}", {"content-type": "text/plain", **EPOCH}),
    ("POST", "/agents/{agent}/heartbeat", None, {"X-Agent-Epoch": "{stale}"}),
    ("POST", "/tasks/T1/complete", '{"agent_id": "{agent}", "attempt": 1, "ok": "yes"}', GOOD),
    ("POST", "/tasks/T1/complete", '{"agent_id": "{agent}", "attempt": 1, "ok": true, "cost_usd": Infinity}', GOOD),
    ("POST", "/tasks/T1/complete", '{"agent_id": "{agent}", "attempt": 1, "ok": true, "error_kind": "nope"}', GOOD),
    ("POST", "/tasks/T1/complete", '{"agent_id": "{agent}", "attempt": 2, "ok": true}', GOOD),
    ("POST", "/tasks/T1/complete", '{"agent_id": "{agent}", "attempt": 1, "ok": true, "summary": "\u00e9"}', GOOD),
    ("POST", "/tasks/T1/complete", '{"agent_id": "{agent}", "attempt": 1, "ok": true}', GOOD),
    ("POST", "/leases/acquire", ACQUIRE, GOOD),
]  # fmt: skip


def test_every_runner_request_gets_the_answer_fastapi_gives(sides: tuple[Side, Side]) -> None:
    fast, reference = sides
    for method, path, body, headers in CASES:
        expected = reference.send(method, path, body, headers)
        assert fast.send(method, path, body, headers) == expected, (method, path, body, headers)


def test_the_served_side_has_the_fast_path_and_the_reference_has_none(
    sides: tuple[Side, Side],
) -> None:
    fast, reference = sides
    assert isinstance(fast.fast_path, FastPath)
    assert reference.fast_path is None


def test_the_route_table_matches_as_starlette_does() -> None:
    start = Route("start", "POST", "/tasks/{task_id}/start", _never)
    change = Route("change", "POST", "/changes", _never)
    table = compile_table([start, change])
    assert match(table, "POST", "/tasks/T1/start") == (start, "T1")
    assert match(table, "POST", "/changes") == (change, "")
    for method, path in [
        ("POST", "/tasks//start"),
        ("GET", "/changes"),
        ("POST", "/changes/"),
        ("POST", "/tasks/a/b/start"),
        ("POST", "/tasks/T1/stop"),
    ]:
        assert match(table, method, path) is None


async def _never(engine: Engine, args: Args) -> Answer:
    raise AssertionError("not called")


@pytest.mark.parametrize("fast", [True, False], ids=["fast path", "FastAPI"])
def test_an_unexpected_exception_is_the_apps_500_envelope_on_both_paths(
    tmp_path: Path, fast: bool, caplog: pytest.LogCaptureFixture
) -> None:
    side = _side(tmp_path, fast)
    served = next(side)
    try:
        served.engine.runner.acquire = _broken  # type: ignore[method-assign]
        answer = served.send("POST", "/leases/acquire", ACQUIRE, GOOD)
    finally:
        next(side, None)
    envelope = {"error": {"code": "internal", "message": "RuntimeError", "detail": {}}}
    assert answer == (500, "application/json", envelope)
    assert "unhandled error" in caplog.text


def _broken(*_: object) -> None:
    raise RuntimeError("a fault, not a refusal")


def test_each_hot_route_is_one_row_that_both_the_fast_path_and_fastapi_serve(
    tmp_path: Path,
) -> None:
    side = _side(tmp_path, fast=True)
    served = next(side)
    try:
        assert isinstance(served.fast_path, FastPath)
        assert sorted(r.name for r in served.fast_path.table.values()) == sorted(
            r.name for r in HOT_ROUTES
        )
        declared = [
            (route.path, method)
            for route in served.app.routes
            if isinstance(route, APIRoute)
            for method in route.methods
        ]
    finally:
        next(side, None)
    for hot in HOT_ROUTES:
        assert declared.count((hot.path, hot.method)) == 1, hot.name
