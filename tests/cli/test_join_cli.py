"""A person's own Claude Code session joins the lock: the real CLI, `claude -p`, no SDK.

`codefleet join` (the real executable) writes the tree's
`.claude/settings.local.json`; the bundled Claude Code CLI is then started in
that tree in print mode, exactly as a person would start it, so it loads the
hooks from the project's local settings itself (no `--settings`, no
`--setting-sources`: the default sources include `local`). The built-in
scripted model drives it: a Write to the file a fleet task holds, then a Write
to a free file, then it ends. A real server on loopback decides.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from codefleet.api.client import FleetClient
from codefleet.cli.start.doctor_checks import bundled_cli
from codefleet.offlinemodels.anthropicapi import (
    FakeModel,
    Text,
    ToolUse,
    Turn,
    WaitFor,
    marker,
    session_env,
)
from codefleet.server.thread import ServerThread

CODEFLEET = Path(sys.executable).parent / "codefleet"
CHECKED = "test-has-seen-the-interactive-lease"
SESSION_TIMEOUT_S = 90.0
WaitUntil = Callable[..., Awaitable[Any]]


async def fleet_holds(client: FleetClient, workdir: Path, path: str) -> None:
    """runner-2 takes task T3 and leases `path`, exactly as a runner does."""
    await client.create_tasks(
        [{"id": "T3", "title": "Add rate limiting", "description": "Limit it.", "file_scope": []}]
    )
    agent = await client.register("runner-2", str(workdir), os.getpid())
    assert await client.assignment(agent["agent_id"], agent["epoch"], wait=5) is not None
    await client.start("T3", agent["agent_id"], agent["epoch"])
    granted = await client.acquire(agent["agent_id"], agent["epoch"], "T3", [path], "Edit")
    assert granted["decision"] == "allow"


def person_script(workdir: Path) -> list[Turn]:
    return [
        Turn(
            content=(
                ToolUse("Write", {"file_path": str(workdir / "a.py"), "content": "A = 'mine'\n"}),
            )
        ),
        Turn(
            content=(
                ToolUse("Write", {"file_path": str(workdir / "notes.py"), "content": "N = 1\n"}),
            )
        ),
        # Held until the test has looked at the leases while the session is still running.
        Turn(content=(Text("Done."),), wait_for=WaitFor(CHECKED, timeout_s=SESSION_TIMEOUT_S)),
    ]


async def start_claude(
    fake_model: FakeModel, workdir: Path, home: Path
) -> asyncio.subprocess.Process:
    cli = bundled_cli()
    assert cli is not None and cli.exists(), "the SDK's bundled Claude Code CLI is missing"
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin"),
        "USER": "ada",
        **session_env(fake_model, home),
    }
    prompt = f"Follow the script. {marker('person')}"
    return await asyncio.create_subprocess_exec(
        str(cli),
        "-p",
        prompt,
        "--output-format",
        "json",
        "--permission-mode",
        "acceptEdits",
        cwd=workdir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


async def test_a_person_session_started_in_a_joined_tree_takes_and_respects_leases(
    server: ServerThread,
    client: FleetClient,
    fake_model: FakeModel,
    workdir: Path,
    tmp_path: Path,
    wait_until: WaitUntil,
) -> None:
    joined = subprocess.run(
        [str(CODEFLEET), "join", "--server", server.url],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert joined.returncode == 0, joined.stderr
    await fleet_holds(client, workdir, "a.py")
    fake_model.add_script("person", person_script(workdir))

    claude = await start_claude(fake_model, workdir, tmp_path / "home")
    try:
        # While the session runs: its free file is an interactive lease of its own.
        held = await wait_until(lambda: _lease_of(client, "notes.py"), timeout=SESSION_TIMEOUT_S)
        assert held["kind"] == "interactive"
        person = held["holder_agent_name"]
        assert person.startswith("ada@") and held["task_id"].startswith("i-")
        agents = {a["name"]: a for a in await client.agents()}
        assert (agents[person]["kind"], agents[person]["status"]) == ("interactive", "busy")
        fake_model.signal(CHECKED)
        out, err = await asyncio.wait_for(claude.communicate(), SESSION_TIMEOUT_S)
    finally:
        if claude.returncode is None:
            claude.kill()
            await claude.wait()
    assert claude.returncode == 0, err.decode()[-2000:]

    # The Write to the fleet's file was denied, with the holder's name, and never happened.
    results = {r.turn: r for r in fake_model.tool_results("person")}
    assert results[1].is_error
    assert "a.py is being edited by runner-2 for task T3 (Add rate limiting)" in results[1].content
    assert (workdir / "a.py").read_text() == "A = 1\n"
    result = json.loads(out)
    assert [d["tool_input"]["file_path"] for d in result["permission_denials"]] == [
        str(workdir / "a.py")
    ]
    # The Write to the free file happened.
    assert not results[2].is_error
    assert (workdir / "notes.py").read_text() == "N = 1\n"
    # After the session ended (its SessionEnd hook), only the fleet's lease is left.
    await wait_until(lambda: _only_fleet_lease(client))
    offline = [e for e in await client.all_events() if e["type"] == "agent_offline"]
    assert offline[-1]["payload"]["name"] == person
    assert offline[-1]["payload"]["reason"] == "session_end"
    assert fake_model.wait_timeouts() == []


async def _lease_of(client: FleetClient, path: str) -> dict[str, Any] | None:
    return next((row for row in await client.leases() if row["path"] == path), None)


async def _only_fleet_lease(client: FleetClient) -> bool:
    return [(r["path"], r["kind"]) for r in await client.leases()] == [("a.py", "task")]
