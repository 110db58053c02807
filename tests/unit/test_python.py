"""`parts.python`: Python's mapper, asked directly for a module's `Index`.

`test_parts.py` holds what each part is named and what a write changes; here is the
index the other modules of `parts` read: the parts tile the lines, each line's owner,
which lines count, and the bound past which a module has no parts.
"""

from __future__ import annotations

from codefleet.parts.model import PartKind
from codefleet.parts.python import HEADER, MAX_PART_BYTES, PYTHON

MODULE = '"""Doc."""\nimport os\n\n\ndef f():\n    return os.sep\n\n\nX = 1\n'


def test_a_modules_index_tiles_its_lines_and_names_each_lines_owner():
    index = PYTHON.index(MODULE)
    assert index is not None
    assert [(p.name, p.kind) for p in index.parts] == [
        (HEADER, PartKind.HEADER),
        ("<import os>", PartKind.IMPORTS),
        ("f", PartKind.FUNCTION),
        ("X", PartKind.ASSIGNMENT),
    ]
    assert "".join(index.lines) == MODULE
    assert index.owner == [0, 1, 2, 2, 2, 2, 3, 3, 3]
    assert index.significant == [True, True, False, False, True, True, False, False, True]


def test_bytes_and_str_of_one_module_give_one_index():
    assert PYTHON.index(MODULE.encode()) == PYTHON.index(MODULE)


def test_a_module_over_the_byte_bound_has_no_parts_and_one_at_it_has():
    filler = "x = 1\n"
    at_bound = "#" * (MAX_PART_BYTES - len(filler) - 1) + "\n" + filler
    assert len(at_bound.encode()) == MAX_PART_BYTES
    assert PYTHON.index(at_bound) is not None
    assert PYTHON.index(at_bound + "\n") is None
    wide = "é" * (MAX_PART_BYTES // 2) + "\n"  # fewer characters than the bound, more bytes
    assert PYTHON.index(f"# {wide}") is None


def test_text_that_is_not_utf8_or_starts_with_a_byte_order_mark_has_no_parts():
    assert PYTHON.index(b"x = '\xff'\n") is None
    assert PYTHON.index("\ufeffx = 1\n".encode()) is None
