"""Rust's parts: a module's top-level items, found with tree-sitter.

The parts (`parts.treesitter`): `<header>` (the comments, `//!` docs and `#![...]`
attributes above the first item), each `use` and `extern crate` by its own text, each
`fn`, `struct`, `enum`, `union`, `trait`, `mod`, `const`, `static`, `type` and
`macro_rules!` by its name, each `impl` block by what it implements (`impl Point`,
`impl fmt::Display for Point`, `impl<T> From<T> for Wrapper<T>`: its methods stay in it),
and anything else by its own text. `#[...]` attributes and `///` docs above an item are
its. Two `impl` blocks of one name apart (or two `#[cfg]` twins apart) are one name in
two places, so such a file is leased whole.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from codefleet.parts.model import PartKind
from codefleet.parts.treesitter import Syntax, TreeSitterParts, text_of

if TYPE_CHECKING:
    from codefleet.parts.treesitter import Node

__all__ = ["MAX_PART_BYTES", "RUST"]

# A file larger than this (UTF-8 bytes) has no parts: it is leased, restored and patched whole
# (docs/decisions/0163-parts-in-every-language-on-tree-sitter.md has the measurements).
MAX_PART_BYTES: Final = 96_000

KINDS: Final = {
    "function_item": PartKind.FUNCTION,
    "function_signature_item": PartKind.FUNCTION,
    "macro_definition": PartKind.FUNCTION,
    "struct_item": PartKind.CLASS,
    "enum_item": PartKind.CLASS,
    "union_item": PartKind.CLASS,
    "trait_item": PartKind.CLASS,
    "mod_item": PartKind.CLASS,
    "type_item": PartKind.CLASS,
    "const_item": PartKind.ASSIGNMENT,
    "static_item": PartKind.ASSIGNMENT,
}


def name_of(node: Node) -> tuple[str, PartKind] | None:
    """A top-level item's name and kind; None: a statement, named by its text."""
    if node.type == "impl_item":
        return _impl_name(node), PartKind.CLASS
    name = node.child_by_field_name("name")
    kind = KINDS.get(node.type)
    return None if name is None or kind is None else (text_of(name), kind)


def _impl_name(node: Node) -> str:
    """`impl Type`, `impl Trait for Type`, with the block's own type parameters."""
    trait, target = node.child_by_field_name("trait"), node.child_by_field_name("type")
    params = node.child_by_field_name("type_parameters")
    head = "impl" + (text_of(params) if params is not None else "")
    negated = "!" if any(c.type == "!" for c in node.children) else ""
    implemented = f"{negated}{text_of(trait)} for " if trait is not None else ""
    return f"{head} {implemented}{text_of(target) if target is not None else '?'}"


RUST: Final = TreeSitterParts(
    Syntax(
        "rust",
        MAX_PART_BYTES,
        name_of,
        header=frozenset({"inner_attribute_item"}),
        imports=frozenset({"use_declaration", "extern_crate_declaration"}),
        attached=frozenset({"attribute_item"}),
    )
)
