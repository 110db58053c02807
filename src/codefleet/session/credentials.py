"""Whether live Claude sessions can authenticate (no SDK import: `doctor` and `demo` ask early)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

__all__ = [
    "CREDENTIAL_VARS",
    "KEYLESS_DEMO",
    "MissingCredentials",
    "credentials_problem",
    "has_login",
]

KEYLESS_DEMO: Final = (
    "`codefleet demo --offline` (the real Claude Code CLI against CodeFleet's scripted model) "
    "or `codefleet demo --dry-run` (scripted agents, no CLI)"
)

CREDENTIAL_VARS: Final = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "CLAUDE_CODE_USE_BEDROCK",
    "CLAUDE_CODE_USE_VERTEX",
)


class MissingCredentials(NotImplementedError):
    """Live sessions need a key or a login (a NotImplementedError so `demo` prints it)."""


def has_login(home: Path | None = None) -> bool:
    """Whether `claude login` has stored a login for this user (the CLI then needs no key)."""
    return ((home or Path.home()) / ".claude" / ".credentials.json").is_file()


def credentials_problem(keyless: str = KEYLESS_DEMO) -> str | None:
    """Why live sessions cannot authenticate, or None when a key or login is present.

    `keyless` names the command's own ways to run without one.
    """
    if any(os.environ.get(name) for name in CREDENTIAL_VARS):
        return None
    if has_login():
        return None
    return (
        "real Claude sessions need ANTHROPIC_API_KEY or a Claude login (`claude auth login`, "
        f"with Claude Code or the bundled CLI `codefleet doctor` shows). Without either, use "
        f"{keyless}."
    )
