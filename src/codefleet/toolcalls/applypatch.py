"""Which files a Codex `apply_patch` call writes, read exactly as the Codex CLI reads the patch.

Codex edits files with one tool, `apply_patch`, whose input is a patch in its own
envelope format (a `PreToolUse` hook receives it as `tool_input.command`; Copilot CLI on
a GPT model sends the same text as `toolArgs`):

    *** Begin Patch
    *** Add File: path          (followed by `+` lines)
    *** Update File: path       (optionally `*** Move to: new path`, then `@@` hunks)
    *** Delete File: path
    *** End Patch

`patch_targets` returns every path the patch writes, in order, without repeats; a move
writes both its source and its destination. It reads the text the way Codex CLI 0.163.0
applies it (`tests/cli/test_patch_reader_cli.py` holds it to the real binary on a corpus
of odd patches): the whole text trimmed of Unicode whitespace, split on `\\n` only (one
trailing `\\r` dropped per line), the envelope's markers and every hunk header trimmed,
so ` *** Delete File: x` after an added file's `+` lines is a header; a `*** Move to: `
line only right after its update header and trimmed at its end only; lines inside an
update's hunks are hunk lines, never headers; a `<<'EOF'` heredoc around the envelope
accepted. A carriage return that does not end a line is refused: the binary drops every
`\\r` before it reads a patch (measured: `a\\rb` becomes `ab`), so what it writes is not
what the text says. A path is the rest of its header line after `: ` exactly (a second space is
part of the name), returned as written, `..` and absolute paths included: the pre-write
gate is the one place that canonicalizes a path and refuses what falls outside the tree.

Fail closed: whatever Codex would refuse to apply (no envelope, an unknown header, an
update with no hunk, a hunk line out of place) is `MalformedPatch` naming the line and
why, and the caller refuses the write with that reason. A well-formed patch naming no
file yields `()`, which the caller refuses too.

Standard library only: the command hook imports it on every write.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["MalformedPatch", "patch_targets"]

BEGIN: Final = "*** Begin Patch"
END: Final = "*** End Patch"
ADD: Final = "*** Add File: "
DELETE: Final = "*** Delete File: "
UPDATE: Final = "*** Update File: "
MOVE: Final = "*** Move to: "
END_OF_FILE: Final = "*** End of File"  # closes an update's last hunk, not a header
CONTEXT: Final = "@@"
HUNK_LINE_MARKS: Final = (" ", "+", "-")
NEXT_HEADER_MARK: Final = "*"  # an update's hunks end at a line starting with it
HEREDOC_OPENERS: Final = ("<<EOF", "<<'EOF'", '<<"EOF"')
HEREDOC_CLOSER: Final = "EOF"
BARE_CR: Final = re.compile("\r(?!\n)")
FIRST_BODY_LINE: Final = 2  # line numbers as Codex counts them: the body starts at line 2
# Unicode White_Space, what Codex (Rust's `str::trim`) trims; Python's `str.strip()` trims
# more (U+001C..U+001F), which Codex keeps as part of a name.
WHITESPACE: Final = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)


class MalformedPatch(ValueError):
    """The patch cannot be read as Codex reads it; the write it carries must be refused."""


def patch_targets(patch: str) -> tuple[str, ...]:
    """Every path the patch writes (add, update, delete, move), in order, once each."""
    lines = _body_lines(patch)
    targets: list[str] = []
    at = 0
    while at < len(lines):
        at = _hunk(lines, at, targets)
    return tuple(dict.fromkeys(targets))


def _body_lines(patch: str) -> list[str]:
    """The lines between the envelope's markers, split as Codex splits them."""
    text = patch.strip(WHITESPACE)
    if BARE_CR.search(text):
        raise MalformedPatch(
            "a carriage return that does not end a line: Codex CLI 0.163.0 drops it from the "
            "name it writes, so the patch cannot be checked as written"
        )
    lines = [line.removesuffix("\r") for line in text.split("\n")] if text else []
    if _enveloped(lines):
        return lines[1:-1]
    heredoc = len(lines) >= 4 and lines[0] in HEREDOC_OPENERS and lines[-1].endswith(HEREDOC_CLOSER)
    if heredoc and _enveloped(lines[1:-1]):
        return lines[2:-2]
    raise MalformedPatch(f"a patch must start with {BEGIN!r} and end with {END!r}")


def _enveloped(lines: list[str]) -> bool:
    return len(lines) >= 2 and _trim(lines[0]) == BEGIN and _trim(lines[-1]) == END


def _hunk(lines: list[str], at: int, targets: list[str]) -> int:
    """Read the hunk whose header is `lines[at]` into `targets`; the index after it."""
    header = _trim(lines[at])
    if header.startswith(ADD):
        targets.append(header.removeprefix(ADD))
        at += 1
        while at < len(lines) and lines[at].startswith("+"):
            at += 1
        return at
    if header.startswith(DELETE):
        targets.append(header.removeprefix(DELETE))
        return at + 1
    if header.startswith(UPDATE):
        targets.append(header.removeprefix(UPDATE))
        return _update(lines, at, targets)
    raise MalformedPatch(
        f"line {at + FIRST_BODY_LINE}: {header[:60]!r} is not a patch header Codex reads "
        f"(it reads {ADD!r}, {UPDATE!r} and {DELETE!r}, each with one space before the path)"
    )


def _update(lines: list[str], header_at: int, targets: list[str]) -> int:
    """The rest of an update: its optional move, then its hunks; the index after them."""
    at = header_at + 1
    if at < len(lines) and lines[at].rstrip(WHITESPACE).startswith(MOVE):
        targets.append(lines[at].rstrip(WHITESPACE).removeprefix(MOVE))
        at += 1
    hunks = 0
    while at < len(lines) and not lines[at].startswith(NEXT_HEADER_MARK):
        if not _trim(lines[at]):
            at += 1
            continue
        at = _update_hunk(lines, at, first=hunks == 0)
        hunks += 1
    if not hunks:
        where = header_at + FIRST_BODY_LINE
        raise MalformedPatch(f"line {where}: the update of {targets[-1]!r} has no hunk")
    return at


def _update_hunk(lines: list[str], at: int, first: bool) -> int:
    """One `@@` hunk of an update (the first may omit its `@@`); the index after it."""
    start = at
    if lines[at] == CONTEXT or lines[at].startswith(CONTEXT + " "):
        start = at + 1
    elif not first:
        raise MalformedPatch(f"line {at + FIRST_BODY_LINE}: a hunk must start with {CONTEXT!r}")
    read = 0
    for line in lines[start:]:
        if line == END_OF_FILE and read:
            return start + read + 1
        if (line and not line.startswith(HUNK_LINE_MARKS)) or line == END_OF_FILE:
            break
        read += 1
    if not read:
        where = start + FIRST_BODY_LINE
        raise MalformedPatch(f"line {where}: a hunk line must start with ' ', '+' or '-'")
    return start + read


def _trim(line: str) -> str:
    return line.strip(WHITESPACE)
