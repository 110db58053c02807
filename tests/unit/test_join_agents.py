"""`codefleet join --agent NAME` / `leave --agent NAME`: each CLI's documented project hook
file gets CodeFleet's entries, and leave removes exactly them (`hook.agentsettings`)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from codefleet.hook.agentsettings import agent_block, join_agent, leave_agent
from codefleet.hook.command import parse_args

EXE = ["/opt/cf/bin/codefleet"]
SERVER = "http://127.0.0.1:8099"


def joined(tree: Path, agent: str) -> dict:
    written = join_agent(tree, agent, agent_block(agent, EXE, SERVER, tree, False))
    assert written.changed and written.path.is_file()
    return json.loads(written.path.read_text())


def test_codex_gets_apply_patch_hooks_in_its_project_hooks_json(tmp_path: Path) -> None:
    data = joined(tmp_path, "codex")
    [pre] = data["hooks"]["PreToolUse"]
    assert pre["matcher"] == "apply_patch"
    [hook] = pre["hooks"]
    assert (hook["type"], hook["timeout"]) == ("command", 15)
    args = parse_args(shlex.split(hook["command"])[2:])
    assert (args.event, args.agent, args.server, args.tree) == (
        "pre-tool-use",
        "codex",
        SERVER,
        str(tmp_path),
    )
    assert set(data["hooks"]) == {"PreToolUse", "PostToolUse"}
    assert (tmp_path / ".codex" / "hooks.json").is_file()


def test_gemini_gets_before_and_after_tool_hooks_in_milliseconds_beside_its_settings(
    tmp_path: Path,
) -> None:
    settings = tmp_path / ".gemini" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(
        json.dumps(
            {
                "theme": "dark",
                "hooks": {
                    "BeforeTool": [
                        {
                            "matcher": "run_shell_command",
                            "hooks": [{"type": "command", "command": "audit"}],
                        }
                    ]
                },
            }
        )
    )
    data = joined(tmp_path, "gemini")
    assert data["theme"] == "dark"
    mine, theirs = data["hooks"]["BeforeTool"][1], data["hooks"]["BeforeTool"][0]
    assert theirs["hooks"][0]["command"] == "audit"
    assert mine["matcher"] == "write_file|replace" and mine["hooks"][0]["timeout"] == 15000
    assert "--agent gemini" in mine["hooks"][0]["command"]

    left = leave_agent(tmp_path, "gemini")

    expected = {"theme": "dark", "hooks": {"BeforeTool": [theirs]}}
    assert left.settings == expected == json.loads(settings.read_text())


def test_copilot_gets_its_own_versioned_file_and_leave_deletes_it(tmp_path: Path) -> None:
    data = joined(tmp_path, "copilot")
    assert data["version"] == 1
    [pre] = data["hooks"]["preToolUse"]
    assert set(pre) == {"type", "bash", "timeoutSec"} and "--agent copilot" in pre["bash"]
    assert set(data["hooks"]) == {"preToolUse", "postToolUse", "sessionEnd"}

    left = leave_agent(tmp_path, "copilot")

    assert left.changed and not (tmp_path / ".github" / "hooks" / "codefleet.json").exists()


@pytest.mark.parametrize("agent", ["claude", "codex", "gemini", "copilot"])
def test_join_twice_changes_nothing_and_leave_twice_removes_nothing(
    tmp_path: Path, agent: str
) -> None:
    block = agent_block(agent, EXE, SERVER, tmp_path, False)
    assert join_agent(tmp_path, agent, block).changed
    assert not join_agent(tmp_path, agent, block).changed
    assert leave_agent(tmp_path, agent).changed
    assert not leave_agent(tmp_path, agent).changed


def test_joining_one_agent_leaves_the_others_files_alone(tmp_path: Path) -> None:
    joined(tmp_path, "claude")
    joined(tmp_path, "codex")
    leave_agent(tmp_path, "codex")
    assert (tmp_path / ".claude" / "settings.local.json").is_file()
    assert not (tmp_path / ".codex" / "hooks.json").exists()
