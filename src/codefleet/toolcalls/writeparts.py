"""Which lease keys one write takes: the parts of a file it changes, or the whole file.

The runner's gate asks this before every `Write`, `Edit` and `MultiEdit` when leases
are by part (`lease_granularity: part`). It reads the file as it is
now, works out what the tool would leave there (`Edit`/`MultiEdit`: the replacement
applied to the current text; `Write`: the content given), and maps the changed lines
to parts (`parts.changes.changed_parts`, with the file's mapper from `parts.kinds`:
each side parsed once). The answer is the part
keys (`path::name`, `leasekeys`) of every part the write changes, adds or deletes.

A command's rewrite of a file (`run_command`) is mapped the same way, but against
the text the command saw (`rewrite_parts`), and lands by part: the current file
with only those parts as the command left them, provided each is still as the
command saw it (`merge_rewrite`), so another holder's parts written meanwhile stay.

Anything it cannot map takes the whole file, as leases by file always do: another
tool (a Codex patch, a notebook), a file no part mapper takes (`parts.kinds`), does
not exist yet, is not a regular file, is larger than its mapper's bound (`max_bytes`),
does not parse before or after, a path that holds `::`, an edit the tool would refuse, or a
write that changes nothing. Never raises: a mapping that fails is the whole file.
Standard library only (the hook side imports it).
"""

from __future__ import annotations

import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from codefleet.parts.changes import changed_parts
from codefleet.parts.edits import apply_edit, apply_multi_edit
from codefleet.parts.kinds import mapper_for
from codefleet.parts.model import PartMapper
from codefleet.parts.putback import preimages, put_back_parts
from codefleet.toolcalls.leasekeys import PART_SEPARATOR, part_key

__all__ = ["PART_TOOLS", "merge_rewrite", "rewrite_parts", "write_keys"]

PART_TOOLS: Final = frozenset({"Write", "Edit", "MultiEdit"})


def write_keys(root: Path, key: str, tool_name: str, tool_input: Any) -> list[str]:
    """The lease keys the write `tool_name(tool_input)` to canonical `key` under `root` takes."""
    try:
        parts = _changed_names(root, key, tool_name, tool_input)
    except (OSError, ValueError, RecursionError, MemoryError):  # e.g. a file deep past the parser
        parts = None
    if not parts:
        return [key]
    return [part_key(key, name) for name in sorted(parts)]


def _changed_names(root: Path, key: str, tool_name: str, tool_input: Any) -> frozenset[str] | None:
    mapper = _mapper(key)
    if tool_name not in PART_TOOLS or not isinstance(tool_input, Mapping) or mapper is None:
        return None
    current = _current_text(root / key, mapper.max_bytes)
    if current is None:
        return None
    proposed = _proposed(current, tool_name, tool_input)
    return None if proposed is None else _names(current, proposed, mapper)


def rewrite_parts(key: str, seen: str | bytes, after: str | bytes) -> frozenset[str] | None:
    """The parts a rewrite of file `key` from `seen` (what the command saw) to `after`
    changes, adds or deletes; None: the rewrite takes the whole file."""
    mapper = _mapper(key)
    if mapper is None or max(len(seen), len(after)) > mapper.max_bytes:
        return None
    try:
        return _names(seen, after, mapper)
    except (ValueError, RecursionError, MemoryError):
        return None


def _mapper(key: str) -> PartMapper | None:
    """The part mapper of a key's file (`parts.kinds`); None: not a file, or one with no parts."""
    return None if PART_SEPARATOR in key else mapper_for(key)


def _names(old: str | bytes, new: str | bytes, mapper: PartMapper) -> frozenset[str] | None:
    """Every part `new` changes, adds or deletes against `old`; None: none, or unmappable."""
    change = changed_parts(old, new, mapper)
    if change is None:
        return None
    return frozenset(change.changed | change.added | change.deleted) or None


def merge_rewrite(
    key: str, current: bytes, seen: bytes, after: bytes, names: frozenset[str]
) -> bytes | None:
    """File `key`'s `current` text with the parts `names` as `after` holds them (a part
    `after` lacks removed, one only it holds added), or None when any of them is no longer
    as in `seen` (another task changed it since the command ran) or the parts cannot be put
    in place."""
    mapper = _mapper(key)
    if mapper is None:
        return None
    try:
        then, now = preimages(seen, names, mapper), preimages(current, names, mapper)
        if then is None or now is None:
            return None
        if any(then[name].text != now[name].text for name in names):
            return None
        return put_back_parts(current, [(after, names)], mapper)
    except (ValueError, RecursionError, MemoryError):
        return None


def _current_text(target: Path, limit: int) -> str | None:
    """The file's text: a regular file (not a symlink) of at most `limit` bytes, UTF-8."""
    info = target.lstat()
    if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
        return None
    try:
        return target.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        return None


def _proposed(current: str, tool_name: str, tool_input: Mapping[str, Any]) -> str | None:
    """What the tool would leave in the file, or None where it would refuse the call."""
    if tool_name == "Write":
        content = tool_input.get("content")
        return content if isinstance(content, str) else None
    if tool_name == "Edit":
        old, new = tool_input.get("old_string"), tool_input.get("new_string")
        replace_all = tool_input.get("replace_all", False)
        if isinstance(old, str) and isinstance(new, str) and isinstance(replace_all, bool):
            return apply_edit(current, old, new, replace_all)
        return None
    edits = tool_input.get("edits")
    if not isinstance(edits, list) or not all(isinstance(e, Mapping) for e in edits):
        return None
    return apply_multi_edit(current, edits)
