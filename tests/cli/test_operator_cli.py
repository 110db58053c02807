"""A person in the loop through the real Claude Code CLI and the scripted model (issue 31).

`say`: T1's session reads a.txt, then its next reply is held by the fake model; the
operator says something; once the runner's heartbeat brought it, the test releases the
reply, the turn ends, and the same conversation's next model request carries the
message. `ask_operator`: T1's session calls the tool; the operator answers with
`codefleet answer`; the tool's result in the next model request is that answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from codefleet.api.client import FleetClient
from codefleet.cli.app import app
from codefleet.fleet.runner import Runner, RunnerOptions
from codefleet.offlinemodels.anthropicapi import FakeModel, Text, ToolUse, Turn, WaitFor
from codefleet.server.thread import ServerThread
from codefleet.session.sdk import ASK_TOOL_NAME, SessionExecutor
from codefleet.ui.viewmodel import describe

Offline = Callable[..., SessionExecutor]
WaitUntil = Callable[..., Awaitable[Any]]
WAIT_S = 60
GO = "the operator has spoken"


def user_texts(body: Any) -> list[str]:
    texts = []
    for message in body["messages"]:
        content = message.get("content")
        if message.get("role") != "user":
            continue
        if isinstance(content, str):
            texts.append(content)
        else:
            texts.extend(str(b.get("text", "")) for b in content if b.get("type") == "text")
            texts.extend(
                str(b.get("content", "")) for b in content if b.get("type") == "tool_result"
            )
    return texts


def one_runner(client: FleetClient, executor: SessionExecutor, workdir: Path, runs: Path) -> Runner:
    options = RunnerOptions("runner-1", workdir, runs, poll_wait=0.2, exit_when_drained=True)
    return Runner(client, executor, options)


async def test_a_held_session_gets_says_text_in_its_next_model_request(
    fake_model: FakeModel,
    client: FleetClient,
    workdir: Path,
    runs: Path,
    offline: Offline,
    wait_until: WaitUntil,
) -> None:
    a = str(workdir / "a.txt")
    (workdir / "a.txt").write_text("A\n")
    fake_model.add_script(
        "T1",
        [
            Turn(content=(ToolUse("Read", {"file_path": a}),)),
            Turn(
                content=(Text("Read a.txt; nothing to change."),),
                wait_for=WaitFor(GO, timeout_s=WAIT_S),
            ),
            Turn(
                content=(
                    ToolUse("Write", {"file_path": str(workdir / "b.txt"), "content": "httpx\n"}),
                )
            ),
            Turn(content=(Text("Wrote b.txt with httpx, as the operator said."),)),
        ],
    )
    await client.create_tasks([{"id": "T1", "title": "t", "description": "read a.txt"}])
    runner = one_runner(client, offline(), workdir, runs)
    fleet = asyncio.create_task(runner.run())
    await wait_until(lambda: len(fake_model.requests("T1")) >= 2, timeout=WAIT_S)
    said = await client.say("T1", "Write b.txt saying httpx.")
    await wait_until(lambda: bool(runner.inbox.waiting), timeout=WAIT_S)  # its heartbeat
    fake_model.signal(GO)
    await asyncio.wait_for(fleet, WAIT_S)

    requests = fake_model.requests("T1")
    heard = user_texts(dict(requests[2].body))[-1]
    print("\n--- the operator's message as the model received it ---\n" + heard)
    assert said["delivered"] == "running"
    assert "Write b.txt saying httpx." in heard
    assert requests[2].turn == 2  # the same conversation: after the first two replies
    assert (workdir / "b.txt").read_text() == "httpx\n"
    events = await client.all_events()
    print("--- the event log ---\n" + "\n".join(describe(e, {}).text for e in events))
    kinds = [
        e["type"]
        for e in events
        if e["task_id"] == "T1"
        and e["type"] in ("operator_message", "operator_message_delivered", "task_succeeded")
    ]
    assert kinds == ["operator_message", "operator_message_delivered", "task_succeeded"]
    assert fake_model.wait_timeouts() == []


async def test_a_session_that_asks_gets_the_answer_given_with_codefleet_answer(
    fake_model: FakeModel,
    client: FleetClient,
    server: ServerThread,
    workdir: Path,
    runs: Path,
    offline: Offline,
    wait_until: WaitUntil,
) -> None:
    fake_model.add_script(
        "T1",
        [
            Turn(content=(ToolUse(ASK_TOOL_NAME, {"question": "httpx or requests?"}),)),
            Turn(content=(Text("Using httpx, as the operator answered."),)),
        ],
    )
    await client.create_tasks([{"id": "T1", "title": "t", "description": "pick a client"}])
    fleet = asyncio.create_task(one_runner(client, offline(), workdir, runs).run())

    async def asked() -> bool:
        return bool(await client.questions())

    await wait_until(asked, timeout=WAIT_S)
    out = await asyncio.to_thread(
        CliRunner().invoke, app, ["answer", "T1", "use httpx", "--server", server.url]
    )
    await asyncio.wait_for(fleet, WAIT_S)

    assert out.exit_code == 0, out.output
    last = fake_model.requests("T1")[-1]
    assert last.turn == 1
    assert any("use httpx" in text for text in user_texts(dict(last.body)))
    assert (await client.task("T1"))["status"] == "succeeded"
