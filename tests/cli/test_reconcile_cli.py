"""A stale read through the real Claude Code CLI: the reconcile turn and the retry (issue 27).

T1's session reads a.txt; T2's session (held by the fake until T1's read reached the
model) changes a.txt; T1's next reply is held until T2's edit is done, then T1 writes
b.txt, and its last reply is held until T2 has succeeded (the test says "go"). Its read is stale: with the default policy the same session gets
one more user message with the diff of a.txt (the last request T1's CLI sends carries
it), and the log has `stale_read` then `reconciled`; with `on_stale_read: retry` the
attempt is rolled back and requeued, and the next one is told which file changed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from codefleet.api.client import FleetClient
from codefleet.fleet.runner import Runner, RunnerOptions
from codefleet.offlinemodels.anthropicapi import FakeModel, Text, ToolUse, Turn, Usage, WaitFor
from codefleet.session.sdk import SessionExecutor

Offline = Callable[..., SessionExecutor]
WaitUntil = Callable[..., Awaitable[Any]]
OLD, NEW = "VERSION = 1\n", "VERSION = 2\n"
WAIT_S = 60
TURN = Usage(1000, 10)  # each of T1's five model turns
GO = "T2 has succeeded"


def scripts(fake_model: FakeModel, workdir: Path) -> None:
    a, b = str(workdir / "a.txt"), str(workdir / "b.txt")
    fake_model.add_script(
        "T1",
        [
            Turn(content=(Text("Reading a.txt."), ToolUse("Read", {"file_path": a})), usage=TURN),
            Turn(
                content=(ToolUse("Write", {"file_path": b, "content": "uses VERSION 1\n"}),),
                wait_for=WaitFor("a.txt", "T2", timeout_s=WAIT_S),
                usage=TURN,
            ),
            Turn(
                content=(Text("Wrote b.txt for VERSION 1."),),
                wait_for=WaitFor(GO, timeout_s=WAIT_S),
                usage=TURN,
            ),
            # the follow-up message (a reconcile turn) continues the same conversation
            Turn(
                content=(ToolUse("Write", {"file_path": b, "content": "uses VERSION 2\n"}),),
                usage=TURN,
            ),
            Turn(content=(Text("Reconciled: b.txt now uses VERSION 2."),), usage=TURN),
        ],
    )
    fake_model.add_script(
        "T2",
        [
            Turn(content=(ToolUse("Read", {"file_path": a}),)),
            Turn(
                content=(ToolUse("Edit", {"file_path": a, "old_string": OLD, "new_string": NEW}),),
                wait_for=WaitFor("VERSION = 1", "T1", timeout_s=WAIT_S),
            ),
            Turn(content=(Text("a.txt is at VERSION 2."),)),
        ],
    )


async def run_two(
    fake_model: FakeModel,
    client: FleetClient,
    offline: Offline,
    wait_until: WaitUntil,
    workdir: Path,
    runs: Path,
    **t1: Any,
) -> list[dict[str, Any]]:
    (workdir / "a.txt").write_text(OLD)
    await client.create_tasks(
        [
            {"id": "T1", "title": "use a", "description": "write b.txt from a.txt", **t1},
            {"id": "T2", "title": "bump a", "description": "bump a.txt"},
        ]
    )
    executor = offline()
    options = [
        RunnerOptions(f"runner-{n}", workdir, runs, poll_wait=0.2, exit_when_drained=True)
        for n in (1, 2)
    ]
    runners = [Runner(client, executor, o) for o in options]
    fleet = asyncio.gather(*(r.run() for r in runners))
    await wait_until(lambda: _succeeded(client, "T2"), timeout=120)
    fake_model.signal(GO)
    await asyncio.wait_for(fleet, 120)
    return list(await client.all_events())


async def _succeeded(client: FleetClient, task_id: str) -> bool:
    return bool((await client.task(task_id))["status"] == "succeeded")


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


async def test_the_stale_session_gets_the_diff_in_the_same_conversation_and_reconciles(
    fake_model: FakeModel,
    client: FleetClient,
    workdir: Path,
    runs: Path,
    offline: Offline,
    wait_until: WaitUntil,
) -> None:
    scripts(fake_model, workdir)

    events = await run_two(fake_model, client, offline, wait_until, workdir, runs)

    last = fake_model.requests("T1")[-1]
    followup = user_texts(dict(last.body))[-1]
    print("\n--- the follow-up message as the model received it ---\n" + followup)
    assert "- a.txt: changed by T2." in followup
    assert "-VERSION = 1\n+VERSION = 2\n" in followup
    assert last.turn == 4  # one conversation: the follow-up came after the three first turns
    kinds = [
        (e["type"], e["task_id"])
        for e in events
        if e["type"] in ("stale_read", "reconciled", "task_succeeded")
    ]
    assert kinds == [
        ("task_succeeded", "T2"),
        ("stale_read", "T1"),
        ("reconciled", "T1"),
        ("task_succeeded", "T1"),
    ]
    [stale] = [e for e in events if e["type"] == "stale_read"]
    assert [(p["path"], p["changed_by"]) for p in stale["payload"]["paths"]] == [("a.txt", ["T2"])]
    [done] = [e for e in events if e["type"] == "reconciled"]
    assert (done["payload"]["rounds"], done["payload"]["outcome"]) == (1, "clean")
    assert (workdir / "b.txt").read_text() == "uses VERSION 2\n"
    row = await client.task("T1")
    assert (row["status"], row["attempts"]) == ("succeeded", 1)
    assert (row["input_tokens"], row["output_tokens"]) == (5000, 50)  # both turns, once each
    assert done["payload"]["cost_usd"] > 0 and row["cost_usd"] > done["payload"]["cost_usd"]
    assert fake_model.wait_timeouts() == []


async def test_with_retry_the_stale_attempt_is_rolled_back_and_requeued_naming_the_file(
    fake_model: FakeModel,
    client: FleetClient,
    workdir: Path,
    runs: Path,
    offline: Offline,
    wait_until: WaitUntil,
) -> None:
    scripts(fake_model, workdir)

    events = await run_two(
        fake_model, client, offline, wait_until, workdir, runs, on_stale_read="retry"
    )

    requeued = [e for e in events if e["type"] == "task_requeued"]
    assert [(e["task_id"], e["payload"]["error_kind"]) for e in requeued] == [("T1", "stale_read")]
    assert [e["payload"]["path"] for e in events if e["type"] == "file_restored"] == ["b.txt"]
    second = [r for r in fake_model.requests("T1") if r.turn == 0][-1]
    assert any("a.txt (changed by T2)" in text for text in user_texts(dict(second.body)))
    row = await client.task("T1")
    assert (row["status"], row["attempts"]) == ("succeeded", 2)
    assert [e for e in events if e["type"] == "reconciled"] == []
