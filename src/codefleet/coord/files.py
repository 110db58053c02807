"""The engine's file duties: pre-images on first grant, restore or patch at attempt end.

Restore-before-release: while a task attempt holds a path's lease nobody else
can write it, so the state captured at the first grant is still the state to
return to. File I/O cannot be rolled back with a transaction (STYLE §19), so a
failed attempt's files are put back in three steps:

1. the transition that ends the attempt (and fences its runner, if it is taken
   back) records a restore intent per leased path (`restores` table, event
   `restore_requested`) and keeps those leases held; it commits;
2. `finish_restores` puts each file back (idempotent: a restore run twice
   leaves the same tree) outside any transaction;
3. one more transaction releases what was restored (`file_restored` per file
   that changed, then `lease_released`) and deletes its intent and pre-image.

A crash anywhere in between leaves the intent, the pre-images and the leases
in SQLite, with the fence already committed: the restarted engine finishes
the restores before it serves anyone. A file that cannot be restored (it
became a directory, a path component became a file, permissions) is that
task's fault only: its lease stays held (never released over a file we could
not put back), the intent keeps the error (`restore_failed`), and the task
fails with `infra` naming the path (docs/decisions.md, "A file that cannot be
restored keeps its lease"). A restart or `retry` tries again.

On success the task's patch (pre-image -> result) is recorded and its
pre-images deleted, in the transition itself: reading files has no side
effect to undo. With `rollback` off (`--keep-failed-edits`) nothing is
captured, restored or recorded.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any

from codefleet.models import DenyReason, ErrorKind, EventType, ReleaseReason, to_iso
from codefleet.rollback import PreImage, TooLarge, capture, current_state, make_patch, restore

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from codefleet.coord.index import LiveIndex, LiveTask
    from codefleet.coord.store import Row, Store
    from codefleet.paths import TreeRoot

__all__ = ["FilesMixin"]

log = logging.getLogger(__name__)


class FilesMixin:
    store: Store
    tree: TreeRoot
    index: LiveIndex
    clock: Callable[[], datetime]
    rollback: bool
    preimage_max_bytes: int
    leases: dict[str, tuple[str, str]]
    task_leases: dict[str, set[str]]
    restoring: dict[str, dict[str, str | None]]  # task -> path -> error (None: not tried yet)

    if TYPE_CHECKING:

        def transition(self) -> AbstractContextManager[None]: ...
        def drop_leases(self, task_id: str, paths: Iterable[str], reason: str) -> None: ...
        def _fail(self, task: LiveTask, kind: ErrorKind, error: str, now: datetime) -> None: ...

    def capture_preimages(self, task_id: str, keys: list[str]) -> list[dict[str, Any]]:
        """Capture every new key's pre-image, or return the denials (nothing captured)."""
        if not self.rollback:
            return []
        images: list[PreImage] = []
        denied: list[dict[str, Any]] = []
        for key in keys:
            try:
                images.append(capture(self.tree.root, key, self.preimage_max_bytes))
            except TooLarge as err:
                denied.append({"path": key, "reason": DenyReason.TOO_LARGE, "message": str(err)})
            except OSError as err:  # unreadable: refuse the write rather than lose the file
                denied.append(
                    {"path": key, "reason": DenyReason.INVALID_PATH, "message": f"{key}: {err}"}
                )
        if denied:
            return denied
        at = to_iso(self.clock())
        for image in images:
            self.store.insert_preimage(task_id, image, at)
        return []

    def record_patches(self, task_id: str) -> None:
        """A succeeded attempt: its patch per file, then its pre-images go (no file is written)."""
        if not self.rollback:
            return
        images = self.store.preimages_of_task(task_id)
        for image in images:
            patch = make_patch(image, current_state(self.tree.root, image.path))
            if patch is not None:
                self.store.insert_patch(task_id, patch)
        if images:
            self.store.delete_preimages_of_task(task_id)

    def request_restores(self, task_id: str, paths: set[str], reason: ReleaseReason) -> set[str]:
        """Step 1, in the caller's transaction: the paths with a pre-image stay held for restore."""
        if not self.rollback:
            return set()
        kept = sorted(paths.intersection(self.store.preimage_paths_of_task(task_id)))
        if not kept:
            return set()
        self.store.insert_restores(task_id, kept, reason, to_iso(self.clock()))
        self.restoring.setdefault(task_id, {}).update(dict.fromkeys(kept))
        self.store.emit(EventType.RESTORE_REQUESTED, task_id=task_id, paths=kept, reason=reason)
        return set(kept)

    def restores_due(self) -> list[str]:
        """Tasks with a restore not yet tried (a failed one waits for a restart or a retry)."""
        return sorted(t for t, paths in self.restoring.items() if None in paths.values())

    def finish_restores(self, task_ids: Iterable[str] | None = None) -> None:
        """Steps 2 and 3 for each task (default: every task with a restore not yet tried)."""
        for task_id in sorted(self.restoring if task_ids is None else task_ids):
            if task_id in self.restoring:
                self._finish_restore(task_id)

    def _finish_restore(self, task_id: str) -> None:
        rows = self.store.restores_of_task(task_id)
        images = {image.path: image for image in self.store.preimages_of_task(task_id)}
        outcomes = list(_put_back(self.tree.root, rows, images))  # file I/O, no transaction open
        with self.transition():
            failed = []
            for row, changed, error in outcomes:
                if error is None:
                    self._restored(task_id, row, changed, images.get(row["path"]))
                else:
                    failed.append(self._unrestorable(task_id, row, error))
            if failed:
                self._fail_unrestored(task_id, failed)

    def _restored(self, task_id: str, row: Row, changed: bool, image: PreImage | None) -> None:
        path = row["path"]
        if changed and image is not None:
            self.store.emit(
                EventType.FILE_RESTORED, task_id=task_id, path=path, existed=image.existed
            )
        self.store.delete_restored(task_id, path)
        self._forget_restore(task_id, path)
        self.drop_leases(task_id, [path], row["reason"])

    def _unrestorable(self, task_id: str, row: Row, error: str) -> str:
        path = row["path"]
        if row["error"] != error:
            self.store.fail_restore(task_id, path, error)
            self.store.emit(EventType.RESTORE_FAILED, task_id=task_id, path=path, error=error)
        self.restoring[task_id][path] = error
        return error

    def _fail_unrestored(self, task_id: str, errors: list[str]) -> None:
        """The attempt's requeue is void: a task whose file cannot be put back fails (`infra`)."""
        task = self.index.live.get(task_id)
        if task is None:
            return  # already failed or cancelled: the event and the held lease say the rest
        message = (
            f"could not restore {'; '.join(errors)}; the lease stays held until the file is "
            "repaired (then `codefleet retry`, or a server restart, restores and releases it)"
        )
        self._fail(task, ErrorKind.INFRA, message, self.clock())

    def _forget_restore(self, task_id: str, path: str) -> None:
        paths = self.restoring.get(task_id, {})
        paths.pop(path, None)
        if not paths:
            self.restoring.pop(task_id, None)

    def load_restores(self) -> None:
        self.restoring = {}
        for row in self.store.restores():
            self.restoring.setdefault(row["task_id"], {})[row["path"]] = row["error"]

    def unrestorable_of(self, task_id: str) -> dict[str, str]:
        """The task's paths whose restore failed, with the error."""
        return {p: e for p, e in self.restoring.get(task_id, {}).items() if e is not None}

    def patch_of(self, task_id: str) -> list[Row]:
        return self.store.patches_of_task(task_id)


def _put_back(
    root: Any, rows: list[Row], images: dict[str, PreImage]
) -> Iterator[tuple[Row, bool, str | None]]:
    """(row, changed, error) per restore row; an OSError is that file's, not the fleet's."""
    for row in rows:
        image = images.get(row["path"])
        if image is None:  # nothing was captured (rollback was off when it was granted)
            yield row, False, None
            continue
        try:
            yield row, restore(root, image), None
        except OSError as err:
            why = err.strerror or str(err)
            log.warning("could not restore %s: %s", row["path"], err)
            yield row, False, f"{row['path']}: {why}"
