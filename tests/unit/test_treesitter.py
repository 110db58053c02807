"""`parts.treesitter`: what no tree-sitter mapper maps for certain, texts mapped once, and
a referee over random edits."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from test_parts import mutated

from codefleet.parts import treesitter
from codefleet.parts.changes import changed_parts
from codefleet.parts.golang import GO
from codefleet.parts.java import JAVA
from codefleet.parts.kinds import MAPPERS, mapper_for
from codefleet.parts.putback import parts_of, put_back_parts
from codefleet.parts.rust import RUST
from codefleet.parts.treesitter import TreeSitterParts
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


def test_a_text_large_or_small_is_mapped_once_however_often_it_is_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    mark = f"// {random.random()}\n"  # texts no other test mapped: none is kept yet
    big = mark + "".join(f"export const v{n} = {n};\n" for n in range(1000))
    small = mark + TS
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
    assert mapped.count(len(small.encode())) == 1  # a small one too (decision 0171)


def test_the_docs_give_each_kind_of_file_its_mappers_size_bound() -> None:
    """The docs' table of languages (the leases-and-parts page): every suffix has a mapper,
    with that bound."""
    docs = (Path(__file__).parents[2] / "docs").glob("*.md")
    doc = "\n".join(page.read_text() for page in sorted(docs))
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


# -- a referee over many small random edits, per language (seeded: each run is the same) -----

REFEREE_BASES = {
    "typescript": (
        TYPESCRIPT,
        '// Doc.\nimport { a } from "a";\nimport b from "b";\n\nexport const X = 1;\n'
        + "".join(
            f"\n// about f{k}\nexport function f{k}(x: number): number {{\n  const y = x + {k};\n"
            f"\n  return y;\n}}\n"
            for k in range(6)
        )
        + "\nconsole.log(f0(1));\n",
    ),
    "go": (
        GO,
        '// Doc.\npackage a\n\nimport "fmt"\n\nvar X = 1\n'
        + "".join(
            f"\n// F{k} is about x.\nfunc (s *S) F{k}(x int) int {{\n\ty := x + {k}\n\n\treturn y\n}}\n"
            for k in range(6)
        ),
    ),
    "rust": (
        RUST,
        "//! Doc.\nuse std::fmt;\nuse std::io;\n\nconst X: i32 = 1;\n"
        + "".join(
            f"\n/// About f{k}.\n#[inline]\npub fn f{k}(x: i32) -> i32 {{\n    let y = x + {k};\n"
            f"\n    y\n}}\n"
            for k in range(6)
        ),
    ),
    "java": (
        JAVA,
        "package a;\n\nimport java.util.List;\nimport java.util.Map;\n"
        + "".join(
            f"\n/** About F{k}. */\nclass F{k} {{\n    int f(int x) {{\n        int y = x + {k};\n"
            f"\n        return y;\n    }}\n}}\n"
            for k in range(6)
        ),
    ),
}


def bare(text: str) -> str:
    """A part's text without the blank lines around it: blank lines belong to no part in
    particular (`parts.model`), and the file's tail goes to whichever part is last."""
    return text.strip("\r\n \t")


@pytest.mark.parametrize("language", list(REFEREE_BASES))
def test_over_random_edits_no_part_outside_the_change_differs_and_a_restore_puts_them_back(
    language: str,
) -> None:
    mapper, base = REFEREE_BASES[language]
    old_parts = {p.name: p.text for p in parts_of(base, mapper) or []}
    rng = random.Random(42)
    mapped = 0
    for _ in range(300):
        new = mutated(rng, base)
        found = changed_parts(base, new, mapper)
        if found is None:  # unparsable or ambiguous: the whole file
            continue
        mapped += 1
        new_parts = {p.name: p.text for p in parts_of(new, mapper) or []}
        for name in (old_parts.keys() | new_parts.keys()) - found.names:
            assert name in old_parts and name in new_parts, (name, new)
            assert bare(old_parts[name]) == bare(new_parts[name]), (name, new)
        restored = put_back_parts(new.encode(), [(base.encode(), found.names)], mapper)
        if restored is not None:  # every part's text is back; a moved one may stay moved
            back = [p.text for p in parts_of(restored, mapper) or []]
            assert sorted(map(bare, back)) == sorted(map(bare, old_parts.values())), new
    assert mapped > 60, mapped


@pytest.mark.parametrize(
    ("mapper", "header", "body"),
    [
        (GO, "// Code generated by protoc-gen-go. DO NOT EDIT.\n\n", "package a\n\nfunc F() {}\n"),
        (TYPESCRIPT, "/** @generated by graphql-codegen */\n", TS),
        (JAVA, "// Auto-generated from schema.json\n", "package a;\n\nclass A {}\n"),
    ],
    ids=["go", "ts", "java"],
)
def test_a_file_whose_header_says_it_is_generated_has_no_parts(
    mapper: TreeSitterParts, header: str, body: str
) -> None:
    assert parts_of(body, mapper) is not None
    assert parts_of(header + body, mapper) is None
