"""Two people's sessions of two different CLIs in one joined tree: one lock between them.

The tree is joined for both Copilot CLI and Gemini CLI. A Copilot session creates a file
and, before it ends, a Gemini session tries to write the same file: the Gemini CLI's
hook is refused with the Copilot session named as the holder, and the file keeps the
Copilot session's content. When both have ended, neither holds anything.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from agents_support import (
    PERSON,
    SESSION_TIMEOUT_S,
    AgentClis,
    codefleet,
    copilot_home,
    finish,
    lease_of,
    start,
)

from codefleet.api.client import FleetClient
from codefleet.offlinemodels.anthropicapi import FakeModel, Text, ToolUse, Turn, WaitFor, marker
from codefleet.offlinemodels.geminiapi import GEMINI_MODEL, FakeGeminiModel, gemini_home
from codefleet.server.thread import ServerThread

GEMINI_DONE = "the-gemini-session-has-ended"
WaitUntil = Callable[..., Awaitable[Any]]


async def test_a_gemini_write_is_refused_on_a_file_a_copilot_session_holds(
    agent_clis: AgentClis,
    server: ServerThread,
    client: FleetClient,
    fake_model: FakeModel,
    workdir: Path,
    tmp_path: Path,
    wait_until: WaitUntil,
) -> None:
    for agent in ("copilot", "gemini"):
        codefleet(workdir, "join", "--agent", agent, "--server", server.url)
    notes = str(workdir / "notes.py")
    fake_model.add_script(
        "copilot",
        [
            Turn(content=(ToolUse("create", {"path": notes, "file_text": "N = 'copilot'\n"}),)),
            Turn(
                content=(Text("Done."),), wait_for=WaitFor(GEMINI_DONE, timeout_s=SESSION_TIMEOUT_S)
            ),
        ],
    )
    env = copilot_home(fake_model, tmp_path / "copilot", workdir, agent_clis.copilot_cache)
    argv = ["-p", f"Go. {marker('copilot')}", "--allow-all-tools"]
    copilot = await start(agent_clis.copilot, argv, workdir, env)
    held = await wait_until(lambda: lease_of(client, "notes.py"), timeout=SESSION_TIMEOUT_S)

    with FakeGeminiModel() as fake:
        write = ToolUse("write_file", {"file_path": notes, "content": "N = 'gemini'\n"})
        fake.add_script("gemini", [Turn(content=(write,))])
        argv = ["-m", GEMINI_MODEL, "--approval-mode", "auto_edit", "-p", f"Go. {marker('gemini')}"]
        home = gemini_home(fake, tmp_path / "gemini", workdir)
        await finish(await start(agent_clis.gemini, argv, workdir, home))
        refused = fake.tool_results("gemini")
    fake_model.signal(GEMINI_DONE)
    await finish(copilot)

    holder = held["holder_agent_name"]
    assert held["kind"] == "interactive" and holder.startswith(f"{PERSON}@")
    assert [r.is_error for r in refused] == [True]
    assert f"notes.py is being edited by {holder} in another session" in refused[0].content
    assert (workdir / "notes.py").read_text() == "N = 'copilot'\n"
    await wait_until(lambda: _no_leases(client))


async def _no_leases(client: FleetClient) -> bool:
    return await client.leases() == []
