"""`parts`: a Python module's parts, the parts a write changes, putting parts back."""

from __future__ import annotations

import ast
import itertools
import random
import sys
from pathlib import Path

import pytest

from codefleet import parts as parts_room
from codefleet.parts import python as python_parts
from codefleet.parts.changes import changed_parts
from codefleet.parts.model import Part, PartChange, PartKind, Preimage
from codefleet.parts.putback import parts_of, preimages, put_back_parts, restore_parts

API = '''\
#!/usr/bin/env python
"""The API module."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["Router", "handle"]

LIMIT: int = 10


# The one handler.
@decorated
@other(1)
def handle(request):
    return request


class Router:
    def route(self):
        return 1

    def other(self):
        return 2


async def serve():
    pass


if __name__ == "__main__":
    serve()
'''


def names(text: str) -> list[str]:
    parts = parts_of(text)
    assert parts is not None
    return [p.name for p in parts]


def part(text: str, name: str) -> Part:
    parts = parts_of(text)
    assert parts is not None
    return next(p for p in parts if p.name == name)


def change(old: str, new: str) -> set[str]:
    found = changed_parts(old, new)
    assert found is not None
    return set(found.names)


# -- parts_of ----------------------------------------------------------------------------------


def test_a_module_has_its_header_its_imports_and_each_top_level_definition():
    assert names(API) == [
        "<header>",
        "<from __future__ import annotations>",
        "<import os>",
        "<from typing import TYPE_CHECKING>",
        "<if TYPE_CHECKING>",
        "__all__",
        "LIMIT",
        "handle",
        "Router",
        "serve",
        '<if __name__ == "__main__">',
    ]


def test_each_part_has_its_kind():
    kinds = {p.name: p.kind for p in parts_of(API) or []}
    assert kinds["<header>"] is PartKind.HEADER
    assert kinds["<import os>"] is PartKind.IMPORTS
    assert kinds["<if TYPE_CHECKING>"] is PartKind.IMPORTS
    assert kinds["handle"] is PartKind.FUNCTION
    assert kinds["serve"] is PartKind.FUNCTION
    assert kinds["Router"] is PartKind.CLASS
    assert kinds["LIMIT"] is PartKind.ASSIGNMENT
    assert kinds['<if __name__ == "__main__">'] is PartKind.STATEMENT


def test_the_parts_tile_the_file_so_their_texts_concatenate_to_it():
    parts = parts_of(API)
    assert parts is not None
    assert "".join(p.text for p in parts) == API
    assert parts[0].first == 1
    assert all(a.last + 1 == b.first for a, b in itertools.pairwise(parts))
    assert parts[-1].last == API.count("\n")


def test_a_definition_owns_its_decorators_and_the_comments_above_it():
    handle = part(API, "handle")
    assert handle.text == (
        "\n\n# The one handler.\n@decorated\n@other(1)\ndef handle(request):\n    return request\n"
    )
    lines = API.splitlines()
    assert lines[handle.first - 1 : handle.last] == handle.text.splitlines()


def test_the_header_is_the_docstring_and_what_is_above_it():
    assert part(API, "<header>").text == '#!/usr/bin/env python\n"""The API module."""\n'


def test_without_a_docstring_the_comments_above_the_first_statement_are_the_header():
    text = "# Copyright\n# License\n\nimport os\n"
    assert names(text) == ["<header>", "<import os>"]
    assert part(text, "<header>").text == "# Copyright\n# License\n"


def test_blank_lines_alone_above_the_first_statement_are_no_header():
    assert names("\n\nimport os\n") == ["<import os>"]


def test_each_import_statement_is_a_part_and_a_try_or_type_checking_of_imports_is_one():
    text = (
        "from __future__ import annotations\n"
        "import os\n\n"
        "try:\n    import ujson as json\nexcept ImportError:\n    import json\n\n"
        "if TYPE_CHECKING:\n    import x\n"
        "if typing.TYPE_CHECKING:\n    import y\n"
        "from x import (a,\n    b)\n"
        "X = 1\n"
    )
    assert names(text) == [
        "<from __future__ import annotations>",
        "<import os>",
        "<try import ujson as json>",
        "<if TYPE_CHECKING>",
        "<if typing.TYPE_CHECKING>",
        "<from x import (a, b)>",
        "X",
    ]
    assert {p.kind for p in parts_of(text) or [] if p.name != "X"} == {PartKind.IMPORTS}


def test_an_import_after_the_first_block_is_an_import_part_named_by_its_text():
    text = "import os\nX = 1\nimport sys\n"
    assert names(text) == ["<import os>", "X", "<import sys>"]
    assert part(text, "<import sys>").kind is PartKind.IMPORTS


def test_a_type_checking_block_holding_more_than_imports_is_a_statement():
    text = "import os\nif TYPE_CHECKING:\n    X = 1\n"
    assert names(text) == ["<import os>", "<if TYPE_CHECKING>"]
    assert part(text, "<if TYPE_CHECKING>").kind is PartKind.STATEMENT


def test_one_import_written_twice_apart_leaves_the_module_without_parts():
    assert parts_of("import os\nX = 1\nimport os\n") is None


def test_assignment_names_cover_chains_tuples_and_starred_targets():
    text = "a = b = 1\nc, (d, *e) = f()\ng: int\nh: int = 2\n"
    assert names(text) == ["a,b", "c,d,e", "g", "h"]


def test_an_assignment_to_an_attribute_or_an_augmented_one_is_a_statement():
    text = "app.debug = True\n__all__ += ['x']\nd['k'] = v\n"
    assert names(text) == ["<app.debug = True>", "<__all__ += ['x']>", "<d['k'] = v>"]


def test_an_expression_statement_is_named_by_its_whole_text_so_similar_calls_differ():
    text = "app.include_router(\n    users.router,\n)\napp.include_router(\n    items.router,\n)\n"
    assert names(text) == [
        "<app.include_router( users.router, )>",
        "<app.include_router( items.router, )>",
    ]


def test_a_compound_statement_is_named_by_its_header_line():
    text = (
        "for x in range(3):\n    print(x)\nwhile ready():  # wait\n    pass\nwith lock:\n    go()\n"
    )
    assert names(text) == ["<for x in range(3)>", "<while ready()>", "<with lock>"]


def test_a_long_statement_name_is_cut_and_keeps_a_digest_of_the_rest():
    long_a = "register(" + ", ".join(f"a{n}" for n in range(40)) + ")\n"
    long_b = long_a.replace("a39", "b39")
    [a] = names(long_a)
    [b] = names(long_b)
    assert a != b
    assert len(a) <= python_parts.MAX_NAME_CHARS
    assert a.startswith("<register(a0, a1")


def test_statement_names_do_not_depend_on_where_the_statement_is():
    before = "def f():\n    pass\napp.run()\n"
    after = "app.run()\ndef g():\n    pass\ndef f():\n    pass\n"
    assert "<app.run()>" in names(before)
    assert "<app.run()>" in names(after)


def test_adjacent_definitions_of_one_name_are_one_part():
    text = (
        "@overload\ndef f(x: int) -> int: ...\n"
        "@overload\ndef f(x: str) -> str: ...\n"
        "def f(x):\n    return x\n"
        "def g():\n    pass\n"
    )
    assert names(text) == ["f", "g"]
    assert part(text, "f").text.count("def f") == 3


def test_one_name_defined_in_two_places_gives_no_parts():
    assert parts_of("def f():\n    pass\nX = 1\ndef f():\n    pass\n") is None
    assert parts_of("handle = 1\ndef g(): pass\ndef handle(): pass\n") is None


def test_statements_sharing_a_line_are_one_part_named_by_the_first():
    text = "x = 1; y = 2\ndef f(): pass\n"
    assert names(text) == ["x", "f"]
    assert part(text, "x").text == "x = 1; y = 2\n"


def test_methods_are_inside_their_class_part():
    assert "route" not in names(API)
    assert "def route" in part(API, "Router").text


def test_an_unparsable_or_undecodable_text_has_no_parts():
    assert parts_of("def f(:\n") is None
    assert parts_of(b"x = '\xff'\n") is None
    assert parts_of("x = 1\x00") is None
    assert parts_of("\ufeffx = 1\n") is None


def test_utf8_bytes_are_read_as_text():
    assert names("x = 'é'\ndef f(): pass\n".encode()) == ["x", "f"]


def test_an_empty_file_has_no_parts_and_a_comment_only_file_is_all_header():
    assert parts_of("") == []
    assert names("# nothing yet\n") == ["<header>"]
    assert names("\n\n") == ["<header>"]
    assert names('"""Only a docstring."""\n') == ["<header>"]


def test_crlf_and_lone_cr_line_endings_count_as_python_counts_them():
    crlf = "import os\r\n\r\ndef f():\r\n    return 1\r\n\r\ndef g():\r\n    return 2\r\n"
    assert names(crlf) == ["<import os>", "f", "g"]
    assert part(crlf, "f").text == "\r\ndef f():\r\n    return 1\r\n"
    assert "".join(p.text for p in parts_of(crlf) or []) == crlf
    assert names("x = 1\ry = 2\r") == ["x", "y"]


def test_a_form_feed_or_line_separator_is_not_a_line_break():
    text = "x = 1\n\x0cdef f():\n    return 'a\u2028b'\ndef g(): pass\n"
    assert names(text) == ["x", "f", "g"]
    assert part(text, "f").first == 2 and part(text, "f").last == 3


def test_a_missing_final_newline_leaves_the_last_part_without_one():
    text = "def f():\n    pass\ndef g():\n    return 2"
    assert part(text, "g").text == "def g():\n    return 2"
    assert part(text, "g").last == 4


def test_indented_comments_after_a_body_stay_with_that_body():
    text = "def f():\n    x = 1\n    # return x\n\ndef g():\n    pass\n"
    assert "# return x" in part(text, "f").text
    assert "# return x" not in part(text, "g").text


def test_trailing_lines_at_the_end_of_the_file_belong_to_the_last_part():
    text = "def f():\n    pass\n\n# end\n"
    assert part(text, "f").text == text


# -- changed_parts -----------------------------------------------------------------------------


def test_an_unchanged_file_changes_no_part():
    assert changed_parts(API, API) == PartChange(frozenset(), frozenset(), frozenset())
    assert change(API, API) == set()


def test_an_unchanged_unparsable_file_changes_nothing():
    assert changed_parts("def f(:\n", "def f(:\n") == PartChange(
        frozenset(), frozenset(), frozenset()
    )


def test_a_change_inside_one_function_changes_only_that_function():
    new = API.replace("return request", "return request.body")
    assert changed_parts(API, new) == PartChange(frozenset({"handle"}), frozenset(), frozenset())


def test_a_method_change_changes_only_its_class():
    assert change(API, API.replace("return 2", "return 3")) == {"Router"}


def test_an_edit_spanning_two_functions_changes_both():
    old = "def f():\n    return 1\n\n\ndef g():\n    return 2\n\n\ndef h():\n    return 3\n"
    new = old.replace(
        "return 1\n\n\ndef g():\n    return 2", "return 10\n\n\ndef g():\n    return 20"
    )
    assert change(old, new) == {"f", "g"}


def test_a_decorator_or_leading_comment_change_changes_its_definition():
    assert change(API, API.replace("@other(1)", "@other(2)")) == {"handle"}
    assert change(API, API.replace("# The one handler.", "# The handler.")) == {"handle"}
    added = API.replace("\n\nclass Router", "\n\n@dataclass\nclass Router")
    assert change(API, added) == {"Router"}


def test_a_docstring_edit_changes_the_header():
    assert change(API, API.replace("The API module.", "The API.")) == {"<header>"}


def test_a_new_import_is_its_own_part_and_changing_or_removing_one_takes_that_one():
    added = changed_parts(API, API.replace("import os\n", "import os\nimport sys\n"))
    assert added == PartChange(frozenset(), frozenset({"<import sys>"}), frozenset())
    changed = API.replace("    from collections.abc", "    from typing")
    assert change(API, changed) == {"<if TYPE_CHECKING>"}
    removed = changed_parts(API, API.replace("import os\n", ""))
    assert removed == PartChange(frozenset(), frozenset(), frozenset({"<import os>"}))
    renamed = API.replace("import os\n", "import os.path\n")
    assert change(API, renamed) == {"<import os>", "<import os.path>"}


def test_two_writers_adding_an_import_each_take_different_names_and_one_import_the_same():
    one = API.replace("import os\n", "import os\nimport re\n")
    two = one.replace("import os\n", "import os\nimport sys\n")
    assert change(API, one) == {"<import re>"}
    assert change(one, two) == {"<import sys>"}
    assert change(API, API.replace("import os\n", "import os\nimport sys\n")) == {"<import sys>"}


def test_reordering_the_imports_takes_every_import_part():
    old = "import b\nimport a\nimport c\n\n\ndef f():\n    pass\n"
    new = "import a\nimport b\nimport c\n\n\ndef f():\n    pass\n"
    assert change(old, new) == {"<import a>", "<import b>", "<import c>"}
    sorted_in = "import a\nimport b\nimport c\nimport d\n\n\ndef f():\n    pass\n"
    assert change(old, sorted_in) == {"<import a>", "<import b>", "<import c>", "<import d>"}


def test_adding_a_function_at_the_end_takes_only_the_new_name():
    new = API + "\n\ndef extra():\n    return 4\n"
    found = changed_parts(API, new)
    assert found == PartChange(frozenset(), frozenset({"extra"}), frozenset())


def test_adding_a_function_in_the_middle_takes_only_the_new_name():
    new = API.replace("\n\nclass Router", "\n\ndef middle():\n    pass\n\n\nclass Router")
    assert changed_parts(API, new) == PartChange(frozenset(), frozenset({"middle"}), frozenset())


def test_two_appends_at_the_end_by_two_writers_take_different_names():
    base = "def f():\n    pass\n"
    one = base + "\n\ndef a():\n    pass\n"
    two = one + "\n\ndef b():\n    pass\n"
    assert change(base, one) == {"a"}
    assert change(one, two) == {"b"}


def test_deleting_a_function_takes_its_name():
    start = API.index("\n\nasync def serve")
    end = API.index("\n\nif __name__")
    new = API[:start] + API[end:]
    assert changed_parts(API, new) == PartChange(frozenset(), frozenset(), frozenset({"serve"}))


def test_a_rename_is_a_deletion_and_an_addition():
    new = API.replace("def handle(request)", "def respond(request)")
    assert changed_parts(API, new) == PartChange(
        frozenset(), frozenset({"respond"}), frozenset({"handle"})
    )


def test_a_whole_file_write_changing_one_function_takes_only_that_part():
    lines = API.splitlines(keepends=True)
    new = "".join(line.replace("return 1", "return 11") for line in lines)
    assert change(API, new) == {"Router"}


def test_blank_lines_added_between_two_parts_take_a_neighbour_never_nothing():
    old = "def f():\n    pass\n\ndef g():\n    pass\n"
    new = old.replace("\ndef g", "\n\n\ndef g")
    found = change(old, new)
    assert found
    assert found <= {"f", "g"}


def test_a_comment_that_moves_from_one_part_to_another_changes_both():
    old = '"""Doc."""\n# about f\ndef f():\n    pass\n'
    new = "# about f\ndef f():\n    pass\n"
    assert change(old, new) == {"<header>", "f"}


def test_a_statement_put_between_imports_takes_only_itself():
    old = "import os\nimport sys\n\nX = 1\n"
    new = "import os\nsys_path = 1\nimport sys\n\nX = 1\n"
    assert change(old, new) == {"sys_path"}


def test_moving_a_function_below_another_takes_the_moved_function():
    old = "def f():\n    return 1\n\n\ndef g():\n    return 2\n"
    new = "def g():\n    return 2\n\n\ndef f():\n    return 1\n"
    found = change(old, new)
    assert found & {"f", "g"}
    assert found <= {"f", "g"}


def test_an_unparsable_side_gives_none():
    assert changed_parts("def f(:\n", "def f():\n    pass\n") is None
    assert changed_parts("def f():\n    pass\n", "def f(:\n") is None
    assert changed_parts("def f(): pass\nX = 1\ndef f(): pass\n", "X = 2\n") is None


def test_a_new_file_takes_every_part_it_creates():
    found = changed_parts("", "import os\n\ndef f():\n    pass\n")
    assert found == PartChange(frozenset(), frozenset({"<import os>", "f"}), frozenset())


def test_crlf_file_change_is_mapped_like_lf():
    old = "def f():\r\n    return 1\r\n\r\ndef g():\r\n    return 2\r\n"
    assert change(old, old.replace("return 2", "return 3")) == {"g"}


def test_adding_a_final_newline_changes_the_last_part():
    old = "def f():\n    pass\ndef g():\n    return 2"
    assert change(old, old + "\n") == {"g"}


def generated_module(functions: int) -> str:
    body = "".join(
        f"\n\ndef func_{n}(x):\n    # step {n}\n    y = x + {n}\n    return y * 2\n"
        for n in range(functions)
    )
    return '"""Generated."""\n\nimport os\n' + body


def test_a_two_thousand_line_module_maps_a_one_function_edit_to_that_function():
    old = generated_module(340)
    assert old.count("\n") >= 2000
    new = old.replace("y = x + 200\n", "y = x + 200 + 1\n")
    assert changed_parts(old, new) == PartChange(frozenset({"func_200"}), frozenset(), frozenset())


def test_mapping_a_write_parses_each_side_once(monkeypatch: pytest.MonkeyPatch):
    calls: list[str] = []
    real = ast.parse

    def counting(source: str, *args: object, **kwargs: object) -> ast.Module:
        calls.append(source)
        return real(source)

    monkeypatch.setattr(python_parts.ast, "parse", counting)
    old = f"# {random.random()}\n{API}"  # texts no other test parsed: none is kept yet
    changed_parts(old, old.replace("return 1", "return 11"))
    assert len(calls) == 2


# -- the cost of a big module (issue 51: a big module blocked every lease) -------------------


def unique_module(kilobytes: int) -> str:
    """A generated module of about `kilobytes` KB that no other test parses."""
    text = f"# {random.random()}\n" + generated_module(1)
    functions = 1
    while len(text) < kilobytes * 1000:
        functions += 100
        text = text.split("\n", 1)[0] + "\n" + generated_module(functions)
    return text


def test_a_module_larger_than_the_bound_has_no_parts_so_it_is_taken_whole():
    big = unique_module(300)
    edited = big.replace("y = x + 7\n", "y = x + 77\n")
    assert parts_of(big) is None
    assert parts_of(big.encode()) is None
    assert changed_parts(big, edited) is None
    assert put_back_parts(edited.encode(), [(big.encode(), ["func_7"])]) is None
    assert len(big.encode()) > python_parts.MAX_PART_BYTES
    below = big[: python_parts.MAX_PART_BYTES]
    below = below[: below.rindex("\n\n\ndef ")] + "\n"
    assert parts_of(below) is not None  # at the bound and below: parts


@pytest.mark.parametrize("kilobytes", [1, 40])
def test_a_text_is_parsed_once_however_many_holders_put_it_back_and_however_often(
    monkeypatch: pytest.MonkeyPatch, kilobytes: int
):
    calls: list[str] = []
    real = ast.parse

    def counting(source: str, *args: object, **kwargs: object) -> ast.Module:
        calls.append(source)
        return real(source)

    monkeypatch.setattr(python_parts.ast, "parse", counting)
    pre = unique_module(kilobytes)  # four holders' pre-images of one file, as a view has them
    now = pre.replace("y = x + 5\n", "y = x + 50\n")  # the viewer's own change stays
    for n in (1, 2, 3, 4):
        now = now.replace(f"y = x + {n}\n", f"y = x + {n}0\n")
    taken = [(pre.encode(), [f"func_{n}"]) for n in (1, 2, 3, 4)]
    view = pre.replace("y = x + 5\n", "y = x + 50\n").encode()

    assert put_back_parts(now.encode(), taken) == view
    assert len(calls) == 3  # the pre-image, the current text and the result: once each
    assert put_back_parts(now.encode(), taken) == view
    assert len(calls) == 3  # the same view again: no parse


def test_a_parse_sets_off_no_garbage_collection_while_it_builds_the_tree(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import gc
    import threading

    text = unique_module(60)  # thousands of nodes: unpaused, several young collections
    collections: list[int] = []
    parsing, inside = threading.get_ident(), [False]
    real = python_parts._indexed

    def indexed(source: str) -> object:
        inside[0] = True
        try:
            return real(source)
        finally:
            inside[0] = False

    def counted(phase: str, info: dict[str, int]) -> None:
        # the parse's own, while it builds the tree: a collection once the collector is back
        # on, or one a server another test left in this process sets off on its own thread
        # (`gcpolicy`), is not the parse's
        if phase == "start" and inside[0] and threading.get_ident() == parsing:
            collections.append(info["generation"])

    monkeypatch.setattr(python_parts, "_indexed", indexed)
    gc.callbacks.append(counted)
    try:
        assert parts_of(text) is not None
    finally:
        gc.callbacks.remove(counted)

    assert collections == []  # each would walk the tree built so far


# -- restore_parts -----------------------------------------------------------------------------


def attempt(old: str, new: str) -> dict[str, Preimage]:
    found = changed_parts(old, new)
    assert found is not None
    taken = preimages(old, found.names)
    assert taken is not None
    return taken


def test_restoring_a_single_writers_change_gives_back_the_old_file():
    cases = [
        API.replace("return request", "return request.body"),
        API.replace("return 2", "return 3"),
        API + "\n\ndef extra():\n    return 4\n",
        API.replace("\n\nclass Router", "\n\ndef middle():\n    pass\n\n\nclass Router"),
        API.replace("def handle(request)", "def respond(request)"),
        API.replace("import os\n", "import os\nimport sys\n"),
        API.replace("The API module.", "The API."),
        API[: API.index("\n\nasync def serve")] + API[API.index("\n\nif __name__") :],
    ]
    for new in cases:
        assert restore_parts(new, attempt(API, new)) == API, new


def test_an_added_import_is_removed_on_restore_and_another_writers_import_stays():
    mine = API.replace("import os\n", "import os\nimport re\n")
    both = mine.replace("import re\n", "import re\nimport sys\n")
    assert restore_parts(mine, attempt(API, mine)) == API
    restored = restore_parts(both, attempt(API, mine))
    assert restored == API.replace("import os\n", "import os\nimport sys\n")


def test_restoring_a_reordered_import_block_puts_the_old_order_back():
    old = "import b\nimport a\n\n\ndef f():\n    pass\n"
    new = "import a\nimport b\nimport c\n\n\ndef f():\n    pass\n"
    both = new.replace("pass", "return 1")  # another task changed f meanwhile
    assert restore_parts(new, attempt(old, new)) == old
    assert restore_parts(both, attempt(old, new)) == old.replace("pass", "return 1")


def test_restoring_one_writer_keeps_the_other_writers_change():
    mine = API.replace("return request", "return request.body")
    both = mine.replace("return 2", "return 3")  # another task changed Router meanwhile
    restored = restore_parts(both, attempt(API, mine))
    assert restored == API.replace("return 2", "return 3")


def test_a_part_the_attempt_added_is_removed_and_another_writers_addition_stays():
    mine = API + "\n\ndef mine():\n    pass\n"
    both = mine + "\n\ndef theirs():\n    pass\n"
    restored = restore_parts(both, attempt(API, mine))
    assert restored == API + "\n\ndef theirs():\n    pass\n"


def test_a_part_added_above_another_is_removed_with_the_blank_lines_it_put_below_it():
    # the part below it owns those blank lines now (a part owns the lines above it); left
    # there, a patch made by removing the part does not apply where it was never added
    cases = [
        ("def seed():\n    return 0\n", "def added():\n    return 1\n\n\n"),  # at the top
        ("x = 1\ndef seed():\n    return 0\n", "def added():\n    return 1\n\n\n"),
        ("x = 1\n\n\ndef seed():\n    return 0\n", "def added():\n    pass\n\n\n\n"),
    ]
    for old, addition in cases:
        at = old.index("def seed")
        mine = old[:at] + addition + old[at:]
        both = mine.replace("return 0", "return 10")  # another task changed seed meanwhile
        assert put_back_parts(mine.encode(), [(old.encode(), ["added"])]) == old.encode()
        theirs = old.replace("return 0", "return 10").encode()
        assert put_back_parts(both.encode(), [(old.encode(), ["added"])]) == theirs


def test_two_parts_added_on_top_of_each_other_by_two_holders_are_both_removed_cleanly():
    old = "def seed():\n    return 0\n"
    first = "def one():\n    return 1\n\n\n" + old  # the second holder's pre-image
    both = "def two():\n    return 2\n\n\n" + first
    taken = [(first.encode(), ["two"]), (old.encode(), ["one"])]  # a patch's start
    assert put_back_parts(both.encode(), taken) == old.encode()


def test_parts_added_to_an_empty_module_are_all_removed():
    mine = "def added():\n    return 1\n\n\ndef seed():\n    return 0\n"
    assert restore_parts(mine, preimages("", {"added", "seed"}) or {}) == ""
    assert preimages("", {"added"}) == {"added": Preimage(None, None)}


def test_a_part_added_at_the_top_of_an_empty_module_leaves_no_blank_lines_on_the_part_below():
    # the empty pre-image knows no part below it: the part now first takes the blank lines
    # the removed one had at the top (none), not the separator the addition put below it
    # (the chaos run's seeds 11 and 17: a later task's patch did not apply at line 1)
    seed = "def seed():\n    return 0\n"
    later = seed + "\n\ndef g_y():\n    return 2\n"  # landed by others since the pre-image
    for theirs in (seed, later):
        mine = "def g_x():\n    return 1\n\n\n" + theirs
        assert put_back_parts(mine.encode(), [(b"", ["g_x"])]) == theirs.encode()
        two = "def g_w():\n    return 3\n\n\n" + mine  # two of this task's parts on top
        assert put_back_parts(two.encode(), [(b"", ["g_w", "g_x"])]) == theirs.encode()


def test_a_deleted_part_goes_back_after_the_part_that_preceded_it():
    start = API.index("\n\nasync def serve")
    end = API.index("\n\nif __name__")
    mine = API[:start] + API[end:]
    both = mine.replace("return 1", "return 11")
    restored = restore_parts(both, attempt(API, mine))
    assert restored == API.replace("return 1", "return 11")


def test_a_deleted_part_whose_predecessor_is_gone_goes_to_the_end():
    old = "def f():\n    pass\n\n\ndef g():\n    pass\n"
    taken = {"g": Preimage("\n\ndef g():\n    pass\n", after="gone")}
    assert restore_parts("def f():\n    pass\n", taken) == old


def test_a_deleted_first_part_goes_back_first():
    old = '"""Doc."""\nimport os\n'
    new = "import os\n"
    assert restore_parts(new, attempt(old, new)) == old


def test_restore_adds_a_newline_before_a_part_put_after_a_last_line_without_one():
    taken = {"g": Preimage("def g():\n    pass\n", after="f")}
    assert restore_parts("def f():\n    pass", taken) == "def f():\n    pass\ndef g():\n    pass\n"


def test_restore_on_an_unparsable_or_ambiguous_file_gives_none():
    taken = {"f": Preimage("def f():\n    pass\n", after=None)}
    assert restore_parts("def f(:\n", taken) is None
    assert restore_parts("def f(): pass\nX = 1\ndef f(): pass\n", taken) is None


def test_restore_whose_result_would_not_hold_the_pre_images_gives_none():
    # The pre-image of a docstring put back after a statement is no longer the header.
    taken = {"<header>": Preimage('"""Doc."""\n', after="x")}
    assert restore_parts("x = 1\n", taken) is None
    assert restore_parts("x = 1\n", {"y": Preimage("def y(:\n", after="x")}) is None


def test_preimages_of_an_unparsable_file_are_none():
    assert preimages("def f(:\n", {"f"}) is None


def test_preimages_record_text_and_predecessor_and_none_for_added_names():
    taken = preimages(API, {"handle", "new"})
    assert taken == {
        "handle": Preimage(part(API, "handle").text, after="LIMIT", before="Router"),
        "new": Preimage(None, after=None),
    }


# -- boundary ----------------------------------------------------------------------------------


def test_the_parts_room_imports_only_the_standard_library_and_itself():
    room = Path(parts_room.__file__).parent
    for module in sorted(room.glob("*.py")):
        imported = {
            (alias.name if isinstance(node, ast.Import) else node.module or "")
            for node in ast.walk(ast.parse(module.read_text(encoding="utf-8")))
            if isinstance(node, ast.Import | ast.ImportFrom)
            for alias in node.names
        }
        outside = {
            name
            for name in imported
            if name.split(".")[0] not in {*sys.stdlib_module_names, "__future__"}
            and not name.startswith("codefleet.parts")
            and name.split(".")[0] != "tree_sitter"
        }
        assert outside == set(), (
            f"{module.name} imports {outside}: parts run in the runner's gate and in the "
            "server: the standard library only, and tree-sitter (pinned, compiled) to parse"
        )


# -- a referee over many small random edits (seeded, so each run is the same) ------------------


def mutated(rng: random.Random, text: str) -> str:
    lines = text.splitlines(keepends=True)
    for _ in range(rng.randint(1, 3)):
        k = rng.randrange(len(lines))
        match rng.randrange(5):
            case 0:
                del lines[k]
            case 1:
                lines.insert(k, lines[rng.randrange(len(lines))])
            case 2:
                lines.insert(k, "\n")
            case 3:
                lines[k] = lines[k].replace("x", "z", 1)
            case _:
                j = rng.randrange(len(lines))
                lines[k], lines[j] = lines[j], lines[k]
    return "".join(lines)


def without_leading_blanks(text: str) -> str:
    return text.lstrip("\r\n \t")


def test_over_random_edits_no_part_outside_the_change_differs_and_restore_puts_every_part_back():
    base = '"""Doc."""\n\nimport os\n\nX = 1\n' + "".join(
        f"\n\n# about f{k}\n@dec\ndef f{k}(x):\n    y = x + {k}\n\n    return y\n" for k in range(6)
    )
    base += "\n\nif __name__ == '__main__':\n    f0(1)\n"
    rng = random.Random(42)
    mapped = 0
    for _ in range(600):
        new = mutated(rng, base)
        found = changed_parts(base, new)
        if found is None:
            continue
        mapped += 1
        old_parts = {p.name: p.text for p in parts_of(base) or []}
        new_parts = {p.name: p.text for p in parts_of(new) or []}
        for name in (old_parts.keys() | new_parts.keys()) - found.names:
            assert name in old_parts and name in new_parts, (name, new)
            assert without_leading_blanks(old_parts[name]) == without_leading_blanks(
                new_parts[name]
            ), (name, new)
        restored = restore_parts(new, preimages(base, found.names) or {})
        if restored is not None:  # every part's text is back; a moved one may stay moved
            assert sorted(map(without_leading_blanks, restored_texts(restored))) == sorted(
                map(without_leading_blanks, old_parts.values())
            ), new
    assert mapped > 400


def restored_texts(text: str) -> list[str]:
    return [p.text for p in parts_of(text) or []]


# -- the parser inside threads (CPython 3.11: python/cpython#106905) -------------------------


def test_modules_are_parsed_one_at_a_time_across_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading
    import time

    real_parse, inside, most = ast.parse, [0], [0]

    def slow_parse(text: str, *args: object, **kwargs: object) -> ast.Module:
        inside[0] += 1
        most[0] = max(most[0], inside[0])
        time.sleep(0.01)  # long enough for another thread to come in, if it may
        inside[0] -= 1
        return real_parse(text, *args, **kwargs)

    monkeypatch.setattr(python_parts.ast, "parse", slow_parse)
    texts = [f"# {random.random()}\ndef f():\n    return 1\n" for _ in range(4)]  # none kept
    threads = [threading.Thread(target=parts_of, args=(text,)) for text in texts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert most[0] == 1


def test_a_parser_fault_is_a_module_without_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    real = ast.parse
    text = f"# {random.random()}\ndef f():\n    return 1\n"  # no other test mapped it: not kept

    def faulty(source: str, *args: object, **kwargs: object) -> ast.Module:
        if source != text:  # anything else (pytest's own report of a failure) parses as usual
            return real(source, *args, **kwargs)
        raise SystemError("AST constructor recursion depth mismatch (before=132, after=199)")

    monkeypatch.setattr(python_parts.ast, "parse", faulty)

    assert parts_of(text) is None  # the whole file, safely
