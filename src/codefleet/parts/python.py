"""Python's parts: a module's top-level units, found with `ast`.

The parts: `<header>` (the docstring, or without one the comments above the first
statement), each import statement by its own text (`<import os>`, `<from x import (a,
b)>`; a `try:` of imports and an `if TYPE_CHECKING:` of imports are one part each,
named by their header: `<try import ujson as json>`, `<if TYPE_CHECKING>`), each
definition by its name (`handle`, `Router`, `LIMIT`, `a,b` for `a, b = ...`), and any
other statement by its own text (`<if __name__ == "__main__">`). Adjacent same-named
definitions (`@overload`s) and statements sharing a line are one part.

Limits: a text that is larger than `MAX_PART_BYTES`, does not parse, is not UTF-8,
starts with a byte-order mark, or defines one name in two places that are not
adjacent has no parts (None), and its caller takes the whole file. The size bound keeps
each parse, and so each grant, restore, patch and view by part on the server's loop,
short (docs/decisions/0154-a-big-module-is-leased-whole.md). The last texts parsed are
kept parsed (`parts.kept`): a file held in parts is put back from the same pre-images
and current text again and again. Standard library only.
"""

from __future__ import annotations

import ast
import gc
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

from codefleet.parts.kept import KeptIndexes
from codefleet.parts.model import LINE, MAX_NAME_CHARS, Index, PartKind, Unit, statement_name, tile

__all__ = ["HEADER", "MAX_NAME_CHARS", "MAX_PART_BYTES", "PYTHON", "PythonParts"]

# One parse at a time in a process: CPython 3.11's AST constructor keeps its recursion
# depth in state the threads share, and two parses at once (the engine's thread and a
# runner's gate in one process: `run`, `demo`) can fail with "SystemError: AST
# constructor recursion depth mismatch" (python/cpython#106905). A parse that fails so
# anyway is a module without parts: leased, restored and patched whole.
_PARSING: Final = threading.Lock()
log = logging.getLogger(__name__)

# A module larger than this (UTF-8 bytes) has no parts: it is leased, restored and patched
# whole. A restore, a patch or a check's view by part parses on the server's loop (about
# 1 ms per KB of dense code on the shared 2-core machine), and every agent's lease answer
# waits for it; past this bound it waited too long (decision 0154).
MAX_PART_BYTES: Final = 64_000

HEADER: Final = "<header>"

_KEPT: Final[KeptIndexes[str]] = KeptIndexes()  # text -> its index (decision 0171)


class PythonParts:
    """The mapper of `.py` and `.pyi` files (`parts.kinds`)."""

    max_bytes: Final = MAX_PART_BYTES

    def index(self, text: str | bytes) -> Index | None:
        return _index(text)


PYTHON: Final = PythonParts()


def _index(text: str | bytes) -> Index | None:
    """The parsed text (None: no parts); from `_KEPT` when it was parsed lately."""
    decoded = _within_bound(text)
    if decoded is None:
        return None
    kept, index = _KEPT.get(decoded)
    if kept:
        return index
    try:
        with _collector_paused():
            index = _indexed(decoded)
    except SystemError:  # the AST constructor's own fault (above): no parts, the whole file
        log.warning("the parser failed on a module (a CPython fault); it is taken whole")
        return None  # not kept: the same text may parse next time
    _KEPT.keep(decoded, len(decoded), index)
    return index


def _within_bound(text: str | bytes) -> str | None:
    """The text as `str`, or None when it is not UTF-8 or is larger than `MAX_PART_BYTES`."""
    if len(text) > MAX_PART_BYTES:
        return None
    if isinstance(text, str):
        return text if len(text.encode("utf-8", "surrogatepass")) <= MAX_PART_BYTES else None
    try:
        return text.decode("utf-8")
    except UnicodeDecodeError:
        return None


@contextmanager
def _collector_paused() -> Iterator[None]:
    """No garbage collection while a text is parsed and tiled: its tree is one object per
    node, and each collection those allocations set off walks the objects tracked, the tree
    built so far included; a 300 KB module's parse took twice as long (decision 0154)."""
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


def _indexed(text: str) -> Index | None:
    try:
        with _PARSING:
            tree = ast.parse(text)
    except (SyntaxError, ValueError):  # ValueError: a null byte
        return None
    lines = LINE.findall(text)
    units = _units(tree.body, lines)
    if units is None:
        return None
    return tile(units, lines, _with_indented_comments)


def _units(body: list[ast.stmt], lines: list[str]) -> list[Unit] | None:
    """The parts' code spans in order; None when one name is defined in two places."""
    if not body:
        return [Unit(HEADER, PartKind.HEADER, 1, len(lines))] if lines else []
    units: list[Unit] = []
    rest = body
    if _is_docstring(body[0]):
        units.append(Unit(HEADER, PartKind.HEADER, 1, _end(body[0])))
        rest = body[1:]
    else:
        above = [n for n, line in enumerate(lines[: _start(body[0]) - 1], 1) if line.strip()]
        if above:
            units.append(Unit(HEADER, PartKind.HEADER, 1, above[-1]))
    for node in rest:
        name, kind = _name(node, lines)
        previous = units[-1] if units else None
        if previous and (_start(node) <= previous.last or previous.name == name):
            units[-1] = Unit(previous.name, previous.kind, previous.first, _end(node))
        else:
            units.append(Unit(name, kind, _start(node), _end(node)))
    if len({u.name for u in units}) < len(units):
        return None
    return units


def _with_indented_comments(last: int, lines: list[str], before: int) -> int:
    """Extend a part's code over the indented comments right below it (a body's last lines)."""
    while last + 1 < before and lines[last][:1] in (" ", "\t") and lines[last].lstrip()[:1] == "#":
        last += 1
    return last


def _start(node: ast.stmt) -> int:
    decorators = getattr(node, "decorator_list", None)
    return min(d.lineno for d in decorators) if decorators else node.lineno


def _end(node: ast.stmt) -> int:
    return node.end_lineno or node.lineno


def _is_docstring(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def _import_like(node: ast.stmt) -> bool:
    """An import, a `try:` of imports, or an `if TYPE_CHECKING:` of imports."""
    if isinstance(node, ast.Import | ast.ImportFrom):
        return True
    if isinstance(node, ast.If):
        test = node.test
        checking = (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
            isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
        )
        return checking and all(_import_or_pass(s) for s in (*node.body, *node.orelse))
    if isinstance(node, ast.Try):
        fallbacks = [*node.orelse, *node.finalbody, *(s for h in node.handlers for s in h.body)]
        return all(isinstance(s, ast.Import | ast.ImportFrom) for s in node.body) and all(
            _import_or_pass(s) or isinstance(s, ast.Assign) for s in fallbacks
        )
    return False


def _import_or_pass(node: ast.stmt) -> bool:
    return isinstance(node, ast.Import | ast.ImportFrom | ast.Pass)


def _name(node: ast.stmt, lines: list[str]) -> tuple[str, PartKind]:
    if _import_like(node):  # one part per statement: two tasks may each add one
        return statement_name(_header_text(node, lines)), PartKind.IMPORTS
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return node.name, PartKind.FUNCTION
    if isinstance(node, ast.ClassDef):
        return node.name, PartKind.CLASS
    targets = _assigned(node)
    if targets:
        return ",".join(targets), PartKind.ASSIGNMENT
    return statement_name(_header_text(node, lines)), PartKind.STATEMENT


def _assigned(node: ast.stmt) -> list[str] | None:
    """The plain names an assignment binds, or None when it binds anything else."""
    if isinstance(node, ast.AnnAssign):
        return _target_names(node.target)
    if isinstance(node, ast.Assign):
        found: list[str] = []
        for target in node.targets:
            names = _target_names(target)
            if names is None:
                return None
            found += names
        return found
    return None


def _target_names(target: ast.expr) -> list[str] | None:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, ast.Starred):
        return _target_names(target.value)
    if isinstance(target, ast.Tuple | ast.List):
        found: list[str] = []
        for element in target.elts:
            names = _target_names(element)
            if names is None:
                return None
            found += names
        return found
    return None


def _header_text(node: ast.stmt, lines: list[str]) -> str:
    """A compound statement's header (`if x`, `for a in b`), else the whole statement."""
    match node:
        case ast.If(test=test):
            return f"if {_segment(test, lines)}"
        case ast.While(test=test):
            return f"while {_segment(test, lines)}"
        case ast.For(target=target, iter=it) | ast.AsyncFor(target=target, iter=it):
            prefix = "async for" if isinstance(node, ast.AsyncFor) else "for"
            return f"{prefix} {_segment(target, lines)} in {_segment(it, lines)}"
        case ast.With(items=items) | ast.AsyncWith(items=items):
            prefix = "async with" if isinstance(node, ast.AsyncWith) else "with"
            return f"{prefix} {', '.join(_with_item(item, lines) for item in items)}"
        case ast.Try(body=body):
            return f"try {_segment(body[0], lines)}"
        case ast.Match(subject=subject):
            return f"match {_segment(subject, lines)}"
    return _segment(node, lines)


def _with_item(item: ast.withitem, lines: list[str]) -> str:
    text = _segment(item.context_expr, lines)
    return f"{text} as {_segment(item.optional_vars, lines)}" if item.optional_vars else text


def _segment(node: ast.stmt | ast.expr, lines: list[str]) -> str:
    """A node's source (its offsets count UTF-8 bytes), whitespace runs made one space."""
    first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
    start, end = node.col_offset, node.end_col_offset
    if first == last:
        text = lines[first].encode()[start:end].decode()
    else:
        head = lines[first].encode()[start:].decode()
        tail = lines[last].encode()[:end].decode()
        text = "".join((head, *lines[first + 1 : last], tail))
    return " ".join(text.split())
