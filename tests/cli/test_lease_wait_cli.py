"""Through the real CLI: an Edit to a held file waits in the hook and lands when the holder ends.

The server runs with `CODEFLEET_LEASE_WAIT`; the holder is a started task whose
gate took `a.py`; the waiting session is the production SDK executor against
the fake model (or the Codex executor against the fake Responses API), its gate
wired as a runner wires it (the wait, and the reads).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from cli_support import run_attempt
from test_codex_executor import say
from test_codex_tools import call, search

from codefleet.api.client import FleetClient
from codefleet.attempt import AttemptReport
from codefleet.fleet.executor import Attempt
from codefleet.models import ErrorKind
from codefleet.offlinemodels.anthropicapi import FakeModel, Text, ToolUse, Turn
from codefleet.offlinemodels.openaiapi import FakeCodexModel, patch_call
from codefleet.server.thread import ServerThread
from codefleet.session import codex as codex_module
from codefleet.session.codex import CodexExecutor
from codefleet.session.sdk import SessionExecutor

if TYPE_CHECKING:
    from conftest import StartAttempt

LEASE_WAIT_S = 30.0
WaitUntil = Callable[..., Awaitable[Any]]


@pytest.fixture
def server(make_server: Callable[..., ServerThread]) -> ServerThread:
    return make_server(lease_wait=LEASE_WAIT_S)


def tool(name: str, **tool_input: str) -> Turn:
    return Turn(content=(ToolUse(name, dict(tool_input)),))


def waiting(attempt: Attempt) -> Attempt:
    """The gate as `Runner.run_task` builds it: it may wait, and knows the session's reads."""
    attempt.gate.lease_wait_s = LEASE_WAIT_S
    attempt.gate.reads = attempt.reads.latest
    return attempt


async def holder_done(client: FleetClient, holder: Attempt, wait_until: WaitUntil) -> None:
    """Once the waiter has parked, the holder's attempt succeeds (releasing a.py)."""
    await wait_until(lambda: client.events(type_="lease_waiting"), timeout=30.0)
    report = AttemptReport(attempt=1, ok=True, summary="done")
    await client.complete(holder.task_id, holder.gate.agent_id, holder.gate.epoch, report)


async def test_an_edit_to_a_held_file_waits_and_lands_once_the_holder_finishes(
    fake_model: FakeModel,
    client: FleetClient,
    start_attempt: StartAttempt,
    workdir: Path,
    offline: Callable[..., SessionExecutor],
    wait_until: WaitUntil,
) -> None:
    holder = await start_attempt("H", runner="holder", scope=["pkg/b.py"])
    assert (await holder.gate.check("Edit", {"file_path": "a.py"})).allowed
    fake_model.add_script(
        "W",
        [
            tool("Read", file_path=str(workdir / "a.py")),
            tool("Edit", file_path=str(workdir / "a.py"), old_string="A = 1", new_string="A = 2"),
            Turn(content=(Text("Done."),)),
        ],
    )
    attempt = waiting(await start_attempt("W", runner="runner-2", scope=["w.py"]))

    session = asyncio.create_task(run_attempt(offline(), attempt))
    await holder_done(client, holder, wait_until)
    outcome = await session

    assert outcome.ok and outcome.error_kind is None
    assert (workdir / "a.py").read_text() == "A = 2\n"
    [waited] = await client.events(type_="lease_waited")
    assert (waited["task_id"], waited["payload"]["outcome"]) == ("W", "granted")


async def test_a_file_changed_while_the_edit_waited_is_read_again_and_the_edit_redone(
    fake_model: FakeModel,
    client: FleetClient,
    start_attempt: StartAttempt,
    workdir: Path,
    offline: Callable[..., SessionExecutor],
    wait_until: WaitUntil,
) -> None:
    holder = await start_attempt("H", runner="holder", scope=["pkg/b.py"])
    assert (await holder.gate.check("Edit", {"file_path": "a.py"})).allowed
    path = str(workdir / "a.py")
    fake_model.add_script(
        "W",
        [
            tool("Read", file_path=path),
            tool("Edit", file_path=path, old_string="A = 1", new_string="A = 2"),
            tool("Read", file_path=path),
            tool("Edit", file_path=path, old_string="A = 10", new_string="A = 20"),
            Turn(content=(Text("Done."),)),
        ],
    )
    attempt = waiting(await start_attempt("W", runner="runner-2", scope=["w.py"]))

    session = asyncio.create_task(run_attempt(offline(), attempt))
    await wait_until(lambda: client.events(type_="lease_waiting"), timeout=30.0)
    (workdir / "a.py").write_text("A = 10\n")  # the holder's edit, while W waits
    await holder_done(client, holder, wait_until)
    outcome = await session

    assert outcome.ok and outcome.error_kind is None  # a reread, not a veto
    assert (workdir / "a.py").read_text() == "A = 20\n"
    [waited] = await client.events(type_="lease_waited")
    assert waited["payload"]["outcome"] == "changed"
    refusal = fake_model.requests("W")[2]  # the turn after the refused Edit
    [answer] = [
        block
        for m in refusal.body["messages"]
        if m["role"] == "user"
        for block in (m["content"] if isinstance(m["content"], list) else [])
        if block.get("type") == "tool_result" and block.get("is_error")
    ]
    print(
        "\n--- what the model received after its Edit waited ---\n" + json.dumps(answer, indent=1)
    )
    assert "a.py changed while you waited (H finished): Read it again" in json.dumps(answer)


async def test_a_codex_patch_on_a_file_changed_while_it_waited_is_read_again_and_redone(
    fake_codex: FakeCodexModel,
    client: FleetClient,
    start_attempt: StartAttempt,
    workdir: Path,
    codex: CodexExecutor,
    wait_until: WaitUntil,
) -> None:
    holder = await start_attempt("H", runner="holder", scope=["pkg/b.py"])
    assert (await holder.gate.check("Edit", {"file_path": "a.py"})).allowed
    fake_codex.add_script(
        "W",
        [
            {"content": [search("read a file")]},
            {"content": [call("read_file", path="a.py")]},
            {"content": [patch_call("*** Update File: a.py", "@@", "-A = 1", "+A = 2")]},
            {"content": [call("read_file", path="a.py")]},
            {"content": [patch_call("*** Update File: a.py", "@@", "-A = 10", "+A = 20")]},
            say("Done."),
        ],
    )
    attempt = waiting(await start_attempt("W", runner="codex-1", scope=["w.py"]))

    session = asyncio.create_task(run_attempt(codex, attempt))
    await wait_until(lambda: client.events(type_="lease_waiting"), timeout=30.0)
    (workdir / "a.py").write_text("A = 10\n")  # the holder's edit, while W's patch waits
    await holder_done(client, holder, wait_until)
    outcome = await session

    told = [r.content for r in fake_codex.tool_results("W")]
    print("\n--- what Codex received after its patch waited ---\n" + told[2])
    assert "a.py changed while you waited (H finished)" in told[2]
    assert "read_file" in told[2]
    assert "A = 10" in told[3]  # it read the file again
    assert (outcome.ok, outcome.error_kind) == (True, None)  # a reread, not a veto
    assert (workdir / "a.py").read_text() == "A = 20\n"
    [waited] = await client.events(type_="lease_waited")
    assert waited["payload"]["outcome"] == "changed"
    assert await client.events(type_="lease_denied") == []
    await client.complete("W", attempt.gate.agent_id, attempt.gate.epoch, outcome)  # as a runner
    assert await client.events(type_="task_requeued") == []
    assert (await client.task("W"))["status"] == "succeeded"


async def test_a_codex_patch_that_waits_past_its_hooks_bound_is_the_timed_out_veto_not_unchecked(
    fake_codex: FakeCodexModel,
    client: FleetClient,
    start_attempt: StartAttempt,
    codex: CodexExecutor,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The server's wait (30 s here) is cut to what Codex's hook can wait for: the holder keeps
    the file, the wait times out on the server, and the patch gets the veto that names it."""
    monkeypatch.setattr(codex_module, "CHECK_TIMEOUT_S", 4.0)  # Codex's own bound, shortened
    holder = await start_attempt("H", runner="holder", scope=["pkg/b.py"])
    assert (await holder.gate.check("Edit", {"file_path": "a.py"})).allowed
    fake_codex.add_script(
        "W", [{"content": [patch_call("*** Update File: a.py", "@@", "-A = 1", "+A = 2")]},
              say("Blocked on a.py.")],
    )  # fmt: skip
    attempt = waiting(await start_attempt("W", runner="codex-1", scope=["w.py"]))

    outcome = await run_attempt(codex, attempt)

    told = fake_codex.tool_results("W")[0].content
    assert "could not be checked" not in told
    assert "a.py" in told and "H" in told
    assert (outcome.error_kind, outcome.blocked_on_path) == (ErrorKind.VETO, "a.py")
    [waited] = await client.events(type_="lease_waited")
    assert waited["payload"]["outcome"] == "timed_out"
