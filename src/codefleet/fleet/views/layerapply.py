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
(atomic per file), with its mode as git keeps it (`layerchanges.git_mode`); then
one ledger row per path, with its hash.

With leases by part (the gate's `granularity`), a file with parts the command
modified asks for the parts its text changes against the text the command saw
(`toolcalls.writeparts.rewrite_parts`; the pre-image the layer showed, for a file
another task was editing), and lands by part: under the grant, which latches the
file, the current file takes only those parts as the command left them, if each is
still as the command saw it (`merge_rewrite`); another holder's parts stay as they
are. A file whose parts cannot be mapped is leased and written whole, as above.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import stat
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from codefleet.fleet.gate.prewrite import WriteGate
from codefleet.fleet.views.layer import Layer
from codefleet.fleet.views.layerchanges import REGULAR_MODE, Change, ChangeKind
from codefleet.models import Granularity
from codefleet.statedir import STATE_DIR, prepare_dirs
from codefleet.toolcalls.leasekeys import part_key
from codefleet.toolcalls.writeparts import merge_rewrite, rewrite_parts

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
    parted = await asyncio.to_thread(rewrites, layer, changes, gate.granularity)
    # a file the layer showed at another task's pre-image is checked part by part instead
    watched = [c for c in changes if not (c.path in parted and c.path in layer.shadowed)]
    refusal = over_limits(changes, limits) or changed_meanwhile(layer, watched)
    if refusal is not None:
        return Applied(denied=refusal)
    keys = [k for c in changes for k in (parted[c.path].keys if c.path in parted else [c.path])]
    verdict = await gate.acquire(COMMAND_TOOL, keys)
    if not verdict.allowed:
        return Applied(denied=verdict.reason, denied_on=verdict.blocked_on)
    texts, refusal = await asyncio.to_thread(merged_under_grant, layer, watched, parted)
    if refusal is not None:
        return Applied(denied=refusal)
    await asyncio.to_thread(put_all, layer, changes, texts)
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


@dataclass(frozen=True, slots=True)
class Rewrite:
    """A command's change to a file with parts, by part: what it saw, what it left, the parts."""

    path: str
    seen: bytes
    after: bytes
    names: frozenset[str]

    @property
    def keys(self) -> list[str]:
        return [part_key(self.path, name) for name in sorted(self.names)]


def rewrites(
    layer: Layer, changes: Sequence[Change], granularity: Granularity
) -> dict[str, Rewrite]:
    """The modified files that land by part (none when leases are by file)."""
    if granularity is not Granularity.PART:
        return {}
    found: dict[str, Rewrite] = {}
    for change in changes:
        if change.kind is not ChangeKind.MODIFIED:
            continue
        lower = layer.images if change.path in layer.shadowed else layer.tree
        try:
            seen = (lower / change.path).read_bytes()
            after = (layer.upper / change.path).read_bytes()
        except OSError:
            continue
        names = rewrite_parts(change.path, seen, after)
        if names:
            found[change.path] = Rewrite(change.path, seen, after, names)
    return found


def merged_under_grant(
    layer: Layer, watched: Sequence[Change], parted: Mapping[str, Rewrite]
) -> tuple[dict[str, bytes], str | None]:
    """Under the grant: the text each file by part lands as, or the refusal (nothing applied).

    Another part's holder may have written a watched file between the first look and
    the grant, so that look is taken again; a file by part needs each of its parts as
    the command saw it."""
    refusal = changed_meanwhile(layer, watched)
    if refusal is not None:
        return {}, refusal
    texts: dict[str, bytes] = {}
    for path, rewrite in parted.items():
        try:
            current = (layer.tree / path).read_bytes()
        except OSError:
            current = b""
        merged = merge_rewrite(path, current, rewrite.seen, rewrite.after, rewrite.names)
        if merged is None:
            return {}, (
                f"{path}: {', '.join(rewrite.keys)} changed in the shared tree while the "
                "command ran (another task finished work there); nothing was applied. Read "
                "the file again and run the command again."
            )
        texts[path] = merged
    return texts, None


def _ctime(path: Path) -> int:
    try:
        return os.lstat(path).st_ctime_ns
    except (FileNotFoundError, NotADirectoryError):
        return 0


def put_all(
    layer: Layer, changes: Sequence[Change], texts: Mapping[str, bytes] | None = None
) -> None:
    """Deletions first, then each file atomically (staged in `STAGING_DIR`, then renamed):
    its text in `texts` (a file landing by part), else the layer's copy."""
    deleted = [c.path for c in changes if c.kind is ChangeKind.DELETED]
    for path in deleted:
        _delete(layer, path)
    staging = layer.tree / STAGING_DIR
    if len(deleted) < len(changes):
        prepare_dirs(staging)
    for change in changes:
        if change.kind is not ChangeKind.DELETED:
            _put(layer, change, staging, (texts or {}).get(change.path))


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


def _put(layer: Layer, change: Change, staging: Path, text: bytes | None) -> None:
    target = layer.tree / change.path
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix="command-", dir=staging)
    os.close(fd)
    try:
        if text is None:
            shutil.copyfile(layer.upper / change.path, name, follow_symlinks=False)
        else:
            Path(name).write_bytes(text)
        os.chmod(name, change.mode if change.mode is not None else REGULAR_MODE)
        os.replace(name, target)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise
