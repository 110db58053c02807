"""Go's parts: a file's top-level declarations, found with tree-sitter.

The parts (`parts.treesitter`): `<header>` (the comments and the `package` clause), each
`import` declaration by its own text (a parenthesized group is one declaration), each
function by its name, each method by its receiver's type and its name (`api.go::Server.Handle`,
whether the receiver is `s *Server` or `Server[T]`), each `type`, `var` and `const`
declaration by the names it declares (`A,B` for a group; one that declares only `_`, an
interface assertion, by its own text), and anything else by its own text. Adjacent
same-named declarations are one part; two `func init()` apart are one name in two
places, so such a file is leased whole.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from codefleet.parts.model import PartKind
from codefleet.parts.treesitter import Syntax, TreeSitterParts, text_of

if TYPE_CHECKING:
    from codefleet.parts.treesitter import Node

__all__ = ["GO", "MAX_PART_BYTES"]

# A file larger than this (UTF-8 bytes) has no parts: it is leased, restored and patched whole
# (docs/decisions/0163-parts-in-every-language-on-tree-sitter.md has the measurements).
MAX_PART_BYTES: Final = 96_000

# declaration -> (the spec nodes that name, the kind of part)
DECLARATIONS: Final = {
    "type_declaration": (frozenset({"type_spec", "type_alias"}), PartKind.CLASS),
    "var_declaration": (frozenset({"var_spec"}), PartKind.ASSIGNMENT),
    "const_declaration": (frozenset({"const_spec"}), PartKind.ASSIGNMENT),
}


def name_of(node: Node) -> tuple[str, PartKind] | None:
    """A top-level declaration's name and kind; None: a statement, named by its text."""
    name = node.child_by_field_name("name")
    if node.type == "function_declaration" and name is not None:
        return text_of(name), PartKind.FUNCTION
    if node.type == "method_declaration" and name is not None:
        receiver = _receiver_type(node)
        return (f"{receiver}.{text_of(name)}", PartKind.FUNCTION) if receiver else None
    if node.type in DECLARATIONS:
        specs, kind = DECLARATIONS[node.type]
        names = [
            text_of(n) for spec in _specs(node, specs) for n in spec.children_by_field_name("name")
        ]
        if not names or set(names) == {"_"}:  # `var _ Handler = (*Server)(nil)`: by its text
            return None
        return ",".join(names), kind
    return None


def _specs(node: Node, types: frozenset[str]) -> list[Node]:
    """The spec nodes of a declaration, in a parenthesized group or not."""
    found: list[Node] = []
    for child in node.named_children:
        if child.type in types:
            found.append(child)
        elif child.type.endswith("_spec_list"):
            found += [c for c in child.named_children if c.type in types]
    return found


def _receiver_type(node: Node) -> str | None:
    """A method's receiver type, without its pointer or its type arguments (`*Box[T]`: `Box`)."""
    receiver = node.child_by_field_name("receiver")
    params = (
        []
        if receiver is None
        else [c for c in receiver.named_children if c.type == "parameter_declaration"]
    )
    kind = params[0].child_by_field_name("type") if len(params) == 1 else None
    while kind is not None and kind.type in ("pointer_type", "generic_type", "parenthesized_type"):
        kind = kind.child_by_field_name("type") or next(iter(kind.named_children), None)
    return text_of(kind) if kind is not None and kind.type == "type_identifier" else None


GO: Final = TreeSitterParts(
    Syntax(
        "go",
        MAX_PART_BYTES,
        name_of,
        header=frozenset({"package_clause"}),
        imports=frozenset({"import_declaration"}),
    )
)
