"""Which mapper tells a file's parts: one per kind of file, by its name.

A file no mapper takes is leased, restored, patched and viewed whole. Adding a
language is one mapper here (`parts.model.PartMapper`): Python on `ast`, the others on
tree-sitter (`parts.treesitter`), each grammar loaded as this module is imported, so a
broken grammar package fails here, at start, naming itself (`parts.grammars`).
"""

from __future__ import annotations

from typing import Final

from codefleet.parts.golang import GO
from codefleet.parts.java import JAVA
from codefleet.parts.model import PartMapper
from codefleet.parts.python import PYTHON
from codefleet.parts.rust import RUST
from codefleet.parts.typescript import JAVASCRIPT, TSX, TYPESCRIPT

__all__ = ["MAPPERS", "mapper_for"]

# (file name suffixes, the mapper of those files)
MAPPERS: Final[tuple[tuple[tuple[str, ...], PartMapper], ...]] = (
    ((".py", ".pyi"), PYTHON),
    ((".ts", ".mts", ".cts"), TYPESCRIPT),
    ((".tsx",), TSX),
    ((".js", ".mjs", ".cjs", ".jsx"), JAVASCRIPT),
    ((".go",), GO),
    ((".rs",), RUST),
    ((".java",), JAVA),
)


def mapper_for(path: str) -> PartMapper | None:
    """The mapper of the file at `path`, or None: a kind of file with no parts."""
    return next((mapper for suffixes, mapper in MAPPERS if path.endswith(suffixes)), None)
