"""The command layer: an overlay over the shared tree that a command writes into.

A command (`run_command`) runs in a user + mount namespace (`unshare`) where
an overlayfs is mounted ON the tree's own path: the lower layers are the
pre-images of files other in-flight tasks hold (`images/`, above) and the live
tree (below); the upper layer (`upper/`) takes every write. So the command
sees the tree as the isolated check view shows it (its own task's edits and
finished work; files other tasks hold at their pre-images), at the tree's own
path (a project's virtualenv and editable installs keep working), and
nothing it does reaches the shared tree: what changed is read from `upper/`
afterwards (`fleet.views.layerchanges`). Files another task created (pre-image
"absent") are removed through the mount before the command starts, which
leaves overlayfs whiteouts in `upper/` that the collection recognises.

Setting up costs one small directory per held file, never a walk of the
tree. The namespace that mounts the layer is root; the command never is: it
runs in a NESTED user namespace as `inner_ids()` with no capabilities, where
the kernel locks the layer's mount (no umount, no remount). With bubblewrap
(`Sandbox.bwrap`, 0.8 or later) that namespace is bwrap's (`--unshare-user
--disable-userns --cap-drop ALL`): the rest of the file system read-only,
private `/tmp` and `/var/tmp`, its own PID namespace (everything dies with
it), no network unless `Sandbox.network`. Without it (`--shell-unsandboxed`)
a second `unshare` makes it (`UNSANDBOXED`: its own PID namespace and
`/proc` too): the tree at its path is still reached only through the layer,
but the command may write whatever else the user may. docs/decisions/0104-commands-run-in-an-overlay-layer.md,
"Commands run in an overlay layer"; docs/security-commands.md, "Commands".
"""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from codefleet.fleet.views.copyview import SKIP_DIRS
from codefleet.rollback import PreImage

__all__ = [
    "Layer",
    "LayerError",
    "Sandbox",
    "ShellSupport",
    "build_layer",
    "inner_ids",
    "layer_argv",
    "shell_line",
    "shell_support",
]

BWRAP_PATHS: Final = ("/usr/bin/bwrap", "/usr/local/bin/bwrap")
HIDDEN_FILE: Final = "hidden"
# A mount option value cannot hold these unescaped; such a tree path is refused.
MOUNT_UNSAFE: Final = frozenset(",:\\\n")
PROBE_TIMEOUT_S: Final = 10.0
# Who a command runs as when the runner is root: any uid but 0 (mapped to the runner's).
UNPRIVILEGED_ID: Final = 1000
# Without bubblewrap: a nested user namespace (the layer's mount locked in it), its own
# PID namespace and /proc (no other process to reach the tree through), no capabilities.
UNSANDBOXED: Final = ("--user", "--mount", "--pid", "--fork", "--kill-child", "--mount-proc")
# Runs inside the namespace: $1 tree, $2 lowerdir, $3 layer base, then the command's argv.
SETUP_SCRIPT: Final = """set -e
tree=$1; lower=$2; base=$3; shift 3
mount -t overlay codefleet-layer -o "lowerdir=$lower,upperdir=$base/upper,workdir=$base/work,userxattr" "$tree"
while IFS= read -r path; do rm -f -- "$tree/$path" 2>/dev/null || :; done < "$base/hidden"
cd "$tree"
exec "$@"
"""


class LayerError(OSError):
    """The layer cannot be built here (no user namespaces, an unusable path)."""


@dataclass(frozen=True, slots=True)
class Sandbox:
    """How a command is confined: `bwrap` is the bubblewrap binary, or None (unsandboxed)."""

    bwrap: str | None
    network: bool = False


@dataclass(frozen=True, slots=True)
class Layer:
    tree: Path  # the real tree root: where the overlay is mounted inside the namespace
    base: Path  # images/, upper/, work/ and the hidden list
    shadowed: frozenset[str]  # shown at a pre-image that existed
    hidden: frozenset[str]  # shown absent: another task created them
    started_ns: int  # wall clock when the layer was built (`time.time_ns`)

    @property
    def images(self) -> Path:
        return self.base / "images"

    @property
    def upper(self) -> Path:
        return self.base / "upper"

    @property
    def lower(self) -> str:
        """The overlay's `lowerdir`: the pre-images (if any) above the tree."""
        return f"{self.images}:{self.tree}" if self.shadowed else str(self.tree)


def build_layer(tree: Path, base: Path, images: Iterable[PreImage]) -> Layer:
    """Lay out `base` (an empty directory) for a layer over `tree` showing `images`."""
    for path in (tree, base):
        if MOUNT_UNSAFE.intersection(str(path)):
            raise LayerError(f"{path}: a layer cannot be mounted over a path with , : or \\")
    for name in ("images", "upper", "work"):
        (base / name).mkdir()
    shadowed, hidden = set(), set()
    for image in images:
        if not SKIP_DIRS.isdisjoint(image.path.split("/")) or "\n" in image.path:
            continue
        if image.existed:
            _put_image(base / "images", image)
            shadowed.add(image.path)
        else:
            hidden.add(image.path)
    (base / HIDDEN_FILE).write_text("".join(f"{p}\n" for p in sorted(hidden)))
    return Layer(tree, base, frozenset(shadowed), frozenset(hidden), time.time_ns())


def _put_image(images: Path, image: PreImage) -> None:
    target = images / image.path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(image.content)
    os.chmod(target, image.mode if image.mode is not None else 0o644)


def layer_argv(layer: Layer, command: str, sandbox: Sandbox, unshare: str) -> list[str]:
    """The argv that runs `command` (through `/bin/sh -c`) in `layer`, confined by `sandbox`.

    The outer namespace (root in it) mounts the layer; the command runs in a
    nested one, as `inner_ids()` without capabilities, where that mount is locked."""
    uid, gid = inner_ids()
    if sandbox.bwrap is not None:
        options = _bwrap_options(layer.tree, sandbox.network, uid, gid)
        confine = [sandbox.bwrap, *options, "--"]
    else:
        confine = [unshare, f"--map-user={uid}", f"--map-group={gid}", *UNSANDBOXED, "--"]
    setup = ["/bin/sh", "-c", SETUP_SCRIPT, "codefleet-layer"]
    namespace = [unshare, "--user", "--map-root-user", "--mount", "--propagation", "private"]
    layout = [str(layer.tree), layer.lower, str(layer.base)]
    return [*namespace, *setup, *layout, *confine, "/bin/sh", "-c", command]


def shell_line(argv: list[str]) -> str:
    """`layer_argv`'s argv as the line `fleet.views.shell.run_command` hands its shell."""
    return "exec " + shlex.join(argv)


def inner_ids() -> tuple[int, int]:
    """The uid and gid a command runs as: the runner's, or `UNPRIVILEGED_ID` for root."""
    uid, gid = os.getuid(), os.getgid()
    return (uid, gid) if uid != 0 else (UNPRIVILEGED_ID, UNPRIVILEGED_ID)


def _bwrap_options(tree: Path, network: bool, uid: int, gid: int) -> list[str]:
    root = str(tree)
    options = [
        "--unshare-user",
        "--disable-userns",
        "--uid",
        str(uid),
        "--gid",
        str(gid),
        "--cap-drop",
        "ALL",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
        "--tmpfs",
        "/var/tmp",
        "--bind",
        root,
        root,
        "--unshare-pid",
        "--unshare-ipc",
        "--die-with-parent",
        "--new-session",
        "--chdir",
        root,
    ]
    return options if network else [*options, "--unshare-net"]


@dataclass(frozen=True, slots=True)
class ShellSupport:
    """What this host offers commands: the namespace tool, bubblewrap, or why not."""

    unshare: str | None
    bwrap: str | None
    problem: str | None  # why no layer can be built here (None: it can)

    @property
    def describe(self) -> str:
        if self.problem is not None:
            return f"commands cannot run here: {self.problem}"
        if self.bwrap is None:
            return "commands run in an overlay layer, NOT sandboxed (no bubblewrap)"
        return f"commands run in an overlay layer, sandboxed by bubblewrap ({self.bwrap})"


@functools.cache
def shell_support() -> ShellSupport:
    """Probe once: can a layer be mounted here, and is bubblewrap present (and working)?"""
    unshare = shutil.which("unshare")
    bwrap = next((p for p in BWRAP_PATHS if os.access(p, os.X_OK)), shutil.which("bwrap"))
    if unshare is None:
        return ShellSupport(None, bwrap, "the `unshare` program (util-linux) is not installed")
    with tempfile.TemporaryDirectory(prefix="codefleet-probe-") as scratch:
        tree, base = Path(scratch, "tree"), Path(scratch, "layer")
        tree.mkdir()
        base.mkdir()
        layer = build_layer(tree, base, ())
        if bwrap is not None and _probe(layer_argv(layer, "true", Sandbox(bwrap), unshare)):
            bwrap = None  # present but unusable here (or older than 0.8): "not sandboxed"
        if bwrap is None and (problem := _probe(layer_argv(layer, "true", Sandbox(None), unshare))):
            return ShellSupport(unshare, None, f"no overlay in a user namespace ({problem})")
    return ShellSupport(unshare, bwrap, None)


def _probe(argv: list[str]) -> str | None:
    try:
        ran = subprocess.run(argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as err:
        return str(err)
    if ran.returncode != 0:
        return (ran.stderr.strip() or f"exit code {ran.returncode}")[-300:]
    return None
