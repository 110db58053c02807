"""Pre-images, restore and patches: a failed attempt leaves nothing behind.

When the server first grants a path to a task attempt it captures the file's
state at that moment (`capture`): its bytes and mode (a symlink: its target
and `S_IFLNK`), or that it was absent, plus the directories that did not
exist yet. While the lease is held nobody
else can write the file, so when the attempt ends without success `restore`
puts that state back exactly (rewrite, or delete and remove the directories
the attempt created if they are empty) before the lease is released. On
success, `make_patch` turns pre-image and final content into a `git apply`-able
unified diff: the task's own change, attributed in one shared tree. Names in
its headers are quoted the way git quotes them (`quote_name`), so any name
git can store applies.

Everything here is plain file I/O on paths under a resolved tree root; the
engine decides when to call it and records the results in SQLite.
"""

from __future__ import annotations

import contextlib
import difflib
import errno
import hashlib
import os
import posixpath
import stat
from dataclasses import dataclass
from pathlib import Path

from codefleet.models import DEFAULT_PREIMAGE_MAX_BYTES

__all__ = [
    "PatchFile",
    "PreImage",
    "TooLarge",
    "capture",
    "content_sha256",
    "make_patch",
    "quote_name",
    "restore",
    "state_sha256",
]

DEFAULT_MAX_BYTES = DEFAULT_PREIMAGE_MAX_BYTES
ABSENT_ERRNOS = frozenset({errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP})  # as Path.exists
# A pre-image's `mode` for a symlink; a file's keeps its permission bits only.
SYMLINK_MODE = stat.S_IFLNK | 0o777
# How git's `quote_c_style` spells these characters inside a quoted name.
_C_ESCAPES = {
    "\a": "\\a",
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\v": "\\v",
    "\f": "\\f",
    "\r": "\\r",
    '"': '\\"',
    "\\": "\\\\",
}


class TooLarge(ValueError):
    def __init__(self, key: str, size: int, limit: int) -> None:
        super().__init__(f"{key} is {size} bytes, over the {limit}-byte pre-image limit")
        self.key, self.size, self.limit = key, size, limit


@dataclass(frozen=True, slots=True)
class PreImage:
    path: str
    existed: bool
    content: bytes = b""
    mode: int | None = None  # permission bits; `SYMLINK_MODE` for a symlink (content: its target)
    created_dirs: tuple[str, ...] = ()  # relative, deepest first, absent at capture

    @property
    def symlink(self) -> bool:
        return self.existed and self.mode is not None and stat.S_ISLNK(self.mode)


@dataclass(frozen=True, slots=True)
class PatchFile:
    path: str
    diff: str
    added: int
    removed: int
    binary: bool


def capture(root: Path, key: str, max_bytes: int = DEFAULT_MAX_BYTES) -> PreImage:
    """The state of `root/key` now; refuses files larger than `max_bytes`."""
    target = root / key
    try:
        info = target.lstat()
    except FileNotFoundError:
        return PreImage(key, False, created_dirs=_missing_dirs(root, key))
    if info.st_size > max_bytes:
        raise TooLarge(key, info.st_size, max_bytes)
    if stat.S_ISLNK(info.st_mode):
        return PreImage(key, True, os.readlink(os.fsencode(target)), SYMLINK_MODE)
    return PreImage(key, True, target.read_bytes(), stat.S_IMODE(info.st_mode))


def _missing_dirs(root: Path, key: str) -> tuple[str, ...]:
    """The parent directories of the canonical key `key` absent under `root`, deepest first.

    String operations, not `pathlib` (a first grant's capture runs this on the event loop;
    the `Path` version cost 50 µs, this one 6)."""
    missing: list[str] = []
    base = os.fspath(root)
    parent = posixpath.dirname(key)
    while parent and not _exists(os.path.join(base, parent)):
        missing.append(parent)
        parent = posixpath.dirname(parent)
    return tuple(missing)


def _exists(path: str) -> bool:
    """`Path(path).exists()`, without building the `Path`: the same errors mean absent."""
    try:
        os.stat(path)
    except OSError as err:
        if err.errno not in ABSENT_ERRNOS:
            raise
        return False
    except ValueError:  # not encodable
        return False
    return True


def restore(root: Path, image: PreImage) -> bool:
    """Put `image` back; idempotent. True when the file on disk changed.

    Raises `OSError` when the path cannot be put back without destroying
    something that is not the file (it became a directory, a path component
    became a file) or the file system refuses (permissions).
    """
    target = root / image.path
    if image.existed:
        return _rewrite(target, image)
    changed = False
    if target.is_dir() and not target.is_symlink():
        raise IsADirectoryError(errno.EISDIR, "is a directory now; it did not exist", str(target))
    if target.is_file() or target.is_symlink():
        target.unlink()
        changed = True
    for rel in image.created_dirs:  # deepest first
        with_dir = root / rel
        if with_dir.is_dir() and not any(with_dir.iterdir()):
            with_dir.rmdir()
    return changed


def _rewrite(target: Path, image: PreImage) -> bool:
    if _already(target, image):
        return False
    if target.is_dir() and not target.is_symlink():
        raise IsADirectoryError(errno.EISDIR, "is a directory now, not the file", str(target))
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.codefleet-restore")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    if image.symlink:
        os.symlink(image.content, os.fsencode(tmp))
    else:
        tmp.write_bytes(image.content)
        os.chmod(tmp, image.mode if image.mode is not None else 0o644)
    os.replace(tmp, target)  # a symlink left at the path is replaced, never followed
    return True


def _already(target: Path, image: PreImage) -> bool:
    """Is `target` already `image` (same kind, bytes and mode; a file without a mode: 0644)?"""
    try:
        now = current_state(target.parent, target.name)
    except OSError:
        return False
    mode = image.mode if image.mode is not None else 0o644
    return now.existed and now.content == image.content and now.mode == mode


def content_sha256(path: Path) -> str | None:
    """The hex SHA-256 of a regular file's bytes; None when there is no readable file."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
    except OSError:
        return None


def state_sha256(image: PreImage) -> str | None:
    """The hex SHA-256 of what `image` holds (a symlink: its target); None when absent.

    How a grant names a file's version to a clone runner, and how the runner checks its own."""
    return hashlib.sha256(image.content).hexdigest() if image.existed else None


def current_state(root: Path, key: str) -> PreImage:
    """What `root/key` is now, without following a symlink there: file, symlink or absent."""
    target = root / key
    try:
        info = target.lstat()
        if stat.S_ISLNK(info.st_mode):
            return PreImage(key, True, os.readlink(os.fsencode(target)), SYMLINK_MODE)
        if stat.S_ISREG(info.st_mode):
            return PreImage(key, True, target.read_bytes(), stat.S_IMODE(info.st_mode))
    except OSError as err:
        if err.errno not in ABSENT_ERRNOS:
            raise
    return PreImage(key, False)


def make_patch(before: PreImage, after: PreImage) -> PatchFile | None:
    """A git-style diff from `before` to `after`; None when nothing changed.

    A file that became a symlink (or the reverse) is a deletion then a creation,
    as git writes a type change."""
    if (
        before.existed == after.existed
        and before.content == after.content
        and before.mode == after.mode
    ):
        return None
    if before.existed and after.existed and before.symlink != after.symlink:
        gone = _one_patch(before, PreImage(before.path, False))
        made = _one_patch(PreImage(before.path, False), after)
        return PatchFile(
            before.path,
            gone.diff + made.diff,
            gone.added + made.added,
            gone.removed + made.removed,
            gone.binary or made.binary,
        )
    return _one_patch(before, after)


def _one_patch(before: PreImage, after: PreImage) -> PatchFile:
    key = before.path
    old_name, new_name = quote_name(f"a/{key}"), quote_name(f"b/{key}")
    header = [f"diff --git {old_name} {new_name}"]
    if not before.existed:
        header.append(f"new file mode {_git_mode(after.mode)}")
    elif not after.existed:
        header.append(f"deleted file mode {_git_mode(before.mode)}")
    elif before.mode != after.mode:
        header += [f"old mode {_git_mode(before.mode)}", f"new mode {_git_mode(after.mode)}"]
    old_text, new_text = _text(before.content), _text(after.content)
    if old_text is None or new_text is None:
        body = [f"Binary files {old_name} and {new_name} differ"]
        return PatchFile(key, "\n".join(header + body) + "\n", 0, 0, True)
    lines = _hunks(before, after, old_text, new_text)
    added = sum(1 for line in lines if line.startswith("+") and not line.startswith("+++"))
    removed = sum(1 for line in lines if line.startswith("-") and not line.startswith("---"))
    return PatchFile(
        key,
        "".join(line if line.endswith("\n") else line + "\n" for line in header + lines),
        added,
        removed,
        False,
    )


def quote_name(name: str) -> str:
    """`name` as git writes it in a patch header: bare, or C-quoted when it must be.

    Quoted when it holds a control character, `"`, `\\` or a byte that is not
    UTF-8 (a surrogate escape); the rest of the text is kept (git with
    `core.quotePath=false`), and `git apply` reads both back to the same name."""
    if not any(_must_quote(ch) for ch in name):
        return name
    return '"' + "".join(_quoted_char(ch) for ch in name) + '"'


def _must_quote(ch: str) -> bool:
    code = ord(ch)
    return ch in _C_ESCAPES or code < 0x20 or code == 0x7F or 0xDC80 <= code <= 0xDCFF


def _quoted_char(ch: str) -> str:
    code = ord(ch)
    if ch in _C_ESCAPES:
        return _C_ESCAPES[ch]
    if 0xDC80 <= code <= 0xDCFF:  # an undecodable byte, kept by `surrogateescape`
        return f"\\{code - 0xDC00:03o}"
    if code < 0x20 or code == 0x7F:
        return f"\\{code:03o}"
    return ch


def _hunks(before: PreImage, after: PreImage, old: str, new: str) -> list[str]:
    if old == new:
        return []
    fromfile = quote_name(f"a/{before.path}") if before.existed else "/dev/null"
    tofile = quote_name(f"b/{after.path}") if after.existed else "/dev/null"
    out: list[str] = []
    for line in difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), fromfile, tofile
    ):
        if line.endswith("\n"):
            out.append(line)
        else:  # the last line of a file without a trailing newline
            out += [line + "\n", "\\ No newline at end of file\n"]
    return out


def _text(content: bytes) -> str | None:
    if b"\x00" in content:
        return None
    try:
        return content.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _git_mode(mode: int | None) -> str:
    if mode is not None and stat.S_ISLNK(mode):
        return "120000"
    return "100755" if mode is not None and mode & 0o111 else "100644"
