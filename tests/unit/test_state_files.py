"""The state directory's modes, and the other paths of a bind-mounted directory (issue 51 items 2, 3, 10).

A `.codefleet` the user's group or others may write is made private when a server
takes it, and the server's record is `0600`, so no other user can open it to hold
its lock. `mountpaths.aliases` maps a directory to the other places its file
system is mounted, from a literal mount table: a path is an alias only when it is
the same directory there.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from codefleet.mountpaths import MountView, aliases, parse_mountinfo
from codefleet.treelock import TreeLock, server_file


def test_a_state_directory_others_may_write_is_made_private_and_the_record_is_0600(
    tmp_path: Path,
) -> None:
    state = tmp_path / ".codefleet"
    state.mkdir()
    state.chmod(0o777)

    lock = TreeLock.acquire(tmp_path, "http://127.0.0.1:1", tmp_path / "db.sqlite")
    try:
        assert stat.S_IMODE(os.stat(state).st_mode) == 0o755
        assert stat.S_IMODE(os.stat(server_file(tmp_path)).st_mode) == 0o600
    finally:
        lock.release()


def test_a_directory_is_also_where_another_mount_of_its_file_system_shows_it(
    tmp_path: Path,
) -> None:
    sub = tmp_path / "tree" / "pkg"
    sub.mkdir(parents=True)
    (tmp_path / "again").symlink_to("/")  # stands for a second mount of / at tmp/again
    table = (
        "27 1 8:1 / / rw - ext4 /dev/vda rw\n"
        f"40 27 8:1 / {tmp_path}/again rw - ext4 /dev/vda rw\n"
        f"41 27 9:9 / {tmp_path}/other\\040fs rw - tmpfs none rw\n"
    )
    mounts = parse_mountinfo(table)

    found = aliases(sub, mounts)

    assert mounts[2] == MountView("9:9", "/", f"{tmp_path}/other fs")
    assert found == [tmp_path / "again" / str(sub).lstrip("/")]
    assert aliases(sub, mounts[:1]) == []  # one mount: no other path
    assert aliases(tmp_path / "nowhere", mounts) == []  # a path of nothing is no alias
