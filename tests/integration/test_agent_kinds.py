"""Agent kinds on the wire: a runner registers the agent it drives, a task may name one."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

from codefleet.api.client import FleetClient
from codefleet.api.graphfile import GraphError, load_graph


async def test_a_task_naming_codex_is_assigned_to_the_codex_runner_and_agents_show_kinds(
    client: FleetClient, workdir: Path
) -> None:
    claude = await client.register("runner-1", str(workdir), os.getpid())
    codex = await client.register("codex-1", str(workdir), os.getpid(), agent="codex")
    await client.create_tasks(
        [{"id": "T1", "title": "t", "description": "d", "agent": "codex", "file_scope": ["a.py"]}]
    )

    assert await client.assignment(claude["agent_id"], claude["epoch"], wait=0.3) is None
    got = await client.assignment(codex["agent_id"], codex["epoch"], wait=5.0)

    assert got is not None and got.id == "T1"
    kinds = {a["name"]: a["agent"] for a in await client.agents()}
    assert kinds == {"runner-1": "claude", "codex-1": "codex"}
    assert (await client.task("T1"))["agent"] == "codex"


async def test_an_unknown_agent_kind_is_refused_by_the_wire(http: httpx.AsyncClient) -> None:
    answer = await http.post(
        "/tasks", json={"tasks": [{"title": "t", "description": "d", "agent": "gemini"}]}
    )
    assert answer.status_code == 422


def test_a_graph_naming_an_unknown_agent_is_a_load_error(tmp_path: Path) -> None:
    graph = tmp_path / "g.yaml"
    graph.write_text("tasks:\n  - id: T1\n    title: t\n    description: d\n    agent: gemini\n")
    with pytest.raises(GraphError, match="agent"):
        load_graph(graph)
