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
does not (docs/decisions/0131-a-copy-is-not-a-mount.md, "A copy is not a mount"). Standard library only:
the hook side imports this module through `paths`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Final, NamedTuple

__all__ = [
    "STATE_DIR",
    "TREE_ID_FILE",
    "NoTreeId",
    "TreeClaim",
    "ensure_tree_id",
    "prepare_dirs",
    "probe_seen",
    "read_tree_id",
    "remove_probe",
    "tree_id_here",
    "tree_id_path",
    "tree_mismatch",
    "tree_root",
    "write_probe",
]

STATE_DIR: Final = ".codefleet"
TREE_ID_FILE: Final = "tree-id"
TREE_ID_SHAPE: Final = re.compile(r"tree_[0-9a-f]{32}")
PROBE_PREFIX: Final = "probe-"
PROBE_SHAPE: Final = re.compile(r"[0-9a-f]{32}")
IGNORE_ALL: Final = "# CodeFleet's database and run records; never committed.\n*\n"


class TreeClaim(NamedTuple):  # not a dataclass: `dataclasses` imports `inspect` (the hook)
    """A tree as one side knows it: its path there, its identity (None: not known) and,
    from a runner, the probe it wrote there (`write_probe`; None: none written)."""

    workdir: str
    tree_id: str | None
    probe: str | None = None


class NoTreeId(Exception):
    """The directory holds no usable tree identity; the message says what to do."""


def prepare_dirs(*dirs: Path) -> None:
    """Create each directory (and its parents); a new `.codefleet` gets its `.gitignore`."""
    for directory in dirs:
        for ancestor in (*reversed(directory.parents), directory):
            if ancestor.name == STATE_DIR and not ancestor.exists():
                ancestor.mkdir(parents=True)
                (ancestor / ".gitignore").write_text(IGNORE_ALL)
        directory.mkdir(parents=True, exist_ok=True)


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
        text = path.read_text(encoding="ascii", errors="replace").strip()
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
    except NoTreeId:
        if tree_id_path(root).exists():  # damaged: keep it for the operator to look at
            raise
    path = tree_id_path(root)
    prepare_dirs(path.parent)
    temp = path.with_name(f".{TREE_ID_FILE}.{os.urandom(8).hex()}")
    temp.write_text(f"tree_{os.urandom(16).hex()}\n", encoding="ascii")
    try:
        _create_once(temp, path)
    finally:
        temp.unlink(missing_ok=True)
    return read_tree_id(root)


def _create_once(written: Path, path: Path) -> None:
    """`written` becomes `path` unless `path` exists; a file system without hard links
    gets an exclusive create instead."""
    try:
        os.link(written, path)
    except FileExistsError:
        return
    except OSError:  # no hard links here (some FUSE file systems): O_EXCL is the next best
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return
        with os.fdopen(fd, "wb") as out:
            out.write(written.read_bytes())
            out.flush()
            os.fsync(out.fileno())


def write_probe(root: Path) -> str | None:
    """A probe written whole into `root`'s `.codefleet/` (closed, so a network filesystem
    has sent it); its token, or None when the directory cannot be written."""
    token = os.urandom(16).hex()
    try:
        (root / STATE_DIR / f"{PROBE_PREFIX}{token}").write_text(token, encoding="ascii")
    except OSError:
        return None
    return token


def remove_probe(root: Path, token: str) -> None:
    (root / STATE_DIR / f"{PROBE_PREFIX}{token}").unlink(missing_ok=True)


def probe_seen(root: Path, token: str) -> bool:
    """Whether the probe `token` a runner wrote in its tree is in the tree at `root`."""
    if not PROBE_SHAPE.fullmatch(token):
        return False
    try:
        return (root / STATE_DIR / f"{PROBE_PREFIX}{token}").read_text(encoding="ascii") == token
    except (OSError, UnicodeDecodeError):
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
