"""Is a path on a network file system? `serve` asks it of the database and of the tree.

The database must be on a disk of the server's own host: SQLite's WAL mode
shares memory between the processes that open it, which a second host cannot
see, its locks over NFS are as unreliable as the one-server `flock`
(`server.lock`), and the default database is inside the tree, which on a fleet
across hosts is exactly the network file system (docs/decisions/0132-who-touches-the-disk-when-runners-are-on-other-hosts.md, "Who
touches the disk when runners are on other hosts").

The answer comes from the kernel's mount table (`/proc/self/mounts`): the
mount whose mount point is the longest prefix of the resolved path, and its
type. Network types are NFS, SMB/CIFS, the cluster file systems, 9p and every
FUSE file system (sshfs, s3fs, juicefs and the like: most FUSE mounts in
front of a tree are remote; a local one only costs a warning). Anywhere
without `/proc` the answer is "not known", never a refusal.

The tree on NFS is expected; but the server's mount of it must not cache
negative lookups or attributes, or a file another host just created can look
absent to the server's pre-image, whose restore would delete it
(`cache_problems`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Final

__all__ = [
    "MOUNTS",
    "Mount",
    "cache_problems",
    "mount_of",
    "network_fs",
    "network_type",
    "parse_mounts",
    "serve_warnings",
]

MOUNTS: Final = Path("/proc/self/mounts")
NETWORK_TYPES: Final = frozenset(
    {
        "nfs",
        "nfs4",
        "cifs",
        "smb3",
        "smbfs",
        "9p",
        "ceph",
        "glusterfs",
        "lustre",
        "afs",
        "gpfs",
        "beegfs",
        "ocfs2",
        "gfs2",
        "fuse",
        "fuseblk",
    }
)
_ESCAPE: Final = re.compile(r"\\([0-7]{3})")  # the mount table writes a space as \040
UNCACHED_LOOKUPS: Final = frozenset({"pos", "positive", "none"})  # the kernel shows "pos"
ATTRIBUTE_TIMES: Final = ("acregmin", "acregmax", "acdirmin", "acdirmax")


@dataclass(frozen=True, slots=True)
class Mount:
    point: str
    fstype: str
    source: str
    options: tuple[str, ...] = ()


def parse_mounts(text: str) -> list[Mount]:
    """The mount table's lines (`source point type options dump pass`) as `Mount`s."""
    found = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 3:
            source, point = (_ESCAPE.sub(lambda m: chr(int(m[1], 8)), f) for f in fields[:2])
            options = tuple(fields[3].split(",")) if len(fields) > 3 else ()
            found.append(Mount(point, fields[2], source, options))
    return found


def mount_of(path: str, mounts: list[Mount]) -> Mount | None:
    """The mount holding absolute `path`: the last-mounted of the longest matching points."""
    best: Mount | None = None
    for mount in mounts:
        point = mount.point.rstrip("/") or "/"
        inside = path == point or path.startswith(point + "/") or point == "/"
        if inside and (best is None or len(point) >= len(best.point.rstrip("/") or "/")):
            best = mount
    return best


def network_type(fstype: str) -> bool:
    return fstype in NETWORK_TYPES or fstype.startswith("fuse.")


def network_fs(path: Path) -> Mount | None:
    """The network mount `path` (or, not yet existing, its nearest ancestor) is on, if any."""
    try:
        mounts = parse_mounts(MOUNTS.read_text())
    except OSError:  # no /proc here: not known
        return None
    mount = mount_of(os.path.realpath(path), mounts)
    return mount if mount is not None and network_type(mount.fstype) else None


def cache_problems(mount: Mount) -> list[str]:
    """The NFS mount options the server's mount of the tree lacks: uncached negative
    lookups and attributes (docs/decisions/0132-who-touches-the-disk-when-runners-are-on-other-hosts.md, "Who touches the disk ...")."""
    if not mount.fstype.startswith("nfs"):
        return []
    keyed = dict(o.split("=", 1) for o in mount.options if "=" in o)
    missing = []
    if keyed.get("lookupcache") not in UNCACHED_LOOKUPS:
        missing.append("lookupcache=positive")
    if "noac" not in mount.options and any(keyed.get(k) != "0" for k in ATTRIBUTE_TIMES):
        missing.append("actimeo=0")
    return missing


def serve_warnings(db: Path, tree: Path) -> list[str]:
    """What `serve` says before it starts: a database on a network file system, a tree on
    an NFS mount that caches what the server must see fresh."""
    said = []
    on = network_fs(db)
    if on is not None:
        said.append(
            f"the database {db} is on a network file system ({on.fstype} at {on.point}): "
            "SQLite's WAL and the one-server lock need a disk of this host. Pass --db (or "
            "set CODEFLEET_DB) to a path on a local disk"
        )
    mount = network_fs(tree)
    missing = cache_problems(mount) if mount is not None else []
    if mount is not None and missing:
        said.append(
            f"the tree {tree} is on {mount.fstype} at {mount.point} without "
            f"{' and '.join(missing)}: a file another host just created can look absent "
            "here, and a failed task's restore would then delete it. Remount the tree on "
            f"this host with -o {','.join(missing)}"
        )
    return said
