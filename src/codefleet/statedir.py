"""Where CodeFleet keeps its own files in the tree it serves: `.codefleet/`.

The working tree defaults to the current directory, so the database and the
run directory default to `.codefleet/codefleet.db` and `.codefleet/runs`
inside it. When CodeFleet creates a `.codefleet` directory it puts a
`.gitignore` of `*` in it, so `git status` in the user's repository stays
clean without editing their own `.gitignore`. Both paths are protected from
agents' writes like any database and run directory (see `paths.TreeRoot`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

__all__ = ["STATE_DIR", "prepare_dirs"]

STATE_DIR: Final = ".codefleet"
IGNORE_ALL: Final = "# CodeFleet's database and run records; never committed.\n*\n"


def prepare_dirs(*dirs: Path) -> None:
    """Create each directory (and its parents); a new `.codefleet` gets its `.gitignore`."""
    for directory in dirs:
        for ancestor in (*reversed(directory.parents), directory):
            if ancestor.name == STATE_DIR and not ancestor.exists():
                ancestor.mkdir(parents=True)
                (ancestor / ".gitignore").write_text(IGNORE_ALL)
        directory.mkdir(parents=True, exist_ok=True)
