"""`parts.java`: the parts of a Java file, found with tree-sitter."""

from __future__ import annotations

from codefleet.parts.changes import changed_parts
from codefleet.parts.java import JAVA, MAX_PART_BYTES
from codefleet.parts.kinds import mapper_for
from codefleet.parts.model import PartKind
from codefleet.parts.putback import parts_of, put_back_parts

ROUTES = """\
/* Licensed under MIT. */
package com.example.api;

import java.util.List;
import static java.lang.Math.max;

/** The routes. */
@Component
public class Routes {
    int handle(int x) { return x; }
}

interface Handler { int handle(int x); }

enum Verb { GET, POST }

record Route(String path) {}

@interface Traced {}
"""


def names(text: str) -> list[str]:
    return [p.name for p in parts_of(text, JAVA) or []]


def test_a_java_file_is_its_header_each_import_and_each_top_level_type() -> None:
    assert names(ROUTES) == [
        "<header>",
        "<import java.util.List;>",
        "<import static java.lang.Math.max;>",
        "Routes",
        "Handler",
        "Verb",
        "Route",
        "Traced",
    ]


def test_the_header_is_the_package_and_annotations_and_docs_are_the_types() -> None:
    parts = {p.name: p for p in parts_of(ROUTES, JAVA) or []}

    assert parts["<header>"].text == "/* Licensed under MIT. */\npackage com.example.api;\n"
    assert parts["Routes"].text.startswith("\n/** The routes. */\n@Component\npublic class")
    assert parts["Routes"].kind is PartKind.CLASS
    assert parts["<import java.util.List;>"].kind is PartKind.IMPORTS
    assert "".join(p.text for p in parts.values()) == ROUTES


def test_an_unparsable_file_two_types_of_one_name_apart_and_one_over_the_bound_have_none() -> None:
    assert parts_of(ROUTES.replace("return x; }", "return x; "), JAVA) is None
    assert parts_of(ROUTES + "class Handler {}\n", JAVA) is None
    big = "package a;\n" + "".join(f"class C{n} {{}}\n" for n in range(MAX_PART_BYTES // 12))
    assert len(big.encode()) > MAX_PART_BYTES and parts_of(big, JAVA) is None


def test_a_write_to_one_type_takes_it_and_another_holders_change_stays_on_put_back() -> None:
    mine = ROUTES.replace("GET, POST", "GET, POST, PUT")
    both = mine.replace("return x;", "return x + 1;")

    change = changed_parts(ROUTES, mine, JAVA)
    assert change is not None and change.names == {"Verb"}
    restored = put_back_parts(both.encode(), [(ROUTES.encode(), ["Verb"])], JAVA)
    assert restored == ROUTES.replace("return x;", "return x + 1;").encode()


def test_a_java_file_has_the_java_mapper() -> None:
    assert mapper_for("src/main/java/com/example/Routes.java") is JAVA
