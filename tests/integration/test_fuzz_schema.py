"""HTTP fuzzing of the whole wire API with schemathesis, against a real server.

The server is a real `ServerThread` (uvicorn, SQLite, the token guard and the
body limit in front), seeded with a few tasks, a running attempt and a lease,
so generated calls meet real rows as well as unknown ids. Schemathesis reads
`/openapi.json` and generates, for every operation, schema-valid and
schema-violating requests (bounded per operation, derandomized so CI sees the
same examples every run); a stateful run then chains calls through the links
added below (register -> heartbeat/assignment/leave, create -> read/cancel/
retry/patch), so epochs, agent ids and task ids are real.

The properties, for every response: never a 5xx; every 4xx is the one error
envelope `{"error": {"code", "message", "detail"}}`; data the schema forbids is
refused (schemathesis' `negative_data_rejection`); a 2xx answer conforms to the
answer model its route declares (`response_schema_conformance`). `CODEFLEET_FUZZ_EXAMPLES`
raises the bound for a longer run by hand, `CODEFLEET_FUZZ_RANDOM=1` draws new
examples instead of CI's fixed ones, and `CODEFLEET_FUZZ_REPORT=FILE` writes the
figures (examples, statuses) quoted in docs/history/reliability-log.md.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from fleet_support import server_settings
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    negative_data_rejection,
    response_schema_conformance,
)

from codefleet.server.httpapp import create_app
from codefleet.server.thread import ServerThread

TOKEN = "fuzz-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
EXAMPLES = int(os.environ.get("CODEFLEET_FUZZ_EXAMPLES", "30"))
STATEFUL_EXAMPLES = max(5, EXAMPLES // 3)
DERANDOMIZE = os.environ.get("CODEFLEET_FUZZ_RANDOM") != "1"  # CI: the same examples every run
STREAM_TIMEOUT_S = 0.3
REQUEST_TIMEOUT_S = 10.0
FIGURES: Counter[str] = Counter()

# Links the stateful run follows (FastAPI declares none): real ids and epochs flow onward.
AGENT = {"agent_id": "$response.body#/agent_id"}
EPOCH = {"header.X-Agent-Epoch": "$response.body#/epoch"}
LINKS: dict[tuple[str, str, str], dict[str, dict[str, Any]]] = {
    ("/agents/register", "post", "200"): {
        "Heartbeat": {"operationId": "heartbeat", "parameters": {**AGENT, **EPOCH}},
        "Assignment": {"operationId": "assignment", "parameters": {**AGENT, **EPOCH}},
        "Leave": {"operationId": "leave", "parameters": {**AGENT, **EPOCH}},
    },
    ("/tasks", "post", "201"): {
        f"{name.title()}": {
            "operationId": name,
            "parameters": {"task_id": "$response.body#/created/0"},
        }
        for name in ("task", "patch", "cancel", "retry")
    },
}


def _with_links(document: dict[str, Any]) -> dict[str, Any]:
    """Name the operations after their handlers and add the links above."""
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            operation["operationId"] = operation["operationId"].split("_")[0]
            for (l_path, l_method, status), links in LINKS.items():
                if (path, method) == (l_path, l_method):
                    operation["responses"][status]["links"] = links
    return document


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    root = tmp_path_factory.mktemp("fuzz")
    tree = root / "tree"
    (tree / ".git").mkdir(parents=True)
    (tree / "a.py").write_text("A = 1\n")
    settings_ = server_settings(root, tree, token=TOKEN, tick_interval=0.05)
    with ServerThread(settings_) as server, httpx.Client(base_url=server.url, headers=AUTH) as http:
        http.post(
            "/tasks",
            json={
                "tasks": [
                    {"id": "T1", "title": "t", "description": "do it"},
                    {"id": "T2", "title": "u", "description": "do it", "depends_on": ["T1"]},
                ]
            },
        ).raise_for_status()
        agent = http.post(
            "/agents/register", json={"name": "runner-1", "workdir": str(tree)}
        ).json()
        epoch = {"X-Agent-Epoch": str(agent["epoch"])}
        assert http.get(f"/agents/{agent['agent_id']}/assignment?wait=5", headers=epoch).json()
        http.post("/tasks/T1/start", json={"agent_id": agent["agent_id"]}, headers=epoch)
        body = {"agent_id": agent["agent_id"], "task_id": "T1", "paths": ["a.py"]}
        assert http.post("/leases/acquire", json=body, headers=epoch).json()["decision"] == "allow"
        yield server


def _openapi_document() -> dict[str, Any]:
    """The server's OpenAPI document (it does not depend on the settings), built once."""
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "tree").mkdir()
        app = create_app(server_settings(Path(tmp), Path(tmp) / "tree"))
        document = app.openapi()
        app.state.engine.store.close()
    return document


def test_every_operation_of_the_schema_has_an_operation_id_of_its_own() -> None:
    paths = _openapi_document()["paths"]
    ids = Counter(op["operationId"] for ops in paths.values() for op in ops.values())

    assert [name for name, n in ids.items() if n > 1] == []


# Loaded at import: schemathesis' fixture-based lazy loader does not work with pytest 9.
schema = schemathesis.openapi.from_dict(_with_links(_openapi_document()))
schema.config.update(headers=AUTH, request_timeout=REQUEST_TIMEOUT_S)
schema.config.generation.update(max_examples=EXAMPLES)


def timeout_for(case: Any) -> float:
    return STREAM_TIMEOUT_S if case.path == "/events/stream" else REQUEST_TIMEOUT_S


def assert_envelope(response: Any) -> None:
    """A 4xx must be the one error shape, with a code and a message a person can read."""
    try:
        body = response.json()
    except ValueError:
        pytest.fail(f"{response.status_code} without a JSON body: {response.text[:300]!r}")
    assert isinstance(body, dict) and set(body) == {"error"}, body
    error = body["error"]
    assert set(error) == {"code", "message", "detail"}, error
    assert isinstance(error["code"], str) and error["code"]
    assert isinstance(error["message"], str) and error["message"]
    assert isinstance(error["detail"], dict)


def check_response(response: Any, case: Any, kind: str = "stateless") -> None:
    FIGURES["examples"] += 1
    FIGURES[f"{kind}_examples"] += 1
    FIGURES[f"{response.status_code // 100}xx"] += 1
    case.validate_response(response, checks=[not_a_server_error, negative_data_rejection])
    if 200 <= response.status_code < 300:  # a typed answer (a row's `answer`) is what it says
        case.validate_response(response, checks=[response_schema_conformance])
    if 400 <= response.status_code < 500:
        assert_envelope(response)


@schema.parametrize()
@settings(
    deadline=None, derandomize=DERANDOMIZE, database=None, suppress_health_check=list(HealthCheck)
)
def test_no_generated_request_gets_a_5xx_and_every_4xx_is_the_envelope(
    case: Any, fuzzed: ServerThread
) -> None:
    response = case.call(base_url=fuzzed.url, timeout=timeout_for(case))

    check_response(response, case)


def test_stateful_sequences_through_the_links_get_no_5xx_and_only_envelopes(
    fuzzed: ServerThread,
) -> None:
    machine = schema.as_state_machine()

    class Checked(machine):  # type: ignore[misc, valid-type]
        def before_call(self, case: Any) -> None:
            for name, value in list((case.headers or {}).items()):
                case.headers[name] = str(value)  # a linked epoch arrives as an int

        def get_call_kwargs(self, case: Any) -> dict[str, Any]:
            return {"base_url": fuzzed.url, "timeout": timeout_for(case)}

        def validate_response(self, response: Any, case: Any, **_: Any) -> None:
            check_response(response, case, "stateful")

    Checked.run(
        settings=settings(
            max_examples=STATEFUL_EXAMPLES,
            stateful_step_count=8,
            deadline=None,
            derandomize=DERANDOMIZE,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
    )
    assert FIGURES["stateful_examples"] > 0


def test_the_server_is_still_healthy_after_the_fuzzing(fuzzed: ServerThread) -> None:
    health = httpx.get(f"{fuzzed.url}/health").json()

    assert health["status"] == "ok"
    report = os.environ.get("CODEFLEET_FUZZ_REPORT")
    if report:
        Path(report).write_text(json.dumps({"max_examples": EXAMPLES, **FIGURES}, indent=2) + "\n")
    assert FIGURES["5xx"] == 0
