"""`parts.golang`: the parts of a Go file, found with tree-sitter."""

from __future__ import annotations

from codefleet.parts.changes import changed_parts
from codefleet.parts.golang import GO, MAX_PART_BYTES
from codefleet.parts.kinds import mapper_for
from codefleet.parts.model import PartKind
from codefleet.parts.putback import parts_of, put_back_parts

HANDLERS = """\
// Package api serves requests.
package api

import "fmt"

import (
\t"net/http"
\tstr "strings"
)

// Server serves.
type Server struct{ name string }

type (
\tID    int
\tNames []string
)

var registry, count = map[string]int{}, 0

var _ fmt.Stringer = (*Server)(nil)

const Limit = 10

// Handle handles one request.
func (s *Server) Handle(w http.ResponseWriter, r *http.Request) {
\tfmt.Fprintln(w, str.ToUpper(s.name))
}

func (s Server) Close() error { return nil }

func (b *Box[T]) Get() T { var zero T; return zero }

func Route(path string) string {
\treturn path
}
"""


def names(text: str) -> list[str]:
    return [p.name for p in parts_of(text, GO) or []]


def test_a_go_file_is_its_header_each_import_and_each_declaration_methods_by_their_type() -> None:
    assert names(HANDLERS) == [
        "<header>",
        '<import "fmt">',
        '<import ( "net/http" str "strings" )>',
        "Server",
        "ID,Names",
        "registry,count",
        "<var _ fmt.Stringer = (*Server)(nil)>",
        "Limit",
        "Server.Handle",
        "Server.Close",
        "Box.Get",
        "Route",
    ]


def test_the_header_is_the_package_clause_and_a_doc_comment_is_its_declarations() -> None:
    parts = {p.name: p for p in parts_of(HANDLERS, GO) or []}

    assert parts["<header>"].text == "// Package api serves requests.\npackage api\n"
    assert parts["Server.Handle"].text.startswith("\n// Handle handles one request.\nfunc")
    assert parts["Server.Handle"].kind is PartKind.FUNCTION
    assert parts["Server"].kind is PartKind.CLASS
    assert parts['<import "fmt">'].kind is PartKind.IMPORTS
    assert "".join(p.text for p in parts.values()) == HANDLERS


def test_an_unparsable_file_two_inits_apart_and_a_file_over_the_bound_have_no_parts() -> None:
    assert parts_of(HANDLERS.replace("return path\n", "return path +\n"), GO) is None
    assert parts_of(HANDLERS.replace("func Route(", "func Route(("), GO) is None
    inits = "package a\n\nfunc init() {}\n\nfunc a() {}\n\nfunc init() {}\n"
    assert parts_of(inits, GO) is None
    blanks = "package a\n\nvar _ A = (*T)(nil)\n\nfunc a() {}\n\nvar _ B = (*T)(nil)\n"
    assert parts_of(blanks, GO) is not None  # interface assertions: each by its own text
    big = "package a\n" + "".join(f"const C{n} = {n}\n" for n in range(MAX_PART_BYTES // 12))
    assert len(big.encode()) > MAX_PART_BYTES and parts_of(big, GO) is None


def test_a_write_to_one_method_takes_it_and_another_holders_change_stays_on_put_back() -> None:
    mine = HANDLERS.replace("return nil", 'return fmt.Errorf("closed")')
    both = mine.replace("return path\n", "return str.TrimSpace(path)\n")

    change = changed_parts(HANDLERS, mine, GO)
    assert change is not None and change.names == {"Server.Close"}
    restored = put_back_parts(both.encode(), [(HANDLERS.encode(), ["Server.Close"])], GO)
    assert restored == HANDLERS.replace("return path\n", "return str.TrimSpace(path)\n").encode()


def test_a_go_file_has_the_go_mapper() -> None:
    assert mapper_for("cmd/server/handlers.go") is GO
