"""Where CodeFleet keeps its own files in the tree it serves: `.codefleet/`.

The working tree defaults to the current directory, so the database and the
run directory default to `.codefleet/codefleet.db` and `.codefleet/runs`
inside it. When CodeFleet creates a `.codefleet` directory it puts a
`.gitignore` of `*` in it, so `git status` in the user's repository stays
clean without editing their own `.gitignore`. The whole directory is
protected from agents' writes (see `paths.TreeRoot`).

The tree's identity lives there too: `.codefleet/tree-id`, a random id the
server writes once, atomically, and never rewrites. A runner reads it in its
own mount of the tree and registers with it, so one tree mounted at different
paths on different hosts is recognised as one tree (docs/decisions/0130-a-tree-is-known-by-its-identity-not-its-path.md, "A
tree is known by its identity, not its path"). An identity alone cannot tell
a copy (`cp -r`) from a mount, so a runner also writes a *probe*, a file of
random name and content, into its own `.codefleet/` and names it when it
registers: a mount of the server's tree shows the file to the server, a copy
does not (docs/decisions/0131-a-copy-is-not-a-mount.md, "A copy is not a mount").

Nothing here follows a link (docs/decisions/0149-the-state-directory-follows-no-link.md): `.codefleet`
must be a real directory, and every file CodeFleet opens in it (`open_state_file`) is opened
through that directory with `O_NOFOLLOW | O_NONBLOCK` and must be a regular file; a
directory CodeFleet makes or writes in (`prepare_dirs`) is audited once per process for a
link, a FIFO or a device anywhere in it. What is not so is `UnsafeStateDir`, one line naming
the path. Standard library only: the hook side imports this module through `paths`.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path
from typing import Final, NamedTuple

__all__ = [
    "STATE_DIR",
    "TREE_ID_FILE",
    "NoTreeId",
    "TreeClaim",
    "UnsafeStateDir",
    "ensure_tree_id",
    "open_state_file",
    "own_state_dir",
    "prepare_dirs",
    "probe_seen",
    "read_tree_id",
    "remove_probe",
    "tree_id_here",
    "tree_id_path",
    "tree_mismatch",
    "tree_root",
    "trusted_state_dir",
    "write_probe",
    "write_state_once",
]

STATE_DIR: Final = ".codefleet"
TREE_ID_FILE: Final = "tree-id"
TREE_ID_SHAPE: Final = re.compile(r"tree_[0-9a-f]{32}")
PROBE_PREFIX: Final = "probe-"
PROBE_SHAPE: Final = re.compile(r"[0-9a-f]{32}")
IGNORE_ALL: Final = "# CodeFleet's database and run records; never committed.\n*\n"
OTHERS_WRITE: Final = stat.S_IWGRP | stat.S_IWOTH
NO_LINK: Final = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # a FIFO must not hang an open
_audited: set[tuple[int, int]] = set()  # the state directories this process audited (dev, ino)


class TreeClaim(NamedTuple):  # not a dataclass: `dataclasses` imports `inspect` (the hook)
    """A tree as one side knows it: its path there, its identity (None: not known) and,
    from a runner, the probe it wrote there (`write_probe`; None: none written)."""

    workdir: str
    tree_id: str | None
    probe: str | None = None


class NoTreeId(Exception):
    """The directory holds no usable tree identity; the message says what to do."""


class UnsafeStateDir(NoTreeId):
    """`.codefleet`, or something in it, is not what CodeFleet makes there: a symbolic link,
    a FIFO or device, or a directory another user owns or may write. A tree with it has no
    usable identity either; the message names the path and what to do."""

    def __init__(self, path: Path | str, what: str) -> None:
        super().__init__(
            f"{path} is {what}: CodeFleet keeps its server record and database in "
            f"{STATE_DIR}/ and never follows a link or shares it with another user. Remove it "
            f"(a repository must not commit {STATE_DIR}/) and start again"
        )
        self.path = Path(path)


def prepare_dirs(*dirs: Path) -> None:
    """Create each directory (and its parents); a new `.codefleet` gets its `.gitignore`.

    At and under a `.codefleet` every directory must be a real one (`UnsafeStateDir`), the
    `.codefleet` this user's and writable by no one else (`own_state_dir`), and nothing in
    it a link, FIFO or device (audited once per process)."""
    for directory in dirs:
        inside = False
        for ancestor in (*reversed(directory.absolute().parents), directory.absolute()):
            if ancestor.name == STATE_DIR and not inside:
                inside = True
                _make_state_dir(ancestor)
            elif inside and _real_dir(ancestor) and ancestor.name == STATE_DIR:
                _write_ignore_all(ancestor)  # a tree's own state inside ours (a demo's tree)
        directory.mkdir(parents=True, exist_ok=True)


def _make_state_dir(state: Path) -> None:
    state.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.mkdir(state, 0o755)
    except FileExistsError:
        own_state_dir(state)
        _audit(state)
        return
    os.chmod(state, 0o755)  # whatever the umask: nobody else writes here
    _write_ignore_all(state)


def _write_ignore_all(state: Path) -> None:
    fd = os.open(state / ".gitignore", os.O_WRONLY | os.O_CREAT | os.O_EXCL | NO_LINK, 0o644)
    with os.fdopen(fd, "w") as out:
        out.write(IGNORE_ALL)


def _real_dir(path: Path) -> bool:
    """Make `path` a directory (True), or check it is one, not a link to one (False)."""
    try:
        os.mkdir(path, 0o755)
    except FileExistsError:
        info = os.lstat(path)
        if not stat.S_ISDIR(info.st_mode):
            raise UnsafeStateDir(path, _kind(path, info)) from None
        return False
    return True


def own_state_dir(state: Path) -> None:
    """`state` (a `.codefleet`) must be a real directory of this user's; one that others may
    write is made private (it is this user's). `UnsafeStateDir` otherwise."""
    info = os.lstat(state)
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafeStateDir(state, _kind(state, info))
    if info.st_uid != os.geteuid():
        raise UnsafeStateDir(state, f"a directory of uid {info.st_uid}, not yours ({os.geteuid()})")
    if info.st_mode & OTHERS_WRITE:
        os.chmod(state, stat.S_IMODE(info.st_mode) & ~OTHERS_WRITE)


def trusted_state_dir(state: Path) -> bool:
    """Whether a record in `state` may be believed: a real directory of this user's that no
    one else may write (docs/decisions/0150-a-server-record-is-believed-only-where-it-could-only-be-yours.md)."""
    try:
        info = os.lstat(state)
    except OSError:
        return False
    return (
        stat.S_ISDIR(info.st_mode)
        and info.st_uid == os.geteuid()
        and not info.st_mode & OTHERS_WRITE
    )


def open_state_file(root: Path, name: str, flags: int, mode: int = 0o600) -> int:
    """A descriptor of `root/.codefleet/name`, opened through the directory without following a
    link (the directory's own name included) and without blocking; a regular file or
    `UnsafeStateDir`. `FileNotFoundError` when it (or `.codefleet`) is missing."""
    state = root / STATE_DIR
    try:
        directory = os.open(state, os.O_RDONLY | os.O_DIRECTORY | NO_LINK)
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.ENOTDIR):
            raise UnsafeStateDir(state, _kind(state, os.lstat(state))) from None
        raise
    try:
        fd = os.open(name, flags | NO_LINK, mode, dir_fd=directory)
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR):  # a link, a socket, a dir
            path = state / name
            raise UnsafeStateDir(path, _kind(path, os.lstat(path))) from None
        raise
    finally:
        os.close(directory)
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise UnsafeStateDir(state / name, _kind(state / name, info))
    return fd


def _audit(state: Path) -> None:
    """`UnsafeStateDir` for the first link, FIFO or device anywhere under `state` (a socket,
    which no open goes through, is let be); once per process per directory."""
    info = os.lstat(state)
    if (info.st_dev, info.st_ino) in _audited:
        return
    pending = [state]
    while pending:
        with os.scandir(pending.pop()) as entries:
            for entry in entries:
                found = entry.stat(follow_symlinks=False)
                if stat.S_ISDIR(found.st_mode):
                    pending.append(Path(entry.path))
                elif not (stat.S_ISREG(found.st_mode) or stat.S_ISSOCK(found.st_mode)):
                    raise UnsafeStateDir(entry.path, _kind(Path(entry.path), found))
    _audited.add((info.st_dev, info.st_ino))


def _kind(path: Path, info: os.stat_result) -> str:
    """What `path` is, in words, when it is not a regular file."""
    if stat.S_ISLNK(info.st_mode):
        return f"a symbolic link (to {os.readlink(path)})"
    if stat.S_ISFIFO(info.st_mode):
        return "a FIFO, not a regular file"
    if stat.S_ISDIR(info.st_mode):
        return "a directory, not a regular file"
    if stat.S_ISSOCK(info.st_mode):
        return "a socket, not a regular file"
    if stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode):
        return "a device, not a regular file"
    return "not a regular file"


def tree_root(start: Path) -> tuple[Path, str]:
    """The tree a command run in `start` works on, and why: the nearest directory (`start`
    or above) that CodeFleet already serves (it has a tree identity) or that is a git
    repository's root; `start` itself when there is none (docs/decisions/0003-one-lock-per-tree.md, "One lock per
    tree")."""
    here = start.absolute()
    for directory in (here, *here.parents):
        if tree_id_path(directory).is_file():
            return directory, f"the tree CodeFleet serves ({STATE_DIR}/{TREE_ID_FILE} is there)"
        if (directory / ".git").exists():
            return directory, "the git repository's root"
    return here, "the current directory (not inside a git repository)"


def tree_id_path(root: Path) -> Path:
    return root / STATE_DIR / TREE_ID_FILE


def read_tree_id(root: Path) -> str:
    """The identity of the tree at `root`, or `NoTreeId` saying why there is none."""
    path = tree_id_path(root)
    try:
        text = _read(root, TREE_ID_FILE, 4096).decode("ascii", errors="replace").strip()
    except (FileNotFoundError, NotADirectoryError):
        raise NoTreeId(
            f"{root} has no tree identity ({path} is missing): no CodeFleet server has served "
            "this directory. Start the runner in its host's mount of the server's tree "
            "(--workdir), after `codefleet serve` has started once in that tree"
        ) from None
    except OSError as err:
        raise NoTreeId(f"cannot read the tree identity {path}: {err.strerror or err}") from None
    if not TREE_ID_SHAPE.fullmatch(text):
        raise NoTreeId(
            f"the tree identity {path} is damaged ({text[:40]!r} is not an id CodeFleet "
            "writes); remove it and start the server again"
        )
    return text


def _read(root: Path, name: str, limit: int) -> bytes:
    """Up to `limit` bytes of `root/.codefleet/name` (`open_state_file`)."""
    fd = open_state_file(root, name, os.O_RDONLY)
    try:
        return os.read(fd, limit)
    finally:
        os.close(fd)


def tree_id_here(root: Path) -> str | None:
    """The identity of the tree at `root`, None when it has none (a client's courtesy check)."""
    try:
        return read_tree_id(root)
    except NoTreeId:
        return None


def ensure_tree_id(root: Path) -> str:
    """The identity of the tree at `root`, created first if it has none; never rewritten.

    The file appears whole or not at all (a hard link of a written file, which is
    atomic on NFS too); when two servers race, the first link wins and both read it.
    """
    try:
        return read_tree_id(root)
    except UnsafeStateDir:
        raise
    except NoTreeId:
        if os.path.lexists(tree_id_path(root)):  # damaged: keep it for the operator to look at
            raise
    prepare_dirs(tree_id_path(root).parent)
    write_state_once(root, TREE_ID_FILE, f"tree_{os.urandom(16).hex()}\n".encode(), 0o644)
    return read_tree_id(root)


def write_state_once(root: Path, name: str, data: bytes, mode: int = 0o600) -> None:
    """`root/.codefleet/name` created whole (a hard link of a written file) unless it
    exists already, then left as it is; through no link (`open_state_file`)."""
    state = root / STATE_DIR
    temp = state / f".{name}.{os.urandom(8).hex()}"
    _write_new(root, temp.name, data, mode)
    try:
        _create_once(temp, state / name)
    finally:
        temp.unlink(missing_ok=True)


def _create_once(written: Path, path: Path) -> None:
    """`written` becomes `path` unless `path` exists; a file system without hard links
    gets an exclusive create instead."""
    try:
        os.link(written, path)
    except FileExistsError:
        return
    except OSError:  # no hard links here (some FUSE file systems): O_EXCL is the next best
        try:
            _write_new(path.parent.parent, path.name, written.read_bytes(), 0o644)
        except FileExistsError:
            return


def _write_new(root: Path, name: str, data: bytes, mode: int) -> None:
    """`root/.codefleet/name` created (never an existing file, nor through a link), written
    whole and synced."""
    fd = open_state_file(root, name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())


def write_probe(root: Path) -> str | None:
    """A probe written whole into `root`'s `.codefleet/` (closed, so a network filesystem
    has sent it); its token, or None when the directory cannot be written."""
    token = os.urandom(16).hex()
    try:
        _write_new(root, f"{PROBE_PREFIX}{token}", token.encode(), 0o644)
    except (OSError, NoTreeId):
        return None
    return token


def remove_probe(root: Path, token: str) -> None:
    (root / STATE_DIR / f"{PROBE_PREFIX}{token}").unlink(missing_ok=True)


def probe_seen(root: Path, token: str) -> bool:
    """Whether the probe `token` a runner wrote in its tree is in the tree at `root`."""
    if not PROBE_SHAPE.fullmatch(token):
        return False
    try:
        return _read(root, f"{PROBE_PREFIX}{token}", 64) == token.encode()
    except (OSError, NoTreeId):
        return False


def tree_mismatch(runner: TreeClaim, server: TreeClaim) -> str | None:
    """Why `runner`'s tree is not `server`'s, with what to do; None when it is.

    By identity when both sides know one (any mount of the tree is the tree), and
    by the runner's probe when it wrote one (a copy has the identity, not the probe);
    otherwise (an older runner, or a server without one) by `runner`'s path
    resolved here against the server's.
    """
    if runner.tree_id is not None and server.tree_id is not None:
        if runner.tree_id == server.tree_id:
            return _copy_mismatch(runner, server)
        return (
            f"the tree {runner.workdir} is {runner.tree_id}, but the server's tree "
            f"{server.workdir} is {server.tree_id}: another tree (a copy or another checkout), "
            f"not a mount of the server's. Use --workdir with this host's mount of "
            f"{server.workdir}, whose {STATE_DIR}/{TREE_ID_FILE} says {server.tree_id}"
        )
    try:
        resolved = os.path.realpath(runner.workdir)
    except (ValueError, OSError):  # a NUL byte and the like: no tree at all
        resolved = None
    if resolved == os.path.realpath(server.workdir):
        return None
    return (
        f"the tree here is {runner.workdir}, but the server's tree is {server.workdir}: use "
        "--workdir pointing at the server's tree (a tree with its identity file may be "
        "mounted anywhere)"
    )


def _copy_mismatch(runner: TreeClaim, server: TreeClaim) -> str | None:
    """Why `runner`'s tree, which has the server's identity, is a copy; None: a mount."""
    if runner.probe is None or probe_seen(Path(server.workdir), runner.probe):
        return None
    return (
        f"the tree {runner.workdir} has the identity of the server's tree {server.workdir} "
        f"({server.tree_id}) but is a copy, not a mount of it: a file the runner wrote in "
        f"{runner.workdir}/{STATE_DIR} did not appear in {server.workdir}/{STATE_DIR}. Edits "
        f"there would never reach the server's tree. Use --workdir with this host's mount "
        f"of {server.workdir}"
    )
