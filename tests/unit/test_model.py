"""`parts.model`: the shape every part mapper gives, tested with a mapper that is not Python's.

`SECTIONS` is a toy mapper (each `# heading` line opens a part named by its heading)
built on `tile` alone, as another language's mapper would be; `test_changes.py` and
`test_putback.py` run the rules that read only the `Index` over it.
"""

from __future__ import annotations

import hashlib

from codefleet.parts.model import (
    LINE,
    MAX_NAME_CHARS,
    Index,
    PartChange,
    PartKind,
    Unit,
    statement_name,
    tile,
)


class Sections:
    """A toy mapper: a `# heading` line opens a part named by the heading, through its last
    non-blank line. No parts for text above the first heading or a heading used twice."""

    def index(self, text: str | bytes) -> Index | None:
        text = text.decode() if isinstance(text, bytes) else text
        lines = LINE.findall(text)
        starts = [n for n, line in enumerate(lines) if line.startswith("# ")]
        names = [lines[n][2:].strip() for n in starts]
        if (lines and starts[:1] != [0]) or len(set(names)) < len(names):
            return None
        units, ends = [], [*starts[1:], len(lines)] if starts else []
        for name, start, end in zip(names, starts, ends, strict=True):
            last = max(n for n in range(start, end) if lines[n].strip())
            units.append(Unit(name, PartKind.STATEMENT, start + 1, last + 1))
        return tile(units, lines, lambda last, _lines, _next: last)


SECTIONS = Sections()
DOC = "# one\nfirst\n\n\n# two\nsecond\n\n# three\nthird\n"


def test_tile_gives_each_part_the_lines_from_the_end_of_the_part_above_through_its_own():
    lines = ["# c\n", "def a():\n", "    x\n", "\n", "\n", "b = 1\n", "\n"]
    units = [Unit("a", PartKind.FUNCTION, 2, 3), Unit("b", PartKind.ASSIGNMENT, 6, 6)]
    index = tile(units, lines, lambda last, _lines, _next: last)
    assert [(p.name, p.first, p.last) for p in index.parts] == [("a", 1, 3), ("b", 4, 7)]
    assert "".join(p.text for p in index.parts) == "".join(lines)
    assert index.owner == [0, 0, 0, 1, 1, 1, 1]
    assert index.significant == [True, True, True, False, False, True, False]


def test_tile_lets_the_mapper_carry_a_parts_end_over_lines_that_belong_to_it():
    lines = ["def a():\n", "    x\n", "    # trailing\n", "b = 1\n"]
    units = [Unit("a", PartKind.FUNCTION, 1, 2), Unit("b", PartKind.ASSIGNMENT, 4, 4)]
    index = tile(units, lines, lambda last, _lines, _next: last + 1)
    assert [(p.first, p.last) for p in index.parts] == [(1, 3), (4, 4)]


def test_no_units_tile_no_parts():
    index = tile([], ["\n"], lambda last, _lines, _next: last)
    assert index.parts == [] and index.owner == [] and index.significant == [False]


def test_a_short_statement_is_named_by_its_text_in_angle_brackets():
    assert statement_name("main()") == "<main()>"
    fits = "x" * (MAX_NAME_CHARS - 2)
    assert statement_name(fits) == f"<{fits}>"


def test_a_long_statement_name_is_cut_and_ends_in_a_digest_of_the_whole():
    text = "y" * MAX_NAME_CHARS
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    assert statement_name(text) == f"<{text[: MAX_NAME_CHARS - 12]}~{digest}>"
    assert len(statement_name(text)) <= MAX_NAME_CHARS
    assert statement_name(text) != statement_name(text[:-1] + "z")


def test_a_write_holds_every_name_it_changes_adds_or_deletes():
    change = PartChange(frozenset({"a"}), frozenset({"new"}), frozenset({"old"}))
    assert change.names == {"a", "new", "old"}


def test_lines_break_where_a_parser_breaks_them_and_nowhere_else():
    assert LINE.findall("a\r\nb\rc\nd") == ["a\r\n", "b\r", "c\n", "d"]
    assert LINE.findall("a\fb\u2028c\n") == ["a\fb\u2028c\n"]


def test_the_toy_mapper_tiles_a_text_with_the_blank_lines_going_to_the_part_below():
    index = SECTIONS.index(DOC)
    assert index is not None
    assert [p.name for p in index.parts] == ["one", "two", "three"]
    assert [p.text for p in index.parts] == [
        "# one\nfirst\n",
        "\n\n# two\nsecond\n",
        "\n# three\nthird\n",
    ]
    assert SECTIONS.index("preamble\n# one\n") is None
    assert SECTIONS.index("# a\n# a\n") is None
