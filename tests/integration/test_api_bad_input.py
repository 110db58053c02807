"""Bad input over raw HTTP: every refusal is a 4xx in the one envelope, and writes nothing.

One server serves the whole module: it holds one registered runner with one
running task, so runner routes can be called with a valid agent and epoch.
Each case snapshots every table through a second SQLite connection before
and after the request; a refused request must leave them byte-for-byte equal.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from fleet_support import server_settings

from codefleet.api.wire import MAX_BODY_BYTES, MAX_DESCRIPTION
from codefleet.server.thread import ServerThread

TABLES = ("tasks", "task_dependencies", "agents", "file_leases", "file_changes", "events")


@dataclass
class Fixture:
    server: ServerThread
    db: Path
    agent_id: str
    epoch: int

    def headers(self) -> dict[str, str]:
        return {"X-Agent-Epoch": str(self.epoch)}

    def tables(self) -> dict[str, list[tuple[Any, ...]]]:
        with sqlite3.connect(self.db) as other:
            return {t: other.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall() for t in TABLES}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fixture]:
    root = tmp_path_factory.mktemp("bad-input")
    tree = root / "tree"
    tree.mkdir()
    (tree / "a.py").write_text("A = 1\n")
    settings = server_settings(root, tree)
    with ServerThread(settings) as server, httpx.Client(base_url=server.url) as http:
        agent = http.post(
            "/agents/register", json={"name": "runner-1", "workdir": str(tree)}
        ).json()
        headers = {"X-Agent-Epoch": str(agent["epoch"])}
        http.post(
            "/tasks", json={"tasks": [{"id": "T1", "title": "t", "description": "do it"}]}
        ).raise_for_status()
        task = http.get(f"/agents/{agent['agent_id']}/assignment?wait=5", headers=headers)
        assert task.json()["task"]["id"] == "T1"
        started = http.post(
            "/tasks/T1/start", json={"agent_id": agent["agent_id"]}, headers=headers
        )
        started.raise_for_status()
        yield Fixture(server, settings.db, agent["agent_id"], agent["epoch"])


@pytest.fixture
async def http(fleet: Fixture) -> AsyncIterator[httpx.AsyncClient]:
    # Plain HTTP on loopback: verify=False skips loading the CA bundle, which is slow.
    async with httpx.AsyncClient(base_url=fleet.server.url, timeout=30, verify=False) as client:
        yield client


def assert_envelope(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text[:500]
    body = response.json()
    assert set(body) == {"error"}
    error = body["error"]
    assert set(error) == {"code", "message", "detail"}
    assert error["code"] == code
    assert isinstance(error["message"], str) and error["message"]
    assert isinstance(error["detail"], dict)
    return error


def task(**fields: Any) -> dict[str, Any]:
    return {"tasks": [{"id": "NEW", "title": "new", "description": "do it", **fields}]}


BAD_GRAPHS: dict[str, Any] = {
    "file_scope as a string": task(file_scope="a.py"),
    "file_scope as an object": task(file_scope={"a.py": True}),
    "file_scope holding a number": task(file_scope=[1]),
    "depends_on as a string": task(depends_on="T1"),
    "priority below range": task(priority=0),
    "priority above range": task(priority=6),
    "priority as a string": task(priority="3"),
    "priority as a float": task(priority=3.0),
    "priority as a bool": task(priority=True),
    "max_attempts zero": task(max_attempts=0),
    "an unknown key in a task": task(blocked_by=["T1"]),
    "an unknown top-level key": {"tasks": [{"title": "x", "description": "do it"}], "extra": 1},
    "a missing title": {"tasks": [{"id": "NEW"}]},
    "an empty title": task(title=""),
    "a missing task list": {},
    "an empty task list": {"tasks": []},
    "the task list as an object": {"tasks": {"id": "NEW", "title": "new", "description": "do it"}},
    "an array body": [{"id": "NEW", "title": "new"}],
    "a null body": None,
    "a multi-megabyte description": task(description="x" * (3 * 1024 * 1024)),
    "a description one past the limit": task(description="x" * (MAX_DESCRIPTION + 1)),
}


@pytest.mark.parametrize("case", BAD_GRAPHS, ids=list(BAD_GRAPHS))
async def test_a_malformed_graph_is_a_422_that_writes_nothing(
    fleet: Fixture, http: httpx.AsyncClient, case: str
):
    before = fleet.tables()

    response = await http.post("/tasks", json=BAD_GRAPHS[case])

    assert_envelope(response, 422, "invalid_request")
    assert fleet.tables() == before


async def test_a_validation_error_does_not_echo_the_input_back(
    fleet: Fixture, http: httpx.AsyncClient
):
    response = await http.post("/tasks", json=task(description="x" * (MAX_DESCRIPTION + 1)))

    assert_envelope(response, 422, "invalid_request")
    assert len(response.content) < 2000


@pytest.mark.parametrize(
    "content",
    [b'{"tasks": [', b"not json at all", b'{"tasks": [{"title": "x", "description": "do it",}]}'],
    ids=["truncated", "prose", "trailing comma"],
)
async def test_malformed_json_is_a_422_that_writes_nothing(
    fleet: Fixture, http: httpx.AsyncClient, content: bytes
):
    before = fleet.tables()

    response = await http.post(
        "/tasks", content=content, headers={"content-type": "application/json"}
    )

    assert_envelope(response, 422, "invalid_request")
    assert fleet.tables() == before


async def test_a_body_that_is_not_utf_8_is_a_400_that_writes_nothing(
    fleet: Fixture, http: httpx.AsyncClient
):
    before = fleet.tables()

    response = await http.post(
        "/tasks", content=b"\xff\xfe\x00", headers={"content-type": "application/json"}
    )

    assert_envelope(response, 400, "http_error")  # FastAPI cannot even decode it
    assert fleet.tables() == before


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded"])
async def test_a_body_that_is_not_declared_json_is_a_422(
    fleet: Fixture, http: httpx.AsyncClient, content_type: str
):
    before = fleet.tables()

    response = await http.post(
        "/tasks",
        content=b'{"tasks": [{"title": "x", "description": "do it"}]}',
        headers={"content-type": content_type},
    )

    assert_envelope(response, 422, "invalid_request")
    assert fleet.tables() == before


async def test_a_body_declared_over_the_limit_is_refused_413_before_it_is_read(
    fleet: Fixture, http: httpx.AsyncClient
):
    before = fleet.tables()
    body = b'{"tasks": [{"title": "' + b"x" * (MAX_BODY_BYTES + 1) + b'"}]}'

    response = await http.post("/tasks", content=body, headers={"content-type": "application/json"})

    assert_envelope(response, 413, "too_large")
    assert fleet.tables() == before


async def test_a_chunked_body_over_the_limit_is_refused_413(
    fleet: Fixture, http: httpx.AsyncClient
):
    before = fleet.tables()
    chunk = b"x" * (1 << 20)

    async def chunks() -> Any:
        yield b'{"tasks": [{"title": "'
        for _ in range(MAX_BODY_BYTES // len(chunk) + 1):
            yield chunk
        yield b'"}]}'

    response = await http.post(
        "/tasks", content=chunks(), headers={"content-type": "application/json"}
    )

    assert_envelope(response, 413, "too_large")
    assert fleet.tables() == before


def runner_cases(fixture: Fixture) -> dict[str, tuple[str, str, dict[str, Any], int, str]]:
    """(method, path, request kwargs, status, code) for each refused runner call."""
    agent, headers = fixture.agent_id, fixture.headers()
    ok_report = {"agent_id": agent, "attempt": 1, "ok": True}
    return {
        "register with a bad name": ("POST", "/agents/register", {"json": {"name": "has space"}}, 422, "invalid_request"),
        "register without a name": ("POST", "/agents/register", {"json": {"pid": 1}}, 422, "invalid_request"),
        "register with a string pid": ("POST", "/agents/register", {"json": {"name": "r", "pid": "1"}}, 422, "invalid_request"),
        "register with an unknown key": ("POST", "/agents/register", {"json": {"name": "r", "role": "x"}}, 422, "invalid_request"),
        "heartbeat of an unknown agent": ("POST", "/agents/a_000000000000/heartbeat", {"json": {}, "headers": headers}, 404, "not_found"),
        "heartbeat without an epoch": ("POST", f"/agents/{agent}/heartbeat", {"json": {}}, 422, "invalid_request"),
        "heartbeat with a word for an epoch": ("POST", f"/agents/{agent}/heartbeat", {"json": {}, "headers": {"X-Agent-Epoch": "one"}}, 422, "invalid_request"),
        "heartbeat with a body field": ("POST", f"/agents/{agent}/heartbeat", {"json": {"x": 1}, "headers": headers}, 422, "invalid_request"),
        "assignment of an unknown agent": ("GET", "/agents/a_000000000000/assignment", {"headers": headers}, 404, "not_found"),
        "assignment with a negative wait": ("GET", f"/agents/{agent}/assignment?wait=-1", {"headers": headers}, 422, "invalid_request"),
        "assignment with a wait too long": ("GET", f"/agents/{agent}/assignment?wait=31", {"headers": headers}, 422, "invalid_request"),
        "leaving as an unknown agent": ("DELETE", "/agents/a_000000000000", {"headers": headers}, 404, "not_found"),
        "leaving with a stale epoch": ("DELETE", f"/agents/{agent}", {"headers": {"X-Agent-Epoch": "99"}}, 409, "stale_epoch"),
        "starting an unknown task": ("POST", "/tasks/NOPE/start", {"json": {"agent_id": agent}, "headers": headers}, 404, "not_found"),
        "starting as an unknown agent": ("POST", "/tasks/T1/start", {"json": {"agent_id": "a_000000000000"}, "headers": headers}, 404, "not_found"),
        "acquiring as an unknown agent": ("POST", "/leases/acquire", {"json": {"agent_id": "a_000000000000", "task_id": "T1", "paths": ["a.py"]}, "headers": headers}, 404, "not_found"),
        "acquiring paths given as a string": ("POST", "/leases/acquire", {"json": {"agent_id": agent, "task_id": "T1", "paths": "a.py"}, "headers": headers}, 422, "invalid_request"),
        "acquiring too many paths at once": ("POST", "/leases/acquire", {"json": {"agent_id": agent, "task_id": "T1", "paths": [f"f{n}.py" for n in range(101)]}, "headers": headers}, 422, "invalid_request"),
        "acquiring without paths": ("POST", "/leases/acquire", {"json": {"agent_id": agent, "task_id": "T1"}, "headers": headers}, 422, "invalid_request"),
        "recording a change to an unknown task": ("POST", "/changes", {"json": {"agent_id": agent, "task_id": "NOPE", "path": "a.py"}, "headers": headers}, 404, "not_found"),
        "recording a change as an unknown agent": ("POST", "/changes", {"json": {"agent_id": "a_000000000000", "task_id": "T1", "path": "a.py"}, "headers": headers}, 404, "not_found"),
        "recording a change with an empty path": ("POST", "/changes", {"json": {"agent_id": agent, "task_id": "T1", "path": ""}, "headers": headers}, 422, "invalid_request"),
        "completing an unknown task": ("POST", "/tasks/NOPE/complete", {"json": ok_report, "headers": headers}, 404, "not_found"),
        "completing attempt zero": ("POST", "/tasks/T1/complete", {"json": {**ok_report, "attempt": 0}, "headers": headers}, 422, "invalid_request"),
        "completing without ok": ("POST", "/tasks/T1/complete", {"json": {"agent_id": agent, "attempt": 1}, "headers": headers}, 422, "invalid_request"),
        "completing with ok as a string": ("POST", "/tasks/T1/complete", {"json": {**ok_report, "ok": "yes"}, "headers": headers}, 422, "invalid_request"),
        "completing with an unknown error kind": ("POST", "/tasks/T1/complete", {"json": {**ok_report, "ok": False, "error_kind": "oops"}, "headers": headers}, 422, "invalid_request"),
        "completing with negative tokens": ("POST", "/tasks/T1/complete", {"json": {**ok_report, "input_tokens": -1}, "headers": headers}, 422, "invalid_request"),
        "completing a future attempt": ("POST", "/tasks/T1/complete", {"json": {**ok_report, "attempt": 2}, "headers": headers}, 409, "not_owner"),
    }  # fmt: skip


OPERATOR_CASES: dict[str, tuple[str, str, dict[str, Any], int, str]] = {
    "reading an unknown task": ("GET", "/tasks/NOPE", {}, 404, "not_found"),
    "cancelling an unknown task": ("POST", "/tasks/NOPE/cancel", {}, 404, "not_found"),
    "retrying an unknown task": ("POST", "/tasks/NOPE/retry", {}, 404, "not_found"),
    "retrying a running task": ("POST", "/tasks/T1/retry", {}, 409, "invalid_state"),
    "a task page of zero": ("GET", "/tasks?limit=0", {}, 422, "invalid_request"),
    "a negative task offset": ("GET", "/tasks?offset=-1", {}, 422, "invalid_request"),
    "a negative event cursor": ("GET", "/events?since=-1", {}, 422, "invalid_request"),
    "an event cursor that is a word": ("GET", "/events?since=latest", {}, 422, "invalid_request"),
    "an event page too large": ("GET", "/events?limit=10001", {}, 422, "invalid_request"),
    "conflicts resolved=maybe": ("GET", "/conflicts?resolved=maybe", {}, 422, "invalid_request"),
    "a fleet bookend with an unknown key": ("POST", "/fleet/started", {"json": {"who": "me"}}, 422, "invalid_request"),
    "a reset on a server that forbids it": ("POST", "/reset", {}, 403, "forbidden"),
    "an unknown route": ("GET", "/nowhere", {}, 404, "not_found"),
    "an unknown nested route": ("POST", "/tasks/T1/explode", {}, 404, "not_found"),
    "a wrong method": ("PUT", "/tasks", {"json": {}}, 405, "method_not_allowed"),
}  # fmt: skip

RUNNER_CASE_IDS = [
    "register with a bad name",
    "register without a name",
    "register with a string pid",
    "register with an unknown key",
    "heartbeat of an unknown agent",
    "heartbeat without an epoch",
    "heartbeat with a word for an epoch",
    "heartbeat with a body field",
    "assignment of an unknown agent",
    "assignment with a negative wait",
    "assignment with a wait too long",
    "leaving as an unknown agent",
    "leaving with a stale epoch",
    "starting an unknown task",
    "starting as an unknown agent",
    "acquiring as an unknown agent",
    "acquiring paths given as a string",
    "acquiring too many paths at once",
    "acquiring without paths",
    "recording a change to an unknown task",
    "recording a change as an unknown agent",
    "recording a change with an empty path",
    "completing an unknown task",
    "completing attempt zero",
    "completing without ok",
    "completing with ok as a string",
    "completing with an unknown error kind",
    "completing with negative tokens",
    "completing a future attempt",
]


def test_every_runner_case_is_listed_once():
    fixture = Fixture(server=None, db=Path(), agent_id="a", epoch=1)  # type: ignore[arg-type]
    assert sorted(runner_cases(fixture)) == sorted(RUNNER_CASE_IDS)


@pytest.mark.parametrize("case", RUNNER_CASE_IDS)
async def test_a_refused_runner_call_is_a_4xx_envelope_that_writes_nothing(
    fleet: Fixture, http: httpx.AsyncClient, case: str
):
    method, path, kwargs, status, code = runner_cases(fleet)[case]
    before = fleet.tables()

    response = await http.request(method, path, **kwargs)

    assert_envelope(response, status, code)
    assert fleet.tables() == before


@pytest.mark.parametrize("case", OPERATOR_CASES, ids=list(OPERATOR_CASES))
async def test_a_refused_operator_call_is_a_4xx_envelope_that_writes_nothing(
    fleet: Fixture, http: httpx.AsyncClient, case: str
):
    method, path, kwargs, status, code = OPERATOR_CASES[case]
    before = fleet.tables()

    response = await http.request(method, path, **kwargs)

    assert_envelope(response, status, code)
    assert fleet.tables() == before


async def test_after_all_that_the_server_is_healthy_and_its_state_untouched(
    fleet: Fixture, http: httpx.AsyncClient
):
    state = (await http.get("/state")).json()

    assert (await http.get("/health")).json()["status"] == "ok"
    assert [(t["id"], t["status"]) for t in state["tasks"]] == [("T1", "running")]
    assert [a["name"] for a in state["agents"]] == ["runner-1"]
