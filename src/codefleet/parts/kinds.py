"""Which mapper tells a file's parts: one per kind of file, by its name.

A file no mapper takes is leased, restored, patched and viewed whole. Adding a
language is one mapper here (`parts.model.PartMapper`). Standard library only.
"""

from __future__ import annotations

from typing import Final

from codefleet.parts.model import PartMapper
from codefleet.parts.python import PYTHON

__all__ = ["MAPPERS", "mapper_for"]

# (file name suffixes, the mapper of those files)
MAPPERS: Final[tuple[tuple[tuple[str, ...], PartMapper], ...]] = (((".py", ".pyi"), PYTHON),)


def mapper_for(path: str) -> PartMapper | None:
    """The mapper of the file at `path`, or None: a kind of file with no parts."""
    return next((mapper for suffixes, mapper in MAPPERS if path.endswith(suffixes)), None)
