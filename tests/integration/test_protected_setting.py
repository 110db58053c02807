"""`CODEFLEET_PROTECTED_PATHS` / `--protected-paths`: the server and the runner use the list.

The default protects what a person's own Claude Code session in the tree would
load (`.claude`, `.mcp.json`); an operator may replace the list, but `.git` stays
protected whatever it says. A name that is not a relative path is a settings error.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import ValidationError

from codefleet.api.client import FleetClient
from codefleet.config import Settings
from codefleet.server.thread import ServerThread


async def _running(client: FleetClient, workdir: Path) -> tuple[str, int]:
    agent = await client.register("runner-1", str(workdir), 1)
    await client.create_tasks([{"id": "T", "title": "t", "description": "do it"}])
    assert await client.assignment(agent["agent_id"], agent["epoch"], wait=5)
    await client.start("T", agent["agent_id"], agent["epoch"])
    return agent["agent_id"], agent["epoch"]


async def _reason(client: FleetClient, agent: tuple[str, int], path: str) -> str | None:
    answer = await client.acquire(agent[0], agent[1], "T", [path], "Write")
    return None if answer["decision"] == "allow" else str(answer["denied"][0]["reason"])


async def test_the_server_protects_the_configured_names_and_always_git(
    make_server: Callable[..., ServerThread], workdir: Path
):
    server = make_server(protected_paths=".github/workflows, deploy.env")
    async with FleetClient(server.url) as client:
        agent = await _running(client, workdir)

        assert await _reason(client, agent, ".github/workflows/ci.yml") == "protected_path"
        assert await _reason(client, agent, "ops/DEPLOY.env") == "protected_path"
        assert await _reason(client, agent, "vendor/.git/config") == "protected_path"
        assert await _reason(client, agent, ".mcp.json") is None  # not on this server's list


async def test_by_default_the_server_protects_agent_configuration(
    server: ServerThread, workdir: Path
):
    async with FleetClient(server.url) as client:
        agent = await _running(client, workdir)

        assert await _reason(client, agent, ".claude/settings.json") == "protected_path"
        assert await _reason(client, agent, ".mcp.json") == "protected_path"
        # where `codefleet` reads its settings: the URL and token of the next command
        assert await _reason(client, agent, ".env") == "protected_path"
        assert await _reason(client, agent, ".env.example") is None


@pytest.mark.parametrize("value", ["../up", "/etc", "a/../b"])
def test_a_protected_name_that_is_not_a_relative_path_is_a_settings_error(value: str):
    with pytest.raises(ValidationError, match="protected name"):
        Settings(_env_file=None, protected_paths=value)  # type: ignore[call-arg]
