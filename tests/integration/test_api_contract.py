"""Contract gaps of the wire API, over a real server: query enums, error bodies on streams."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest
from corpus_support import assert_envelope

from codefleet.api.client import FleetClient
from codefleet.errors import Unauthorized
from codefleet.server.thread import ServerThread

TOKEN = "contract-token"


@pytest.mark.parametrize(
    ("path", "params"),
    [
        ("/tasks", {"status": "bogus"}),
        ("/tasks", {"status": "PENDING"}),
        ("/events", {"type": "task_exploded"}),
        ("/tasks/T1/patch", {"format": "yaml"}),
        ("/conflicts", {"resolved": "perhaps"}),
    ],
)
async def test_an_unknown_enum_value_in_a_query_is_a_422_envelope_not_an_empty_answer(
    http: httpx.AsyncClient, path: str, params: dict[str, str]
):
    await http.post("/tasks", json={"tasks": [{"id": "T1", "title": "t", "description": "d"}]})

    response = await http.get(path, params=params)

    assert_envelope(response, 422, "invalid_request")
    assert next(iter(params)) in response.json()["error"]["message"]


async def test_a_known_status_or_event_type_still_filters(client: FleetClient):
    await client.create_tasks([{"id": "T1", "title": "t", "description": "d"}])

    assert [t["id"] for t in await client.tasks("pending")] == ["T1"]
    assert await client.tasks("succeeded") == []
    assert [e["task_id"] for e in await client.events(type_="task_created")] == ["T1"]


async def test_an_event_stream_refused_with_4xx_raises_the_refusal_not_a_read_error(
    make_server: Callable[..., ServerThread],
):
    server = make_server(token=TOKEN)
    async with FleetClient(server.url, token="not-the-token") as client:
        with pytest.raises(Unauthorized, match="token"):
            async for _ in client.stream():
                pass
