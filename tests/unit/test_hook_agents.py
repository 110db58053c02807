"""`codefleet hook ... --agent NAME`: each CLI's documented hook input read as Claude Code's,
and the denial written in the shape that CLI honours (`hook.agentdialects`).

The inputs below are each CLI's pre-tool hook stdin on a file write, as measured with
the real CLIs: Codex CLI 0.163.0, Gemini CLI 0.61.0 and Copilot CLI 1.0.102 (tests/agents
runs the last two against a real server). The server is a loopback port where nothing listens, so
every write that reaches the lease question is refused with "did not answer".
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

from codefleet.hook.agentdialects import denial_for, normalized
from codefleet.hook.command import HookArgs, UsageError, parse_args, run
from codefleet.toolcalls.writepaths import deny_output, tool_paths


def dead_server() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def pre(tree: Path, agent: str) -> HookArgs:
    return HookArgs("pre-tool-use", dead_server(), str(tree), False, agent)


def codex_input(tree: Path, patch: str) -> dict[str, Any]:
    # measured: what Codex CLI 0.163.0 writes on a PreToolUse hook's stdin for apply_patch
    return {
        "session_id": "01a23221-e37c-7bb2-9fd3-7c7ece4b0a8c",
        "turn_id": "01a23221-e3d2-7020-8c06-cbd784f475e6",
        "transcript_path": "/home/me/.codex/sessions/rollout.jsonl",
        "cwd": str(tree),
        "hook_event_name": "PreToolUse",
        "model": "gpt-5.5",
        "permission_mode": "bypassPermissions",
        "tool_name": "apply_patch",
        "tool_input": {"command": patch},
        "tool_use_id": "call_0_0",
    }


def gemini_input(tree: Path, tool: str = "write_file", **tool_input: str) -> dict[str, Any]:
    # measured: what Gemini CLI 0.61.0 writes on a BeforeTool hook's stdin
    return {
        "session_id": "3e54d499-77eb-4c0f-818a-2e898f633136",
        "transcript_path": "/home/me/.gemini/tmp/tree/chats/session-2026-12-01T19-03-3e54d499.jsonl",
        "cwd": str(tree),
        "hook_event_name": "BeforeTool",
        "timestamp": "2026-12-01T19:03:09.503Z",
        "tool_name": tool,
        "tool_input": tool_input or {"file_path": str(tree / "a.py"), "content": "x"},
    }


def copilot_input(tree: Path, args: Any, session: bool = True) -> dict[str, Any]:
    # measured: what Copilot CLI 1.0.102 writes on a preToolUse hook's stdin (its sessionId;
    # an input without one, as an older Copilot CLI's documentation showed, is read too)
    data = {"timestamp": 1796152363214, "cwd": str(tree), "toolName": "edit", "toolArgs": args}
    return {"sessionId": "979f82eb-588b-45f8-aed2-9bbb344d285e", **data} if session else data


PATCH = "*** Begin Patch\n*** Update File: a.py\n@@\n-A = 1\n+A = 2\n*** Add File: pkg/c.py\n+C = 3\n*** End Patch\n"


def test_a_codex_patch_is_read_as_every_file_its_headers_name(workdir: Path) -> None:
    data = normalized("codex", codex_input(workdir, PATCH))
    assert tool_paths(data["tool_name"], data["tool_input"]) == ["a.py", "pkg/c.py"]


def test_a_gemini_write_is_read_as_a_claude_write(workdir: Path) -> None:
    data = normalized("gemini", gemini_input(workdir))
    assert (data["tool_name"], data["session_id"]) == (
        "Write",
        "3e54d499-77eb-4c0f-818a-2e898f633136",
    )
    assert tool_paths(data["tool_name"], data["tool_input"]) == [str(workdir / "a.py")]


def test_a_gemini_replace_is_read_as_a_claude_edit(workdir: Path) -> None:
    edit = {"file_path": "a.py", "instruction": "Change it.", "old_string": "A", "new_string": "B"}
    data = normalized("gemini", gemini_input(workdir, "replace", **edit))
    assert data["tool_name"] == "Edit"
    assert tool_paths(data["tool_name"], data["tool_input"]) == ["a.py"]


@pytest.mark.parametrize(
    "args", [{"path": "a.py", "old_str": "A", "new_str": "B"}, '{"path": "a.py"}']
)
def test_a_copilot_edit_is_read_with_its_args_object_or_json_string(
    workdir: Path, args: Any
) -> None:
    data = normalized("copilot", copilot_input(workdir, args))
    assert (data["tool_name"], data["session_id"]) == (
        "Edit",
        "979f82eb-588b-45f8-aed2-9bbb344d285e",
    )
    assert tool_paths(data["tool_name"], data["tool_input"]) == ["a.py"]


def test_a_copilot_apply_patch_is_read_as_every_file_its_raw_patch_names(workdir: Path) -> None:
    # measured: with a GPT model Copilot CLI 1.0.102 edits through `apply_patch`, its
    # toolArgs the raw patch text (not JSON)
    stdin = {**copilot_input(workdir, PATCH), "toolName": "apply_patch"}
    data = normalized("copilot", stdin)
    assert tool_paths(data["tool_name"], data["tool_input"]) == ["a.py", "pkg/c.py"]
    out = json.loads(run(pre(workdir, "copilot"), json.dumps(stdin), {}))
    assert "did not answer" in out["permissionDecisionReason"]


def test_a_copilot_input_without_a_session_id_is_held_by_the_tree(workdir: Path) -> None:
    data = normalized("copilot", copilot_input(workdir, {"path": "a.py"}, session=False))
    assert data["session_id"] == "copilot-tree"


def test_each_cli_gets_the_refusal_in_its_own_documented_shape() -> None:
    assert denial_for("claude", "no") == deny_output("no") == denial_for("codex", "no")
    assert denial_for("gemini", "no") == {"decision": "deny", "reason": "no"}
    assert denial_for("copilot", "no") == {
        "permissionDecision": "deny",
        "permissionDecisionReason": "no",
    }


@pytest.mark.parametrize(
    ("agent", "stdin", "reason_of"),
    [
        (
            "codex",
            lambda t: codex_input(t, PATCH),
            lambda o: o["hookSpecificOutput"]["permissionDecisionReason"],
        ),
        ("gemini", gemini_input, lambda o: o["reason"]),
        (
            "copilot",
            lambda t: copilot_input(t, {"path": "a.py"}),
            lambda o: o["permissionDecisionReason"],
        ),
    ],
)
def test_an_unreachable_server_refuses_each_agents_write_in_its_shape(
    workdir: Path, agent: str, stdin: Any, reason_of: Any
) -> None:
    out = json.loads(run(pre(workdir, agent), json.dumps(stdin(workdir)), {}))
    assert "did not answer" in reason_of(out) and "a.py" in reason_of(out)


def test_a_malformed_codex_patch_is_refused_without_asking_the_server(workdir: Path) -> None:
    args = HookArgs("pre-tool-use", "http://127.0.0.1:9", str(workdir), False, "codex")
    out = run(args, json.dumps(codex_input(workdir, "*** Add File: a.py\n")), {}, post=None)
    reason = json.loads(out)["hookSpecificOutput"]["permissionDecisionReason"]
    assert "cannot be read as Codex reads it" in reason and "Begin Patch" in reason


def test_a_gemini_read_gets_no_objection(workdir: Path) -> None:
    read = {**gemini_input(workdir), "tool_name": "read_file", "tool_input": {"file_path": "a.py"}}
    assert run(pre(workdir, "gemini"), json.dumps(read), {}) == ""


def test_the_agent_flag_parses_and_an_unknown_agent_is_a_usage_error() -> None:
    argv = ["pre-tool-use", "--agent", "copilot", "--server", "http://h:1", "--tree", "/t"]
    assert parse_args(argv).agent == "copilot"
    with pytest.raises(UsageError, match="unknown agent"):
        parse_args(["pre-tool-use", "--agent", "cursor", "--server", "http://h:1", "--tree", "/t"])
