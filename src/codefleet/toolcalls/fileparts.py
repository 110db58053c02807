"""The parts of a Python module, the parts a write changes, and putting parts back.

A part is one top-level unit of a module, named so that the name survives
unrelated edits: `<header>` (the docstring, or without one the comments above
the first statement), `<imports>` (the first run of top-level imports, with
`try:` imports and `if TYPE_CHECKING:` imports), each definition by its name
(`handle`, `Router`, `LIMIT`, `a,b` for `a, b = ...`), and any other statement
by its own text (`<if __name__ == "__main__">`, `<app.add_middleware(Cors)>`).
A part owns the lines from the end of the part above it through its own end:
the blank lines, comments and decorators above it, and for the last part the
tail of the file, so the parts tile the file. Blank lines between parts belong
to nobody in particular: a change to them alone takes the part that owns them.

Limits: Python only, parsed with `ast`; a text that is larger than `MAX_PART_BYTES`,
does not parse, is not UTF-8, starts with a byte-order mark, or defines one name in
two places that are not adjacent has no parts (None), and its caller takes the whole
file. The size bound keeps each parse, and so each grant, restore, patch and view by
part on the server's loop, short (docs/decisions/0154-a-big-module-is-leased-whole.md).
The last few large texts parsed are kept parsed: a file held in parts by several tasks
is put back from the same pre-images and current text again and again.
Adjacent same-named definitions (`@overload`s) and statements sharing a line
are one part. A part's lease key (`path::name`) is `toolcalls.leasekeys`'. Standard
library only: both the hook side and the server import it.
"""

from __future__ import annotations

import ast
import difflib
import gc
import hashlib
import itertools
import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

__all__ = [
    "HEADER",
    "IMPORTS",
    "MAX_NAME_CHARS",
    "MAX_PART_BYTES",
    "Part",
    "PartChange",
    "PartKind",
    "Preimage",
    "apply_edit",
    "apply_multi_edit",
    "changed_parts",
    "parts_of",
    "preimages",
    "put_back_parts",
    "restore_parts",
]

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
# Texts of at least KEEP_PARSED_BYTES are kept parsed, the last KEEP_PARSED of them (below
# that, a parse costs a few ms at most and is not worth the memory).
KEEP_PARSED_BYTES: Final = 16_000
KEEP_PARSED: Final = 16

HEADER: Final = "<header>"
IMPORTS: Final = "<imports>"
MAX_NAME_CHARS: Final = 80  # a statement's name past this is cut and ends in a digest
# Python's own line breaks: not `str.splitlines`, which also breaks at \f, \v, \x1c, \u2028...
_LINE: Final = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


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
class _Unit:
    name: str
    kind: PartKind
    first: int  # the first and last line of its code: decorators and comments above are not in it
    last: int


@dataclass(frozen=True, slots=True)
class _Index:
    """A parsed text: its lines, its parts, and per line the part that owns it (0-based)."""

    lines: list[str]
    parts: list[Part]
    owner: list[int]
    significant: list[bool]  # False: a blank line outside any part's code


_NO_CHANGE: Final = PartChange(frozenset(), frozenset(), frozenset())
_parsed: OrderedDict[str, _Index | None] = OrderedDict()  # text -> its index; under _PARSING

# -- parts -------------------------------------------------------------------------------------


def parts_of(text: str | bytes) -> list[Part] | None:
    """The module's parts in file order, or None when they cannot be told (see the module doc)."""
    index = _index(text)
    return None if index is None else list(index.parts)


def _index(text: str | bytes) -> _Index | None:
    """The parsed text (None: no parts); a large one from `_parsed` when it was parsed lately."""
    decoded = _within_bound(text)
    if decoded is None:
        return None
    keep = len(decoded) >= KEEP_PARSED_BYTES
    if keep:
        with _PARSING:
            if decoded in _parsed:
                _parsed.move_to_end(decoded)
                return _parsed[decoded]
    try:
        with _collector_paused():
            index = _indexed(decoded)
    except SystemError:  # the AST constructor's own fault (above): no parts, the whole file
        log.warning("the parser failed on a module (a CPython fault); it is taken whole")
        return None  # not kept: the same text may parse next time
    if keep:
        with _PARSING:
            _parsed[decoded] = index
            while len(_parsed) > KEEP_PARSED:
                _parsed.popitem(last=False)
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


def _indexed(text: str) -> _Index | None:
    try:
        with _PARSING:
            tree = ast.parse(text)
    except (SyntaxError, ValueError):  # ValueError: a null byte
        return None
    lines = _LINE.findall(text)
    units = _units(tree.body, lines)
    if units is None:
        return None
    return _tile(units, lines)


def _units(body: list[ast.stmt], lines: list[str]) -> list[_Unit] | None:
    """The parts' code spans in order; None when one name is defined in two places."""
    if not body:
        return [_Unit(HEADER, PartKind.HEADER, 1, len(lines))] if lines else []
    units: list[_Unit] = []
    rest = body
    if _is_docstring(body[0]):
        units.append(_Unit(HEADER, PartKind.HEADER, 1, _end(body[0])))
        rest = body[1:]
    else:
        above = [n for n, line in enumerate(lines[: _start(body[0]) - 1], 1) if line.strip()]
        if above:
            units.append(_Unit(HEADER, PartKind.HEADER, 1, above[-1]))
    imports = 0
    while imports < len(rest) and _import_like(rest[imports]):
        imports += 1
    if imports:
        units.append(_Unit(IMPORTS, PartKind.IMPORTS, _start(rest[0]), _end(rest[imports - 1])))
    for node in rest[imports:]:
        name, kind = _name(node, lines)
        previous = units[-1] if units else None
        if previous and (_start(node) <= previous.last or previous.name == name):
            units[-1] = _Unit(previous.name, previous.kind, previous.first, _end(node))
        else:
            units.append(_Unit(name, kind, _start(node), _end(node)))
    if len({u.name for u in units}) < len(units):
        return None
    return units


def _tile(units: list[_Unit], lines: list[str]) -> _Index:
    """Give each part the lines from the end of the code above it through its own code's end."""
    ends = [
        _with_indented_comments(u.last, lines, nxt.first) for u, nxt in itertools.pairwise(units)
    ]
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
    return _Index(lines, parts, owner, significant)


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
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return node.name, PartKind.FUNCTION
    if isinstance(node, ast.ClassDef):
        return node.name, PartKind.CLASS
    targets = _assigned(node)
    if targets:
        return ",".join(targets), PartKind.ASSIGNMENT
    return _statement_name(_header_text(node, lines)), PartKind.STATEMENT


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


def _statement_name(text: str) -> str:
    if len(text) + 2 <= MAX_NAME_CHARS:
        return f"<{text}>"
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    return f"<{text[: MAX_NAME_CHARS - 12]}~{digest}>"


# -- the parts a write changes -----------------------------------------------------------------


def changed_parts(old_text: str | bytes, new_text: str | bytes) -> PartChange | None:
    """The parts the write `old_text` -> `new_text` changes; None when a side has no parts.

    Each changed line takes the part that owns it on its side (blank lines between parts only
    when nothing else in their hunk changed); an unchanged line that moved from one part to
    another takes both. Each side is parsed once.
    """
    if old_text == new_text:
        return _NO_CHANGE
    old, new = _index(old_text), _index(new_text)
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
    return PartChange(
        changed=frozenset(touched & old_names & new_names),
        added=frozenset(touched - old_names),
        deleted=frozenset(touched - new_names),
    )


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
    old: _Index, new: _Index, a: range, b: range, took_old: set[int], took_new: set[int]
) -> None:
    olds = {old.owner[n] for n in a if old.significant[n]}
    news = {new.owner[n] for n in b if new.significant[n]}
    if not olds and not news:  # only blank lines between parts: their owners, never nothing
        olds = {old.owner[n] for n in a}
        news = {new.owner[n] for n in b}
    took_old |= olds
    took_new |= news


def _moved_between_parts(
    old: _Index, new: _Index, a: range, b: range, took_old: set[int], took_new: set[int]
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


# -- putting parts back ------------------------------------------------------------------------


def preimages(old_text: str | bytes, names: Iterable[str]) -> dict[str, Preimage] | None:
    """Each named part of `old_text` with its neighbours; None text for a name it lacks.
    None when its parts cannot be told. An empty text (an empty `__init__.py`) has no
    parts at all, so every name is one the attempt added."""
    parts = parts_of(old_text)
    return None if parts is None else _preimages_in(parts, names)


def _preimages_in(parts: list[Part], names: Iterable[str]) -> dict[str, Preimage]:
    if not parts:
        return {name: Preimage(None, None) for name in names}
    above: list[str | None] = [None, *(p.name for p in parts[:-1])]
    below: list[str | None] = [*(p.name for p in parts[1:]), None]
    found = {p.name: Preimage(p.text, a, b) for p, a, b in zip(parts, above, below, strict=True)}
    return {name: found.get(name, Preimage(None, None)) for name in names}


# (a part's name, the part above it) -> the blank lines above its code, in a pre-image
Gaps = Mapping[tuple[str, str | None], str]


def restore_parts(
    current_text: str, taken: Mapping[str, Preimage], gaps: Gaps | None = None
) -> str | None:
    """`current_text` with each taken part put back as it was; every other part as it is.

    A part the attempt added is removed; one it deleted goes back after the part that was
    above it (if that is gone, before the one that was below; else at the end). The part
    below a removed one gets back the blank lines above its code that it had in the
    pre-image (`gaps`), where the part above it is again the one it had there: blank
    lines belong to the part below them, so an addition's own separator went to that
    part. None when the current text has no parts or the result does not hold exactly
    the parts it should: the caller restores the whole file.
    """
    parts = parts_of(current_text)
    if parts is None:
        return None
    texts = {p.name: p.text for p in parts}
    added = {name for name, pre in taken.items() if pre.text is None}
    order = [p.name for p in parts if p.name not in added]
    deleted = {n: pre for n, pre in taken.items() if pre.text is not None and n not in texts}
    texts |= {name: pre.text for name, pre in taken.items() if pre.text is not None}
    for name in order[:]:
        if name in taken:
            _unmove(order, name, taken[name], taken)
    _reinsert(order, deleted)
    tops = _tops_of_removed_runs(parts, added)
    _close_gaps(texts, order, tops.keys() - taken.keys(), gaps or {}, tops)
    result = _joined([texts[name] for name in order], current_text)
    again = parts_of(result)
    if again is None or [p.name for p in again] != order:
        return None
    return result


def _tops_of_removed_runs(parts: list[Part], removed: set[str]) -> dict[str, str]:
    """Each part right below a run of removed parts -> the blank lines the run's first part
    starts with (the gap that was above the run)."""
    tops: dict[str, str] = {}
    top: str | None = None
    for part in parts:
        if part.name in removed:
            top = _blank_run(part.text) if top is None else top
        elif top is not None:
            tops[part.name], top = top, None
    return tops


def _close_gaps(
    texts: dict[str, str], order: list[str], names: set[str], gaps: Gaps, tops: Mapping[str, str]
) -> None:
    """Give each of `names` the blank lines above its code it had in a pre-image where the
    part above it was the one it has now; one no pre-image shows there that is now first
    takes the blank lines the file started with (`tops`: a pre-image with no parts, an
    empty module, knows no part's gap)."""
    for k, name in enumerate(order):
        if name not in names:
            continue
        gap = gaps.get((name, order[k - 1] if k else None))
        if gap is None and k == 0:
            gap = tops[name]
        if gap is not None:
            texts[name] = gap + texts[name][len(_blank_run(texts[name])) :]


def _blank_run(text: str) -> str:
    """The blank lines a part's text starts with."""
    lines = (m.group() for m in _LINE.finditer(text))
    return "".join(itertools.takewhile(lambda line: not line.strip(), lines))


def put_back_parts(current: bytes, taken: Iterable[tuple[bytes, Iterable[str]]]) -> bytes | None:
    """`current` with the named parts of each pre-image put back as they were in it: a
    failed attempt's restore (one pre-image), a patch's ends and a check's view (one per
    other holder). None where the parts cannot be found or put back: the caller takes the
    whole file (or says it cannot)."""
    merged: dict[str, Preimage] = {}
    gaps: dict[tuple[str, str | None], str] = {}
    for pre, names in taken:
        parts = parts_of(pre)
        if parts is None:
            return None  # a pre-image whose parts cannot be told
        found = _preimages_in(parts, names)
        if merged.keys() & found.keys():
            return None  # one part in two hands cannot be
        merged |= found
        for above, part in zip([None, *(p.name for p in parts)], parts, strict=False):
            gaps.setdefault((part.name, above), _blank_run(part.text))
    if not merged:
        return current
    try:
        text = current.decode("utf-8")
    except UnicodeDecodeError:
        return None
    restored = restore_parts(text, merged, gaps)
    return None if restored is None else restored.encode("utf-8")


def _unmove(order: list[str], name: str, pre: Preimage, taken: Mapping[str, Preimage]) -> None:
    """Move a part back past an untaken neighbour it is now on the other side of (the attempt
    moved it). Parts others added in between stay: only an inverted pair counts."""
    at = order.index(name)
    if pre.after in order and pre.after not in taken and order.index(pre.after) > at:
        order.remove(name)
        order.insert(order.index(pre.after) + 1, name)
    elif pre.before in order and pre.before not in taken and order.index(pre.before) < at:
        order.remove(name)
        order.insert(order.index(pre.before), name)


def _reinsert(order: list[str], deleted: dict[str, Preimage]) -> None:
    """Place each deleted part once its neighbour is placed; unplaceable ones at the end."""
    while deleted:
        placed = False
        for name, pre in list(deleted.items()):
            at = _position(order, pre, deleted)
            if at is not None:
                order.insert(at, name)
                del deleted[name]
                placed = True
        if not placed:
            order.extend(deleted)
            return


def _position(order: list[str], pre: Preimage, waiting: Mapping[str, Preimage]) -> int | None:
    """After the part that was above; if that is gone, before the one that was below; else the
    end. None: wait, that neighbour is itself still to be put back."""
    if pre.after is None:
        return 0
    if pre.after in order:
        return order.index(pre.after) + 1
    if pre.after in waiting:
        return None
    if pre.before in order:
        return order.index(pre.before)
    if pre.before in waiting:
        return None
    return len(order)


def _joined(texts: list[str], current: str) -> str:
    newline = "\r\n" if "\r\n" in current else "\n"
    fixed = [t if t.endswith(("\n", "\r")) else t + newline for t in texts[:-1]]
    return "".join(fixed + texts[-1:])


# -- the content an edit proposes --------------------------------------------------------------


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
