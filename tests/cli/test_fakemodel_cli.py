"""The real Claude Code CLI against the scripted fake model (real-CLI tier, DESIGN.md §8).

Each test drives the bundled CLI through `claude_agent_sdk.query()` with production
options and checks what reached the disk and what the CLI sent back to the model. The
last few tests talk to the fake over plain HTTP: they pin the fake's own contract.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
import yaml
from claude_agent_sdk import HookContext, HookInput, HookJSONOutput, ResultError

from codefleet.offlinemodels.anthropicapi import (
    ApiError,
    FakeModel,
    ScriptError,
    Text,
    ToolUse,
    Turn,
    Usage,
    WaitFor,
    marker,
    scripts_from_dict,
    turn_from_dict,
)

if TYPE_CHECKING:
    from conftest import RunSession

# What the init frame lists: MultiEdit does not exist in CLI 2.1.332 and is dropped silently.
SESSION_TOOLS_SEEN = {"Read", "Write", "Edit", "NotebookEdit", "Glob", "Grep"}
REASON = "a.py is held by runner-2 for task T3. Do not retry this file. Stop now."


def deny(reason: str) -> HookJSONOutput:
    """The exact PreToolUse deny shape of DESIGN.md §7."""
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        }
    }


def write_turn(
    path: Path, content: str, *, usage: Usage | None = None, wait_for: WaitFor | None = None
) -> Turn:
    """A reply that says a word and calls Write on `path`."""
    write = ToolUse("Write", {"file_path": str(path), "content": content})
    return Turn(content=(Text("Writing."), write), usage=usage, wait_for=wait_for)


def tool_call(input_data: HookInput) -> tuple[str, str]:
    """`(tool_name, tool_input.file_path)` of a PreToolUse/PostToolUse hook input."""
    data: dict[str, Any] = dict(input_data)
    return str(data["tool_name"]), str(data["tool_input"]["file_path"])


async def no_objection(_input: HookInput, _id: str | None, _ctx: HookContext) -> HookJSONOutput:
    return {}


# --- through the real CLI ------------------------------------------------------------------


async def test_a_scripted_write_lands_on_disk_and_the_result_reports_usage_and_cost(
    fake_model: FakeModel, tree: Path, run_session: RunSession
) -> None:
    target = tree / "hello.py"
    fake_model.add_script(
        "write",
        [
            write_turn(target, "print('hi')\n", usage=Usage(input_tokens=1200, output_tokens=30)),
            Turn(content=(Text("Wrote it."),), usage=Usage(input_tokens=800, output_tokens=20)),
        ],
    )
    ledger: list[tuple[str, str]] = []

    async def record(input_data: HookInput, _id: str | None, _ctx: HookContext) -> HookJSONOutput:
        ledger.append(tool_call(input_data))
        return {}

    run = await run_session("write", pre_tool_use=no_objection, post_tool_use=record)

    assert target.read_text() == "print('hi')\n"
    result = run.result
    assert (result.subtype, result.is_error, run.error) == ("success", False, None)
    assert result.usage is not None
    assert (result.usage["input_tokens"], result.usage["output_tokens"]) == (2000, 50)
    assert result.model_usage is not None
    assert sum(m["inputTokens"] for m in result.model_usage.values()) == 2000
    assert result.total_cost_usd is not None and result.total_cost_usd > 0
    assert ledger == [("Write", str(target))]
    assert set(run.init.data["tools"]) == SESSION_TOOLS_SEEN
    assert run.init.data["permissionMode"] == "dontAsk"
    assert [(r.script_id, r.turn) for r in fake_model.requests()] == [("write", 0), ("write", 1)]
    assert fake_model.unexpected_requests() == []


async def test_a_deny_from_the_hook_stops_the_write_and_the_model_reads_the_reason(
    fake_model: FakeModel, tree: Path, run_session: RunSession
) -> None:
    target = tree / "a.py"
    fake_model.add_script(
        "deny", [write_turn(target, "x = 1\n"), Turn(content=(Text("Blocked."),))]
    )
    seen: list[str] = []

    async def veto(input_data: HookInput, _id: str | None, _ctx: HookContext) -> HookJSONOutput:
        seen.append(tool_call(input_data)[1])
        return deny(REASON)

    run = await run_session("deny", pre_tool_use=veto)

    assert not target.exists()
    assert seen == [str(target)]
    [result] = fake_model.tool_results("deny")
    assert result.is_error and REASON in result.content
    assert (run.result.subtype, run.result.is_error) == ("success", False)
    assert run.result.permission_denials and len(run.result.permission_denials) == 1


async def test_a_hook_that_raises_blocks_the_write(
    fake_model: FakeModel, tree: Path, run_session: RunSession
) -> None:
    target = tree / "a.py"
    fake_model.add_script("raises", [write_turn(target, "x = 1\n")])

    async def broken(_input: HookInput, _id: str | None, _ctx: HookContext) -> HookJSONOutput:
        raise RuntimeError("lease server unreachable")

    run = await run_session("raises", pre_tool_use=broken)

    assert not target.exists()
    [result] = fake_model.tool_results("raises")
    assert result.is_error
    assert run.result.is_error is False


async def test_a_scripted_bash_call_is_refused_as_no_such_tool_and_the_session_ends_normally(
    fake_model: FakeModel, tree: Path, run_session: RunSession
) -> None:
    canary = tree / "pwned"
    fake_model.add_script(
        "bash", [Turn(content=(ToolUse("Bash", {"command": f"touch {canary}"}),))]
    )

    run = await run_session("bash", pre_tool_use=no_objection)

    assert not canary.exists()
    [result] = fake_model.tool_results("bash")
    assert result.is_error and "no such tool" in result.content.lower()
    assert (run.result.subtype, run.result.is_error, run.error) == ("success", False, None)


@pytest.mark.parametrize(("status", "error_type"), [(500, "api_error"), (429, "rate_limit_error")])
async def test_an_http_error_ends_the_session_with_an_error_result_and_no_retry(
    fake_model: FakeModel, run_session: RunSession, status: int, error_type: str
) -> None:
    fake_model.add_script("boom", [Turn(error=ApiError(status, error_type, "scripted"))])

    run = await run_session("boom")

    assert run.result.is_error and run.result.api_error_status == status
    assert isinstance(run.error, ResultError) and run.error.api_error_status == status
    assert len(fake_model.requests("boom")) == 1


async def test_wait_for_holds_a_reply_until_another_session_has_written(
    fake_model: FakeModel, tree: Path, run_session: RunSession
) -> None:
    holder, late = tree / "api.py", tree / "late.py"
    fake_model.add_script(
        "T3",
        [Turn(content=(ToolUse("Glob", {"pattern": "*.py"}),)), write_turn(holder, "T3\n")],
    )
    wait = WaitFor(substring="api.py", script_id="T3", timeout_s=30)
    fake_model.add_script("T4", [write_turn(late, "T4\n", wait_for=wait)])
    order: list[str] = []

    async def record(input_data: HookInput, _id: str | None, _ctx: HookContext) -> HookJSONOutput:
        order.append(Path(tool_call(input_data)[1]).name)
        return {}

    runs = await asyncio.gather(
        run_session("T4", pre_tool_use=record), run_session("T3", pre_tool_use=record)
    )

    assert order == ["api.py", "late.py"]
    assert fake_model.wait_timeouts() == []
    assert all(not r.result.is_error for r in runs)
    assert holder.read_text() == "T3\n" and late.read_text() == "T4\n"


# --- the fake itself, over plain HTTP ------------------------------------------------------


def _messages_body(script_id: str, assistant_turns: int = 0) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"go {marker(script_id)}"}]
    messages += [{"role": "system", "content": "env"}]
    messages += [{"role": "assistant", "content": "ok"}] * assistant_turns
    return {"model": "m", "stream": True, "messages": messages}


def _sse_events(raw: str) -> list[tuple[str, dict[str, Any]]]:
    frames = [f for f in raw.split("\n\n") if f]
    pairs = [f.split("\n", 1) for f in frames]
    return [(e.removeprefix("event: "), json.loads(d.removeprefix("data: "))) for e, d in pairs]


def test_the_stream_fragments_reassemble_to_the_scripted_tool_input(fake_model: FakeModel) -> None:
    tool_input = {"file_path": "/x/" + "long_name" * 10 + ".py", "content": "a\nb\n"}
    fake_model.add_script("s", [Turn(content=(Text("hi"), ToolUse("Write", tool_input)))])

    response = httpx.post(f"{fake_model.base_url}/v1/messages?beta=true", json=_messages_body("s"))

    events = _sse_events(response.text)
    assert response.headers["content-type"] == "text/event-stream"
    names = [name for name, _ in events]
    assert names[:2] == ["message_start", "ping"] and names[-2:] == [
        "message_delta",
        "message_stop",
    ]
    fragments = [
        d["delta"]["partial_json"]
        for n, d in events
        if n == "content_block_delta" and d["index"] == 1
    ]
    assert len(fragments) > 1 and json.loads("".join(fragments)) == tool_input
    assert events[-2][1]["delta"]["stop_reason"] == "tool_use"


def test_the_turn_counts_assistant_entries_and_past_the_script_the_model_ends(
    fake_model: FakeModel,
) -> None:
    fake_model.add_script("s", [Turn(content=(Text("first"),))])

    response = httpx.post(f"{fake_model.base_url}/v1/messages", json=_messages_body("s", 1))

    deltas = [d["delta"] for n, d in _sse_events(response.text) if n == "content_block_delta"]
    assert deltas == [{"type": "text_delta", "text": "Done."}]
    assert [(r.script_id, r.turn) for r in fake_model.requests()] == [("s", 1)]


def test_other_paths_and_head_api_hello_get_200_empty_json(fake_model: FakeModel) -> None:
    with httpx.Client(base_url=fake_model.base_url) as client:
        head = client.head("/api/hello?x=1")
        other = client.post("/v1/messages/count_tokens", json={})

    assert head.status_code == 200 and head.content == b""
    assert (other.status_code, other.json()) == (200, {})
    assert fake_model.unexpected_requests() == ["HEAD /api/hello", "POST /v1/messages/count_tokens"]
    assert fake_model.requests() == []


def test_a_wait_for_that_is_never_met_gives_up_and_is_recorded(fake_model: FakeModel) -> None:
    fake_model.add_script(
        "s", [Turn(content=(Text("late"),), wait_for=WaitFor("never", timeout_s=0.2))]
    )

    response = httpx.post(f"{fake_model.base_url}/v1/messages", json=_messages_body("s"))

    assert response.status_code == 200
    assert fake_model.wait_timeouts() == [("s", 0)]


SCRIPTS_YAML = """
T1:
  - content:
      - text: hi
      - tool_use: {name: Read, input: {file_path: a}}
    usage: {input_tokens: 5, output_tokens: 6}
    wait_for: {substring: a.py, script_id: T0}
  - error: {status: 429, type: rate_limit_error}
    delay_s: 0.1
"""


def test_scripts_load_from_yaml_and_unknown_keys_are_refused() -> None:
    scripts = scripts_from_dict(yaml.safe_load(SCRIPTS_YAML))

    assert scripts == {
        "T1": [
            Turn(
                content=(Text("hi"), ToolUse("Read", {"file_path": "a"})),
                usage=Usage(5, 6),
                wait_for=WaitFor("a.py", "T0"),
            ),
            Turn(delay_s=0.1, error=ApiError(429, "rate_limit_error")),
        ]
    }
    with pytest.raises(ScriptError, match="delay"):
        turn_from_dict({"delay": 1})
    with pytest.raises(ScriptError, match="tool_use"):
        turn_from_dict({"content": [{"tool_use": {"name": "Write", "args": {}}}]})
    with pytest.raises(ScriptError, match="list of turns"):
        scripts_from_dict({"T1": "not a list"})
