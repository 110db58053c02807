"""The other paths at which this host sees a directory: its bind mounts, read from the kernel.

A subdirectory of a served tree bind-mounted elsewhere (`mount --bind tree/sub /mnt/x`)
shows nothing of the tree above it at `/mnt/x`: walking up from there never meets the
tree's `.codefleet/server.json`. The kernel's table of this process's mounts
(`/proc/self/mountinfo`) says, for each mount, which directory of its file system it
shows (its *root*) and where; so the directory at `/mnt/x` is also at every mount point
of the same file system whose root contains it, at the matching path (`aliases`). A path
is an alias only if it exists here and is the same directory (device and inode), so a
mount hidden under another, or gone, is no alias. Without `/proc` there are none: not
known, never a refusal (docs/decisions/0150-a-server-record-is-believed-only-where-it-could-only-be-yours.md).
Standard library only: the fast commands import it through `treelock`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Final, NamedTuple

__all__ = ["MOUNTINFO", "MountView", "aliases", "parse_mountinfo"]

MOUNTINFO: Final = Path("/proc/self/mountinfo")
_ESCAPE: Final = re.compile(r"\\([0-7]{3})")  # the table writes a space as \040


class MountView(NamedTuple):
    """One mount: its file system (`major:minor`), the directory of it shown, and where."""

    device: str
    root: str
    point: str


def parse_mountinfo(text: str) -> list[MountView]:
    """The table's lines (`id parent major:minor root point ...`) as `MountView`s."""
    found = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 5:
            root, point = (_ESCAPE.sub(lambda m: chr(int(m[1], 8)), f) for f in fields[3:5])
            found.append(MountView(fields[2], root, point))
    return found


def aliases(path: Path, mounts: list[MountView] | None = None) -> list[Path]:
    """Other paths on this host of the directory `path` (resolved), nearest mount first."""
    here = os.path.realpath(path)
    if mounts is None:
        try:
            mounts = parse_mountinfo(MOUNTINFO.read_text())
        except OSError:  # no /proc here: not known
            return []
    holder = _holding(here, mounts)
    if holder is None:
        return []
    inside = _join(holder.root, _below(here, holder.point))
    found = []
    for mount in mounts:
        if mount.device != holder.device or _below(inside, mount.root) is None:
            continue
        other = _join(mount.point, _below(inside, mount.root))
        if other != here and other not in found and _same_dir(other, here):
            found.append(other)
    return [Path(p) for p in found]


def _holding(path: str, mounts: list[MountView]) -> MountView | None:
    """The mount `path` is on: the last mounted of the longest matching mount points."""
    best: MountView | None = None
    for mount in mounts:
        if _below(path, mount.point) is not None and (
            best is None or len(mount.point) >= len(best.point)
        ):
            best = mount
    return best


def _below(path: str, top: str) -> str | None:
    """`path` relative to `top` ("" for `top` itself), or None when it is not under it."""
    top = top.rstrip("/")
    if path == top or (not top and path == "/"):
        return ""
    return path[len(top) + 1 :] if path.startswith(top + "/") else None


def _join(top: str, rest: str | None) -> str:
    return os.path.join(top, rest) if rest else top


def _same_dir(one: str, two: str) -> bool:
    try:
        a, b = os.stat(one), os.stat(two)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)
