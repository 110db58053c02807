"""What a check's view holds, as one digest: its content identity.

A check's result is a function of its command and the content it ran on. The
view of a check is the tree (or a clone) with the files other tasks hold shown
at their pre-images (`fleet.views.runinview.Mask`); its identity is one SHA-256
over every file of it, path by path: git's object id for a tracked file the
tree has as its index says (`git ls-files -s`), the SHA-256 of the bytes for a
file that differs from the index or is untracked (`git status`, ignored files
left out, as git leaves them out), and for a masked file its pre-image's, as
the same bytes on disk would give (the index's entry when it is the index's
content, else its mode and SHA-256: one content, one identity). Two
views with one identity hold the same bytes at the same paths, so a passing
result on one is a passing result on the other (`fleet.tools.attemptchecks`
reuses it; docs/decisions/0158-a-check-is-not-run-twice-on-the-same-content.md).

Nothing is written to the repository (no object, no index refresh:
`GIT_OPTIONAL_LOCKS=0`). No identity (None) where it cannot be said for
certain: not a git repository's top level, git missing or failing, a held file
with no pre-image (the view is not isolated from it). Ignored files are not
in it: a check whose result depends on them, on the clock or on the network
is declared `reuse: false` by its operator.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Final

from codefleet.rollback import PreImage
from codefleet.statedir import STATE_DIR

__all__ = ["view_identity"]

GIT_TIMEOUT_S: Final = 120.0


def view_identity(
    root: Path,
    images: Mapping[str, PreImage],
    unrestorable: Collection[str] = (),
    exclude: Collection[Path] = (),
) -> str | None:
    """The identity of the view of `root` with `images` shown at their pre-images; None
    when it cannot be said for certain (see the module docstring)."""
    if unrestorable or shutil.which("git") is None:
        return None
    if not _top_level(root.resolve()):
        return None
    skip = [STATE_DIR, *(_inside(root, p) for p in exclude)]
    staged, status = _git_both(
        root,
        ("ls-files", "-s", "-z"),
        ("status", "--porcelain", "-z", "--untracked-files=all", "--no-renames"),
    )
    if staged is None or status is None:
        return None
    entries: dict[str, str] = {}
    for record in staged.split(b"\0"):
        if record:
            meta, _, name = record.partition(b"\t")
            mode, oid, _stage = meta.split(b" ")
            entries[os.fsdecode(name)] = f"{mode.decode()} {oid.decode()}"
    indexed = dict(entries)  # the index's own entries, before the disk's changes
    for record in status.split(b"\0"):
        if len(record) > 3:  # "XY path": differs from the index, or untracked
            changed = os.fsdecode(record[3:])
            entries[changed] = _on_disk(root / changed)
    for path, image in images.items():
        entries[path] = _masked(image, indexed.get(path)) if image.existed else ""
    digest = hashlib.sha256()
    for path in sorted(entries):
        if entries[path] and not any(path == s or path.startswith(f"{s}/") for s in skip if s):
            digest.update(f"{path}\0{entries[path]}\0".encode(errors="surrogateescape"))
    return digest.hexdigest()


def _masked(image: PreImage, indexed: str | None) -> str:
    """A masked file's entry as the same bytes on disk would give it: the index's own entry
    when the pre-image is what the index holds, else its mode and SHA-256 (so one content
    has one identity, masked or not: a landing's base alone is the batch that landed it)."""
    if image.symlink:
        return f"link {hashlib.sha256(image.content).hexdigest()}"
    mode = "100755" if (image.mode or 0) & 0o111 else "100644"
    blob = hashlib.sha1(b"blob %d\0" % len(image.content) + image.content, usedforsecurity=False)
    if indexed == f"{mode} {blob.hexdigest()}":
        return indexed
    return f"{mode} {hashlib.sha256(image.content).hexdigest()}"


def _on_disk(path: Path) -> str:
    """A file's entry as its bytes say (a symbolic link: its target; absent: nothing)."""
    try:
        if path.is_symlink():
            return f"link {hashlib.sha256(os.fsencode(os.readlink(path))).hexdigest()}"
        if path.is_file():
            mode = "100755" if path.stat().st_mode & 0o111 else "100644"  # as git tells them
            return f"{mode} {_sha256(path)}"
    except OSError:
        return "unreadable"
    return ""


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _inside(root: Path, path: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except (ValueError, OSError):
        return ""


def _top_level(root: Path) -> bool:
    """Whether `root` is a git repository's top level; a yes is remembered (a check asks
    twice per run, and a repository's top level does not move while CodeFleet serves it)."""
    if root in _TOP_LEVELS:
        return True
    top = _git(root, "rev-parse", "--show-toplevel")
    if top is None or Path(top.decode().strip()).resolve() != root:
        return False
    _TOP_LEVELS.add(root)
    return True


_TOP_LEVELS: set[Path] = set()


def _git_both(
    root: Path, first: tuple[str, ...], second: tuple[str, ...]
) -> tuple[bytes | None, bytes | None]:
    """Two read-only git commands run at once (each is a few ms of process start)."""
    try:
        procs = [_start(root, first), _start(root, second)]
    except OSError:
        return None, None
    return _finish(procs[0]), _finish(procs[1])


def _start(root: Path, args: tuple[str, ...]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        ["git", *args], cwd=root, env={**os.environ, **_GIT_ENV},
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip


def _finish(proc: subprocess.Popen[bytes]) -> bytes | None:
    try:
        out, _ = proc.communicate(timeout=GIT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return None
    return out if proc.returncode == 0 else None


_GIT_ENV: Final = {"GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"}


def _git(root: Path, *args: str) -> bytes | None:
    env = {**os.environ, **_GIT_ENV}
    try:
        done = subprocess.run(
            ["git", *args], cwd=root, capture_output=True, env=env, timeout=GIT_TIMEOUT_S
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None
