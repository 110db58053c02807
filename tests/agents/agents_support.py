"""Plain helpers of the agents tier (fixtures live in conftest.py).

A person's session is the real CLI started in print mode in the joined tree, exactly as a
person would start it: it reads the project hook file `codefleet join --agent NAME` (the
real executable) wrote. `fleet_holds` gives a fleet task a lease through the API, as a
runner takes one.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codefleet.api.client import FleetClient
from codefleet.offlinemodels.anthropicapi import FAKE_API_KEY, FakeModel

CODEFLEET = Path(sys.executable).parent / "codefleet"
SESSION_TIMEOUT_S = 90.0
PERSON = "ada"
# A model id Copilot CLI knows (its token limits and tool set); the fake answers any.
COPILOT_MODEL = "claude-sonnet-4.5"


@dataclass(frozen=True, slots=True)
class AgentClis:
    """The installed CLIs' entry points, and where Copilot CLI unpacks itself once."""

    gemini: Path
    copilot: Path
    copilot_cache: Path


def codefleet(tree: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The installed `codefleet` executable, run in `tree`; a failure fails the test."""
    done = subprocess.run(
        [str(CODEFLEET), *args], cwd=tree, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return done


async def fleet_holds(client: FleetClient, tree: Path, path: str) -> None:
    """runner-2 takes task T3 and leases `path`, exactly as a runner does."""
    await client.create_tasks(
        [{"id": "T3", "title": "Add rate limiting", "description": "Limit it.", "file_scope": []}]
    )
    agent = await client.register("runner-2", str(tree), os.getpid())
    assert await client.assignment(agent["agent_id"], agent["epoch"], wait=5) is not None
    await client.start("T3", agent["agent_id"], agent["epoch"])
    granted = await client.acquire(agent["agent_id"], agent["epoch"], "T3", [path], "Edit")
    assert granted["decision"] == "allow"


async def start(
    cli: Path, argv: list[str], tree: Path, env: dict[str, str]
) -> asyncio.subprocess.Process:
    """Start `cli argv...` in `tree` with only `env` (plus PATH and the person's login)."""
    full = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "USER": PERSON, **env}
    return await asyncio.create_subprocess_exec(
        str(cli),
        *argv,
        cwd=tree,
        env=full,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


async def finish(process: asyncio.subprocess.Process) -> tuple[str, str]:
    """Wait (bounded) for the CLI to exit 0; its stdout and stderr."""
    try:
        out, err = await asyncio.wait_for(process.communicate(), SESSION_TIMEOUT_S)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == 0, err.decode()[-3000:]
    return out.decode(), err.decode()


def copilot_home(fm: FakeModel, home: Path, trusted: Path, cache: Path) -> dict[str, str]:
    """A Copilot CLI user's HOME under `home` that trusts `trusted`; the env vars a run needs.

    Measured with Copilot CLI 1.0.102: `COPILOT_PROVIDER_BASE_URL` switches it to a model
    provider of your own ("BYOK": no GitHub login asked for), `COPILOT_PROVIDER_TYPE=anthropic`
    makes it speak the Messages API the fake model answers, `COPILOT_OFFLINE` turns off
    everything that calls GitHub (login, update checks). It runs a repository's
    `.github/hooks/*.json` only in a folder the person trusted (`trustedFolders` in
    `~/.copilot/config.json`, as its own trust prompt records it). `COPILOT_PKG_CACHE_HOME`
    is where the binary unpacks itself on first start (≈5 s): shared, so that happens once.
    """
    config = home / ".copilot"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.json").write_text(json.dumps({"trustedFolders": [str(trusted)]}))
    return {
        "HOME": str(home),
        "COPILOT_PKG_CACHE_HOME": str(cache),
        "COPILOT_PROVIDER_BASE_URL": fm.base_url,
        "COPILOT_PROVIDER_TYPE": "anthropic",
        "COPILOT_PROVIDER_API_KEY": FAKE_API_KEY,
        "COPILOT_MODEL": COPILOT_MODEL,
        "COPILOT_OFFLINE": "true",
    }


async def lease_of(client: FleetClient, path: str) -> dict[str, Any] | None:
    """The lease row of `path`, if any holder has it."""
    return next((row for row in await client.leases() if row["path"] == path), None)


async def only_fleet_lease(client: FleetClient) -> bool:
    """Is the fleet task's lease of a.py the only one left?"""
    return [(r["path"], r["kind"]) for r in await client.leases()] == [("a.py", "task")]


async def leased(client: FleetClient, path: str, tool: str) -> list[dict[str, Any]]:
    """The `lease_acquired` events of `path` by `tool` (what the server says of a write)."""
    return [
        e["payload"]
        for e in await client.all_events()
        if e["type"] == "lease_acquired"
        and (e["payload"]["path"], e["payload"]["tool"]) == (path, tool)
    ]


def hooks_in(path: Path) -> dict[str, Any]:
    """The `hooks` object of a project hook file, or {} when the file is gone."""
    if not path.exists():
        return {}
    hooks = json.loads(path.read_text() or "{}").get("hooks") or {}
    assert isinstance(hooks, dict)
    return hooks
