"""Reads stay inside the tree: the local check behind a read-only session's hook.

Under `dontAsk` the Claude Code CLI lets an allowed tool reach outside its
working directory (measured for writes; see research/real-cli-offline.md),
so a session that may only read the tree refuses, before the tool runs, any
`Read`, `Glob` or `Grep` that names a place outside it: a `file_path` or
`path`, or the literal (glob-free) head of a `Glob` pattern or a `Grep`
file filter, each resolved with symlinks against the tree root. Grep's
`pattern` is a regular expression over contents, not a path. Pure string
and `realpath` work; the hook that calls it lives in `session`.
"""

from __future__ import annotations

import os
from typing import Any, Final

from codefleet.toolcalls.writepaths import extract_paths

__all__ = ["READ_TOOLS", "read_refusal"]

READ_TOOLS: Final = ("Read", "Glob", "Grep")
GLOB_CHARS: Final = frozenset("*?[{")
PATTERN_KEYS: Final = {"Glob": "pattern", "Grep": "glob"}


def read_refusal(root: str, tool: str, tool_input: Any) -> str | None:
    """None when the call reads only inside `root`; else the refusal the model reads."""
    if tool not in READ_TOOLS:
        return f"{tool or 'This tool'} is not available in this session."
    if not isinstance(tool_input, dict):
        return f"The {tool} call could not be checked, so it was refused."
    root = os.path.realpath(root)
    base = root
    for raw in extract_paths(tool_input):
        resolved = os.path.realpath(os.path.join(root, raw))
        if raw.startswith("~") or not _inside(root, resolved):
            return _outside(raw)
        if raw == tool_input.get("path"):
            base = resolved
    pattern = tool_input.get(PATTERN_KEYS.get(tool, ""))
    if isinstance(pattern, str) and pattern and _pattern_escapes(root, base, pattern):
        return _outside(pattern)
    return None


def _pattern_escapes(root: str, base: str, pattern: str) -> bool:
    """Does the glob reach outside `root`: by its literal head, `~`, or a `..` after a glob?"""
    parts = pattern.split("/")
    glob_at = next((i for i, part in enumerate(parts) if GLOB_CHARS & set(part)), len(parts))
    if pattern.startswith("~") or ".." in parts[glob_at:]:
        return True
    head = "/".join(parts[:glob_at]) or ("/" if pattern.startswith("/") else "")
    return bool(head) and not _inside(root, os.path.realpath(os.path.join(base, head)))


def _inside(root: str, resolved: str) -> bool:
    return resolved == root or resolved.startswith(root.rstrip(os.sep) + os.sep)


def _outside(raw: str) -> str:
    return (
        f"{raw} is outside the working tree, so reading it was refused. "
        "Read only inside the current directory."
    )
