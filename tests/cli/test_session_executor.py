"""The SDK executor through the real Claude Code CLI, a real server and a real WriteGate.

Each test plays a fake-model script (named like its task) through `SessionExecutor` and
checks what reached the disk, what the model was told (the fake's recorded tool_result),
what the executor reported, and what the server recorded.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from claude_agent_sdk import HookCallback, HookContext, HookInput, HookJSONOutput
from cli_support import claude_children, pid_alive, run_attempt

from codefleet.api.client import FleetClient
from codefleet.fleet.runner import Runner, RunnerOptions
from codefleet.models import ErrorKind
from codefleet.offlinemodels.anthropicapi import ApiError, FakeModel, Text, ToolUse, Turn, Usage
from codefleet.server.thread import free_port
from codefleet.session import attempthooks
from codefleet.session.attempthooks import deny
from codefleet.session.sdk import RESOURCE_TOOL_NAMES, SessionExecutor
from codefleet.session.sessionfiles import record_path

if TYPE_CHECKING:
    from conftest import StartAttempt

Offline = Callable[..., SessionExecutor]
HERMETIC_TOOLS = ["Edit", "Glob", "Grep", "NotebookEdit", "Read", "Write"]
OUR_TOOLS = sorted(RESOURCE_TOOL_NAMES)  # in-process: acquire_resource, next_number, allocate_port


def write(path: str | Path, content: str, usage: Usage | None = None) -> Turn:
    return Turn(
        content=(
            Text(f"Writing {path}."),
            ToolUse("Write", {"file_path": str(path), "content": content}),
        ),
        usage=usage,
    )


def edit(path: str, old: str, new: str, usage: Usage | None = None) -> Turn:
    tool = ToolUse("Edit", {"file_path": path, "old_string": old, "new_string": new})
    return Turn(content=(Text(f"Editing {path}."), tool), usage=usage)


def say(text: str, usage: Usage | None = None) -> Turn:
    return Turn(content=(Text(text),), usage=usage)


async def drain_one(
    client: FleetClient, executor: SessionExecutor, workdir: Path, runs: Path, **options: Any
) -> None:
    """Run one real Runner until the fleet has nothing left to do."""
    opts = RunnerOptions(
        "runner-1", workdir, runs, poll_wait=0.2, exit_when_drained=True, **options
    )
    await Runner(client, executor, opts).run()


# --- allow, ledger, accounting, the session record -----------------------------------------


async def test_allowed_writes_land_and_the_task_row_has_the_ledger_usage_and_cost(
    fake_model: FakeModel, client: FleetClient, workdir: Path, runs: Path, offline: Offline
) -> None:
    fake_model.add_script(
        "T1",
        [
            write("new.py", "N = 1\n", Usage(1200, 30)),
            edit(str(workdir / "a.py"), "A = 1", "A = 2", Usage(800, 20)),
            say("Done: new.py and a.py.", Usage(500, 10)),
        ],
    )
    await client.create_tasks(
        [{"id": "T1", "title": "t", "description": "do it", "file_scope": ["new.py"]}]
    )
    executor = offline()

    await drain_one(client, executor, workdir, runs)

    assert (workdir / "new.py").read_text() == "N = 1\n"
    assert (workdir / "a.py").read_text() == "A = 2\n"
    row = await client.task("T1")
    assert (row["status"], row["attempts"]) == ("succeeded", 1)
    assert [(c["path"], c["tool"]) for c in row["file_changes"]] == [
        ("new.py", "Write"),
        ("a.py", "Edit"),
    ]
    assert (row["input_tokens"], row["output_tokens"]) == (2500, 60)
    assert row["cost_usd"] > 0 and row["session_id"]
    assert row["result_summary"] == "Done: new.py and a.py."
    assert len(executor.hook_timings_ms) == 2


async def test_the_session_record_proves_the_session_was_hermetic(
    fake_model: FakeModel, start_attempt: StartAttempt, workdir: Path, runs: Path, offline: Offline
) -> None:
    fake_model.add_script("T1", [write("new.py", "N = 1\n"), say("ok")])
    attempt = await start_attempt("T1")

    outcome = await run_attempt(offline(), attempt)

    record = json.loads(record_path(attempt).read_text())
    init = record["init"]
    assert sorted(init["tools"]) == sorted(HERMETIC_TOOLS + OUR_TOOLS)  # no Bash, no subagent
    assert (init["permissionMode"], init["cwd"], init["mcp_servers"]) == (
        "dontAsk",
        str(workdir),
        [{"name": "codefleet", "status": "connected", "source": "sdk"}],  # ours, in-process
    )
    assert init["apiKeySource"] == "ANTHROPIC_API_KEY"
    assert record["outcome"]["ok"] is True and outcome.ok
    assert record["hook"]["count"] == 1 and record["hook"]["p99_ms"] >= record["hook"]["p50_ms"] > 0
    assert record["cli_pid"] and not pid_alive(record["cli_pid"])
    assert (runs / "runners" / "runner-1.stderr.log").read_text().startswith("--- ")
    assert list((runs / "homes").iterdir()), "each session gets its own HOME under the run dir"


# --- deny -------------------------------------------------------------------------------


async def test_a_write_to_a_held_file_is_refused_and_the_model_is_told_who_holds_it(
    fake_model: FakeModel,
    client: FleetClient,
    start_attempt: StartAttempt,
    workdir: Path,
    offline: Offline,
) -> None:
    holder = await start_attempt("H", runner="holder", scope=["a.py"])
    assert (await holder.gate.check("Write", {"file_path": "a.py"})).allowed
    fake_model.add_script(
        "T4",
        [write("a.py", "stolen\n"), write("later.py", "no\n"), say("I was told to stop.")],
    )
    attempt = await start_attempt("T4", runner="runner-2", scope=["pkg/b.py"])

    outcome = await run_attempt(offline(), attempt)

    assert (workdir / "a.py").read_text() == "A = 1\n"
    assert not (workdir / "later.py").exists(), "after a veto every further write is refused"
    told = [r for r in fake_model.tool_results("T4") if r.is_error]
    assert "a.py is held by holder for task H" in told[0].content
    assert "Stop now" in told[1].content
    assert (outcome.ok, outcome.error_kind, outcome.blocked_on_path) == (
        False,
        ErrorKind.VETO,
        "a.py",
    )
    assert outcome.files_written == ()
    denied = await client.events(type_="lease_denied")
    assert [(e["task_id"], e["payload"]["path"]) for e in denied] == [("T4", "a.py")]


async def test_a_path_outside_the_tree_is_refused_without_asking_the_server(
    fake_model: FakeModel,
    client: FleetClient,
    start_attempt: StartAttempt,
    tmp_path: Path,
    offline: Offline,
) -> None:
    outside = tmp_path / "outside.py"
    fake_model.add_script("T1", [write(outside, "x\n"), say("Refused.")])
    attempt = await start_attempt("T1")

    outcome = await run_attempt(offline(), attempt)

    assert not outside.exists()
    [told] = fake_model.tool_results("T1")
    assert told.is_error and "outside the shared working tree" in told.content
    assert (outcome.ok, outcome.error_kind) == (False, ErrorKind.AGENT_ERROR)
    assert await client.events(type_="lease_denied") == []


async def test_bash_is_not_available_to_the_agent(
    fake_model: FakeModel, start_attempt: StartAttempt, workdir: Path, offline: Offline
) -> None:
    canary = workdir / "pwned"
    fake_model.add_script("T1", [Turn(content=(ToolUse("Bash", {"command": f"touch {canary}"}),))])
    attempt = await start_attempt("T1")

    await run_attempt(offline(), attempt)

    assert not canary.exists()
    [told] = fake_model.tool_results("T1")
    assert told.is_error and "no such tool" in told.content.lower()


# --- a hook that cannot fail open -----------------------------------------------------------


def _raises(_answer: HookJSONOutput) -> HookJSONOutput:
    raise RuntimeError("hook bug")


def _none(_answer: HookJSONOutput) -> HookJSONOutput:
    return None  # type: ignore[return-value]


def _wrong_case(_answer: HookJSONOutput) -> HookJSONOutput:
    answer: Any = deny("held")
    answer["hookSpecificOutput"]["permissionDecision"] = "Deny"
    return answer  # type: ignore[no-any-return]


def _no_event_name(_answer: HookJSONOutput) -> HookJSONOutput:
    answer: Any = deny("held")
    del answer["hookSpecificOutput"]["hookEventName"]
    return answer  # type: ignore[no-any-return]


MANGLERS = {
    "raises": _raises,
    "returns None": _none,
    "wrong-case Deny": _wrong_case,
    "no hookEventName": _no_event_name,
}


def mangle_hook(
    monkeypatch: pytest.MonkeyPatch,
    mangler: Callable[[HookJSONOutput], HookJSONOutput],
    delay_s: float = 0.0,
) -> None:
    """Wrap the production PreToolUse callback: it still asks the gate, then answers badly."""
    original = attempthooks.make_pre_tool_use

    def make(attempt_log: attempthooks.AttemptLog) -> HookCallback:
        real = original(attempt_log)

        async def hook(
            data: HookInput, tool_use_id: str | None, ctx: HookContext
        ) -> HookJSONOutput:
            answer = await real(data, tool_use_id, ctx)
            if delay_s:
                await asyncio.sleep(delay_s)
            return mangler(answer)

        return hook

    monkeypatch.setattr(attempthooks, "make_pre_tool_use", make)


def _blocked_write(fake_model: FakeModel) -> None:
    fake_model.add_script("T1", [write("new.py", "N = 1\n"), say("Finished.")])


@pytest.mark.parametrize("mangler", MANGLERS.values(), ids=MANGLERS.keys())
async def test_a_malformed_hook_answer_blocks_the_write(
    fake_model: FakeModel,
    start_attempt: StartAttempt,
    workdir: Path,
    offline: Offline,
    monkeypatch: pytest.MonkeyPatch,
    mangler: Callable[[HookJSONOutput], HookJSONOutput],
) -> None:
    _blocked_write(fake_model)
    mangle_hook(monkeypatch, mangler)
    attempt = await start_attempt("T1")

    outcome = await run_attempt(offline(), attempt)

    assert not (workdir / "new.py").exists()
    [told] = fake_model.tool_results("T1")
    assert told.is_error
    assert not outcome.ok, "a session whose write was blocked did not do its task"


async def test_a_hook_slower_than_its_timeout_blocks_the_write(
    fake_model: FakeModel,
    start_attempt: StartAttempt,
    workdir: Path,
    offline: Offline,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _blocked_write(fake_model)
    mangle_hook(monkeypatch, lambda answer: answer, delay_s=3.0)
    attempt = await start_attempt("T1")

    outcome = await run_attempt(offline(hook_timeout=1.0), attempt)

    assert not (workdir / "new.py").exists()
    [told] = fake_model.tool_results("T1")
    assert told.is_error
    assert not outcome.ok


async def test_an_unreachable_server_means_every_write_is_refused(
    fake_model: FakeModel, start_attempt: StartAttempt, workdir: Path, offline: Offline
) -> None:
    _blocked_write(fake_model)
    attempt = await start_attempt("T1")
    async with FleetClient(f"http://127.0.0.1:{free_port()}", timeout=1.0) as dead:
        attempt.gate.client = dead
        outcome = await run_attempt(offline(), attempt)

    assert not (workdir / "new.py").exists()
    [told] = fake_model.tool_results("T1")
    assert told.is_error and "could not grant the lease" in told.content
    assert (outcome.ok, outcome.error_kind) == (False, ErrorKind.AGENT_ERROR)


# --- budget, API errors, the wall clock ------------------------------------------------------


BIG = Usage(input_tokens=200_000, output_tokens=100)  # priced by the CLI itself: ~$1 on opus


@pytest.mark.parametrize(
    ("limits", "turns", "subtype"),
    [
        ({"max_budget_usd": 0.05}, [write("new.py", "x\n", BIG)], "error_max_budget_usd"),
        ({"max_turns": 1}, [write("new.py", "x\n"), write("b.py", "y\n")], "error_max_turns"),
    ],
    ids=["budget", "turns"],
)
async def test_a_budget_or_turn_stop_is_reported_as_budget(
    fake_model: FakeModel,
    start_attempt: StartAttempt,
    offline: Offline,
    limits: dict[str, Any],
    turns: list[Turn],
    subtype: str,
) -> None:
    fake_model.add_script("T1", turns)
    attempt = await start_attempt("T1")

    outcome = await run_attempt(offline(**limits), attempt)

    assert (outcome.ok, outcome.error_kind) == (False, ErrorKind.BUDGET)
    assert outcome.error is not None and subtype in outcome.error
    assert outcome.cost_usd > 0 and outcome.input_tokens > 0


@pytest.mark.parametrize(
    ("status", "kind"), [(500, ErrorKind.INFRA), (429, ErrorKind.RATE_LIMITED)], ids=["500", "429"]
)
async def test_an_api_error_is_infra_and_a_429_is_rate_limited(
    fake_model: FakeModel,
    start_attempt: StartAttempt,
    offline: Offline,
    status: int,
    kind: ErrorKind,
) -> None:
    fake_model.add_script("T1", [Turn(error=ApiError(status, "api_error", "scripted"))])
    attempt = await start_attempt("T1")

    outcome = await run_attempt(offline(), attempt)

    assert (outcome.ok, outcome.error_kind) == (False, kind)
    assert outcome.error is not None and f"HTTP {status}" in outcome.error


async def test_the_wall_clock_timeout_kills_the_cli_and_the_task_fails_as_timeout(
    fake_model: FakeModel, client: FleetClient, workdir: Path, runs: Path, offline: Offline
) -> None:
    fake_model.add_script("T1", [Turn(content=(Text("thinking..."),), delay_s=60)])
    await client.create_tasks(
        [{"id": "T1", "title": "slow", "description": "do it", "max_attempts": 1}]
    )
    assert claude_children() == []
    started = time.monotonic()

    await drain_one(client, offline(), workdir, runs, task_timeout=1.5)

    [failed] = await client.events(type_="task_failed")  # its only attempt
    assert failed["payload"]["last_error_kind"] == "timeout"
    assert time.monotonic() - started < 5.0, "the CLI is killed, not waited for"
    record = json.loads((runs / "sessions" / "T1-attempt1.json").read_text())
    assert record["outcome"] == "cancelled"
    assert record["cli_pid"] and not pid_alive(record["cli_pid"])
    assert claude_children() == []
