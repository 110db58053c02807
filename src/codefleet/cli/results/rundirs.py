"""The run directory's contents: what `codefleet runs` lists and `--prune` removes.

Every entry of the run directory is listed with its size and age: the demo
workspaces (`demo-<stamp>-<hex>`, each a tree, a database and its runners'
records) and the record directories `run` and `runner` keep (`runners/`,
`sessions/`, `homes/`). Pruning removes demo workspaces only, keeping the
newest `keep` by the stamp in their names, and never one whose database a live server holds
(the server's lock, `serverlock`).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from codefleet.server.lock import LOCK_SUFFIX, DatabaseInUse, ServerLock

__all__ = ["RunEntry", "list_runs", "prune_runs"]

DEMO_PREFIX = "demo-"


@dataclass(frozen=True, slots=True)
class RunEntry:
    path: Path
    size: int  # bytes, every file below it
    modified: float  # newest mtime below it, seconds since the epoch

    @property
    def is_demo(self) -> bool:
        return self.path.name.startswith(DEMO_PREFIX) and self.path.is_dir()


def _measure(path: Path) -> tuple[int, float]:
    size, newest = 0, path.lstat().st_mtime
    for root, _, files in os.walk(path):
        for name in files:
            try:
                info = os.lstat(os.path.join(root, name))
            except OSError:  # removed while we walk: it no longer counts
                continue
            size += info.st_size
            newest = max(newest, info.st_mtime)
    return size, newest


def list_runs(run_dir: Path) -> list[RunEntry]:
    """The run directory's entries, newest first (empty when it does not exist)."""
    if not run_dir.is_dir():
        return []
    entries = [RunEntry(p, *_measure(p)) for p in run_dir.iterdir() if p.name != ".gitignore"]
    return sorted(entries, key=lambda e: (-e.modified, e.path.name))


def _in_use(workspace: Path) -> bool:
    db = workspace / "codefleet.db"
    if not db.with_name(db.name + LOCK_SUFFIX).exists():
        return False
    try:
        ServerLock.acquire(db).release()
    except DatabaseInUse:
        return True
    return False


def prune_runs(run_dir: Path, keep: int) -> tuple[list[RunEntry], list[RunEntry]]:
    """Remove all but the newest `keep` demo workspaces; returns (removed, kept in use)."""
    # Newest by the stamp in the name: a live server touching its database does not make an
    # old workspace new.
    demos = sorted(
        (e for e in list_runs(run_dir) if e.is_demo), key=lambda e: e.path.name, reverse=True
    )
    removed, busy = [], []
    for entry in demos[keep:]:
        if _in_use(entry.path):
            busy.append(entry)
            continue
        shutil.rmtree(entry.path)
        removed.append(entry)
    return removed, busy
