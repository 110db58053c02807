"""What a command changed in its layer, and what may become of each change.

`collect` reads the layer's upper directory (overlayfs: a copied-up or new
file, a whiteout character device for a deletion, an opaque directory for a
directory deleted and made again) and compares each entry with what the
command saw below it (the pre-image layer, else the live tree): created,
modified, deleted, mode changed, symbolic link, and a file replaced by a
directory (or the reverse). Modes are compared and carried as git keeps
them (`git_mode`: the execute bit only), so a setuid bit never lands. A
file copied up but left byte- and mode-identical is no change. Directories
themselves are not changes: a lease guards a file.

`sort_changes` puts each change in one of three lists, in this order:

- kept out: under a regenerable directory (`fleet.views.copyview.SKIP_DIRS`, the
  check view's skip list), git's index (`.git/index`: any `git status`,
  such as a version-from-git build tool runs under `pytest`, refreshes it;
  it is never the task's work and nothing the agent did wrong; every other
  write under `.git` is refused), or ignored by the repository
  (`git check-ignore`);
- refused: what the lock's one path rule (`TreeRoot.canonical`) refuses
  (protected paths, the database, the run directory, anything resolving
  outside the tree, hard-linked files), symbolic links, special files, and a
  file turned into a directory or back (a rollback could not undo it);
- to apply: the rest, which `fleet.views.layerapply` takes through the leases.

Paths in the answer are relative POSIX paths under the tree.
"""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Final

from codefleet.fleet.views.copyview import SKIP_DIRS
from codefleet.fleet.views.layer import Layer
from codefleet.paths import GIT_DIR, PathRejected, TreeRoot

__all__ = ["Change", "ChangeKind", "Sorted", "collect", "git_mode", "sort_changes"]

OPAQUE_XATTR: Final = "user.overlay.opaque"
COMPARE_CHUNK: Final = 1 << 20
GIT_TIMEOUT_S: Final = 30.0
EXECUTABLE_MODE: Final = 0o755
REGULAR_MODE: Final = 0o644
GIT_INDEX: Final = "index"  # `.git/index`: git's stat cache, rewritten by a `git status`


class ChangeKind(StrEnum):
    CREATED = "created"
    MODIFIED = "modified"
    DELETED = "deleted"
    MODE = "mode"  # only the permission bits changed
    SYMLINK = "symlink"
    SPECIAL = "special"  # a fifo, socket or device
    RETYPED = "retyped"  # a file became a directory or a directory a file


@dataclass(frozen=True, slots=True)
class Change:
    path: str
    kind: ChangeKind
    size: int = 0  # bytes to write (created, modified)
    mode: int | None = None  # permission bits of the new file (`git_mode`)
    target: str | None = None  # what a symbolic link points to


@dataclass(frozen=True, slots=True)
class Sorted:
    apply: tuple[Change, ...] = ()
    kept_out: tuple[Change, ...] = ()
    refused: tuple[tuple[Change, str], ...] = ()  # with the reason


# -- collection ---------------------------------------------------------------------


def collect(layer: Layer) -> list[Change]:
    """Every change the command made in `layer`, sorted by path."""
    changes = list(_walk(layer, layer.upper, ""))
    return sorted(changes, key=lambda c: c.path)


def _walk(layer: Layer, upper: Path, prefix: str, opaque: bool = False) -> Iterator[Change]:
    """The changes under `upper`; `opaque`: an ancestor hid everything below it."""
    with os.scandir(upper) as entries:
        for entry in entries:
            rel = f"{prefix}{entry.name}"
            info = entry.stat(follow_symlinks=False)
            below = _below(layer, rel)
            if stat.S_ISCHR(info.st_mode) and info.st_rdev == 0:  # a whiteout
                if rel not in layer.hidden:
                    yield from _deleted(layer, rel, below)
            elif stat.S_ISDIR(info.st_mode):
                yield from _directory(layer, Path(entry.path), rel, below, opaque)
            else:
                yield from _entry(layer, Path(entry.path), rel, info, below)


def _below(layer: Layer, rel: str) -> os.stat_result | None:
    """What the command saw at `rel` before it ran: the pre-image, else the tree; lstat."""
    if rel in layer.hidden:
        return None
    for root in (layer.images, layer.tree) if layer.shadowed else (layer.tree,):
        try:
            return os.lstat(root / rel)
        except (FileNotFoundError, NotADirectoryError):
            continue
    return None


def _below_path(layer: Layer, rel: str) -> Path:
    return layer.images / rel if rel in layer.shadowed else layer.tree / rel


def _deleted(layer: Layer, rel: str, below: os.stat_result | None) -> Iterator[Change]:
    if below is None:
        return
    if stat.S_ISDIR(below.st_mode):
        yield from _files_below(layer, rel)
    else:
        yield Change(rel, ChangeKind.DELETED)


def _files_below(layer: Layer, rel: str, keep: frozenset[str] = frozenset()) -> Iterator[Change]:
    """A deletion for every file the command saw under directory `rel` (not in `keep`)."""
    seen: set[str] = set()
    for root in (layer.images, layer.tree):
        top = root / rel
        for dirpath, dirnames, filenames in os.walk(top):
            if dirpath == str(top):  # what the remade directory holds again is not deleted
                dirnames[:] = [d for d in dirnames if d not in keep]
            for name in filenames:
                path = Path(dirpath, name).relative_to(root).as_posix()
                first = path[len(rel) + 1 :].split("/", 1)[0]
                if path in seen or path in layer.hidden or first in keep:
                    continue
                seen.add(path)
                yield Change(path, ChangeKind.DELETED)


def _directory(
    layer: Layer, upper: Path, rel: str, below: os.stat_result | None, opaque: bool
) -> Iterator[Change]:
    opaque = opaque or _opaque(upper)
    if below is not None and not stat.S_ISDIR(below.st_mode):
        yield Change(rel, ChangeKind.RETYPED)  # a file replaced by a directory
    elif below is not None and opaque:  # deleted and made again: the rest is gone
        present = frozenset(os.listdir(upper))
        yield from _files_below(layer, rel, present)
    yield from _walk(layer, upper, f"{rel}/", opaque)


def _opaque(path: Path) -> bool:
    try:
        return os.getxattr(path, OPAQUE_XATTR, follow_symlinks=False) == b"y"
    except OSError:
        return False


def _entry(
    layer: Layer, path: Path, rel: str, info: os.stat_result, below: os.stat_result | None
) -> Iterator[Change]:
    mode = git_mode(info.st_mode)
    if below is not None and stat.S_ISDIR(below.st_mode):
        yield Change(rel, ChangeKind.RETYPED)  # a directory replaced by a file
    elif stat.S_ISLNK(info.st_mode):
        if (
            below is None
            or not stat.S_ISLNK(below.st_mode)
            or (os.readlink(path) != os.readlink(_below_path(layer, rel)))
        ):
            yield Change(rel, ChangeKind.SYMLINK, target=os.readlink(path))
    elif not stat.S_ISREG(info.st_mode):
        yield Change(rel, ChangeKind.SPECIAL)
    elif below is None:
        yield Change(rel, ChangeKind.CREATED, info.st_size, mode)
    elif not stat.S_ISREG(below.st_mode):
        yield Change(rel, ChangeKind.MODIFIED, info.st_size, mode)  # e.g. a link made a file
    else:
        kind = _compare(path, _below_path(layer, rel), info, below)
        if kind is not None:
            yield Change(rel, kind, info.st_size, mode)


def git_mode(st_mode: int) -> int:
    """The permission bits a change carries, as git keeps them: 0o755 if the owner may
    execute, else 0o644; never setuid, setgid or sticky, never group or world writable."""
    return EXECUTABLE_MODE if st_mode & stat.S_IXUSR else REGULAR_MODE


def _compare(
    path: Path, lower: Path, info: os.stat_result, below: os.stat_result
) -> ChangeKind | None:
    """MODIFIED, MODE or None (a copy-up that changed nothing)."""
    same_mode = git_mode(info.st_mode) == git_mode(below.st_mode)
    if info.st_size == below.st_size and _same_bytes(path, lower):
        return None if same_mode else ChangeKind.MODE
    return ChangeKind.MODIFIED


def _same_bytes(a_path: Path, b_path: Path) -> bool:
    try:
        with open(a_path, "rb") as a, open(b_path, "rb") as b:
            while True:
                chunk = a.read(COMPARE_CHUNK)
                if chunk != b.read(COMPARE_CHUNK):
                    return False
                if not chunk:
                    return True
    except OSError:
        return False


# -- sorting ------------------------------------------------------------------------

REFUSED_KINDS: Final = {
    ChangeKind.SYMLINK: "a symbolic link: commands may not make or change links",
    ChangeKind.SPECIAL: "not a regular file",
    ChangeKind.RETYPED: "a file replaced by a directory (or the reverse) cannot be rolled back",
}


def sort_changes(changes: Sequence[Change], tree: TreeRoot) -> Sorted:
    """Kept out, refused (with reasons) and to apply; see the module docstring."""
    kept: list[Change] = []
    refused: list[tuple[Change, str]] = []
    rest: list[Change] = []
    for change in changes:
        if not SKIP_DIRS.isdisjoint(change.path.split("/")) or _git_index(change.path):
            kept.append(change)
        elif (why := _refusal(change, tree)) is not None:
            refused.append((change, why))
        else:
            rest.append(change)
    ignored = _ignored(tree.root, [c.path for c in rest])
    kept += [c for c in rest if c.path in ignored]
    apply = tuple(c for c in rest if c.path not in ignored)
    return Sorted(apply, tuple(sorted(kept, key=lambda c: c.path)), tuple(refused))


def _git_index(path: str) -> bool:
    """Git's index file, which a read-only `git status` rewrites (its stat cache)."""
    parts = [p.casefold() for p in path.split("/")]
    return parts[-2:] == [GIT_DIR, GIT_INDEX]


def _refusal(change: Change, tree: TreeRoot) -> str | None:
    try:
        key = tree.canonical(change.path)
    except PathRejected as err:
        return err.message
    if key != change.path:
        return f"resolves to {key} through a symbolic link in the tree"
    if change.target is not None and _leaves(tree.root, change.path, change.target):
        return f"a symbolic link pointing outside the working tree ({change.target})"
    return REFUSED_KINDS.get(change.kind)


def _leaves(root: Path, path: str, target: str) -> bool:
    where = os.path.normpath(os.path.join(root, os.path.dirname(path), target))
    return not Path(where).is_relative_to(root)


def _ignored(root: Path, paths: list[str]) -> frozenset[str]:
    """The paths the repository at `root` ignores (`git check-ignore`); none without git."""
    if not paths or not (root / ".git").exists():
        return frozenset()
    try:
        ran = subprocess.run(
            ["git", "-C", str(root), "check-ignore", "-z", "--stdin"],
            input="".join(f"{p}\0" for p in paths).encode(),
            capture_output=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return frozenset()
    if ran.returncode not in (0, 1):  # 1: nothing ignored
        return frozenset()
    return frozenset(p for p in ran.stdout.decode(errors="surrogateescape").split("\0") if p)
