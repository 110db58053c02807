"""A person's own GitHub Copilot CLI session in the lock: the real CLI, its hooks written by `join`.

`codefleet join --agent copilot` writes the tree's `.github/hooks/codefleet.json`; the
pinned Copilot CLI (tests/agents/package.json) is then started in that tree in print
mode, `copilot -p PROMPT --allow-all-tools`, with a model provider of its own (BYOK)
pointed at the scripted fake model on loopback: no GitHub login, no key, no network. A
real server decides: an `edit` of the file a fleet task holds is refused before the disk
is touched, a `create` of a free file is leased and lands, the session's end releases
its leases, and after `leave --agent copilot` no hook runs. On a GPT model (an OpenAI
Responses provider, the fake Codex API) its edit tool is `apply_patch`: every file the
patch names is leased, all or nothing.
"""

from __future__ import annotations

import asyncio
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
    fleet_holds,
    hooks_in,
    lease_of,
    leased,
    only_fleet_lease,
    start,
)

from codefleet.api.client import FleetClient
from codefleet.offlinemodels.anthropicapi import FakeModel, Text, ToolUse, Turn, WaitFor, marker
from codefleet.offlinemodels.openaiapi import FakeCodexModel, patch_call
from codefleet.server.thread import ServerThread

CHECKED = "test-has-seen-the-copilot-lease"
# A GPT model behind an OpenAI Responses endpoint: Copilot CLI then edits with apply_patch.
GPT_PROVIDER = {
    "COPILOT_PROVIDER_TYPE": "openai",
    "COPILOT_PROVIDER_WIRE_API": "responses",
    "COPILOT_MODEL": "gpt-5.4",
}
WaitUntil = Callable[..., Awaitable[Any]]


def person_script(tree: Path) -> list[Turn]:
    held, free = str(tree / "a.py"), str(tree / "notes.py")
    return [
        Turn(content=(ToolUse("edit", {"path": held, "old_str": "A = 1", "new_str": "A = 0"}),)),
        Turn(content=(ToolUse("create", {"path": free, "file_text": "N = 1\n"}),)),
        # Held until the test has looked at the leases while the session still runs.
        Turn(content=(Text("Done."),), wait_for=WaitFor(CHECKED, timeout_s=SESSION_TIMEOUT_S)),
    ]


async def copilot(
    clis: AgentClis,
    fake: FakeModel,
    tree: Path,
    home: Path,
    script: str,
    provider: dict[str, str] | None = None,
) -> asyncio.subprocess.Process:
    argv = ["-p", f"Go. {marker(script)}", "--allow-all-tools"]
    env = {**copilot_home(fake, home, tree, clis.copilot_cache), **(provider or {})}
    return await start(clis.copilot, argv, tree, env)


async def test_a_copilot_session_in_a_joined_tree_is_leased_refused_and_released(
    agent_clis: AgentClis,
    server: ServerThread,
    client: FleetClient,
    fake_model: FakeModel,
    workdir: Path,
    tmp_path: Path,
    wait_until: WaitUntil,
) -> None:
    codefleet(workdir, "join", "--agent", "copilot", "--server", server.url)
    await fleet_holds(client, workdir, "a.py")
    fake_model.add_script("person", person_script(workdir))
    session = await copilot(agent_clis, fake_model, workdir, tmp_path / "home", "person")
    # While the session runs: its free file is an interactive lease of its own.
    held = await wait_until(lambda: lease_of(client, "notes.py"), timeout=SESSION_TIMEOUT_S)
    fake_model.signal(CHECKED)
    await finish(session)

    assert held["kind"] == "interactive" and held["holder_agent_name"].startswith(f"{PERSON}@")
    results = {r.turn: r for r in fake_model.tool_results("person")}
    # The edit of the fleet's file was refused by the hook, naming the holder; a.py untouched.
    # (Copilot CLI hands the model its hook's refusal as a plain tool result, not an error.)
    assert results[1].content.startswith("Denied by preToolUse hook:")
    assert "a.py is being edited by runner-2 for task T3 (Add rate limiting)" in results[1].content
    assert (workdir / "a.py").read_text() == "A = 1\n"
    # The create of the free file was leased (the server's event says so) and landed.
    assert not results[2].is_error
    assert (workdir / "notes.py").read_text() == "N = 1\n"
    assert await leased(client, "notes.py", "Write")
    # The session's end (its sessionEnd hook) gave its lease back; the fleet's stays.
    await wait_until(lambda: only_fleet_lease(client))


async def test_after_leave_no_codefleet_hook_runs_in_a_copilot_session(
    agent_clis: AgentClis,
    server: ServerThread,
    client: FleetClient,
    fake_model: FakeModel,
    workdir: Path,
    tmp_path: Path,
) -> None:
    hook_file = workdir / ".github" / "hooks" / "codefleet.json"
    joined = codefleet(workdir, "join", "--agent", "copilot", "--server", server.url)
    assert "Copilot CLI runs a " in joined.stdout and "only in a trusted folder" in joined.stdout
    assert set(hooks_in(hook_file)) == {"preToolUse", "postToolUse", "sessionEnd"}
    await fleet_holds(client, workdir, "a.py")

    codefleet(workdir, "leave", "--agent", "copilot")
    assert not hook_file.exists()
    edit = ToolUse("edit", {"path": str(workdir / "a.py"), "old_str": "A = 1", "new_str": "A = 2"})
    fake_model.add_script("after", [Turn(content=(edit,))])
    await finish(await copilot(agent_clis, fake_model, workdir, tmp_path / "home", "after"))

    # Nothing asked the server: the edit landed on the file the fleet still holds.
    assert [r.is_error for r in fake_model.tool_results("after")] == [False]
    assert (workdir / "a.py").read_text() == "A = 2\n"
    assert await only_fleet_lease(client)


async def test_a_copilot_session_on_a_gpt_model_has_its_apply_patch_gated_by_every_target(
    agent_clis: AgentClis,
    server: ServerThread,
    client: FleetClient,
    workdir: Path,
    tmp_path: Path,
    wait_until: WaitUntil,
) -> None:
    codefleet(workdir, "join", "--agent", "copilot", "--server", server.url)
    await fleet_holds(client, workdir, "a.py")
    both = ("*** Add File: notes.py", "+N = 1", "*** Update File: a.py", "@@", "-A = 1", "+A = 0")
    with FakeCodexModel() as fake:
        fake.add_script(
            "gpt",
            [
                {"content": [patch_call(*both)]},
                {"content": [patch_call("*** Add File: notes.py", "+N = 1")]},
                {"content": [{"text": "Done."}]},
            ],
        )
        provider = {**GPT_PROVIDER, "COPILOT_PROVIDER_BASE_URL": fake.responses_url}
        await finish(await copilot(agent_clis, fake, workdir, tmp_path / "home", "gpt", provider))
        results = {r.turn: r for r in fake.tool_results("gpt")}

    # The patch naming the fleet's file was refused whole: neither of its files was touched.
    assert results[1].content.startswith("Denied by preToolUse hook:")
    assert "a.py is being edited by runner-2 for task T3" in results[1].content
    assert (workdir / "a.py").read_text() == "A = 1\n"
    # The patch of the free file alone was leased and landed.
    assert not results[2].content.startswith("Denied")
    assert (workdir / "notes.py").read_text() == "N = 1\n"
    assert await leased(client, "notes.py", "apply_patch")
    await wait_until(lambda: only_fleet_lease(client))
