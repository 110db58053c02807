"""TypeScript's, TSX's and JavaScript's parts: a module's top-level nodes, found with tree-sitter.

The parts (`parts.treesitter`): `<header>` (the comments and a `#!` line above the first
statement), each `import` statement by its own text, each function, class, interface,
type alias, enum and namespace by its name (`export`, `export default`'s `default`,
`declare` and decorators are the definition's), each `const`/`let`/`var` by the names it
binds (`a,b` for `const a = 1, b = 2`), and any other statement by its own text
(`<export * from "./x";>`). Adjacent same-named declarations (overload signatures and
their implementation) are one part. JSX is parsed in `.js`/`.jsx` files and in `.tsx`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from codefleet.parts.model import PartKind
from codefleet.parts.treesitter import Syntax, TreeSitterParts, text_of

if TYPE_CHECKING:
    from codefleet.parts.treesitter import Node

__all__ = ["JAVASCRIPT", "MAX_PART_BYTES", "TSX", "TYPESCRIPT"]

# A file larger than this (UTF-8 bytes) has no parts: it is leased, restored and patched whole
# (docs/decisions/0163-parts-in-every-language-on-tree-sitter.md has the measurements).
MAX_PART_BYTES: Final = 96_000

FUNCTIONS: Final = frozenset(
    {"function_declaration", "generator_function_declaration", "function_signature"}
)
TYPES: Final = frozenset(
    {
        "class_declaration",
        "abstract_class_declaration",
        "interface_declaration",
        "type_alias_declaration",
        "enum_declaration",
        "internal_module",
        "module",
    }
)
BINDINGS: Final = frozenset({"lexical_declaration", "variable_declaration"})
WRAPPERS: Final = frozenset({"export_statement", "ambient_declaration", "expression_statement"})
PATTERN_NAMES: Final = frozenset({"identifier", "shorthand_property_identifier_pattern"})
# pattern nodes of which only one side binds names: node type -> that side's field
ONE_SIDE: Final = {
    "pair_pattern": "value",
    "object_assignment_pattern": "left",
    "assignment_pattern": "left",
}


def name_of(node: Node) -> tuple[str, PartKind] | None:
    """A top-level definition's name and kind; None: a statement, named by its text."""
    if node.type == "export_statement" and any(c.type == "default" for c in node.children):
        return "default", PartKind.FUNCTION
    if node.type in WRAPPERS:
        inner = node.child_by_field_name("declaration") or next(iter(node.named_children), None)
        return None if inner is None or inner.type in WRAPPERS else name_of(inner)
    if node.type in BINDINGS:
        names = [
            n for d in node.named_children if d.type == "variable_declarator" for n in _bound(d)
        ]
        return (",".join(names), PartKind.ASSIGNMENT) if names else None
    name = node.child_by_field_name("name")
    if name is None or name.type == "string":  # `declare module "m"`: by its text
        return None
    if node.type in FUNCTIONS:
        return text_of(name), PartKind.FUNCTION
    return (text_of(name), PartKind.CLASS) if node.type in TYPES else None


def _bound(declarator: Node) -> list[str]:
    """The names a declarator binds: its identifier, or every name in its pattern."""
    target = declarator.child_by_field_name("name")
    if target is None:
        return []
    if target.type == "identifier":
        return [text_of(target)]
    return [text_of(n) for n in _descendants(target) if n.type in PATTERN_NAMES]


def _descendants(node: Node) -> list[Node]:
    found: list[Node] = []
    todo = list(node.named_children)
    while todo:
        child = todo.pop(0)
        side = ONE_SIDE.get(child.type)
        if side is not None:  # `{ key: name }`, `{ name = fallback }`: one side binds
            bound = child.child_by_field_name(side)
            todo[:0] = [bound] if bound is not None else []
            continue
        found.append(child)
        todo[:0] = child.named_children
    return found


def _syntax(grammar: str) -> Syntax:
    return Syntax(grammar, MAX_PART_BYTES, name_of, imports=frozenset({"import_statement"}))


TYPESCRIPT: Final = TreeSitterParts(_syntax("typescript"))
TSX: Final = TreeSitterParts(_syntax("tsx"))
JAVASCRIPT: Final = TreeSitterParts(_syntax("javascript"))
