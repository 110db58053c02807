"""The copy view: a throwaway copy of the shared tree, where no layer can be mounted.

`copy_tree` copies the tree into a fresh directory with real, independent
files (a copy-on-write reflink where the filesystem offers one, else a byte
copy; never a hard link), so nothing a check writes can reach the shared
tree through the copy. It skips what is regenerable or private:

- `SKIP_DIRS` anywhere (virtualenvs, `node_modules`, bytecode and tool caches);
- the protected paths inside the tree (the database and its WAL files, the
  run directory);
- `.git` internals: the view gets a `.git` with the repository's small
  metadata (HEAD, config, refs, index, info) and an `objects/info/alternates`
  entry pointing at the original object store, which git only ever reads, so
  `git status`, `git diff` and version-from-git tools work without copying
  history. A `.git` *file* (a worktree or submodule) is not copied: its gitdir
  is shared state a check could write to.

Symlinks stay symlinks; one that resolves inside the tree is re-pointed into
the view, one that resolves outside keeps pointing there (absolute). The tree
moves while it is copied (other tasks write, a restore removes what a failed
attempt created): an entry that is gone by the time it is copied is left out
(`GONE`), as if the copy had been taken a moment later, and `settle` brings the
copy level with the tree once the mask has been fetched again: a file removed or
rewritten since it was copied (a failed attempt's file, leased, written and put
back between the two fetches, is in neither mask) is removed or copied again.

`overlay` then puts back the pre-image of every path another in-flight task
holds (rewriting it, or deleting it if it did not exist), reusing
`rollback.restore`, so the view is the tree as if only this task's work and
finished work existed. Plain file I/O, no network, no clock besides timing.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from codefleet.rollback import PreImage, restore

__all__ = ["SKIP_DIRS", "ViewStats", "copy_tree", "overlay", "settle"]

SKIP_DIRS: Final = frozenset(
    {
        ".venv",
        "venv",
        "node_modules",
        "__pycache__",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".tox",
        ".nox",
        ".hypothesis",
    }
)
# Inside .git: what the view does not copy (history comes through alternates).
GIT_SKIP: Final = frozenset({"objects", "hooks", "logs", "lfs", "modules", "worktrees"})
FICLONE: Final = 0x40049409  # linux/fs.h: _IOW(0x94, 9, int)
NO_SENDFILE: Final = frozenset({errno.EINVAL, errno.ENOSYS, errno.ENOTSOCK, errno.EOPNOTSUPP})
NO_REFLINK: Final = frozenset(
    {errno.EOPNOTSUPP, errno.ENOTTY, errno.EXDEV, errno.EINVAL, errno.EBADF, errno.ENOSYS}
)


GONE: Final = (FileNotFoundError, NotADirectoryError)  # removed while the tree was copied


@dataclass(frozen=True, slots=True)
class ViewStats:
    files: int
    bytes: int
    reflinked: int
    git: bool
    ms: float
    # each copied file (relative path) -> its change time in the tree when it was copied
    copied: Mapping[str, int] = field(default_factory=dict, repr=False, compare=False)


class _Copier:
    def __init__(self, source: Path, dest: Path, exclude: Iterable[Path]) -> None:
        self.source = source
        self.dest = dest
        self.exclude = frozenset(str(p) for p in exclude)
        self.files = self.bytes = self.reflinked = 0
        self.copied: dict[str, int] = {}
        self.try_reflink = sys.platform.startswith("linux")

    def copy_dir(self, src: str, dst: str, top: bool = False) -> None:
        os.mkdir(dst)
        with os.scandir(src) as entries:
            for entry in entries:
                if entry.name == ".git" or entry.path in self.exclude:
                    continue  # the root's .git is handled by `_copy_git`
                target = os.path.join(dst, entry.name)
                try:
                    self._copy_entry(entry, target)
                except GONE:
                    if not os.path.lexists(entry.path):  # gone meanwhile: so it is in the view
                        shutil.rmtree(target, ignore_errors=True)
                        continue
                    raise
        if not top:
            shutil.copymode(src, dst)

    def _copy_entry(self, entry: os.DirEntry[str], target: str) -> None:
        if entry.is_symlink():
            self.link(entry.path, target)
        elif entry.is_dir(follow_symlinks=False):
            if entry.name not in SKIP_DIRS:
                self.copy_dir(entry.path, target)
        elif entry.is_file(follow_symlinks=False):
            self.copy_file(entry.path, target)

    def copy_file(self, src: str, dst: str) -> None:
        """One independent copy with mode and times: a reflink, else `sendfile`."""
        reader = os.open(src, os.O_RDONLY | os.O_CLOEXEC)
        try:
            info = os.fstat(reader)
            mode = stat.S_IMODE(info.st_mode)
            writer = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
            try:
                if not (self.try_reflink and self._reflink(reader, writer)):
                    _send(reader, writer, info.st_size)
                os.fchmod(writer, mode)  # the umask may have narrowed it
                os.utime(writer, ns=(info.st_atime_ns, info.st_mtime_ns))
            finally:
                os.close(writer)
        finally:
            os.close(reader)
        self.files += 1
        self.bytes += info.st_size
        self.copied[os.path.relpath(src, self.source)] = info.st_ctime_ns

    def _reflink(self, reader: int, writer: int) -> bool:
        """A copy-on-write clone (btrfs, XFS, ...); False, and never again, if unsupported."""
        import fcntl

        try:
            fcntl.ioctl(writer, FICLONE, reader)
        except OSError as err:
            if err.errno in NO_REFLINK:
                self.try_reflink = False
                return False
            raise
        self.reflinked += 1
        return True

    def link(self, src: str, dst: str) -> None:
        resolved = Path(os.path.realpath(src))
        if resolved.is_relative_to(self.source):
            target = self.dest / resolved.relative_to(self.source)
            os.symlink(os.path.relpath(target, os.path.dirname(dst)), dst)
        else:
            os.symlink(resolved, dst)


def _send(reader: int, writer: int, size: int) -> None:
    """Copy in the kernel (`sendfile`), or by reads and writes where it cannot."""
    offset = 0
    try:
        while offset < size:
            sent = os.sendfile(writer, reader, offset, size - offset)
            if sent == 0:  # the file shrank while we copied it
                return
            offset += sent
    except OSError as err:
        if err.errno not in NO_SENDFILE:
            raise
        os.lseek(reader, offset, os.SEEK_SET)
        while chunk := os.read(reader, 1 << 20):
            view = memoryview(chunk)
            while view:
                view = view[os.write(writer, view) :]


def copy_tree(source: Path, dest: Path, exclude: Iterable[Path] = ()) -> ViewStats:
    """Copy `source` (a resolved directory) to `dest` (must not exist); see the module doc."""
    started = time.perf_counter()
    source = source.resolve()
    skipped = {str(p.resolve()) for p in (*exclude, dest.parent)}  # a TMPDIR inside the tree
    skipped |= {f"{p}{suffix}" for p in skipped for suffix in ("-wal", "-shm", "-journal")}
    copier = _Copier(source, dest, (Path(p) for p in skipped))
    copier.copy_dir(str(source), str(dest), top=True)
    git = _copy_git(source / ".git", dest / ".git")
    ms = (time.perf_counter() - started) * 1000.0
    return ViewStats(copier.files, copier.bytes, copier.reflinked, git, ms, copier.copied)


def settle(source: Path, dest: Path, copied: Mapping[str, int], masked: Iterable[str]) -> int:
    """Bring the copy level with the tree for each copied file not `masked`: removed from
    the copy if gone from the tree, copied again if changed since; how many were."""
    source = source.resolve()
    copier = _Copier(source, dest, ())
    skip = set(masked)
    moved = 0
    for rel, ctime in copied.items():
        if rel in skip:
            continue
        try:
            now = os.lstat(source / rel).st_ctime_ns
        except GONE:
            now = None
        if now == ctime:
            continue
        moved += 1
        with contextlib.suppress(FileNotFoundError):
            os.unlink(dest / rel)
        if now is not None:
            with contextlib.suppress(*GONE):
                copier.copy_file(str(source / rel), str(dest / rel))
    return moved


def _copy_git(git: Path, target: Path) -> bool:
    """The repository's metadata with the object store borrowed read-only (alternates)."""
    if git.is_symlink() or not git.is_dir():
        return False
    target.mkdir()
    for entry in os.scandir(git):
        if entry.name in GIT_SKIP:
            continue
        if entry.is_dir(follow_symlinks=False):
            shutil.copytree(entry.path, target / entry.name, symlinks=True)
        elif entry.is_file(follow_symlinks=False):
            shutil.copyfile(entry.path, target / entry.name)
    info = target / "objects" / "info"
    info.mkdir(parents=True)
    (target / "objects" / "pack").mkdir()
    borrowed = [str(git / "objects")]
    with contextlib.suppress(OSError):  # the original may itself borrow objects
        for line in (git / "objects" / "info" / "alternates").read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                borrowed.append(str((git / "objects" / line.strip()).resolve()))
    (info / "alternates").write_text("".join(f"{path}\n" for path in borrowed))
    return True


def overlay(dest: Path, images: Iterable[PreImage]) -> list[str]:
    """Put each pre-image back in the view; returns the paths that changed.

    A path under a skipped directory is left alone: the view has no such directory.
    """
    changed = []
    for image in images:
        if SKIP_DIRS.isdisjoint(Path(image.path).parts) and _put_back(dest, image):
            changed.append(image.path)
    return changed


def _put_back(dest: Path, image: PreImage) -> bool:
    """`restore` in the view; a directory where the file was (made behind the lock's back,
    so the shared tree keeps it until a person repairs it) is removed: the view is a copy."""
    try:
        return restore(dest, image)
    except IsADirectoryError:
        target = dest / image.path
        if target.is_symlink() or not target.is_dir():
            raise
        shutil.rmtree(target)
        return restore(dest, image) or True
