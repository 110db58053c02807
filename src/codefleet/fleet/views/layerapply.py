"""Applying a command's changes to the shared tree: through the leases, all or nothing.

The changes `fleet.views.layerchanges` sorted "to apply" reach the tree only after the
attempt's `WriteGate` granted every one of their leases in ONE request (the
same door and the same all-or-nothing rule as a write tool's call; the
server takes each first-granted path's pre-image, so a failed attempt's
rollback puts them back like any write). Refused, nothing is applied and the
answer is the gate's own denial text: a path another task holds is a veto
(`blocked_on`), exactly as for a refused `Write`.

Before asking, two cheap refusals, each applying nothing: over the limits
(`ShellLimits`: files, bytes), or a file in the tree changed after the layer
was built (its ctime is newer: a task finished it while the command ran, and
applying would overwrite work the command never saw).

Granted: deletions first (and directories the command removed, once empty),
then each file written in `STAGING_DIR` (under the tree's `.codefleet/`, so
a temporary name never meets a file of the tree) and renamed over its target
(atomic per file), with its mode as git keeps it (`changes.git_mode`); then
one ledger row per path, with its hash.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import stat
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from codefleet.fleet.gate.prewrite import WriteGate
from codefleet.fleet.views.layer import Layer
from codefleet.fleet.views.layerchanges import REGULAR_MODE, Change, ChangeKind
from codefleet.statedir import STATE_DIR, prepare_dirs

__all__ = ["COMMAND_TOOL", "Applied", "ShellLimits", "apply_changes"]

COMMAND_TOOL: Final = "run_command"  # the tool name on its lease and ledger rows
DEFAULT_MAX_FILES: Final = 1000
DEFAULT_MAX_BYTES: Final = 64 * 1024 * 1024
# Where a file is written before it is renamed over its target: the tree's own state
# directory (same file system, protected, never a name in the tree another task holds).
STAGING_DIR: Final = f"{STATE_DIR}/staging"


@dataclass(frozen=True, slots=True)
class ShellLimits:
    max_files: int = DEFAULT_MAX_FILES
    max_bytes: int = DEFAULT_MAX_BYTES


@dataclass(frozen=True, slots=True)
class Applied:
    applied: tuple[str, ...] = ()
    denied: str | None = None  # why nothing was applied (None: all of it was)
    denied_on: str | None = None  # the path another task holds (a veto)


async def apply_changes(
    gate: WriteGate, layer: Layer, changes: Sequence[Change], limits: ShellLimits
) -> Applied:
    """Apply every change or none; see the module docstring. Never raises for a refusal."""
    if not changes:
        return Applied()
    refusal = over_limits(changes, limits) or changed_meanwhile(layer, changes)
    if refusal is not None:
        return Applied(denied=refusal)
    verdict = await gate.acquire(COMMAND_TOOL, [c.path for c in changes])
    if not verdict.allowed:
        return Applied(denied=verdict.reason, denied_on=verdict.blocked_on)
    await asyncio.to_thread(put_all, layer, changes)
    await asyncio.gather(*(gate.record(c.path, COMMAND_TOOL) for c in changes))
    return Applied(applied=tuple(c.path for c in changes))


def over_limits(changes: Sequence[Change], limits: ShellLimits) -> str | None:
    size = sum(c.size for c in changes)
    if len(changes) > limits.max_files:
        return (
            f"The command changed {len(changes)} files, over the limit of {limits.max_files} "
            "(CODEFLEET_SHELL_MAX_FILES); nothing was applied."
        )
    if size > limits.max_bytes:
        return (
            f"The command's changes hold {size} bytes, over the limit of {limits.max_bytes} "
            "(CODEFLEET_SHELL_MAX_BYTES); nothing was applied."
        )
    return None


def changed_meanwhile(layer: Layer, changes: Sequence[Change]) -> str | None:
    """A refusal naming the files the shared tree changed after the layer was built."""
    moved = [c.path for c in changes if _ctime(layer.tree / c.path) > layer.started_ns]
    if not moved:
        return None
    return (
        f"{', '.join(moved[:10])} changed in the shared tree while the command ran (another "
        "task finished work there); nothing was applied. Read the file(s) again and run the "
        "command again."
    )


def _ctime(path: Path) -> int:
    try:
        return os.lstat(path).st_ctime_ns
    except (FileNotFoundError, NotADirectoryError):
        return 0


def put_all(layer: Layer, changes: Sequence[Change]) -> None:
    """Deletions first, then each file atomically (staged in `STAGING_DIR`, then renamed)."""
    deleted = [c.path for c in changes if c.kind is ChangeKind.DELETED]
    for path in deleted:
        _delete(layer, path)
    staging = layer.tree / STAGING_DIR
    if len(deleted) < len(changes):
        prepare_dirs(staging)
    for change in changes:
        if change.kind is not ChangeKind.DELETED:
            _put(layer, change, staging)


def _delete(layer: Layer, path: str) -> None:
    try:
        (layer.tree / path).unlink()
    except FileNotFoundError:
        return
    parent = os.path.dirname(path)
    while parent and _removed_in_layer(layer, parent):  # `rm -r dir`: the directory goes too
        try:
            (layer.tree / parent).rmdir()
        except OSError:
            return  # not empty: other files are still there
        parent = os.path.dirname(parent)


def _removed_in_layer(layer: Layer, directory: str) -> bool:
    try:
        info = os.lstat(layer.upper / directory)
    except (FileNotFoundError, NotADirectoryError):
        return False
    return stat.S_ISCHR(info.st_mode) and info.st_rdev == 0


def _put(layer: Layer, change: Change, staging: Path) -> None:
    target = layer.tree / change.path
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix="command-", dir=staging)
    os.close(fd)
    try:
        shutil.copyfile(layer.upper / change.path, name, follow_symlinks=False)
        os.chmod(name, change.mode if change.mode is not None else REGULAR_MODE)
        os.replace(name, target)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise
