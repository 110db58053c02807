"""The parts a write changes: each changed line takes the part that owns it, on its side.

Import statements are parts one by one (each mapper names each by its text), so two
writes that each add an import take different names; a write that reorders the import
statements both sides have takes every import part of both sides (the order is the
block's, not one statement's). Any kind of file: the mapper's `Index` of each side is
all it reads. Standard library only.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from typing import Final

from codefleet.parts.model import Index, PartChange, PartKind, PartMapper
from codefleet.parts.python import PYTHON

__all__ = ["changed_parts"]

_NO_CHANGE: Final = PartChange(frozenset(), frozenset(), frozenset())


def changed_parts(
    old_text: str | bytes, new_text: str | bytes, mapper: PartMapper = PYTHON
) -> PartChange | None:
    """The parts the write `old_text` -> `new_text` changes; None when a side has no parts.

    Each changed line takes the part that owns it on its side (blank lines between parts only
    when nothing else in their hunk changed); an unchanged line that moved from one part to
    another takes both. Each side is parsed once.
    """
    if old_text == new_text:
        return _NO_CHANGE
    old, new = mapper.index(old_text), mapper.index(new_text)
    if old is None or new is None:
        return None
    took_old: set[int] = set()
    took_new: set[int] = set()
    for tag, i1, i2, j1, j2 in _opcodes(old.lines, new.lines):
        if tag == "equal":
            _moved_between_parts(old, new, range(i1, i2), range(j1, j2), took_old, took_new)
        else:
            _changed_lines(old, new, range(i1, i2), range(j1, j2), took_old, took_new)
    old_names = {p.name for p in old.parts}
    new_names = {p.name for p in new.parts}
    touched = {old.parts[k].name for k in took_old} | {new.parts[k].name for k in took_new}
    touched |= _reordered_imports(old, new)
    return PartChange(
        changed=frozenset(touched & old_names & new_names),
        added=frozenset(touched - old_names),
        deleted=frozenset(touched - new_names),
    )


def _reordered_imports(old: Index, new: Index) -> set[str]:
    """Every import part of both sides when the imports both sides have changed order, else none."""
    olds = [p.name for p in old.parts if p.kind is PartKind.IMPORTS]
    news = [p.name for p in new.parts if p.kind is PartKind.IMPORTS]
    both = set(olds) & set(news)
    if [n for n in olds if n in both] == [n for n in news if n in both]:
        return set()
    return {*olds, *news}


def _opcodes(a: list[str], b: list[str]) -> Iterator[tuple[str, int, int, int, int]]:
    """difflib's opcodes, with the common head and tail set aside first (most writes are small)."""
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    if head:
        yield "equal", 0, head, 0, head
    matcher = difflib.SequenceMatcher(None, a[head : len(a) - tail], b[head : len(b) - tail])
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        yield tag, i1 + head, i2 + head, j1 + head, j2 + head
    if tail:
        yield "equal", len(a) - tail, len(a), len(b) - tail, len(b)


def _changed_lines(
    old: Index, new: Index, a: range, b: range, took_old: set[int], took_new: set[int]
) -> None:
    olds = {old.owner[n] for n in a if old.significant[n]}
    news = {new.owner[n] for n in b if new.significant[n]}
    if not olds and not news:  # only blank lines between parts: their owners, never nothing
        olds = {old.owner[n] for n in a}
        news = {new.owner[n] for n in b}
    took_old |= olds
    took_new |= news


def _moved_between_parts(
    old: Index, new: Index, a: range, b: range, took_old: set[int], took_new: set[int]
) -> None:
    """Unchanged lines whose part changed name (a split import block, a dropped docstring)."""
    names_a = [old.parts[k].name for k in old.owner[a.start : a.stop]]
    names_b = [new.parts[k].name for k in new.owner[b.start : b.stop]]
    if names_a == names_b:
        return
    for m, n, name_a, name_b in zip(a, b, names_a, names_b, strict=True):
        if name_a != name_b and (old.significant[m] or new.significant[n]):
            took_old.add(old.owner[m])
            took_new.add(new.owner[n])
