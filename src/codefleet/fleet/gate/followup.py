"""The reconcile turn's message: which files changed while the agent worked, and how.

For each stale path: who changed it (or deleted it), the top-level parts of a
file with parts that changed (`writeparts.rewrite_parts`: `handle`, `<import os>`),
and the unified diff from
what the agent read to what is there now, within bounds: at most
`FILE_CHARS` per file and `TOTAL_CHARS` in all. A file past either bound (or
not kept, or not text) is named with the number of lines that changed and
"Read it again". Then what to do: check that its own change still fits, fix
it if not (its leases are still held, it may lease more), and finish.

Pure text from values: the caller reads the files.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from codefleet.attempt import StaleRead
from codefleet.toolcalls.writeparts import rewrite_parts

__all__ = ["FILE_CHARS", "TOTAL_CHARS", "Seen", "bounded_diff", "followup", "followup_message"]

FILE_CHARS: Final = 20_000
TOTAL_CHARS: Final = 60_000

OPENING: Final = (
    "While you worked, other tasks changed files you had read. What you read may no "
    "longer be what is there:"
)
CLOSING: Final = (
    "Check that your own change still fits these files as they are now, and fix it if it does "
    "not: your leases are still held, and you may edit other files too. Do not undo the other "
    "tasks' changes. When you are done, reply with a short summary of what you changed (or "
    "that nothing needed to change)."
)


@dataclass(frozen=True, slots=True)
class Seen:
    """One stale file's text as read and as it is now (None: not kept, or no file)."""

    before: str | None
    after: str | None
    kept: bool  # False: the read's bytes were not kept (too large, not text)


def bounded_diff(path: str, before: str | None, after: str | None) -> tuple[str, int]:
    """The unified diff (read -> now) and the number of lines it adds or removes."""
    lines = list(
        difflib.unified_diff(
            (before or "").splitlines(keepends=True),
            (after or "").splitlines(keepends=True),
            fromfile=f"{path} (as you read it)",
            tofile=f"{path} (now)" if after is not None else f"{path} (deleted)",
        )
    )
    changed = sum(1 for x in lines if x[:1] in "+-" and not x.startswith(("+++", "---")))
    text = "".join(x if x.endswith("\n") else x + "\n\\ No newline at end of file\n" for x in lines)
    return text, changed


def followup_message(stale: Sequence[StaleRead], seen: Mapping[str, Seen]) -> str:
    """The whole follow-up user message for one round of stale reads."""
    return followup(stale, seen)[0]


def followup(stale: Sequence[StaleRead], seen: Mapping[str, Seen]) -> tuple[str, list[str]]:
    """The message, and the paths it shows whole (a diff, or a deletion): seen by the agent."""
    parts, shown = [OPENING], []
    budget = TOTAL_CHARS
    for item in stale:
        section, used = _section(item, seen.get(item.path), budget)
        parts.append(section)
        budget -= max(0, used)
        if used >= 0:
            shown.append(item.path)
    parts.append(CLOSING)
    return "\n\n".join(parts) + "\n", shown


def _section(item: StaleRead, seen: Seen | None, budget: int) -> tuple[str, int]:
    """One file's part of the message and the diff characters it spent (-1: not shown)."""
    who = ", ".join(item.changed_by)
    if item.now_sha256 is None:
        return f"- {item.path}: deleted by {who}.", 0
    head = f"- {item.path}: changed by {who}."
    if seen is None or not seen.kept or seen.after is None:
        return f"{head} Read it again.", -1
    parts = rewrite_parts(item.path, seen.before or "", seen.after)
    if parts:
        head = f"- {item.path}: changed by {who} (in {', '.join(sorted(parts))})."
    diff, changed = bounded_diff(item.path, seen.before, seen.after)
    if len(diff) > FILE_CHARS or len(diff) > budget:
        return f"{head} {changed} lines changed (too long to show here). Read it again.", -1
    return f"{head}\n```diff\n{diff}```", len(diff)
