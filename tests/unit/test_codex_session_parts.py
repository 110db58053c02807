"""The pure parts of a Codex runner session: hook input normalization, the hook bridge's
fail-closed answers, the session's config and its rules."""

from __future__ import annotations

import tomllib
from pathlib import Path

from codefleet.fleet.gate.codexbridge import ask_gate
from codefleet.models import GATED_TOOLS, WRITE_TOOLS
from codefleet.session.codexconfig import CODEX_RULES, CodexProvider, config_toml
from codefleet.toolcalls.writepaths import tool_paths

PATCH = "*** Begin Patch\n*** Update File: /abs/tree/a.py\n*** Move to: b.py\n@@\n-x\n+y\n*** End Patch\n"


def test_a_codex_patch_input_names_every_header_target() -> None:
    # the shape Codex 0.163.0 writes on a PreToolUse hook's stdin: the patch in `command`
    assert tool_paths("apply_patch", {"command": PATCH}) == ["/abs/tree/a.py", "b.py"]


def test_a_malformed_or_missing_patch_names_nothing_so_the_gate_refuses_it() -> None:
    assert tool_paths("apply_patch", {"command": "*** Add File: a.py\n"}) == []
    assert tool_paths("apply_patch", {"patch": PATCH}) == []
    assert tool_paths("apply_patch", None) == []


def test_claude_tools_are_still_read_by_their_path_fields() -> None:
    assert tool_paths("Write", {"file_path": "a.py", "content": ""}) == ["a.py"]


def test_apply_patch_is_gated_but_is_not_a_claude_write_tool() -> None:
    assert {"apply_patch"} == GATED_TOOLS - WRITE_TOOLS


def test_the_bridge_denies_when_the_runner_socket_is_gone(tmp_path: Path) -> None:
    answer = ask_gate(str(tmp_path / "missing.sock"), b"{}", timeout=1.0)
    output = answer["hookSpecificOutput"]
    assert isinstance(output, dict) and output["permissionDecision"] == "deny"
    assert "could not be checked" in str(output["permissionDecisionReason"])


def test_the_session_config_has_no_shell_and_hooks_apply_patch_both_ways() -> None:
    text = config_toml(CodexProvider("http://127.0.0.1:9/v1", "KEY_VAR"), "bridge 'x y'", 30)
    config = tomllib.loads(text)
    assert config["features"]["shell_tool"] is False and config["features"]["unified_exec"] is False
    assert (config["approval_policy"], config["sandbox_mode"]) == ("never", "danger-full-access")
    provider = config["model_providers"][config["model_provider"]]
    assert (provider["base_url"], provider["env_key"], provider["wire_api"]) == (
        "http://127.0.0.1:9/v1",
        "KEY_VAR",
        "responses",
    )
    for event in ("PreToolUse", "PostToolUse"):
        [group] = config["hooks"][event]
        assert group["matcher"] == "apply_patch"
        assert group["hooks"] == [{"type": "command", "command": "bridge 'x y'", "timeout": 30}]


def test_the_codex_rules_forbid_reverting_other_agents_changes() -> None:
    assert "Never revert" in CODEX_RULES and "did not make" in CODEX_RULES
    assert "refusal is final" in CODEX_RULES


def test_the_tools_proxy_is_the_sessions_one_mcp_server_with_the_longest_calls_bound() -> None:
    proxy = ("/usr/bin/python3", "-m", "codefleet.session.codexread", "/tmp/x/tools.sock")
    provider = CodexProvider("http://127.0.0.1:9/v1", "KEY_VAR")
    config = tomllib.loads(config_toml(provider, "bridge", 30, proxy, 960))
    assert config["mcp_servers"] == {
        "codefleet": {"command": proxy[0], "args": list(proxy[1:]), "tool_timeout_sec": 960}
    }
    unbounded = tomllib.loads(config_toml(provider, "bridge", 30, proxy))
    assert "tool_timeout_sec" not in unbounded["mcp_servers"]["codefleet"]
