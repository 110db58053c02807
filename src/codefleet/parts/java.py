"""Java's parts: a file's top-level types, found with tree-sitter.

The parts (`parts.treesitter`): `<header>` (the comments and the `package` declaration),
each `import` by its own text, each top-level `class`, `interface`, `enum`, `record` and
`@interface` by its name (its annotations, modifiers and the `/** docs */` above it are
its; its members stay in it), and anything else by its own text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from codefleet.parts.model import PartKind
from codefleet.parts.treesitter import Syntax, TreeSitterParts, text_of

if TYPE_CHECKING:
    from codefleet.parts.treesitter import Node

__all__ = ["JAVA", "MAX_PART_BYTES"]

# A file larger than this (UTF-8 bytes) has no parts: it is leased, restored and patched whole
# (docs/decisions/0163-parts-in-every-language-on-tree-sitter.md has the measurements).
MAX_PART_BYTES: Final = 96_000

TYPES: Final = frozenset(
    {
        "class_declaration",
        "interface_declaration",
        "enum_declaration",
        "record_declaration",
        "annotation_type_declaration",
    }
)


def name_of(node: Node) -> tuple[str, PartKind] | None:
    """A top-level type's name; None: a statement, named by its text."""
    name = node.child_by_field_name("name")
    return (text_of(name), PartKind.CLASS) if node.type in TYPES and name is not None else None


JAVA: Final = TreeSitterParts(
    Syntax(
        "java",
        MAX_PART_BYTES,
        name_of,
        header=frozenset({"package_declaration"}),
        imports=frozenset({"import_declaration"}),
    )
)
