"""One server per database: an exclusive lock held for the server's whole life.

Two servers on one SQLite file would each believe the other's runners are
stale, restore their files and grant one path twice. So the server takes an
`fcntl.flock` on `<database>.lock` before it opens the database and keeps the
descriptor open until it exits; the kernel drops the lock when the process
dies, however it dies (SIGKILL included), so a crash never leaves a stale
lock behind. The holder writes its pid into the file, so a refused second
server can name it. The lock file lives beside the database and is protected
from agents' writes like the database itself (`paths.SQLITE_SIDE_FILES`).
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from pathlib import Path
from typing import Final

from codefleet.statedir import NO_LINK, UnsafeStateDir

__all__ = ["LOCK_SUFFIX", "DatabaseInUse", "ServerLock"]

LOCK_SUFFIX: Final = ".lock"


class DatabaseInUse(RuntimeError):
    """Another live server holds the database."""

    def __init__(self, db: Path, pid: int | None) -> None:
        who = f"pid {pid}" if pid is not None else "a process whose pid is unknown"
        super().__init__(
            f"database {db} is in use by another CodeFleet server ({who}); "
            "use that server, or stop it first"
        )
        self.db, self.pid = db, pid


class ServerLock:
    """The held lock; `release()` (or process exit) frees the database."""

    def __init__(self, db: Path, fd: int) -> None:
        self.db = db
        self.path = lock_path(db)
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, db: Path) -> ServerLock:
        """Lock `db` for this process, or raise `DatabaseInUse` naming the holder's pid."""
        path = lock_path(db)
        fd = _open_regular(path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(fd)
            os.close(fd)
            raise DatabaseInUse(db, holder) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return cls(db, fd)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _open_regular(path: Path) -> int:
    """`path` opened for the lock, never through a link nor a FIFO; a regular file or
    `UnsafeStateDir` (docs/decisions/0149-the-state-directory-follows-no-link.md)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | NO_LINK, 0o600)
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR):
            raise UnsafeStateDir(path, "a symbolic link or not a regular file") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UnsafeStateDir(path, "not a regular file")
    return fd


def lock_path(db: Path) -> Path:
    return db.with_name(db.name + LOCK_SUFFIX)


def _read_pid(fd: int) -> int | None:
    try:
        return int(os.pread(fd, 32, 0).decode().strip())
    except (OSError, ValueError):
        return None
