"""The request-body corpus beyond tests/integration/test_api_bad_input.py: what broke the server.

Each item was a 5xx (or a poisoned event log) before the fix it pins down:
numbers past SQLite's INTEGER range (OverflowError), NaN, infinities and lone
surrogates in the free-form fleet objects (accepted, then every later
`GET /events` failed), JSON nested deeper than any reader can re-parse, and a
file name longer than the file system allows (OSError). Now each is a 4xx in
the envelope and changes nothing; and, at the end, every read still works.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from corpus_support import Witness, assert_envelope
from fleet_support import server_settings

from codefleet.api.wire import MAX_JSON_DEPTH
from codefleet.models import MAX_INT
from codefleet.server.thread import ServerThread

BIG = str(MAX_INT + 1)


@dataclass
class Door:
    server: ServerThread
    witness: Witness
    agent_id: str
    epoch: int


@pytest.fixture(scope="module")
def door(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Door]:
    root = tmp_path_factory.mktemp("http")
    tree = root / "tree"
    tree.mkdir()
    (tree / "a.py").write_text("A = 1\n")
    settings = server_settings(root, tree)
    with ServerThread(settings) as server, httpx.Client(base_url=server.url) as http:
        http.post(
            "/tasks", json={"tasks": [{"id": "T1", "title": "t", "description": "do it"}]}
        ).raise_for_status()
        agent = http.post(
            "/agents/register", json={"name": "runner-1", "workdir": str(tree)}
        ).json()
        epoch = {"X-Agent-Epoch": str(agent["epoch"])}
        assert http.get(f"/agents/{agent['agent_id']}/assignment?wait=5", headers=epoch).json()
        http.post("/tasks/T1/start", json={"agent_id": agent["agent_id"]}, headers=epoch)
        yield Door(server, Witness(settings.db, tree), agent["agent_id"], agent["epoch"])


def nested(depth: int, inner: str = "1") -> str:
    return '{"a": ' * depth + inner + "}" * depth


def obj(*members: str) -> str:
    """A JSON object from raw members, so the body can hold what `json.dumps` never writes."""
    return "{" + ", ".join(members) + "}"


def cases(door: Door) -> dict[str, tuple[str, str, str | None, dict[str, str], int, str]]:
    """name -> (method, path, raw JSON body, extra headers, status, code)."""
    epoch = {"X-Agent-Epoch": str(door.epoch)}

    def report(*extra: str, attempt: str = "1") -> str:
        return obj(f'"agent_id": "{door.agent_id}"', f'"attempt": {attempt}', '"ok": false', *extra)

    return {
        "a pid past SQLite's integers": ("POST", "/agents/register", obj('"name": "r9"', f'"pid": {BIG}'), {}, 422, "invalid_request"),
        "a negative pid": ("POST", "/agents/register", obj('"name": "r9"', '"pid": -1'), {}, 422, "invalid_request"),
        "a task offset past SQLite's integers": ("GET", f"/tasks?offset={BIG}", None, {}, 422, "invalid_request"),
        "an event cursor past SQLite's integers": ("GET", f"/events?since={BIG}", None, {}, 422, "invalid_request"),
        "a stream cursor past SQLite's integers": ("GET", f"/events/stream?since={BIG}", None, {}, 422, "invalid_request"),
        "a Last-Event-ID past SQLite's integers": ("GET", "/events/stream", None, {"Last-Event-ID": BIG}, 422, "invalid_request"),
        "token counts past SQLite's integers": ("POST", "/tasks/T1/complete", report(f'"input_tokens": {BIG}'), epoch, 422, "invalid_request"),
        "a duration past SQLite's integers": ("POST", "/tasks/T1/complete", report(f'"duration_ms": {BIG}'), epoch, 422, "invalid_request"),
        "an attempt past SQLite's integers": ("POST", "/tasks/T1/complete", report(attempt=BIG), epoch, 422, "invalid_request"),
        "an infinite cost": ("POST", "/tasks/T1/complete", report('"cost_usd": Infinity'), epoch, 422, "invalid_request"),
        "a NaN cost": ("POST", "/tasks/T1/complete", report('"cost_usd": NaN'), epoch, 422, "invalid_request"),
        "a fleet runner count past SQLite's integers": ("POST", "/fleet/started", obj(f'"runners": {BIG}'), {}, 422, "invalid_request"),
        "NaN in a fleet summary": ("POST", "/fleet/finished", obj('"summary": {"duration_s": NaN}'), {}, 422, "invalid_request"),
        "Infinity in a fleet verify": ("POST", "/fleet/finished", obj('"verify": {"exit_code": -Infinity}'), {}, 422, "invalid_request"),
        "a lone surrogate in a fleet summary": ("POST", "/fleet/started", obj('"summary": {"note": "\\udc00"}'), {}, 422, "invalid_request"),
        "a fleet summary nested past the limit": ("POST", "/fleet/started", obj('"summary": ' + nested(MAX_JSON_DEPTH + 1)), {}, 422, "invalid_request"),
        "a fleet summary nested as deep as the parser goes": ("POST", "/fleet/started", obj('"summary": ' + nested(950)), {}, 422, "invalid_request"),
        "a task list nested 100,000 deep": ("POST", "/tasks", obj('"tasks": ' + "[" * 100_000 + "]" * 100_000), {}, 400, "http_error"),
        "a fleet summary nested 100,000 deep": ("POST", "/fleet/started", obj('"summary": ' + nested(100_000)), {}, 400, "http_error"),
        "a scope name longer than the file system allows": ("POST", "/tasks", obj('"tasks": [{"title": "t", "description": "do it", "file_scope": ["' + "x" * 300 + '"]}]'), {}, 422, "invalid_graph"),
        "a body without a content type": ("POST", "/tasks", obj('"tasks": [{"title": "t", "description": "do it"}]'), {"Content-Type": ""}, 422, "invalid_request"),
    }  # fmt: skip


CASE_IDS = list(cases(Door(None, None, "a", 1)))  # type: ignore[arg-type]


@pytest.mark.parametrize("item", CASE_IDS)
def test_a_body_that_used_to_break_the_server_is_a_4xx_envelope_that_changes_nothing(
    door: Door, item: str
) -> None:
    method, path, body, headers, status, code = cases(door)[item]
    before = door.witness.picture()
    sent: dict[str, Any] = {"headers": {"Content-Type": "application/json", **headers}}
    if body is not None:
        sent["content"] = body.encode()

    with httpx.Client(base_url=door.server.url, timeout=30) as http:
        response = http.request(method, path, **sent)

    assert_envelope(response, status, code)
    assert door.witness.picture() == before


def test_a_summary_nested_within_the_limit_is_kept_and_every_read_still_works(door: Door) -> None:
    with httpx.Client(base_url=door.server.url, timeout=30) as http:
        body = obj('"summary": ' + nested(MAX_JSON_DEPTH - 1))
        kept = http.post(
            "/fleet/started", content=body, headers={"Content-Type": "application/json"}
        )
        reads = [http.get(p).status_code for p in ("/events", "/state", "/tasks", "/conflicts")]
        with http.stream("GET", "/events/stream") as stream:
            first = next(stream.iter_lines())

    assert kept.status_code == 200
    assert reads == [200, 200, 200, 200]
    assert first.startswith(("id:", ":"))
