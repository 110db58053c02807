"""One hook command for every agent: each CLI's input normalized, its denial shaped.

`codefleet hook pre-tool-use --agent NAME` (written by `codefleet join --agent NAME`)
normalizes what NAME's CLI writes on stdin into the Claude Code shape the command's
fast path reads (`session_id`, `tool_name`, `tool_input`, `cwd`), and turns THE denial
(`toolcalls.writepaths.deny_output`) into NAME's refusal. Each shape is the CLI's documented one:

- claude: as is.
- codex (Codex CLI): Claude Code's shape; its edit tool is `apply_patch`, the raw patch
  in `tool_input.command`, whose headers name the targets (`writepaths.tool_paths`). The
  Claude Code denial is honoured (measured with Codex CLI 0.163.0).
- gemini (Gemini CLI, `BeforeTool` / `AfterTool`): Claude Code's keys, `tool_name`
  `write_file` or `replace` with `tool_input.file_path` (and `read_file`, recorded after
  it ran as Claude Code's `Read` is); refused with
  `{"decision": "deny", "reason"}` (measured with Gemini CLI 0.61.0).
- copilot (GitHub Copilot CLI, `preToolUse` / `postToolUse`): `sessionId`, `cwd`,
  `toolName` `edit` or `create` with `toolArgs` (an object, or a JSON string) holding
  `path`; with a GPT model its edit tool is `apply_patch`, `toolArgs` the raw patch text
  (read as Codex's). An input without `sessionId` is held by the tree. Refused with
  `{"permissionDecision": "deny", "permissionDecisionReason"}` (measured with Copilot
  CLI 1.0.102).

Standard library only: it runs on every write of a person's session.
"""

from __future__ import annotations

import json
from typing import Any, Final

from codefleet.toolcalls.writepaths import PATCH_KEY, PATCH_TOOL, deny_output

__all__ = ["AGENTS", "denial_for", "normalized"]

CLAUDE: Final = "claude"
AGENTS: Final = (CLAUDE, "codex", "gemini", "copilot")
GEMINI_TOOLS: Final = {"write_file": "Write", "replace": "Edit", "read_file": "Read"}
COPILOT_TOOLS: Final = {"edit": "Edit", "create": "Write"}
# The session of a Copilot input without `sessionId`: one per tree (a server serves one
# tree), spelled as the wire's session ids are (no `/`, so not the cwd; was a 422).
COPILOT_TREE_SESSION: Final = "copilot-tree"


def normalized(agent: str, data: Any) -> Any:
    """`data` (agent's hook input) in Claude Code's shape; anything unreadable is returned
    as is, for the command's own checks to refuse."""
    if not isinstance(data, dict) or agent in (CLAUDE, "codex"):
        return data
    if agent == "gemini":
        tool = str(data.get("tool_name") or "")
        return {**data, "tool_name": GEMINI_TOOLS.get(tool, tool)}
    if agent == "copilot":
        return _copilot(data)
    return data


def _copilot(data: dict[str, Any]) -> dict[str, Any]:
    tool = str(data.get("toolName") or "")
    args = data.get("toolArgs")
    if tool == PATCH_TOOL and isinstance(args, str):
        args = {PATCH_KEY: args}  # the raw patch, where Codex's input carries it
    elif isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            args = None
    cwd = str(data.get("cwd") or "")
    return {
        "session_id": str(data.get("sessionId") or COPILOT_TREE_SESSION),
        "tool_name": COPILOT_TOOLS.get(tool, tool),
        "tool_input": args,
        "cwd": cwd,
    }


def denial_for(agent: str, reason: str) -> dict[str, Any]:
    """THE refusal of a write, as `agent`'s CLI reads it."""
    if agent == "gemini":
        return {"decision": "deny", "reason": reason}
    if agent == "copilot":
        return {"permissionDecision": "deny", "permissionDecisionReason": reason}
    return deny_output(reason)  # Claude Code's, which Codex honours too
