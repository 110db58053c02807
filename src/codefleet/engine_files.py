"""The engine's file duties: pre-images on first grant, restore or patch at attempt end.

Restore-before-release: while a task attempt holds a path's lease nobody else
can write it, so the state captured at the first grant is still the state to
return to. `settle_files` runs inside the transaction that ends the attempt,
BEFORE the leases are released: on failure it restores every path (emitting
`file_restored` per file that changed), on success it records the task's patch;
then the pre-images are deleted. If the server dies midway, the transaction
rolls back, so leases and pre-images are still in SQLite; the attempt's end is
driven again (the runner retries its report, or stale detection takes the task
back) and restore, being idempotent, finishes the job.

With `rollback` off (`--keep-failed-edits`) nothing is captured or restored
and no patch is recorded.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from codefleet.models import DenyReason, EventType, to_iso
from codefleet.rollback import PreImage, TooLarge, capture, current_state, make_patch, restore

if TYPE_CHECKING:
    from codefleet.paths import TreeRoot
    from codefleet.store import Row, Store

__all__ = ["FilesMixin"]

log = logging.getLogger(__name__)


class FilesMixin:
    store: Store
    tree: TreeRoot
    clock: Callable[[], datetime]
    rollback: bool
    preimage_max_bytes: int

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

    def settle_files(self, task_id: str, succeeded: bool) -> None:
        """Restore (failure) or record the patch (success); runs before the release."""
        if not self.rollback:
            return
        images = self.store.preimages_of_task(task_id)
        for image in images:
            if succeeded:
                patch = make_patch(image, current_state(self.tree.root, image.path))
                if patch is not None:
                    self.store.insert_patch(task_id, patch)
            elif restore(self.tree.root, image):
                self.store.emit(
                    EventType.FILE_RESTORED, task_id=task_id, path=image.path, existed=image.existed
                )
        if images:
            self.store.delete_preimages_of_task(task_id)

    def patch_of(self, task_id: str) -> list[Row]:
        return self.store.patches_of_task(task_id)
