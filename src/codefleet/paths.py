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
import stat
from collections.abc import Iterable
from pathlib import Path

from codefleet.models import DenyReason

__all__ = ["MAX_PATH_CHARS", "PathRejected", "TreeRoot"]

MAX_PATH_CHARS = 4096
# Writing SQLite's side files rewrites the database as surely as writing the database itself;
# `.lock` is the server's one-server lock (`serverlock`).
SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal", ".lock")


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
            str(p) for p in resolved if p != self.root and p not in self.root.parents
        )
        self._root = str(self.root)
        self._prefix = self._root.rstrip(os.sep) + os.sep

    def canonical(self, raw: str) -> str:
        """The lease key for `raw`, or `PathRejected`.

        On the lease hot path: plain `os.path` string work plus the `realpath`
        and `stat` calls that symlink resolution needs, no `pathlib` objects.
        """
        if not isinstance(raw, str) or not raw.strip():
            raise PathRejected(str(raw), DenyReason.INVALID_PATH, "empty path")
        if "\x00" in raw or len(raw) > MAX_PATH_CHARS:
            raise PathRejected(raw[:200], DenyReason.INVALID_PATH, "unusable path")
        resolved = os.path.realpath(os.path.join(self._root, raw))  # an absolute raw wins the join
        if not resolved.startswith(self._prefix):
            if resolved == self._root:
                raise PathRejected(raw, DenyReason.INVALID_PATH, f"{raw} names the tree itself")
            raise PathRejected(
                raw, DenyReason.OUTSIDE_WORKDIR, f"{raw} resolves outside the working tree"
            )
        rel = resolved[len(self._prefix) :]
        if rel.partition("/")[0] == ".git" or self._is_protected(resolved):
            raise PathRejected(raw, DenyReason.PROTECTED_PATH, f"{raw} is a protected path")
        try:
            is_dir = stat.S_ISDIR(os.stat(resolved).st_mode)
        except (FileNotFoundError, NotADirectoryError):
            is_dir = False
        except OSError as err:  # e.g. a name longer than the file system allows
            raise PathRejected(raw, DenyReason.INVALID_PATH, f"{raw}: {err.strerror}") from None
        if is_dir:
            raise PathRejected(raw, DenyReason.INVALID_PATH, f"{raw} is a directory")
        return rel

    def _is_protected(self, resolved: str) -> bool:
        return any(resolved == p or resolved.startswith(p + os.sep) for p in self._protected)
