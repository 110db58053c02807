"""Path canonicalization: the one rule for turning a spelling into a lease key.

Both sides use it: the pre-write path normalizes before asking, and the server
canonicalizes every path it receives, so `./a.py`, `x/../a.py`, `a//b.py` and
the absolute spelling of one file always map to the same key. Symlinks are
resolved, so a link cannot smuggle a write outside the tree. A lease key is a
relative POSIX path under the resolved tree root; anything that resolves
outside it, into `.git`, onto a protected file (the database, the run
directory), onto a directory, or that is not a usable path at all, is refused
with a `PathRejected` naming the reason.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from codefleet.models import DenyReason

__all__ = ["MAX_PATH_CHARS", "PathRejected", "TreeRoot"]

MAX_PATH_CHARS = 4096
# Writing SQLite's side files rewrites the database as surely as writing the database itself.
SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")


class PathRejected(ValueError):
    def __init__(self, raw: str, reason: DenyReason, message: str) -> None:
        super().__init__(message)
        self.raw = raw
        self.reason = reason
        self.message = message


class TreeRoot:
    """A resolved working tree plus the paths inside it no agent may write."""

    def __init__(self, root: Path, protected: Iterable[Path] = ()) -> None:
        self.root = Path(os.path.realpath(root))
        resolved = [Path(os.path.realpath(p)) for p in protected]
        resolved += [p.with_name(p.name + side) for p in resolved for side in SQLITE_SIDE_FILES]
        # A protected directory that contains the whole tree would forbid everything: it only
        # matters when it lies inside the tree.
        self._protected = tuple(
            p for p in resolved if p != self.root and p not in self.root.parents
        )

    def canonical(self, raw: str) -> str:
        """The lease key for `raw`, or `PathRejected`."""
        if not isinstance(raw, str) or not raw.strip():
            raise PathRejected(str(raw), DenyReason.INVALID_PATH, "empty path")
        if "\x00" in raw or len(raw) > MAX_PATH_CHARS:
            raise PathRejected(raw[:200], DenyReason.INVALID_PATH, "unusable path")
        given = Path(raw)
        resolved = Path(os.path.realpath(given if given.is_absolute() else self.root / given))
        try:
            rel = resolved.relative_to(self.root)
        except ValueError:
            raise PathRejected(
                raw, DenyReason.OUTSIDE_WORKDIR, f"{raw} resolves outside the working tree"
            ) from None
        if not rel.parts:
            raise PathRejected(raw, DenyReason.INVALID_PATH, f"{raw} names the tree itself")
        if rel.parts[0] == ".git" or self._is_protected(resolved):
            raise PathRejected(raw, DenyReason.PROTECTED_PATH, f"{raw} is a protected path")
        try:
            is_dir = resolved.is_dir()
        except OSError as err:  # e.g. a name longer than the file system allows
            raise PathRejected(raw, DenyReason.INVALID_PATH, f"{raw}: {err.strerror}") from None
        if is_dir:
            raise PathRejected(raw, DenyReason.INVALID_PATH, f"{raw} is a directory")
        return rel.as_posix()

    def _is_protected(self, resolved: Path) -> bool:
        return any(resolved == p or p in resolved.parents for p in self._protected)
