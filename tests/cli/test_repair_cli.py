"""Repair turns through the real Claude Code CLI and the fake model (issue 53, item 4).

A failed verify: T1's session writes `VALUE = 3`, its verify wants 2; the same
conversation gets the repair message (the fake's next request carries it, one turn
later) and writes `VALUE = 2`: one attempt, nothing rolled back. A landing that fails:
T1's change passes alone but breaks the landing check; its session is resumed by the
next attempt (the CLI's `--resume`, in the HOME that holds its transcript), told the
check's output, and repairs the change in place; the repaired change lands.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from codefleet.api.client import FleetClient
from codefleet.fleet.local import FleetOptions, run_fleet
from codefleet.fleet.runner import RunnerOptions
from codefleet.offlinemodels.anthropicapi import FakeModel, Text, ToolUse, Turn
from codefleet.server.thread import ServerThread
from codefleet.session.sdk import SessionExecutor

Offline = Callable[..., SessionExecutor]


def script(fake_model: FakeModel, workdir: Path) -> None:
    lib = str(workdir / "lib.py")
    fake_model.add_script(
        "T1",
        [
            Turn(content=(Text("Writing lib.py."), ToolUse("Write", {"file_path": lib, "content": "VALUE = 3\n"}))),
            Turn(content=(Text("lib.py says VALUE = 3."),)),
            # the repair message continues the same conversation (or resumes it)
            Turn(content=(ToolUse("Write", {"file_path": lib, "content": "VALUE = 2\n"}),)),
            Turn(content=(Text("Repaired: VALUE = 2."),)),
        ],
    )  # fmt: skip


def user_texts(body: dict[str, Any]) -> list[str]:
    texts = []
    for message in body["messages"]:
        content = message.get("content")
        if message.get("role") != "user":
            continue
        if isinstance(content, str):
            texts.append(content)
        else:
            texts.extend(str(b.get("text", "")) for b in content if b.get("type") == "text")
    return texts


async def drain(url: str, offline: Offline, workdir: Path, runs: Path) -> Any:
    executor = offline()
    options = FleetOptions(RunnerOptions("runner", workdir, runs, poll_wait=0.2), runners=1)
    return await run_fleet(url, lambda _: executor, options)


def of(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == kind]


async def test_a_failed_verify_is_repaired_in_the_same_conversation(
    fake_model: FakeModel, server: ServerThread, workdir: Path, runs: Path, offline: Offline
) -> None:
    (workdir / "lib.py").write_text("VALUE = 1\n")
    script(fake_model, workdir)
    async with FleetClient(server.url) as client:
        task = {"id": "T1", "title": "two", "description": "make it 2", "verify": "two"}
        await client.create_tasks([task], {"two": "grep -q 'VALUE = 2' lib.py"})
        result = await drain(server.url, offline, workdir, runs)
        events = await client.all_events()
        row = await client.task("T1")

    assert result.ok, result.tasks
    last = fake_model.requests("T1")[-1]
    repair = user_texts(dict(last.body))[-1]
    print("\n--- the repair message as the model received it ---\n" + repair)
    assert "failed its verification" in repair and "check `two`" in repair
    assert last.turn == 3  # one conversation: the repair came after the first two turns
    assert [e["payload"]["outcome"] for e in of(events, "repair_finished")] == ["fixed"]
    assert of(events, "task_requeued") == [] and of(events, "file_restored") == []
    assert (row["status"], row["attempts"]) == ("succeeded", 1)
    assert (workdir / "lib.py").read_text() == "VALUE = 2\n"


async def test_a_landing_break_is_repaired_by_the_resumed_session(
    fake_model: FakeModel,
    make_server: Callable[..., ServerThread],
    workdir: Path,
    runs: Path,
    offline: Offline,
) -> None:
    (workdir / "lib.py").write_text("VALUE = 1\n")
    script(fake_model, workdir)
    server = make_server(heartbeat_interval=0.2, run_dir=runs)
    async with FleetClient(server.url) as client:
        task = {"id": "T1", "title": "not three", "description": "change VALUE"}
        await client.create_tasks([task], {"land": "! grep -q 'VALUE = 3' lib.py"})
        await client.set_integration("land")
        result = await drain(server.url, offline, workdir, runs)
        events = await client.all_events()
        row = await client.task("T1")

    assert result.ok, result.tasks
    [started] = of(events, "repair_started")
    first_session = started["payload"]["session_id"]
    last = fake_model.requests("T1")[-1]
    assert any("did not land" in text for text in user_texts(dict(last.body)))
    assert last.turn == 3  # the resumed conversation: its earlier turns are in the request
    assert [e["payload"]["outcome"] for e in of(events, "repair_finished")] == ["landing"]
    assert of(events, "integration_failed") == [] and of(events, "file_restored") == []
    assert (row["status"], row["attempts"], row["session_id"]) == ("succeeded", 2, first_session)
    assert (workdir / "lib.py").read_text() == "VALUE = 2\n"
