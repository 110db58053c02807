"""`GET /metrics`: the gauges an autoscaler sizes the fleet on, read from the real engine.

Real server and SQLite; the text is parsed with prometheus-client's own parser, as a
Prometheus server would read it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from codefleet.api.client import FleetClient
from codefleet.server.thread import ServerThread

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


async def scrape(url: str, token: str | None = None) -> Samples:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(base_url=url, headers=headers) as http:
        answer = await http.get("/metrics")
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(answer.text)
        for sample in family.samples
    }


def task(task_id: str, *after: str) -> dict[str, object]:
    return {"id": task_id, "title": task_id, "description": "do it", "depends_on": list(after)}


async def test_the_gauges_follow_tasks_runners_and_leases(
    server: ServerThread, client: FleetClient, workdir: Path
) -> None:
    empty = await scrape(server.url)
    assert empty[("codefleet_tasks_ready", ())] == 0
    assert empty[("codefleet_runners", (("status", "idle"),))] == 0

    await client.create_tasks([task("T1"), task("T2"), task("T3", "T1")])
    loaded = await scrape(server.url)
    assert loaded[("codefleet_tasks", (("status", "pending"),))] == 3
    assert loaded[("codefleet_tasks_ready", ())] == 2  # T3 waits for T1
    assert loaded[("codefleet_tasks_in_flight", ())] == 0

    agent = await client.register("runner-1", str(workdir), os.getpid())
    assignment = await client.assignment(agent["agent_id"], agent["epoch"], wait=5)
    assert assignment is not None
    busy = await scrape(server.url)
    assert busy[("codefleet_tasks_in_flight", ())] == 1
    assert busy[("codefleet_tasks_ready", ())] == 1  # T3 waits for T1: not ready
    assert busy[("codefleet_runners", (("status", "busy"),))] == 1
    assert busy[("codefleet_landing_queue", ())] == 0
    assert busy[("codefleet_landing_halted", ())] == 0
    assert busy[("codefleet_landing_steps", ())] == 0
    assert busy[("codefleet_fleet_paused", ())] == 0


async def test_a_server_with_a_token_wants_it_from_the_scraper(
    make_server: Callable[..., ServerThread],
) -> None:
    server = make_server(token="metrics-token-0123456789")
    async with httpx.AsyncClient(base_url=server.url) as http:
        assert (await http.get("/metrics")).status_code == 401
    found = await scrape(server.url, token="metrics-token-0123456789")
    assert found[("codefleet_leases", ())] == 0
