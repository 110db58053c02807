"""One client must not stall the fleet: a big graph load while a runner is at work.

A real runner holds a running task and heartbeats every 0.1 s against a
server whose stale window is 1 s; meanwhile a graph of 30,000 scope paths is
posted (checking them is seconds of `stat` calls). The load must not keep
the server from hearing heartbeats: they are answered while the load is
still in progress, and nobody is marked stale. The assertions are about
order and outcome (answers before the load's answer, no `agent_offline`, the
same epoch), not about how long anything took.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from codefleet.api.client import FleetClient
from codefleet.errors import TooLarge
from codefleet.fleet.runner import Runner, RunnerOptions
from codefleet.fleet.scripted import ScriptedExecutor, parse_script
from codefleet.models import MAX_BATCH_SCOPE_PATHS
from codefleet.server.thread import ServerThread

LIVELY = {"heartbeat_interval": 0.1, "stale_after": 1.0, "tick_interval": 0.05}


def big_graph(tasks: int, paths: int) -> list[dict[str, Any]]:
    return [
        {
            "id": f"B{i:05d}",
            "title": "big",
            "description": "one of many",
            "file_scope": [f"big/m{i:05d}/f{j:02d}.py" for j in range(paths)],
        }
        for i in range(tasks)
    ]


async def test_heartbeats_are_answered_during_a_big_load_and_no_runner_goes_stale(
    make_server: Callable[..., ServerThread], workdir: Path, tmp_path: Path, wait_until: Any
) -> None:
    server = make_server(**LIVELY)
    script = {"hold": [{"write": {"path": "held.txt", "content": "mine"}}, {"sleep": 120}]}
    runner = Runner(
        FleetClient(server.url),
        ScriptedExecutor(parse_script(script)),
        RunnerOptions("runner-1", workdir, tmp_path / "runs", poll_wait=0.2),
    )
    stop = asyncio.Event()
    async with FleetClient(server.url, timeout=120) as client:
        await client.create_tasks([{"id": "hold", "title": "h", "description": "hold a file"}])
        running = asyncio.create_task(runner.run(stop))
        await wait_until(client.leases)  # at work, holding held.txt
        [before] = await client.agents()
        watcher = await client.register("watcher", str(workdir), None)

        load = asyncio.create_task(client.create_tasks(big_graph(1000, 30)))
        answered_while_loading = 0
        while not load.done():
            await client.heartbeat(watcher["agent_id"], watcher["epoch"])
            answered_while_loading += not load.done()
        created = await load

        offline = await client.events(type_="agent_offline")
        after = {a["name"]: a for a in await client.agents()}
        hold = await client.task("hold")
        await client.cancel("hold")  # ends the runner's session (fenced), then it can stop
        stop.set()
        await asyncio.wait_for(running, 30)
    assert len(created) == 1000
    assert answered_while_loading >= 3, "the server kept answering while the load was checked"
    assert offline == []
    assert after["runner-1"]["epoch"] == before["epoch"] and not after["runner-1"]["stale"]
    assert after["watcher"]["epoch"] == watcher["epoch"]
    assert hold["status"] == "running" and hold["attempts"] == 1


async def test_a_batch_over_the_scope_path_cap_is_a_413_envelope_and_stores_nothing(
    server: ServerThread,
) -> None:
    per_task = 1000
    tasks = MAX_BATCH_SCOPE_PATHS // per_task + 1
    graph = [
        {
            "id": f"C{i:04d}",
            "title": "c",
            "description": "d",
            "file_scope": [f"c{i}/{j}.py" for j in range(per_task)],
        }
        for i in range(tasks)
    ]
    async with httpx.AsyncClient(base_url=server.url, timeout=120) as http:
        response = await http.post("/tasks", json={"tasks": graph})
        listed = (await http.get("/tasks")).json()["tasks"]

    assert response.status_code == 413
    error = response.json()["error"]
    assert error["code"] == "too_large" and "split the graph" in error["message"]
    assert error["detail"] == {
        "problem": "too_many_scope_paths",
        "paths": tasks * per_task,
        "limit": MAX_BATCH_SCOPE_PATHS,
    }
    assert listed == []
    async with FleetClient(server.url) as client:
        with pytest.raises(TooLarge, match="split the graph"):
            await client.create_tasks(graph)
