"""A person's own Gemini CLI session in the lock: the real CLI, its hooks written by `join`.

`codefleet join --agent gemini` writes the tree's `.gemini/settings.json`; the pinned
Gemini CLI (tests/agents/package.json) is then started in that tree in print mode,
`gemini -m MODEL --approval-mode auto_edit -p PROMPT` (its file tools run without a
prompt, its shell does not), against the scripted fake Gemini API on loopback with a
fake key. A real server decides: a `replace` of the file a fleet task holds is refused
before the disk is touched, a `write_file` of a free file is leased and lands, the
session's end releases its leases, and after `leave --agent gemini` no hook runs.
"""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from agents_support import (
    PERSON,
    SESSION_TIMEOUT_S,
    AgentClis,
    codefleet,
    finish,
    fleet_holds,
    hooks_in,
    lease_of,
    leased,
    only_fleet_lease,
    start,
)

from codefleet.api.client import FleetClient
from codefleet.offlinemodels.anthropicapi import Text, ToolUse, Turn, WaitFor, marker
from codefleet.offlinemodels.geminiapi import GEMINI_MODEL, FakeGeminiModel, gemini_home
from codefleet.server.thread import ServerThread

CHECKED = "test-has-seen-the-gemini-lease"
WaitUntil = Callable[..., Awaitable[Any]]


def person_script(tree: Path) -> list[Turn]:
    held, free = str(tree / "a.py"), str(tree / "notes.py")
    return [
        Turn(content=(ToolUse("replace", _edit(held, "A = 1", "A = 'mine'")),)),
        Turn(content=(ToolUse("write_file", {"file_path": free, "content": "N = 1\n"}),)),
        Turn(content=(ToolUse("read_file", {"file_path": free}),)),
        # Held until the test has looked at the leases while the session still runs.
        Turn(content=(Text("Done."),), wait_for=WaitFor(CHECKED, timeout_s=SESSION_TIMEOUT_S)),
    ]


def _edit(path: str, old: str, new: str) -> dict[str, str]:
    return {"file_path": path, "instruction": "Change it.", "old_string": old, "new_string": new}


async def gemini(
    clis: AgentClis, fake: FakeGeminiModel, tree: Path, home: Path, script: str
) -> asyncio.subprocess.Process:
    argv = ["-m", GEMINI_MODEL, "--approval-mode", "auto_edit", "-p", f"Go. {marker(script)}"]
    return await start(clis.gemini, argv, tree, gemini_home(fake, home, tree))


async def test_a_gemini_session_in_a_joined_tree_is_leased_refused_and_released(
    agent_clis: AgentClis,
    server: ServerThread,
    client: FleetClient,
    workdir: Path,
    tmp_path: Path,
    wait_until: WaitUntil,
) -> None:
    codefleet(workdir, "join", "--agent", "gemini", "--server", server.url)
    await fleet_holds(client, workdir, "a.py")
    with FakeGeminiModel() as fake:
        fake.add_script("person", person_script(workdir))
        session = await gemini(agent_clis, fake, workdir, tmp_path / "home", "person")
        # While the session runs: its free file is an interactive lease of its own.
        held = await wait_until(lambda: lease_of(client, "notes.py"), timeout=SESSION_TIMEOUT_S)
        fake.signal(CHECKED)
        await finish(session)
        results = {r.turn: r for r in fake.tool_results("person")}

    assert held["kind"] == "interactive" and held["holder_agent_name"].startswith(f"{PERSON}@")
    # The replace of the fleet's file was refused by the hook, naming the holder; a.py untouched.
    assert results[1].is_error
    assert "a.py is being edited by runner-2 for task T3 (Add rate limiting)" in results[1].content
    assert (workdir / "a.py").read_text() == "A = 1\n"
    # The write of the free file was leased (the server's event says by whom) and landed.
    assert not results[2].is_error
    assert (workdir / "notes.py").read_text() == "N = 1\n"
    assert await leased(client, "notes.py", "Write")
    # Its read of the file is recorded as a person's read (a ledger row with the hash).
    assert not results[3].is_error
    with sqlite3.connect(f"file:{server.settings.db}?mode=ro", uri=True) as db:
        reads = list(db.execute("SELECT path, tool, sha256 FROM file_changes WHERE kind = 'read'"))
    assert reads == [("notes.py", "Read", hashlib.sha256(b"N = 1\n").hexdigest())]
    # The session's end (its SessionEnd hook) gave its lease back; the fleet's stays.
    await wait_until(lambda: only_fleet_lease(client))


async def test_after_leave_no_codefleet_hook_runs_in_a_gemini_session(
    agent_clis: AgentClis,
    server: ServerThread,
    client: FleetClient,
    workdir: Path,
    tmp_path: Path,
) -> None:
    settings = workdir / ".gemini" / "settings.json"
    joined = codefleet(workdir, "join", "--agent", "gemini", "--server", server.url)
    assert "Gemini CLI runs a " in joined.stdout and "only in a trusted folder" in joined.stdout
    assert set(hooks_in(settings)) == {"BeforeTool", "AfterTool", "SessionEnd"}
    await fleet_holds(client, workdir, "a.py")

    codefleet(workdir, "leave", "--agent", "gemini")
    assert hooks_in(settings) == {}
    with FakeGeminiModel() as fake:
        edit = ToolUse("replace", _edit(str(workdir / "a.py"), "A = 1", "A = 2"))
        fake.add_script("after", [Turn(content=(edit,))])
        await finish(await gemini(agent_clis, fake, workdir, tmp_path / "home", "after"))
        results = fake.tool_results("after")

    # Nothing asked the server: the write landed on the file the fleet still holds.
    assert [r.is_error for r in results] == [False]
    assert (workdir / "a.py").read_text() == "A = 2\n"
    assert await only_fleet_lease(client)
