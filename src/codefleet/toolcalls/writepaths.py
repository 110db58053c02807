"""The contract both doors share: which paths a write names, and THE denial shape.

Two doors stand between a write and the disk: the runner's gate (`prewrite.WriteGate`,
asked by its session's `PreToolUse` hook, `session`) and a person's hook, the command a
person's own Claude Code session runs (`hook`, installed by `codefleet join`). Both read a tool call the
same way (`tool_paths`) and refuse it with the same JSON (`deny_output`),
the exact `PreToolUse` shape Claude Code honours (DESIGN §7): a misspelled key
is silently ignored by the CLI, so the shape is defined once, here.

Standard library only: the command hook imports this on every write of a
person's session and must start fast.
"""

from __future__ import annotations

from typing import Any, Final

from codefleet.toolcalls.applypatch import MalformedPatch, patch_targets

__all__ = [
    "PATCH_KEY",
    "PATCH_TOOL",
    "PATH_KEYS",
    "deny_output",
    "extract_paths",
    "no_path_reason",
    "tool_paths",
]

PATH_KEYS: Final = ("file_path", "notebook_path", "path")
PATCH_TOOL: Final = "apply_patch"  # Codex's one file-edit tool; its input is a patch
PATCH_KEY: Final = "command"  # where Codex's PreToolUse input carries the raw patch


def tool_paths(tool_name: str, tool_input: Any) -> list[str]:
    """Every target path a write tool call names: a patch's headers, else `extract_paths`.

    A malformed patch names nothing, so the gate refuses it (`toolcalls.applypatch`).
    """
    if tool_name != PATCH_TOOL:
        return extract_paths(tool_input)
    patch = tool_input.get(PATCH_KEY) if isinstance(tool_input, dict) else tool_input
    if not isinstance(patch, str):
        return []
    try:
        return list(patch_targets(patch))
    except MalformedPatch:
        return []


def no_path_reason(tool_name: str, tool_input: Any) -> str:
    """Why `tool_paths` named nothing: the patch's flaw as Codex reads it, else no path."""
    patch = tool_input.get(PATCH_KEY) if isinstance(tool_input, dict) else tool_input
    if tool_name == PATCH_TOOL and isinstance(patch, str):
        try:
            patch_targets(patch)
        except MalformedPatch as err:
            return f"{tool_name}'s patch cannot be read as Codex reads it ({err})"
    return f"{tool_name} named no file path"


def extract_paths(tool_input: Any) -> list[str]:
    """Every target path named by a write tool's input, in order, without repeats."""
    found: list[str] = []
    if not isinstance(tool_input, dict):
        return found
    sources = [tool_input]
    edits = tool_input.get("edits")
    if isinstance(edits, list):
        sources.extend(e for e in edits if isinstance(e, dict))
    for source in sources:
        for key in PATH_KEYS:
            value = source.get(key)
            if isinstance(value, str) and value and value not in found:
                found.append(value)
    return found


def deny_output(reason: str) -> dict[str, Any]:
    """THE `PreToolUse` denial: the write does not happen and the model reads `reason`."""
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        }
    }
