"""A unified diff, read and applied in memory: what a dry-run script's `patch` step writes.

`read_patch` reads the text `git diff` or `diff -u` prints (one or more files; `a/` and
`b/` prefixes dropped; `diff --git`, `index` and mode lines skipped) into one
`FilePatch` per file, or raises `PatchError` naming the line. `apply_hunks` applies a
file's hunks to its text: each hunk's old lines (context and removals) must be found
whole, at the line its header names or, failing that, at the nearest place they occur
(a file another task changed above it moved them); a hunk found nowhere is a
`PatchError` naming it. A file created (`--- /dev/null`) starts empty; a deletion is
refused (a session cannot delete through the lease). Standard library only; the
executor writes the result through the attempt's `WriteGate`, as a `write` step does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

__all__ = ["FilePatch", "Hunk", "PatchError", "apply_hunks", "read_patch"]

HUNK_HEADER: Final = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
NO_NEWLINE: Final = "\\ No newline at end of file"
DEV_NULL: Final = "/dev/null"
SKIPPED: Final = ("diff ", "index ", "new file mode", "deleted file mode", "old mode", "new mode",
                  "similarity index", "Binary files")  # fmt: skip


class PatchError(ValueError):
    """A diff that cannot be read, or a hunk that does not apply."""


@dataclass(frozen=True, slots=True)
class Hunk:
    old_start: int  # 1-based, as the header says
    old: tuple[str, ...]  # the lines it expects (context and removals), with their endings
    new: tuple[str, ...]  # the lines it leaves

    def header(self) -> str:
        return f"@@ -{self.old_start},{len(self.old)} @@"


@dataclass(frozen=True, slots=True)
class FilePatch:
    path: str  # relative to the tree
    hunks: tuple[Hunk, ...]
    created: bool = False


def read_patch(text: str) -> tuple[FilePatch, ...]:
    """Every file the diff changes, in order; `PatchError` when it is not a unified diff."""
    lines = text.splitlines(keepends=True)
    patches: list[FilePatch] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            i, patch = _file(lines, i)
            patches.append(patch)
        elif line.startswith(SKIPPED) or not line.strip():
            i += 1
        else:
            raise PatchError(f"line {i + 1} is not part of a unified diff: {line.rstrip()!r}")
    if not patches:
        raise PatchError("no file in the diff (a unified diff: `--- a/F`, `+++ b/F`, `@@` hunks)")
    return tuple(patches)


def _file(lines: list[str], i: int) -> tuple[int, FilePatch]:
    old, new = _name(lines[i][4:]), _name(lines[i + 1][4:])
    if new == DEV_NULL:
        raise PatchError(f"line {i + 2}: the diff deletes {old}; a script cannot delete a file")
    i += 2
    hunks: list[Hunk] = []
    while i < len(lines) and lines[i].startswith("@@"):
        i, hunk = _hunk(lines, i)
        hunks.append(hunk)
    if not hunks:
        raise PatchError(f"line {i + 1}: {new} has no hunk (`@@ -l,n +l,n @@`)")
    return i, FilePatch(new, tuple(hunks), created=old == DEV_NULL)


def _name(field: str) -> str:
    name = field.rstrip("\r\n").split("\t", 1)[0].strip()
    return name[2:] if name[:2] in ("a/", "b/") else name


def _hunk(lines: list[str], i: int) -> tuple[int, Hunk]:
    match = HUNK_HEADER.match(lines[i])
    if match is None:
        raise PatchError(f"line {i + 1}: not a hunk header: {lines[i].rstrip()!r}")
    start = int(match.group(1))
    old_left = int(match.group(2) or 1)
    new_left = int(match.group(4) or 1)
    old: list[str] = []
    new: list[str] = []
    i += 1
    while i < len(lines) and (old_left > 0 or new_left > 0):
        line = lines[i]
        mark, body = line[:1], line[1:]
        if line.rstrip("\r\n") == "":  # an empty context line whose space was trimmed
            mark, body = " ", line
        if mark in (" ", "-"):
            old.append(body)
            old_left -= 1
        if mark in (" ", "+"):
            new.append(body)
            new_left -= 1
        if mark not in (" ", "-", "+"):
            raise PatchError(f"line {i + 1}: a hunk line starts with ' ', '-' or '+'")
        i += 1
        if i < len(lines) and lines[i].startswith(NO_NEWLINE):
            _strip_last(old if mark != "+" else [], new if mark != "-" else [])
            i += 1
    return i, Hunk(start, tuple(old), tuple(new))


def _strip_last(*sides: list[str]) -> None:
    for side in sides:
        if side:
            side[-1] = side[-1].rstrip("\r\n")


def apply_hunks(text: str, hunks: tuple[Hunk, ...], path: str) -> str:
    """`text` with each hunk applied in order; `PatchError` naming a hunk not found."""
    lines = text.splitlines(keepends=True)
    shift = 0  # lines added minus lines removed by the hunks before
    for hunk in hunks:
        at = _find(lines, hunk.old, max(0, hunk.old_start - 1 + shift))
        if at is None:
            raise PatchError(
                f"{path}: hunk {hunk.header()} does not apply: its lines are not there"
            )
        lines[at : at + len(hunk.old)] = hunk.new
        shift += len(hunk.new) - len(hunk.old)
    return "".join(lines)


def _find(lines: list[str], old: tuple[str, ...], near: int) -> int | None:
    """Where `old` occurs whole in `lines`, nearest to `near` (an empty hunk: at `near`)."""
    if not old:
        return min(near, len(lines))
    n = len(old)
    starts = sorted(range(len(lines) - n + 1), key=lambda s: (abs(s - near), s))
    return next((s for s in starts if tuple(lines[s : s + n]) == old), None)
