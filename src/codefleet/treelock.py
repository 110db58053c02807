"""One lock per tree: the server's `.codefleet/server.json`, locked and read.

A server takes an exclusive `flock` on `<tree>/.codefleet/server.json` before
it opens its database and holds it for its life; the kernel drops it however
the process ends. Under the lock it writes its record, `{url, pid, host, db,
workdir}`, into the same file, so a refused second server names the running
one, and a command run anywhere inside the tree finds its server by walking
up from its directory (`live_server`). A record whose file nobody holds is
stale (the server died) and is ignored; a server that stops empties it.

A record is believed only where it could only be this user's
(docs/decisions/0150-a-server-record-is-believed-only-where-it-could-only-be-yours.md): the
walk up stops at the first directory this user does not own, the `.codefleet` must be a real
directory of theirs that no one else may write (`statedir.trusted_state_dir`), and the record a
regular file of theirs, opened without following a link or blocking on a FIFO; it is written
`0600`, so no other user can even open it to hold its lock. Whether the record names this tree
and a live CodeFleet server is asked before anything is sent to it (`api.treeserver`).

The lock is on the tree, not the database: a second server on the tree is
refused whatever its `--db`, and so is a server on a directory inside a tree
whose server runs (docs/decisions/0003-one-lock-per-tree.md, "One lock per tree"), wherever
that directory is mounted on this host (`mountpaths.aliases`: a bind-mounted subdirectory
is asked about the tree above its mount source). Whether a file is
held is asked with a shared, non-blocking `flock` that is dropped at once; a
server that meets such a probe retries its own lock a few times before it
calls the tree taken. Standard library only: the CLI reads it before anything
heavy is imported.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from contextlib import suppress
from pathlib import Path
from typing import Final, Literal, NamedTuple

from codefleet.mountpaths import aliases
from codefleet.statedir import STATE_DIR, NoTreeId, open_state_file, prepare_dirs, trusted_state_dir

__all__ = [
    "SERVER_FILE",
    "ServerRecord",
    "TreeInUse",
    "TreeLock",
    "live_server",
    "nearest_record",
    "refuse_if_served",
    "server_file",
]

SERVER_FILE: Final = "server.json"
TAKE_TRIES: Final = 20  # a client's probe holds the file for microseconds; 20 tries outlast it
TAKE_PAUSE_S: Final = 0.01


class ServerRecord(NamedTuple):
    """What a running server says about itself in its tree's `.codefleet/server.json`."""

    url: str
    pid: int | None
    host: str | None
    db: str
    workdir: str

    def names(self) -> str:
        """`URL (pid N on HOST, database DB)`: the running server, as a message names it."""
        where = f"pid {self.pid}" if self.pid is not None else "pid unknown"
        if self.host:
            where += f" on {self.host}"
        return f"{self.url} ({where}, database {self.db})"


class TreeInUse(RuntimeError):
    """Another live server holds the tree (or a tree that contains it)."""

    def __init__(self, root: Path, holder: ServerRecord | None, tree: Path) -> None:
        who = holder.names() if holder else "a server whose record is not written yet"
        if tree == root:
            head = f"the tree {root} already has a CodeFleet server: {who}"
        else:
            head = f"{root} is inside the tree {tree}, whose CodeFleet server runs: {who}"
        super().__init__(
            f"{head}. One tree has one server, whatever its database: use that one (commands "
            "run inside the tree find it), or stop it first"
        )
        self.root, self.holder, self.tree = root, holder, tree


def server_file(root: Path) -> Path:
    return root / STATE_DIR / SERVER_FILE


class TreeLock:
    """The held lock on one tree; `release()` (or process exit) frees it."""

    def __init__(self, root: Path, fd: int) -> None:
        self.root = root
        self.path = server_file(root)
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, root: Path, url: str, db: Path) -> TreeLock:
        """Lock the tree at `root` for this process and write its record, or `TreeInUse`."""
        root = root.resolve()
        refuse_if_served(root, parents_only=True)
        prepare_dirs(root / STATE_DIR)
        fd = open_state_file(root, SERVER_FILE, os.O_RDWR | os.O_CREAT, 0o600)
        with suppress(OSError):  # an older server's record was 0644: no one else may lock it
            os.fchmod(fd, 0o600)
        if not _take(fd):
            holder = _record(fd)
            os.close(fd)
            raise TreeInUse(root, holder, root)
        record = ServerRecord(url, os.getpid(), socket.gethostname(), str(db), str(root))
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(record._asdict()).encode() + b"\n", 0)
        return cls(root, fd)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Empty the record (no command finds a stopped server) and drop the lock."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        os.ftruncate(fd, 0)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def refuse_if_served(root: Path, *, parents_only: bool = False) -> None:
    """`TreeInUse` when a live server holds `root` or a tree of this user's that contains it."""
    root = root.resolve()
    trees = _own_dirs(root)[1:] if parents_only else _own_dirs(root)
    for alias in aliases(root):  # a bind mount of a subdirectory: the tree above it, there
        trees += _own_dirs(alias)[1:] if parents_only else _own_dirs(alias)
    for tree in trees:
        holder = _holder(tree)
        if holder is not None:  # inside a served tree, a server would be a second lock on it
            raise TreeInUse(root, holder or None, tree)


def live_server(start: Path) -> ServerRecord | None:
    """The record of the live server whose tree holds `start` (the nearest), or None."""
    found = nearest_record(start)
    return found[1] if found is not None else None


def nearest_record(start: Path) -> tuple[Path, ServerRecord] | None:
    """The nearest tree at or above `start` whose record a live server holds, and the record;
    None when there is none. Only this user's directories are asked (`_own_dirs`)."""
    try:
        here = start.resolve()
    except OSError:
        return None
    for tree in _own_dirs(here):
        holder = _holder(tree)
        if holder:
            return tree, holder
    return None


def _own_dirs(here: Path) -> list[Path]:
    """`here` and its parents up to the last one this user owns: a tree is a directory of
    yours, and the walk stops where another user's begins (`/tmp`, `/home`)."""
    mine = []
    for directory in (here, *here.parents):
        try:
            if os.stat(directory).st_uid != os.geteuid():
                break
        except OSError:
            break
        mine.append(directory)
    return mine


def _take(fd: int) -> bool:
    for _ in range(TAKE_TRIES):
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            time.sleep(TAKE_PAUSE_S)  # a probe (`_holder`) lets go within microseconds
    return False


def _holder(tree: Path) -> ServerRecord | Literal[False] | None:
    """The record in `tree`'s `.codefleet/server.json` when a live server holds it; False when
    it is held but says nothing readable yet; None when nobody holds it, there is no such
    file, or it is not to be believed (not this user's alone, a link, a FIFO)."""
    if not trusted_state_dir(tree / STATE_DIR):
        return None
    try:
        fd = open_state_file(tree, SERVER_FILE, os.O_RDONLY)
    except (OSError, NoTreeId):
        return None
    try:
        if os.fstat(fd).st_uid != os.geteuid():
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _record(fd) or False
        except OSError:
            return None
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _record(fd: int) -> ServerRecord | None:
    try:
        data = json.loads(os.pread(fd, 65536, 0).decode())
        return ServerRecord(
            str(data["url"]),
            int(data["pid"]) if data.get("pid") is not None else None,
            str(data["host"]) if data.get("host") else None,
            str(data["db"]),
            str(data["workdir"]),
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
