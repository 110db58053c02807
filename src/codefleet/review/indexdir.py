"""The private index's directory, and removing the ones killed runs left behind.

`commit` and `run --commit` build commits in an index file inside a fresh
temporary directory (`codefleet-index-*`) and remove it when done; a run killed meanwhile cannot,
so each `IndexDir` holds an exclusive `flock` on its `lock` file for as long
as it lives (the kernel drops it when the process dies, however it dies).
Making a new one first sweeps the temp dir: a directory is removed only when
it is ours (our prefix, our user, a real directory, not a link), old (not
modified for `STALE_AFTER_S`: git renames the index into it on every write)
and not in use (its lock can be taken, or it has none: made before the lock
existed). See "Review: leftover index directories" in docs/decisions/0080-review-leftover-index-directories.md.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import stat
import tempfile
import time
from pathlib import Path
from typing import Final

__all__ = ["PREFIX", "STALE_AFTER_S", "IndexDir", "sweep_stale"]

PREFIX: Final = "codefleet-index-"
LOCK_NAME: Final = "lock"
STALE_AFTER_S: Final = 3600.0


class IndexDir:
    """A fresh private directory for an index file, locked until `close`."""

    def __init__(self, parent: Path | None = None) -> None:
        sweep_stale(parent)
        self.path = Path(tempfile.mkdtemp(prefix=PREFIX, dir=parent))
        self._lock = os.open(self.path / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)

    @property
    def index(self) -> Path:
        return self.path / "index"

    def close(self) -> None:
        """Remove the directory, then let go of the lock; idempotent."""
        if self._lock < 0:
            return
        shutil.rmtree(self.path, ignore_errors=True)
        os.close(self._lock)
        self._lock = -1


def sweep_stale(parent: Path | None = None, now: float | None = None) -> list[Path]:
    """Remove our index directories that are old and in use by nobody; the ones removed."""
    base = Path(parent or tempfile.gettempdir())
    at = time.time() if now is None else now
    removed = []
    try:
        entries = list(os.scandir(base))
    except OSError:
        return []
    for entry in entries:
        if entry.name.startswith(PREFIX) and _ours_and_old(entry, at) and _unused(entry.path):
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(Path(entry.path))
    return removed


def _ours_and_old(entry: os.DirEntry[str], now: float) -> bool:
    try:
        info = entry.stat(follow_symlinks=False)
    except OSError:
        return False
    return (
        stat.S_ISDIR(info.st_mode)
        and info.st_uid == os.getuid()
        and now - info.st_mtime > STALE_AFTER_S
    )


def _unused(path: str) -> bool:
    """Can the directory's lock be taken (or has it none)? The lock is let go at once."""
    try:
        fd = os.open(os.path.join(path, LOCK_NAME), os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # held: a live run's
        return False
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)
    return True
