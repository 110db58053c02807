"""`codefleet join --agent NAME`: CodeFleet's hooks in each CLI's own project hook file.

Each entry runs `codefleet hook EVENT --agent NAME --server URL --tree PATH`
(`hook.agentdialects` normalizes the input and shapes the denial). Where each CLI reads its
project hooks (its documented format):

| agent   | file (under the tree)        | events (matcher)                                                    |
|---------|------------------------------|---------------------------------------------------------------------|
| claude  | .claude/settings.local.json  | PreToolUse, PostToolUse (write tools), SessionEnd                   |
| codex   | .codex/hooks.json            | PreToolUse, PostToolUse (apply_patch)                               |
| gemini  | .gemini/settings.json        | BeforeTool (write_file|replace), AfterTool (+read_file), SessionEnd |
| copilot | .github/hooks/codefleet.json | preToolUse, postToolUse, sessionEnd                                 |

Claude Code's, Codex's and Gemini CLI's files share one shape (`{"hooks": {EVENT:
[{"matcher", "hooks": [{"type": "command", "command", "timeout"}]}]}}`, Gemini's timeout
in milliseconds), so `settings.merged` / `without_ours` keep everything else in them.
Copilot CLI reads every `.github/hooks/*.json` (`{"version": 1, "hooks": {event:
[{"type": "command", "bash", "timeoutSec"}]}}`, no matcher: the hook itself ignores
tools that write nothing), so CodeFleet's entries live in a file of its own, removed
by `leave` once nothing else is in it. Codex runs a project hook only once the person
trusted it (`/hooks` in Codex), Gemini CLI and Copilot CLI only in a folder the person
trusted: `join` says so, it never trusts on their behalf. (Measured with Gemini CLI
0.61.0 and Copilot CLI 1.0.102, which tests/agents runs.)
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from codefleet.hook.settings import (
    HOOK_TIMEOUT_S,
    WRITE_MATCHER,
    Written,
    drop_our_backup,
    hooks_block,
    is_ours,
    join_tree,
    leave_tree,
    read_settings,
    tree_id_args,
    write_settings,
)

__all__ = ["AGENT_FILES", "AgentFile", "agent_block", "join_agent", "leave_agent"]


@dataclass(frozen=True, slots=True)
class AgentFile:
    """Where one CLI reads project hooks, and which of its events run which subcommand."""

    relative: str
    events: tuple[tuple[str, str, str | None], ...]  # (event key, subcommand, matcher)
    timeout: int  # in the CLI's unit
    timeout_key: str = "timeout"


AGENT_FILES: Final = {
    "claude": AgentFile(
        ".claude/settings.local.json",
        (
            ("PreToolUse", "pre-tool-use", WRITE_MATCHER),
            ("PostToolUse", "post-tool-use", WRITE_MATCHER),
            ("SessionEnd", "session-end", None),
        ),
        HOOK_TIMEOUT_S,
    ),
    "codex": AgentFile(
        ".codex/hooks.json",
        (
            ("PreToolUse", "pre-tool-use", "apply_patch"),
            ("PostToolUse", "post-tool-use", "apply_patch"),
        ),
        HOOK_TIMEOUT_S,
    ),
    "gemini": AgentFile(
        ".gemini/settings.json",
        (
            ("BeforeTool", "pre-tool-use", "write_file|replace"),
            ("AfterTool", "post-tool-use", "write_file|replace|read_file"),
            ("SessionEnd", "session-end", None),
        ),
        HOOK_TIMEOUT_S * 1000,
    ),
    "copilot": AgentFile(
        ".github/hooks/codefleet.json",
        (
            ("preToolUse", "pre-tool-use", None),
            ("postToolUse", "post-tool-use", None),
            ("sessionEnd", "session-end", None),
        ),
        HOOK_TIMEOUT_S,
        "timeoutSec",
    ),
}
COPILOT_VERSION: Final = 1


def agent_block(
    agent: str,
    executable: list[str],
    server: str,
    tree: Path,
    fail_open: bool,
    tree_id: str | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """`agent`'s hook entries, keyed by its event names."""
    if agent == "claude":  # the entries `join` has always written (no --agent: the default)
        return hooks_block(executable, server, tree, fail_open, tree_id)
    spec = AGENT_FILES[agent]
    block: dict[str, list[dict[str, Any]]] = {}
    for event, subcommand, matcher in spec.events:
        argv = [*executable, "hook", subcommand, "--agent", agent, "--server", server]
        argv += ["--tree", str(tree), *tree_id_args(tree_id)]
        argv += ["--fail-open"] if fail_open else []
        command = shlex.join(argv)
        if agent == "copilot":
            block[event] = [{"type": "command", "bash": command, spec.timeout_key: spec.timeout}]
            continue
        entry: dict[str, Any] = {
            "hooks": [{"type": "command", "command": command, spec.timeout_key: spec.timeout}]
        }
        block[event] = [{"matcher": matcher, **entry} if matcher else entry]
    return block


def join_agent(
    tree: Path, agent: str, block: dict[str, list[dict[str, Any]]], dry_run: bool = False
) -> Written:
    """Merge `block` into `agent`'s project hook file (or only compute it, with `dry_run`)."""
    path = tree / AGENT_FILES[agent].relative
    if agent != "copilot":
        return join_tree(tree, block, dry_run, path=path)
    before = read_settings(path)
    after = _copilot_without_ours(before or {})
    hooks = after.setdefault("hooks", {})
    for event, entries in block.items():
        hooks[event] = [*hooks.get(event, []), *entries]
    after["version"] = COPILOT_VERSION
    if dry_run or after == before:
        return Written(path, after != before, None, after)
    return write_settings(path, before, after)


def leave_agent(tree: Path, agent: str, dry_run: bool = False) -> Written:
    """Remove exactly CodeFleet's entries from `agent`'s project hook file."""
    path = tree / AGENT_FILES[agent].relative
    if agent != "copilot":
        return leave_tree(tree, dry_run, path=path)
    before = read_settings(path)
    if not dry_run:
        drop_our_backup(path.with_name(path.name + ".bak"), _copilot_has_ours)
    if before is None:
        return Written(path, False, None, None)
    after = _copilot_without_ours(before)
    if not after.get("hooks"):
        after = {}  # nothing but our entries was in our file: it goes
    if dry_run or after == before:
        return Written(path, after != before, None, after)
    return write_settings(path, None, after)  # what leave removes is only ours: no copy


def _copilot_without_ours(data: dict[str, Any]) -> dict[str, Any]:
    hooks = data.get("hooks") if isinstance(data.get("hooks"), dict) else {}
    kept = {
        event: [e for e in entries if not is_ours({"type": "command", "command": _bash(e)})]
        for event, entries in (hooks or {}).items()
        if isinstance(entries, list)
    }
    out = {**data, "hooks": {event: entries for event, entries in kept.items() if entries}}
    return out


def _copilot_has_ours(data: dict[str, Any]) -> bool:
    hooks = data.get("hooks") if isinstance(data.get("hooks"), dict) else {}
    return any(
        is_ours({"type": "command", "command": _bash(e)})
        for entries in (hooks or {}).values()
        if isinstance(entries, list)
        for e in entries
    )


def _bash(entry: Any) -> str:
    return str(entry.get("bash", "")) if isinstance(entry, dict) else ""
