"""The content a tool's edit proposes: what an `Edit` or a `MultiEdit` would leave in a file.

Replayed on the file as it is, so the gate can map a write to the parts it changes
before it is made. Standard library only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

__all__ = ["apply_edit", "apply_multi_edit"]


def apply_edit(
    current: str, old_string: str, new_string: str, replace_all: bool = False
) -> str | None:
    """The text an `Edit` would write, or None where the tool refuses it (no match, several
    matches without `replace_all`, nothing changed); an empty `old_string` fills an empty file."""
    if old_string == new_string:
        return None
    if not old_string:
        return new_string if not current else None
    matches = current.count(old_string)
    if matches == 0 or (matches > 1 and not replace_all):
        return None
    return current.replace(old_string, new_string, -1 if replace_all else 1)


def apply_multi_edit(current: str, edits: Iterable[Mapping[str, object]]) -> str | None:
    """The text a `MultiEdit` would write: its edits in order, None if any one is refused."""
    text = current
    for edit in edits:
        old, new = edit.get("old_string"), edit.get("new_string")
        replace_all = edit.get("replace_all", False)
        if not (isinstance(old, str) and isinstance(new, str) and isinstance(replace_all, bool)):
            return None
        edited = apply_edit(text, old, new, replace_all)
        if edited is None:
            return None
        text = edited
    return text
