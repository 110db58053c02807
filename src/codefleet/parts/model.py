"""The shape every part mapper gives: parts that tile a file's lines, and its index of them.

A part is one top-level unit of a file, named so that the name survives unrelated
edits. A mapper (`PartMapper`, one per kind of file: `parts.kinds`) finds the units'
code spans (`Unit`); `tile` gives each part the lines from the end of the part above
it through its own end (the blank lines, comments and decorators above it, and for the
last part the tail of the file), so the parts tile the file. Blank lines between parts
belong to nobody in particular: a change to them alone takes the part that owns them.
What is done with parts (`parts.changes`, `parts.putback`) reads only this `Index`, so
it is the same for every kind of file. Standard library only.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Final, Protocol

__all__ = [
    "LINE",
    "MAX_NAME_CHARS",
    "Index",
    "Part",
    "PartChange",
    "PartKind",
    "PartMapper",
    "Preimage",
    "Unit",
    "statement_name",
    "tile",
]

# Line breaks as a parser counts them: not `str.splitlines`, which also breaks at \f, \v,
# \x1c, \u2028...
LINE: Final = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
MAX_NAME_CHARS: Final = 80  # a statement's name past this is cut and ends in a digest


class PartKind(StrEnum):
    HEADER = "header"
    IMPORTS = "imports"
    FUNCTION = "function"
    CLASS = "class"
    ASSIGNMENT = "assignment"
    STATEMENT = "statement"


@dataclass(frozen=True, slots=True)
class Part:
    """One part: its lines `first..last` (1-based, inclusive) and their exact text."""

    name: str
    kind: PartKind
    first: int
    last: int
    text: str


@dataclass(frozen=True, slots=True)
class PartChange:
    """The parts a write changes: in both versions, only in the new one, only in the old."""

    changed: frozenset[str]
    added: frozenset[str]
    deleted: frozenset[str]

    @property
    def names(self) -> frozenset[str]:
        """Every name the write must hold: a rename holds both its old and its new name."""
        return self.changed | self.added | self.deleted


@dataclass(frozen=True, slots=True)
class Preimage:
    """A part as it was before an attempt (None: the attempt added it), and its neighbours then."""

    text: str | None
    after: str | None  # the part above it (None: it was first)
    before: str | None = None  # the part below it (None: it was last)


@dataclass(frozen=True, slots=True)
class Unit:
    """A part's code span, as a mapper finds it (decorators and comments above are not in it)."""

    name: str
    kind: PartKind
    first: int
    last: int


@dataclass(frozen=True, slots=True)
class Index:
    """A mapped text: its lines, its parts, and per line the part that owns it (0-based)."""

    lines: list[str]
    parts: list[Part]
    owner: list[int]
    significant: list[bool]  # False: a blank line outside any part's code


class PartMapper(Protocol):
    """One kind of file's parts: its `Index`, or None when the text has none to tell (a
    text larger than `max_bytes` UTF-8 bytes never has any)."""

    @property
    def max_bytes(self) -> int: ...

    def index(self, text: str | bytes) -> Index | None: ...


def tile(
    units: list[Unit], lines: list[str], extend: Callable[[int, list[str], int], int]
) -> Index:
    """Give each part the lines from the end of the code above it through its own code's end;
    `extend(last, lines, next_first)` may carry a part's end over lines that belong to it
    (a body's trailing comments)."""
    ends = [extend(u.last, lines, nxt.first) for u, nxt in itertools.pairwise(units)]
    ends += [len(lines)] if units else []
    parts: list[Part] = []
    owner: list[int] = []
    significant = [bool(line.strip()) for line in lines]
    first = 1
    for k, (unit, last) in enumerate(zip(units, ends, strict=True)):
        parts.append(Part(unit.name, unit.kind, first, last, "".join(lines[first - 1 : last])))
        owner.extend([k] * (last - first + 1))
        significant[unit.first - 1 : unit.last] = [True] * (unit.last - unit.first + 1)
        first = last + 1
    return Index(lines, parts, owner, significant)


def statement_name(text: str) -> str:
    """A part named by its own text (whitespace runs made one space by the mapper): `<text>`,
    cut past `MAX_NAME_CHARS` and ended with a digest of the whole."""
    if len(text) + 2 <= MAX_NAME_CHARS:
        return f"<{text}>"
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    return f"<{text[: MAX_NAME_CHARS - 12]}~{digest}>"
