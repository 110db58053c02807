"""A Codex session's CodeFleet tools through the real Codex CLI, offline (issue 32).

Codex defers MCP tools behind its `tool_search`, so each script first searches (as a real
model must), then calls the tool as Codex exposes it: `read_file` in the `mcp__codefleet`
namespace. The tools run in the runner's process on the attempt's own objects (its read
set, its gate, its checker, its inbox), so a Codex read is recorded like a Claude Code
`Read`, a stale read gets its reconcile turn on the same Codex thread, and the operator's
messages reach a running Codex session as one more turn.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cli_support import run_attempt
from test_codex_executor import say
from tool_support import COMMAND_PYTHON

from codefleet.api.client import FleetClient
from codefleet.attempt import OperatorNote
from codefleet.fleet.tools.ask import Asker
from codefleet.fleet.tools.attemptchecks import Checker, CheckLimits
from codefleet.fleet.tools.commandtool import CommandRunner, host_shell
from codefleet.fleet.views.layerapply import ShellLimits
from codefleet.offlinemodels.anthropicapi import marker
from codefleet.offlinemodels.openaiapi import FakeCodexModel, patch_call
from codefleet.session.codex import CodexExecutor

if TYPE_CHECKING:
    from conftest import StartAttempt

WaitUntil = Callable[..., Awaitable[Any]]
WAIT_S = 60
GO = "the world has moved"


def search(query: str) -> dict[str, Any]:
    return {"tool_use": {"name": "tool_search", "input": {"query": query}}}


def call(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_use": {"name": f"mcp__codefleet__{tool}", "input": arguments}}


def held(content: list[dict[str, Any]]) -> dict[str, Any]:
    """A reply the fake holds until the test signals GO."""
    return {"content": content, "wait_for": {"substring": GO, "timeout_s": WAIT_S}}


def user_texts(body: Any) -> list[str]:
    """The user messages' texts of one Responses request, in order."""
    return [
        str(part.get("text", ""))
        for item in body["input"]
        if item.get("type", "message") == "message" and item.get("role") == "user"
        for part in item.get("content") or []
    ]


async def test_a_file_codex_reads_with_read_file_is_in_the_attempts_read_set(
    fake_codex: FakeCodexModel, start_attempt: StartAttempt, codex: CodexExecutor
) -> None:
    fake_codex.add_script(
        "R1",
        [{"content": [search("read a file")]}, {"content": [call("read_file", path="a.py")]},
         say("Read a.py.")],
    )  # fmt: skip
    attempt = await start_attempt("R1")

    outcome = await run_attempt(codex, attempt)

    assert outcome.ok
    assert "A = 1" in fake_codex.tool_results("R1")[-1].content
    read = attempt.reads.latest["a.py"]
    assert read.sha256 == hashlib.sha256(b"A = 1\n").hexdigest()
    tools = {t.get("type") for t in fake_codex.requests("R1")[0].body["tools"]}
    assert "tool_search" in tools  # the CodeFleet tools are found, not listed upfront


async def test_a_stale_read_gets_a_reconcile_turn_on_the_same_codex_thread(
    fake_codex: FakeCodexModel, client: FleetClient, start_attempt: StartAttempt,
    workdir: Path, codex: CodexExecutor, wait_until: WaitUntil,
) -> None:  # fmt: skip
    fake_codex.add_script(
        "S1",
        [
            {"content": [search("read a file")]},
            {"content": [call("read_file", path="a.py")]},
            held([patch_call("*** Add File: b.py", "+USES = 'A = 1'")]),
            say("Wrote b.py for A = 1."),
            # the reconcile turn: one more user message on the same thread
            {"content": [patch_call("*** Update File: b.py", "@@", "-USES = 'A = 1'", "+USES = 'A = 5'")]},
            say("Reconciled: b.py now uses A = 5."),
        ],
    )  # fmt: skip
    attempt = await start_attempt("S1", scope=["b.py"])
    session = asyncio.create_task(run_attempt(codex, attempt))
    await wait_until(lambda: len(fake_codex.requests("S1")) >= 3, timeout=WAIT_S)
    (workdir / "a.py").write_text("A = 5\n")  # outside the lock, while S1 works
    fake_codex.signal(GO)

    outcome = await session

    followup = user_texts(fake_codex.requests("S1")[-1].body)[-1]
    print("\n--- the follow-up message as Codex received it ---\n" + followup)
    assert "- a.py: changed by outside the lock (in A)." in followup
    assert "-A = 1\n+A = 5\n" in followup
    assert (outcome.ok, outcome.summary) == (True, "Reconciled: b.py now uses A = 5.")
    assert (workdir / "b.py").read_text() == "USES = 'A = 5'\n"
    assert outcome.input_tokens == 6000  # every model call of both turns, counted once
    kinds = [e["type"] for e in await client.all_events() if e["type"] in
             ("stale_read", "reconciled")]  # fmt: skip
    assert kinds == ["stale_read", "reconciled"]


async def test_an_operator_message_said_while_codex_works_is_its_next_turn(
    fake_codex: FakeCodexModel, start_attempt: StartAttempt, workdir: Path,
    codex: CodexExecutor, wait_until: WaitUntil,
) -> None:  # fmt: skip
    fake_codex.add_script(
        "O1",
        [held([{"text": "Nothing to change."}]),
         {"content": [patch_call("*** Add File: c.py", "+CLIENT = 'httpx'")]},
         say("Wrote c.py with httpx, as the operator said.")],
    )  # fmt: skip
    attempt = await start_attempt("O1")
    session = asyncio.create_task(run_attempt(codex, attempt))
    await wait_until(lambda: fake_codex.requests("O1"), timeout=WAIT_S)
    attempt.inbox.offer([OperatorNote(1, "Write c.py saying httpx.")])  # as a heartbeat does
    fake_codex.signal(GO)

    outcome = await session

    heard = user_texts(fake_codex.requests("O1")[-2].body)[-1]
    assert "Write c.py saying httpx." in heard
    assert (workdir / "c.py").read_text() == "CLIENT = 'httpx'\n"
    assert (outcome.ok, outcome.summary) == (True, "Wrote c.py with httpx, as the operator said.")
    assert not attempt.inbox.waiting and attempt.inbox.owed  # received; the next beat says so


async def test_codex_takes_a_port_asks_the_operator_and_runs_a_check_through_codefleet(
    fake_codex: FakeCodexModel, client: FleetClient, start_attempt: StartAttempt,
    codex: CodexExecutor, wait_until: WaitUntil,
) -> None:  # fmt: skip
    await client.define_checks({"test": "cat a.py"})
    fake_codex.add_script(
        "K1",
        [
            {"content": [search("number port resource question check")]},
            {"content": [call("allocate_port")]},
            {"content": [call("ask_operator", question="httpx or requests?")]},
            {"content": [call("run_check", name="test")]},
            say("Done."),
        ],
    )  # fmt: skip
    attempt = await start_attempt("K1")
    gate = attempt.gate
    asker = Asker(client, gate.agent_id, gate.epoch, "K1", attempt.inbox, timeout=WAIT_S)
    checker = Checker(gate, await client.checks(), attempt.number, CheckLimits())
    attempt = dataclasses.replace(attempt, ask=asker, checks=checker)
    session = asyncio.create_task(run_attempt(codex, attempt))

    async def asked() -> list[dict[str, Any]]:
        return await client.questions()

    question = (await wait_until(asked, timeout=WAIT_S))[0]
    attempt.inbox.answer([(str(question["question_id"]), "use httpx")])  # as a heartbeat does
    outcome = await session

    port, answer, check = (r.content for r in fake_codex.tool_results("K1")[1:4])
    assert "free on this host, yours until this task ends" in port
    assert "use httpx" in answer
    assert "Check `test` passed" in check and "A = 1" in check
    assert outcome.ok
    prompt = "\n".join(user_texts(fake_codex.requests("K1")[0].body))
    assert "ask_operator" in prompt and "run_check tool, by name: test" in prompt
    assert "run_command" not in prompt  # no shell for this task: the tool is not named


async def test_a_codex_prompt_names_only_the_tools_the_session_has(
    fake_codex: FakeCodexModel, start_attempt: StartAttempt, codex: CodexExecutor
) -> None:
    fake_codex.add_script("P1", [say("Nothing to do.")])
    attempt = await start_attempt("P1")

    await run_attempt(codex, attempt)

    prompt = "\n".join(user_texts(fake_codex.requests("P1")[0].body))
    assert marker("P1") in prompt
    for absent in ("ask_operator", "run_check", "run_command"):
        assert absent not in prompt
    assert "read_file" in prompt and "tool_search" in prompt
    assert json.dumps(prompt)  # plain text


async def test_a_codex_task_with_the_shell_runs_a_command_whose_file_lands_leased(
    fake_codex: FakeCodexModel, client: FleetClient, start_attempt: StartAttempt,
    workdir: Path, codex: CodexExecutor,
) -> None:  # fmt: skip
    generate = f"\"{COMMAND_PYTHON}\" -c \"open('gen.py', 'w').write('GEN = 1\\n')\""
    fake_codex.add_script(
        "C1",
        [{"content": [search("run a shell command")]},
         {"content": [call("run_command", command=generate)]}, say("Generated gen.py.")],
    )  # fmt: skip
    attempt = await start_attempt("C1")
    config = host_shell(ShellLimits(), unsandboxed=True)
    assert config is not None, "no command layer on this host"
    attempt = dataclasses.replace(
        attempt, commands=CommandRunner(attempt.gate, attempt.number, config)
    )

    outcome = await run_attempt(codex, attempt)

    answer = fake_codex.tool_results("C1")[-1].content
    assert "Command exited with code 0" in answer and "Applied to the shared tree: gen.py" in answer
    assert outcome.ok and (workdir / "gen.py").read_text() == "GEN = 1\n"
    assert [(x["path"], x["task_id"]) for x in await client.leases()] == [("gen.py", "C1")]
    prompt = "\n".join(user_texts(fake_codex.requests("C1")[0].body))
    assert "run_command tool" in prompt and "You cannot run commands" not in prompt
