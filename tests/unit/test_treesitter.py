"""`parts.treesitter`: what no tree-sitter mapper maps for certain, and large texts mapped once."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from codefleet.parts import treesitter
from codefleet.parts.golang import GO
from codefleet.parts.java import JAVA
from codefleet.parts.kinds import MAPPERS, mapper_for
from codefleet.parts.putback import parts_of
from codefleet.parts.typescript import TYPESCRIPT

TS = 'import { a } from "a";\n\nexport function f() {\n  return a;\n}\n\nconst x = 1;\n'


def test_a_tree_with_a_missing_node_has_no_parts() -> None:
    assert parts_of("class A { int x = 1; }\n", JAVA) is not None
    assert parts_of("class A { int x = 1 }\n", JAVA) is None  # (MISSING ";"), no ERROR node


@pytest.mark.parametrize(
    "text",
    [
        b"\xef\xbb\xbf" + TS.encode(),  # a byte-order mark
        TS.encode().replace(b"return a", b"return '\xff'"),  # not UTF-8
        TS.replace("\n", "\r"),  # lone CRs: lines tree-sitter does not count
        TS.replace("\n", "\n\r"),
    ],
    ids=["bom", "not-utf8", "cr", "lf-cr"],
)
def test_a_text_whose_lines_or_bytes_are_not_certain_has_no_parts(text: str | bytes) -> None:
    assert parts_of(text, TYPESCRIPT) is None


def test_crlf_lines_are_mapped_as_they_are() -> None:
    crlf = TS.replace("\n", "\r\n")
    parts = parts_of(crlf, TYPESCRIPT)

    assert parts is not None and [p.name for p in parts] == ['<import { a } from "a";>', "f", "x"]
    assert "".join(p.text for p in parts) == crlf


def test_an_empty_file_has_no_parts_and_a_file_of_comments_is_its_header() -> None:
    assert parts_of("", GO) == []
    parts = parts_of("// Package a.\npackage a\n", GO)
    assert parts is not None and [(p.name, p.text) for p in parts] == [
        ("<header>", "// Package a.\npackage a\n")
    ]


def test_a_large_text_is_mapped_once_however_often_it_is_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    big = "".join(f"export const v{n} = {n};\n" for n in range(treesitter.KEEP_PARSED_BYTES // 20))
    small = TS
    mapped: list[int] = []
    indexed = treesitter.TreeSitterParts._indexed

    def counted(self: treesitter.TreeSitterParts, source: str, data: bytes) -> object:
        mapped.append(len(data))
        return indexed(self, source, data)

    monkeypatch.setattr(treesitter.TreeSitterParts, "_indexed", counted)
    for _ in range(3):
        assert parts_of(big, TYPESCRIPT) is not None
        assert parts_of(small, TYPESCRIPT) is not None

    assert mapped.count(len(big.encode())) == 1  # kept mapped
    assert mapped.count(len(small.encode())) == 3  # a small text costs little: mapped again


def test_the_docs_give_each_kind_of_file_its_mappers_size_bound() -> None:
    """docs/how-it-works.md's table of languages: every suffix has a mapper, with that bound."""
    doc = (Path(__file__).parents[2] / "docs" / "how-it-works.md").read_text()
    rows = [line for line in doc.splitlines() if line.startswith("| ") and "KB |" in line]
    said = {
        suffix: int(bound) * 1000
        for row in rows
        for bound in re.findall(r"\| (\d+) KB \|$", row)
        for suffix in re.findall(r"`(\.[a-z]+)`", row.split("|")[1])
    }

    assert len(said) == 13, said
    assert {suffix: getattr(mapper_for(f"x{suffix}"), "max_bytes", None) for suffix in said} == said
    assert {s for suffixes, _ in MAPPERS for s in suffixes} == set(said)
