"""One record, one type: the attempt report and the assignment across the wire.

The report a runner sends reaches the engine unchanged (runner -> client JSON ->
the server's pydantic body -> `AttemptReport`), and the wire still refuses a body
with an unknown or a missing field. The assignment JSON parses into `AssignedTask`
in the client, every field kept.
"""

from __future__ import annotations

import json
from dataclasses import fields
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from codefleet.api.client import FleetClient
from codefleet.api.wire import CompleteBody
from codefleet.attempt import AssignedTask, AttemptReport, OperatorNote
from codefleet.models import ErrorKind, Granularity, StaleReadPolicy

# Every field away from its default, so a field lost on the way cannot pass unnoticed.
FULL = AttemptReport(
    attempt=2,
    ok=False,
    summary="half done",
    error="a.py is held by runner-1",
    error_kind=ErrorKind.RATE_LIMITED,
    blocked_on_path="a.py",
    input_tokens=1200,
    output_tokens=80,
    cost_usd=0.125,
    duration_ms=4321,
    session_id="s-1",
    files_written=("b.py", "pkg/c.py"),
    retry_after_s=17.5,
)


async def sent_body(report: AttemptReport) -> dict[str, Any]:
    """The JSON body `FleetClient.complete` puts on the wire for `report`."""
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"status": "failed", "duplicate": False})

    async with FleetClient("http://fleet", transport=httpx.MockTransport(answer)) as client:
        await client.complete("T1", "a_1", 3, report)
    [request] = seen
    assert (request.url.path, request.headers["X-Agent-Epoch"]) == ("/tasks/T1/complete", "3")
    body: dict[str, Any] = json.loads(request.content)
    return body


def test_the_round_trip_fixture_sets_every_field_away_from_its_default() -> None:
    defaults = AttemptReport(attempt=1, ok=True)
    same = [
        f.name for f in fields(AttemptReport) if getattr(FULL, f.name) == getattr(defaults, f.name)
    ]
    assert same == []


async def test_a_report_reaches_the_engine_type_unchanged_through_client_json_and_wire_body() -> (
    None
):
    body = await sent_body(FULL)

    arrived = CompleteBody.model_validate_json(json.dumps(body))

    assert arrived.agent_id == "a_1"
    assert arrived.report() == FULL


async def test_the_wire_json_of_a_report_is_the_runner_body_of_before() -> None:
    body = await sent_body(AttemptReport(attempt=1, ok=True, summary="done", duration_ms=5))

    assert body == {
        "agent_id": "a_1",
        "attempt": 1,
        "ok": True,
        "summary": "done",
        "error": None,
        "error_kind": None,
        "blocked_on_path": None,
        "input_tokens": 0,
        "output_tokens": 0,
        "cost_usd": 0.0,
        "duration_ms": 5,
        "session_id": None,
        "files_written": [],
    }
    assert (await sent_body(FULL))["retry_after_s"] == 17.5  # sent only when a limit said so


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"surprise": 1}, "extra_forbidden"),
        ({"ok": None}, "missing"),
        ({"attempt": None}, "missing"),
        ({"error_kind": "bored"}, "enum"),
    ],
)
async def test_the_wire_refuses_an_unknown_a_missing_or_a_wrong_field(
    change: dict[str, Any], problem: str
) -> None:
    body = await sent_body(FULL)
    for key, value in change.items():
        if value is None:
            del body[key]
        else:
            body[key] = value

    with pytest.raises(ValidationError) as refused:
        CompleteBody.model_validate_json(json.dumps(body))

    assert [e["type"] for e in refused.value.errors()] == [problem]


async def test_the_client_parses_the_assignment_json_into_one_type_with_every_field() -> None:
    wire = {
        "id": "T4",
        "title": "Add middleware",
        "description": "Edit api.py first.",
        "priority": 3,
        "file_scope": ["api.py", "mw.py"],
        "attempts": 2,
        "deadline": "2026-01-02T03:04:05.678Z",
        "blocked_on_path": "api.py",
        "error": "vetoed: api.py is held",
        "error_kind": "veto",
        "verify": "test",
        "verify_at_landing": True,
        "on_stale_read": "retry",
        "lease_granularity": "part",
        "notes": [{"seq": 1, "text": "use httpx"}],
        "ask": False,
        "shell_mode": "network",
        "resources": ["db"],
        "repair_session": "s-1",
    }

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"task": wire})

    async with FleetClient("http://fleet", transport=httpx.MockTransport(answer)) as client:
        task = await client.assignment("a_1", 3)

    assert task == AssignedTask(
        id="T4",
        title="Add middleware",
        description="Edit api.py first.",
        priority=3,
        file_scope=("api.py", "mw.py"),
        attempts=2,
        deadline=datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC),
        blocked_on_path="api.py",
        error="vetoed: api.py is held",
        error_kind=ErrorKind.VETO,
        verify="test",
        verify_at_landing=True,
        on_stale_read=StaleReadPolicy.RETRY,
        lease_granularity=Granularity.PART,
        notes=(OperatorNote(1, "use httpx"),),
        ask=False,
        shell_mode="network",
        resources=("db",),
        repair_session="s-1",
    )
    assert {f.name for f in fields(AssignedTask)} == set(wire)
