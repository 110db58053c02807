"""A part mapper on tree-sitter: a file's top-level nodes as parts, by one language's rules.

Each language (`parts.typescript`, `parts.golang`, `parts.rust`, `parts.java`) gives a
`Syntax`: its grammar, which top-level node types are its header, its imports, and what
belongs to the definition below (attributes), and how a definition is named. The parts:
`<header>` (the comments and the package clause above the first other node), one part per
import statement named by its own text, each definition by its name, and any other
statement by its own text. Adjacent same-named nodes (overloads) and nodes sharing a line
are one part; comments above a node belong to it (`model.tile`).

Whatever cannot be mapped for certain has no parts (None: the caller takes the whole file):
a text larger than the language's bound, not UTF-8, starting with a byte-order mark, with a
line break tree-sitter does not count (a lone CR), whose tree holds any ERROR or MISSING
node, or that names one definition in two places that are not adjacent. The last few
large texts mapped are kept mapped (by language and bytes).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from codefleet.parts.grammars import load
from codefleet.parts.model import LINE, Index, PartKind, Unit, statement_name, tile

if TYPE_CHECKING:
    from tree_sitter import Language
    from tree_sitter import Node as Node  # the language modules read nodes through this module

__all__ = ["HEADER", "Syntax", "TreeSitterParts", "text_of"]

HEADER: Final = "<header>"
# Texts of at least KEEP_PARSED_BYTES are kept mapped, the last KEEP_PARSED of them: a file
# held in parts by several tasks is put back from the same pre-images again and again
# (as Python's mapper does, decision 0154).
KEEP_PARSED_BYTES: Final = 16_000
KEEP_PARSED: Final = 16
_KEEPING: Final = threading.Lock()
_parsed: OrderedDict[tuple[str, bytes], Index | None] = OrderedDict()  # under _KEEPING
COMMENTS: Final = frozenset({"comment", "line_comment", "block_comment", "hash_bang_line"})

# A definition's (name, kind); None: it is a statement, named by its text
Namer = Callable[["Node"], "tuple[str, PartKind] | None"]


@dataclass(frozen=True, slots=True)
class Syntax:
    """One language's rules over its top-level nodes, and its size bound (UTF-8 bytes)."""

    grammar: str  # a key of `parts.grammars.GRAMMARS`
    max_bytes: int
    name: Namer
    header: frozenset[str] = frozenset()  # the package clause, inner attributes
    imports: frozenset[str] = frozenset()
    attached: frozenset[str] = frozenset()  # belongs to the node below it (`#[derive]`)


class TreeSitterParts:
    """The mapper of one language's files (`parts.kinds`); its grammar is loaded when made."""

    def __init__(self, syntax: Syntax) -> None:
        self.syntax = syntax
        self.max_bytes = syntax.max_bytes
        self.language: Language = load(syntax.grammar)

    def index(self, text: str | bytes) -> Index | None:
        decoded = _within_bound(text, self.max_bytes)
        if decoded is None:
            return None
        source, data = decoded
        if len(data) < KEEP_PARSED_BYTES:
            return self._indexed(source, data)
        key = (self.syntax.grammar, data)
        with _KEEPING:
            if key in _parsed:
                _parsed.move_to_end(key)
                return _parsed[key]
        index = self._indexed(source, data)
        with _KEEPING:
            _parsed[key] = index
            while len(_parsed) > KEEP_PARSED:
                _parsed.popitem(last=False)
        return index

    def _indexed(self, source: str, data: bytes) -> Index | None:
        from tree_sitter import Parser

        root = Parser(self.language).parse(data).root_node
        if root.has_error or root.is_missing:
            return None
        lines = LINE.findall(source)
        units = _units(self.syntax, root.children, lines)
        return None if units is None else tile(units, lines, _as_is)


def _within_bound(text: str | bytes, limit: int) -> tuple[str, bytes] | None:
    """The text and its UTF-8 bytes; None past `limit`, not UTF-8, with a BOM or a lone CR."""
    if len(text) > limit:
        return None
    try:
        data = text.encode("utf-8") if isinstance(text, str) else text
        source = text if isinstance(text, str) else text.decode("utf-8")
    except UnicodeError:
        return None
    if len(data) > limit or source.startswith("\ufeff"):
        return None
    if "\r" in source and source.count("\r") != source.count("\r\n"):
        return None
    return source, data


def _as_is(last: int, lines: list[str], before: int) -> int:
    return last


def _span(node: Node) -> tuple[int, int]:
    """A node's first and last lines (1-based); a node ending at a line's start ends above it."""
    first = node.start_point.row + 1
    end = node.end_point
    return first, max(first, end.row + 1 if end.column else end.row)


def text_of(node: Node) -> str:
    """A node's source, whitespace runs made one space."""
    return " ".join((node.text or b"").decode("utf-8", "replace").split())


def _items(syntax: Syntax, nodes: list[Node]) -> list[tuple[int, int, Node]]:
    """The top-level nodes that are parts' code: (first line, last line, node); comments
    are left to `tile`, and an attached node (an attribute) starts the node below it."""
    items: list[tuple[int, int, Node]] = []
    pending: int | None = None
    for node in nodes:
        if node.type in COMMENTS:
            continue
        first, last = _span(node)
        if node.type in syntax.attached:
            pending = first if pending is None else pending
            continue
        items.append((first if pending is None else pending, last, node))
        pending = None
    return items


def _units(syntax: Syntax, nodes: list[Node], lines: list[str]) -> list[Unit] | None:
    """The parts' code spans in order; None when one name is defined in two places."""
    items = _items(syntax, nodes)
    lead = 0
    while lead < len(items) and items[lead][2].type in syntax.header:
        lead += 1
    if lead == len(items):
        return [Unit(HEADER, PartKind.HEADER, 1, len(lines))] if lines else []
    units: list[Unit] = []
    above = [n for n, line in enumerate(lines[: items[lead][0] - 1], 1) if line.strip()]
    if above:
        units.append(Unit(HEADER, PartKind.HEADER, 1, above[-1]))
    for first, last, node in items[lead:]:
        name, kind = _named(syntax, node)
        previous = units[-1] if units else None
        if previous and (first <= previous.last or previous.name == name):
            units[-1] = Unit(previous.name, previous.kind, previous.first, last)
        else:
            units.append(Unit(name, kind, first, last))
    if len({u.name for u in units}) < len(units):
        return None
    return units


def _named(syntax: Syntax, node: Node) -> tuple[str, PartKind]:
    if node.type in syntax.imports:
        return statement_name(text_of(node)), PartKind.IMPORTS
    return syntax.name(node) or (statement_name(text_of(node)), PartKind.STATEMENT)
