"""Operator messages over the wire (issue 31): the real runner and server, scripted brains.

A message to a task that is not running waits for its next attempt's prompt; a
message to a running task rides its runner's heartbeat and reaches the session at
the next turn boundary, as one more user message in the same conversation.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from codefleet.api.client import FleetClient
from codefleet.errors import InvalidState, NotFound, TooLarge
from codefleet.fleet.local import FleetOptions, run_fleet
from codefleet.fleet.runner import RunnerOptions
from codefleet.fleet.scripted import ScriptedExecutor, parse_script
from codefleet.models import MAX_MESSAGE_BYTES
from codefleet.server.thread import ServerThread
from codefleet.session.taskprompt import NOTES_HEADING, build_prompt

FAST = {"heartbeat_interval": 0.1, "stale_after": 5.0, "tick_interval": 0.05, "backoff_base": 0.0}


def of(events: list[dict[str, Any]], *kinds: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] in kinds]


async def test_a_message_to_a_pending_task_shows_in_its_next_assignments_prompt(
    client: FleetClient,
) -> None:
    await client.create_tasks([{"id": "T1", "title": "fetch", "description": "get it"}])
    said = await client.say("T1", "use httpx, not requests")
    registered = await client.register("r1", (await client.health())["workdir"], 1234)

    task = await client.assignment(registered["agent_id"], registered["epoch"], wait=5)

    assert (said["seq"], said["delivered"], said["attempt"]) == (1, "next_attempt", 1)
    assert task is not None
    prompt = build_prompt(task)
    assert "use httpx, not requests" in prompt[prompt.index(NOTES_HEADING) :]


async def test_a_running_session_gets_the_message_at_its_next_turn_boundary(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    server = make_server(**FAST)
    script = {
        "T1": [
            {"wait_message": "tests/unit"},
            {"expect_followup": "the tests live in tests/unit", "turn": 2},
            {"write": {"path": "tests.txt", "content": "tests/unit\n"}, "turn": 2},
        ]
    }
    executor = ScriptedExecutor(parse_script(script), wait_timeout=10)
    async with FleetClient(server.url) as client:
        await client.create_tasks([{"id": "T1", "title": "t", "description": "d"}])
        fleet = asyncio.create_task(
            run_fleet(
                server.url,
                lambda _: executor,
                FleetOptions(RunnerOptions("runner", workdir, workdir.parent / "runs")),
            )
        )
        while (await client.task("T1"))["status"] != "running":
            await asyncio.sleep(0.01)
        said = await client.say("T1", "the tests live in tests/unit")
        result = await asyncio.wait_for(fleet, 30)
        events = await client.all_events()
    assert result.all_succeeded
    assert said["delivered"] == "running"
    assert [(t, a) for t, a, _ in executor.followups] == [("T1", 1)]
    assert (workdir / "tests.txt").read_text() == "tests/unit\n"
    order = [
        e["type"]
        for e in of(events, "operator_message", "operator_message_delivered", "task_succeeded")
    ]
    assert order == ["operator_message", "operator_message_delivered", "task_succeeded"]


async def test_a_message_is_an_operator_action_with_clear_refusals(
    make_server: Callable[..., ServerThread],
) -> None:
    server = make_server(token="s3cret")
    async with httpx.AsyncClient(base_url=server.url) as raw:
        refused = await raw.post("/tasks/T1/messages", json={"text": "hi"})
    assert refused.status_code == 401
    async with FleetClient(server.url, token="s3cret") as client:
        await client.create_tasks([{"id": "T1", "title": "t", "description": "d"}])
        async with httpx.AsyncClient(
            base_url=server.url, headers={"Authorization": "Bearer s3cret"}
        ) as raw:
            blank = await raw.post("/tasks/T1/messages", json={"text": "  "})
        assert blank.status_code == 422
        try:
            await client.say("T1", "x" * (MAX_MESSAGE_BYTES + 1))
            raise AssertionError("a message past the size cap was kept")
        except TooLarge as err:
            assert "16384 bytes" in err.message
        try:
            await client.say("T9", "nobody")
            raise AssertionError("a message to no task was kept")
        except NotFound:
            pass
        await client.cancel("T1")
        try:
            await client.say("T1", "too late")
            raise AssertionError("a message to a cancelled task was kept")
        except InvalidState as err:
            assert "already cancelled" in err.message


# -- ask_operator ---------------------------------------------------------------------------


async def run_one(server: ServerThread, workdir: Path, script: dict[str, Any]) -> Any:
    executor = ScriptedExecutor(parse_script(script), wait_timeout=10)
    return asyncio.create_task(
        run_fleet(
            server.url,
            lambda _: executor,
            FleetOptions(RunnerOptions("runner", workdir, workdir.parent / "runs")),
        )
    )


async def test_a_questions_answer_reaches_the_waiting_tool(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    server = make_server(**FAST)
    script = {
        "T1": [
            {"ask": "httpx or requests?"},
            {"expect_answer": "use httpx"},
            {"write": {"path": "client.txt", "content": "httpx\n"}},
        ]
    }
    async with FleetClient(server.url) as client:
        await client.create_tasks([{"id": "T1", "title": "t", "description": "d"}])
        fleet = await run_one(server, workdir, script)
        while not (open_questions := await client.questions()):
            await asyncio.sleep(0.01)
        answered = await client.answer("T1", "use httpx")
        result = await asyncio.wait_for(fleet, 30)
        events = await client.all_events()
    [question] = open_questions
    assert (question["task_id"], question["attempt"], question["text"]) == (
        "T1",
        1,
        "httpx or requests?",
    )
    assert answered["question_id"] == question["question_id"] and answered["by"] == "operator"
    assert result.all_succeeded
    assert (workdir / "client.txt").read_text() == "httpx\n"
    [asked] = of(events, "question_asked")
    assert asked["payload"]["question_id"] == question["question_id"]
    assert await_free(events)


def await_free(events: list[dict[str, Any]]) -> bool:
    """No runner went stale and no attempt was taken back while a question waited."""
    stale = [e for e in of(events, "agent_offline") if e["payload"]["reason"] == "agent_stale"]
    return not stale and not of(events, "task_requeued", "task_failed")


async def test_a_questions_wait_neither_makes_the_runner_stale_nor_spends_its_wall_clock(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    server = make_server(
        heartbeat_interval=0.1,
        stale_after=0.5,
        task_timeout=1.0,
        question_timeout=2.0,
        tick_interval=0.05,
        backoff_base=0.0,
    )
    script = {"T1": [{"ask": "which tests?"}, {"expect_answer": "No answer: use your best"}]}
    async with FleetClient(server.url) as client:
        await client.create_tasks([{"id": "T1", "title": "t", "description": "d"}])
        result = await asyncio.wait_for(await run_one(server, workdir, script), 30)
        events = await client.all_events()
    assert result.all_succeeded
    [answered] = of(events, "question_answered")
    assert answered["payload"]["by"] == "timeout"
    assert await_free(events)


async def test_a_line_typed_at_runs_terminal_answers_the_oldest_open_question(
    client: FleetClient, monkeypatch: Any, wait_until: Any
) -> None:
    from codefleet.cli.run.asking import answer_from_terminal

    await client.create_tasks([{"id": "T1", "title": "t", "description": "d"}])
    registered = await client.register("r1", (await client.health())["workdir"], 1234)
    agent, epoch = registered["agent_id"], registered["epoch"]
    assert await client.assignment(agent, epoch, wait=5) is not None
    await client.start("T1", agent, epoch)
    asked = await client.ask("T1", agent, epoch, "httpx or requests?")
    read_end, write_end = os.pipe()
    monkeypatch.setattr("sys.stdin", os.fdopen(read_end, "r"))
    stop, said = asyncio.Event(), list[str]()
    listening = asyncio.create_task(answer_from_terminal(client, stop, said.append))
    os.write(write_end, b"use httpx\n")

    await wait_until(lambda: bool(said), timeout=10)
    stop.set()
    await listening
    os.close(write_end)

    assert said == [f"T1: answered {asked['question_id']} (httpx or requests?)"]
    assert await client.questions() == []
