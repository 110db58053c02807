"""Which files a Codex `apply_patch` call writes: the targets named by its patch headers.

Codex edits files with one tool, `apply_patch`, whose input is a patch in its own
envelope format (a `PreToolUse` hook receives it as `tool_input.command`):

    *** Begin Patch
    *** Add File: path          (followed by `+` lines)
    *** Update File: path       (optionally `*** Move to: new path`, then `@@` hunks)
    *** Delete File: path
    *** End Patch

`patch_targets` returns every path a header names, in order, without repeats; a
move writes both its source and its destination, so both are targets. A path is
everything after the header's `: ` up to the end of the line (spaces included,
surrounding whitespace dropped); it is returned as written, `..` and absolute
paths included, because the pre-write gate is the one place that canonicalizes
a path and refuses what falls outside the tree.

Fail closed: a patch without its `Begin`/`End` envelope, a `*** ` line that is no
known header, a header with an empty path, or `*** Move to:` not right after an
`*** Update File:` is `MalformedPatch`, and the caller refuses the write. A
well-formed patch naming no file yields `()`, which the caller refuses too.

Standard library only: the command hook imports it on every write.
"""

from __future__ import annotations

from typing import Final

__all__ = ["MalformedPatch", "patch_targets"]

BEGIN: Final = "*** Begin Patch"
END: Final = "*** End Patch"
HEADER_MARK: Final = "*** "
FILE_HEADERS: Final = ("*** Add File:", "*** Update File:", "*** Delete File:")
MOVE_HEADER: Final = "*** Move to:"
UPDATE_HEADER: Final = "*** Update File:"
END_OF_FILE: Final = "*** End of File"  # a hunk marker inside an update, not a header


class MalformedPatch(ValueError):
    """The patch cannot be read safely; the write it carries must be refused."""


def patch_targets(patch: str) -> tuple[str, ...]:
    """Every path the patch's headers name (add, update, delete, move), in order, once each."""
    lines = _body_lines(patch)
    targets: list[str] = []
    previous = ""
    for number, line in enumerate(lines, start=2):
        if line.startswith(HEADER_MARK) and line != END_OF_FILE:
            path = _header_path(line, previous, number)
            if path not in targets:
                targets.append(path)
            previous = line
        elif line.strip():
            previous = line
    return tuple(targets)


def _body_lines(patch: str) -> list[str]:
    """The lines between the envelope's `Begin` and `End` markers."""
    lines = patch.strip().splitlines()
    if len(lines) < 2 or lines[0].strip() != BEGIN or lines[-1].strip() != END:
        raise MalformedPatch(f"a patch must start with {BEGIN!r} and end with {END!r}")
    return [line.rstrip("\r") for line in lines[1:-1]]


def _header_path(line: str, previous: str, number: int) -> str:
    """The path of one header line; anything that is not a known header is malformed."""
    if line.startswith(MOVE_HEADER):
        if not previous.startswith(UPDATE_HEADER):
            raise MalformedPatch(f"line {number}: {MOVE_HEADER!r} must follow {UPDATE_HEADER!r}")
        return _path_after(line, MOVE_HEADER, number)
    for header in FILE_HEADERS:
        if line.startswith(header):
            return _path_after(line, header, number)
    raise MalformedPatch(f"line {number}: unknown patch header {line[:60]!r}")


def _path_after(line: str, header: str, number: int) -> str:
    path = line[len(header) :].strip()
    if not path:
        raise MalformedPatch(f"line {number}: {header!r} names no path")
    return path
