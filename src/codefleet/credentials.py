"""Whether live Claude sessions can authenticate (no SDK import: `doctor` and `demo` ask early)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

__all__ = ["CREDENTIAL_VARS", "MissingCredentials", "credentials_problem"]

CREDENTIAL_VARS: Final = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "CLAUDE_CODE_USE_BEDROCK",
    "CLAUDE_CODE_USE_VERTEX",
)


class MissingCredentials(NotImplementedError):
    """Live sessions need a key or a login (a NotImplementedError so `demo` prints it)."""


def credentials_problem() -> str | None:
    """Why live sessions cannot authenticate, or None when a key or login is present."""
    if any(os.environ.get(name) for name in CREDENTIAL_VARS):
        return None
    if (Path.home() / ".claude" / ".credentials.json").is_file():
        return None
    return (
        "real Claude sessions need ANTHROPIC_API_KEY (or a `claude` login). Without one, use "
        "--offline (the real Claude Code CLI against the built-in scripted model) or "
        "--dry-run (scripted agents, no CLI)."
    )
