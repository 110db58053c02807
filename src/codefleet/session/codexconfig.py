"""What a Codex runner session is told: its private `config.toml` and its rules (pure text).

Each attempt runs `codex app-server` with `CODEX_HOME` set to a private directory
holding only this file, so nothing of the user's Codex setup is read or written:

- a custom model provider (`base_url`, the key read from one environment variable,
  the Responses wire, no retries: a 429 reaches the outcome at once);
- no shell: the `shell_tool` and `unified_exec` features off, so the model is offered
  no command tool at all (measured with CLI 0.163.0 and model `gpt-5.5`: its tools
  are `apply_patch`, `view_image` and `request_user_input`); web search, sub-agents,
  goals, apps, plugins and skills off too;
- CodeFleet's tools (`session.codexread`, an MCP stdio proxy to the runner's
  `session.tools`): `read_file` and `list_files` (Codex offers no read tool without a
  shell), the resource tools, and `run_check`, `run_command`, `ask_operator` when the
  attempt has them. Codex 0.163.0 defers every MCP tool behind its `tool_search` (no
  config knob shows them upfront: its `tool_search` features are removed); a search
  exposes them, as functions in the `mcp__codefleet` namespace, so the rules say to
  search. `tool_timeout_sec` is the longest call's bound (a check, a question);
- `PreToolUse` and `PostToolUse` command hooks on `apply_patch`, each running the
  bridge to the runner's gate (`fleet.gate.codexbridge`). Codex runs a hook only once it
  is trusted; the executor trusts these two through Codex's own RPCs and checks
  that they are before the turn starts (docs/decisions/0111-codex-runners.md, "Codex runners").

The sandbox is `danger-full-access` with approvals `never`: the only tool left that
touches files is `apply_patch`, gated by the hook, which refuses any path outside
the tree; Codex's own workspace-write sandbox failed every patch on this machine
(its helper could not set up), so it would only turn writes into errors.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

__all__ = [
    "CODEX_RULES",
    "DEFAULT_CODEX_MODEL",
    "DISABLED_FEATURES",
    "CodexProvider",
    "config_toml",
]

DEFAULT_CODEX_MODEL: Final = "gpt-5.5"
PROVIDER_ID: Final = "codefleet"
DISABLED_FEATURES: Final = (
    "shell_tool",
    "unified_exec",
    "multi_agent",
    "goals",
    "apps",
    "plugins",
    "image_generation",
    "browser_use",
    "computer_use",
    "in_app_browser",
)
HOOK_MATCHER: Final = "apply_patch"
TOOLS_ID: Final = "codefleet"

CODEX_RULES: Final = """\
You are one of several coding agents working at the same time in ONE shared working tree \
(your current directory). Other agents, some of them not Codex, are editing other files in \
this tree right now, on purpose.

Rules of the shared tree:
- Never revert, undo, reformat or "fix" a change you did not make, even if it looks wrong, \
unfinished or unrelated to your task: another agent made it on purpose and is still working.
- Before every patch, CodeFleet checks that no other agent holds any file the patch touches. \
The file list below ("expected files") is only a hint; it is not a permission and not a limit.
- If a patch is refused, the refusal is final. Do NOT retry that file, do NOT make the same \
change somewhere else or work around it. Stop immediately and reply with one short message \
saying which file blocked you. CodeFleet will run your task again later, when the file is free.
- Work only inside the current directory. Read files with CodeFleet's read_file and \
list_files tools (find them, and CodeFleet's other tools, with tool_search). You cannot run \
commands; make the change with the apply_patch tool. Do not create summary or notes files.
- When you are done, reply with a short summary of what you changed."""


@dataclass(frozen=True, slots=True)
class CodexProvider:
    """Where the Responses API lives and which environment variable holds its key."""

    base_url: str
    key_env: str


def config_toml(
    provider: CodexProvider,
    hook_command: str,
    hook_timeout_s: int,
    tools: Sequence[str] = (),
    tool_timeout_s: int | None = None,
) -> str:
    """The whole `config.toml` of one Codex runner session; `tools` is the argv of the
    tools' MCP proxy (`session.codexread`), none when empty, and `tool_timeout_s` the
    longest one call may take (None: Codex's default)."""
    lines = [
        f"model_provider = {_s(PROVIDER_ID)}",
        'approval_policy = "never"',
        'sandbox_mode = "danger-full-access"',
        'web_search = "disabled"',
        "",
        f"[model_providers.{PROVIDER_ID}]",
        f"name = {_s(PROVIDER_ID)}",
        f"base_url = {_s(provider.base_url)}",
        f"env_key = {_s(provider.key_env)}",
        'wire_api = "responses"',
        "request_max_retries = 0",
        "stream_max_retries = 0",
        "",
        "[features]",
        *(f"{name} = false" for name in DISABLED_FEATURES),
        "",
    ]
    for event in ("PreToolUse", "PostToolUse"):
        lines += [
            f"[[hooks.{event}]]",
            f"matcher = {_s(HOOK_MATCHER)}",
            f"[[hooks.{event}.hooks]]",
            'type = "command"',
            f"command = {_s(hook_command)}",
            f"timeout = {hook_timeout_s}",
            "",
        ]
    if tools:
        lines += [
            f"[mcp_servers.{TOOLS_ID}]",
            f"command = {_s(tools[0])}",
            f"args = [{', '.join(_s(a) for a in tools[1:])}]",
            *([f"tool_timeout_sec = {tool_timeout_s}"] if tool_timeout_s else []),
            "",
        ]
    return "\n".join(lines)


def _s(text: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's for these characters)."""
    return json.dumps(text)
