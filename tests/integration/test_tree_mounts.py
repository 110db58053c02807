"""One tree, two mount points: a runner whose workdir is another path to the server's tree.

The runner process runs in its own mount namespace (`unshare -m`) where the
server's tree is bind-mounted at a directory that, outside it, is empty: the
same files under another path, as on another host's NFS mount, and not a
symlink (`realpath` cannot bring the two paths together). The runner
registers by the tree's identity, its task is assigned, its write lands in
the server's tree and is leased and recorded by its tree-relative path; a
failed attempt's edit is put back by the server on its own mount.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import yaml
from tool_support import require_tool, unavailable

from codefleet.api.client import FleetClient
from codefleet.server.thread import ServerThread

CLI = [sys.executable, "-m", "codefleet.cli"]


def _private_mount_works(unshare: str, tree: Path, mount: Path) -> bool:
    probe = f"mount --bind {shlex.quote(str(tree))} {shlex.quote(str(mount))}"
    done = subprocess.run([unshare, "-m", "--propagation", "private", "sh", "-c", probe],
                          capture_output=True, text=True, timeout=30)  # fmt: skip
    return done.returncode == 0


def _in_other_mount(tree: Path, mount: Path, argv: list[str]) -> list[str]:
    """`argv` run where `tree` is also at `mount`, in a mount namespace of its own."""
    unshare = require_tool("unshare", "a second mount of the tree", "util-linux")
    if not _private_mount_works(unshare, tree, mount):
        unavailable("this kernel refuses a private mount namespace (unshare -m: root needed)")
    script = f"mount --bind {shlex.quote(str(tree))} {shlex.quote(str(mount))} && exec {shlex.join(argv)}"  # fmt: skip
    return [unshare, "-m", "--propagation", "private", "sh", "-c", script]


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("CODEFLEET_")}


async def test_a_runner_on_another_mount_of_the_tree_works_by_tree_relative_paths(
    server: ServerThread, workdir: Path, tmp_path: Path
) -> None:
    mount = tmp_path / "mnt" / "repo"  # empty here; the tree, in the runner's namespace
    mount.mkdir(parents=True)
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump({
        "W": [{"write": {"path": "a.py", "content": "A = 'from the other mount'\n"}}],
        "F": [{"write": {"path": "pkg/b.py", "content": "B = 'never kept'\n"}},
              {"fail": "this attempt fails"}],
    }))  # fmt: skip
    async with FleetClient(server.url) as client:
        await client.create_tasks([
            {"id": "W", "title": "write a", "description": "d", "file_scope": ["a.py"]},
            {"id": "F", "title": "fail b", "description": "d", "file_scope": ["pkg/b.py"],
             "max_attempts": 1},
        ])  # fmt: skip
    runner = [*CLI, "runner", "--name", "far", "--dry-run", "--script", str(script),
              "--server", server.url, "--workdir", str(mount),
              "--run-dir", str(tmp_path / "runs"), "--exit-when-drained"]  # fmt: skip

    done = subprocess.run(_in_other_mount(workdir, mount, runner), capture_output=True,
                          text=True, timeout=120, env=_env())  # fmt: skip

    assert done.returncode == 0, done.stderr
    assert list(mount.iterdir()) == []  # the bind mount was the runner's alone
    assert (workdir / "a.py").read_text() == "A = 'from the other mount'\n"
    assert (workdir / "pkg" / "b.py").read_text() == "B = 2\n"  # restored by the server
    async with FleetClient(server.url) as client:
        [agent] = await client.agents()
        written = await client.task("W")
        leased = await client.events(type_="lease_acquired")
        statuses = {t["id"]: t["status"] for t in await client.tasks()}
    assert agent["workdir"] == str(mount)
    assert statuses == {"W": "succeeded", "F": "failed"}
    assert [c["path"] for c in written["file_changes"]] == ["a.py"]
    assert sorted(e["payload"]["path"] for e in leased) == ["a.py", "pkg/b.py"]
