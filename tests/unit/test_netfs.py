"""Which file system a path is on, read from the kernel's mount table (issue 33 item 2).

`serve` warns when its database is on a network file system; these read the
table's parsing and the longest-prefix rule with literal tables, and this
machine's own table for a path that is on a local disk.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from codefleet.server.netfs import (
    cache_problems,
    mount_of,
    network_fs,
    network_type,
    parse_mounts,
    serve_warnings,
)

TABLE = """\
overlay / overlay rw,relatime,lowerdir=/a,upperdir=/b,workdir=/c 0 0
proc /proc proc rw,nosuid,nodev,noexec,relatime 0 0
tmpfs /srv tmpfs rw,nosuid,nodev 0 0
fileserver:/export/repo /srv/repo nfs4 rw,relatime,vers=4.2,hard,proto=tcp 0 0
//nas/share /mnt/my\\040share cifs rw,relatime,vers=3.1.1 0 0
sshfs#me@host:/work /mnt/work fuse.sshfs rw,nosuid,nodev 0 0
"""


@pytest.mark.parametrize(
    ("path", "point", "fstype"),
    [
        ("/srv/repo/.codefleet/codefleet.db", "/srv/repo", "nfs4"),
        ("/srv/repo", "/srv/repo", "nfs4"),
        ("/srv/repository/x", "/srv", "tmpfs"),  # a name sharing the prefix is not inside
        ("/mnt/my share/db", "/mnt/my share", "cifs"),  # the table's \040 is a space
        ("/mnt/work/db", "/mnt/work", "fuse.sshfs"),
        ("/var/lib/codefleet/db", "/", "overlay"),
    ],
)
def test_a_path_is_on_the_mount_with_the_longest_matching_point(
    path: str, point: str, fstype: str
) -> None:
    mount = mount_of(path, parse_mounts(TABLE))

    assert mount is not None and (mount.point, mount.fstype) == (point, fstype)


def test_the_last_of_two_mounts_on_one_point_is_the_one_in_effect() -> None:
    stacked = parse_mounts(TABLE + "server:/other /srv/repo nfs rw 0 0\n")

    mount = mount_of("/srv/repo/db", stacked)

    assert mount is not None and (mount.fstype, mount.source) == ("nfs", "server:/other")


@pytest.mark.parametrize(
    ("fstype", "network"),
    [("nfs", True), ("nfs4", True), ("cifs", True), ("smb3", True), ("fuse.sshfs", True),
     ("fuse", True), ("ceph", True), ("ext4", False), ("xfs", False), ("tmpfs", False),
     ("overlay", False), ("btrfs", False)],
)  # fmt: skip
def test_network_types_are_nfs_smb_the_cluster_file_systems_and_fuse(
    fstype: str, network: bool
) -> None:
    assert network_type(fstype) is network


def test_a_database_on_this_machines_temporary_directory_is_not_on_a_network(
    tmp_path: Path,
) -> None:
    assert network_fs(tmp_path / ".codefleet" / "codefleet.db") is None


@pytest.mark.parametrize(
    ("options", "missing"),
    [
        ("rw,vers=4.2,hard,proto=tcp,acregmin=3,acregmax=60,acdirmin=30,acdirmax=60",
         ["lookupcache=positive", "actimeo=0"]),
        ("rw,vers=4.2,acregmin=0,acregmax=0,acdirmin=0,acdirmax=0,lookupcache=pos", []),
        ("rw,vers=3,noac,lookupcache=none", []),
        ("rw,vers=3,lookupcache=pos,acregmin=3,acregmax=60,acdirmin=30,acdirmax=60",
         ["actimeo=0"]),
    ],
)  # fmt: skip
def test_the_servers_nfs_mount_of_the_tree_must_not_cache_lookups_or_attributes(
    options: str, missing: list[str]
) -> None:
    [mount] = parse_mounts(f"fs:/export/repo /srv/repo nfs4 {options} 0 0\n")

    assert cache_problems(mount) == missing


def test_only_nfs_mounts_are_held_to_the_cache_options() -> None:
    [mount] = parse_mounts("//nas/share /mnt/share cifs rw,relatime 0 0\n")

    assert cache_problems(mount) == []


def test_serve_has_nothing_to_say_about_a_tree_and_database_on_a_local_disk(
    tmp_path: Path,
) -> None:
    assert serve_warnings(tmp_path / ".codefleet" / "codefleet.db", tmp_path) == []
