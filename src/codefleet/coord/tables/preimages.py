"""The pre-images part: each file as a task first held it, put back or patched at attempt end.

This part owns `restoring` (task -> path -> the restore's last error, None
while not tried) and every pre-image, restore-intent and patch row; the lease
table calls it to capture and to settle, the engine to put files back. It
never releases a lease or fails a task itself: it says what was restored and
what could not be, and the engine does the rest in its transaction.

Restore-before-release: while a task attempt holds a path's lease nobody else
can write it, so the state captured at the first grant is still the state to
return to. File I/O cannot be rolled back with a transaction (STYLE §19), so a
failed attempt's files are put back in three steps:

1. the transition that ends the attempt (and fences its runner, if it is taken
   back) records a restore intent per leased path (`restores` table, event
   `restore_requested`) and keeps those leases held; it commits;
2. `Restores.finish` (`coord/tables/restores.py`) puts each file back (idempotent: a
   restore run twice leaves the same tree) outside any transaction;
3. one more transaction releases what was restored (`file_restored` per file
   that changed, then `lease_released`) and deletes its intent and pre-image.

A crash anywhere in between leaves the intent, the pre-images and the leases
in SQLite, with the fence already committed: the restarted engine finishes
the restores before it serves anyone. A file that cannot be restored (it
became a directory, a path component became a file, permissions) is that
task's fault only: its lease stays held (never released over a file we could
not put back), the intent keeps the error (`restore_failed`), and the task
fails with `infra` naming the path (docs/decisions/0031-a-file-that-cannot-be-restored-keeps-its-lease.md, "A file that cannot be
restored keeps its lease"). A restart or `retry` tries again.

On success the task's patch (pre-image -> result) is recorded and its
pre-images deleted, in the transition itself: reading files has no side
effect to undo. With `rollback` off (`--keep-failed-edits`) nothing is
captured, restored or recorded.

Parts (`parts`, a mapper per kind of file): a task that holds parts of a file, not the whole
file, has the file's pre-image like any other, but only its parts are put back
(`put_back_parts`), so another holder's concurrent change to another part stays.
Its patch runs from the file without its parts and without those of tasks still
holding parts, to the file without those others' parts: the patches apply in the
order the tasks land. A check's view of a file others hold parts of shows it
with their parts put back. Where the parts cannot be found again, a file no one
else holds is put back whole; one that others hold parts of is not (a restore
fails and keeps its lease, a view lists it as not isolated). An empty pre-image
(an empty `__init__.py`) has no parts: every part the task holds it added.

A task granted whole a file it held parts of (a write the gate could not map to
parts, with nobody else in the file) has its pre-image moved to the file as it is
then with only its parts as they were (`rebased`): what others changed meanwhile
and landed is in the file now, so its restore, a view and its patch keep it
(docs/decisions/0148-a-part-to-whole-upgrade-moves-the-pre-image.md).
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from codefleet.coord.policy.answers import Denial
from codefleet.coord.storage.rows import RestoreRow
from codefleet.coord.storage.store import Store
from codefleet.models import DenyReason, EventType, ReleaseReason, to_iso
from codefleet.parts.kinds import mapper_for
from codefleet.parts.putback import put_back_parts
from codefleet.paths import TreeRoot
from codefleet.resources import is_resource_key
from codefleet.rollback import PreImage, TooLarge, capture, current_state, make_patch, restore
from codefleet.toolcalls.leasekeys import file_of

__all__ = ["HoldersOn", "Preimages", "PutBack", "uncovered"]

log = logging.getLogger(__name__)

# (file) -> task -> the parts of it the task holds (None: the whole file): `LeaseTable.holders_on`
HoldersOn = Callable[[str], Mapping[str, frozenset[str] | None]]


@dataclass(frozen=True, slots=True)
class PutBack:
    """Step 2's outcome for one restore intent: `error` None when the file is back."""

    row: RestoreRow
    changed: bool
    error: str | None
    image: PreImage | None


class Preimages:
    """Pre-images, restore intents and patches of one tree; runs on the engine's thread."""

    def __init__(
        self,
        store: Store,
        tree: TreeRoot,
        clock: Callable[[], datetime],
        rollback: bool,
        preimage_max_bytes: int,
    ) -> None:
        self.store = store
        self.tree = tree
        self.clock = clock
        self.rollback = rollback
        self.preimage_max_bytes = preimage_max_bytes
        self.restoring: dict[str, dict[str, str | None]] = {}
        # file -> (until, its state when a task was granted parts of it to write): while that
        # task's tool writes it, reads of it here take this, never a half-written file
        self.stills: dict[str, tuple[datetime, PreImage]] = {}

    def hold_still(self, path: str, until: datetime) -> None:
        """A task may write parts of `path` now, until `until`: keep the file as it is."""
        try:
            self.stills[path] = (until, current_state(self.tree.root, path))
        except OSError:
            self.stills.pop(path, None)

    def let_go(self, path: str) -> None:
        self.stills.pop(path, None)

    def file_now(self, path: str) -> PreImage:
        """The file as it is, or as it was before its writer's tool call, while one runs."""
        until, still = self.stills.get(path, (None, None))
        if until is not None and still is not None and until > self.clock():
            return still
        return current_state(self.tree.root, path)

    def capture_preimages(self, task_id: str, keys: list[str]) -> list[Denial]:
        """Capture every new key's pre-image, or return the denials (nothing captured)."""
        if not self.rollback:
            return []
        images: list[PreImage] = []
        denied: list[Denial] = []
        for key in keys:
            try:
                images.append(capture(self.tree.root, key, self.preimage_max_bytes))
            except TooLarge as err:
                denied.append(Denial(key, DenyReason.TOO_LARGE, str(err)))
            except OSError as err:  # unreadable: refuse the write rather than lose the file
                denied.append(Denial(key, DenyReason.INVALID_PATH, f"{key}: {err}"))
        if denied:
            return denied
        at = to_iso(self.clock())
        for image in images:
            self.store.insert_preimage(task_id, image, at)
        return []

    def rebased(
        self, task_id: str, upgrades: Mapping[str, frozenset[str]]
    ) -> tuple[list[PreImage], list[Denial]]:
        """The pre-images a grant of whole files the task held parts of (`upgrades`: file ->
        those parts) moves to: the file as it is now with only its parts as they were. Or the
        denials, where its parts cannot be found again (nothing is changed either way)."""
        if not self.rollback:
            return [], []
        images: list[PreImage] = []
        denied: list[Denial] = []
        for path, names in sorted(upgrades.items()):
            image = self.store.preimage_of(task_id, path)
            if image is None or not image.existed:
                continue
            now = self.file_now(path)
            content = (
                _put_back(path, now.content, [(image.content, names)]) if now.existed else None
            )
            if content is None:
                denied.append(Denial(path, DenyReason.INVALID_PATH, _not_rebased(path, names)))
            else:
                images.append(replace(image, content=content, mode=now.mode))
        return images, denied

    def rebase(self, task_id: str, images: Iterable[PreImage]) -> None:
        """Keep `rebased`'s pre-images (caller's transaction, with the grant)."""
        for image in images:
            self.store.rebase_preimage(task_id, image)

    def record_patches(
        self,
        task_id: str,
        parts: Mapping[str, frozenset[str]],
        holders_on: HoldersOn,
        passed_on: Mapping[str, PreImage] | None = None,
    ) -> None:
        """A succeeded attempt: its patch per file, then its pre-images go (no file is written).

        `parts`: file -> the parts the task held of it (files it held whole are not in it);
        `passed_on`: file -> the task's result in a file it passed on while it waited to land
        (the file has moved on since: `policy.stacks`)."""
        if not self.rollback:
            return
        images = self.store.preimages_of_task(task_id)
        for image in images:
            after = (passed_on or {}).get(image.path) or self.file_now(image.path)
            before = image
            if image.path in parts and after.existed:
                before, after = self._part_patch_ends(
                    task_id, image, after, parts[image.path], holders_on(image.path)
                )
            patch = make_patch(before, after)
            if patch is not None:
                self.store.insert_patch(task_id, patch)
        if images:
            self.store.delete_preimages_of_task(task_id)

    def _part_patch_ends(
        self,
        task_id: str,
        image: PreImage,
        after: PreImage,
        names: frozenset[str],
        holders: Mapping[str, frozenset[str] | None],
    ) -> tuple[PreImage, PreImage]:
        """The file without the other holders' parts, before and after this task's parts: the
        patch that applies once the tasks that landed before it did. Unmappable: the whole
        file's pre-image to now (it then carries the others' changes made so far)."""
        others = self._others_taken(task_id, image.path, holders)
        if others is not None:
            end = _put_back(image.path, after.content, others)
            start = _put_back(image.path, after.content, [*others, (image.content, names)])
            if end is not None and start is not None:
                return replace(image, content=start), replace(after, content=end)
        return image, after

    def _others_taken(
        self, task_id: str, path: str, holders: Mapping[str, frozenset[str] | None]
    ) -> list[tuple[bytes, frozenset[str]]] | None:
        """Each other holder's pre-image of `path` with the parts it holds; None when one
        holds it whole or has no pre-image of it."""
        taken: list[tuple[bytes, frozenset[str]]] = []
        for holder, names in sorted(holders.items()):
            if holder == task_id:
                continue
            image = self.store.preimage_of(holder, path)
            if names is None or image is None:
                return None
            taken.append((image.content, names))
        return taken

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

    def forget(self, task_id: str, path: str) -> None:
        """Drop the task's pre-image of `path` and any restore of it (caller's transaction):
        what it stacked there is undone by the restore of the task under it."""
        self.store.delete_restored(task_id, path)
        paths = self.restoring.get(task_id, {})
        paths.pop(path, None)
        if not paths:
            self.restoring.pop(task_id, None)

    def restores_due(self) -> list[str]:
        """Tasks with a restore not yet tried (a failed one waits for a restart or a retry)."""
        return sorted(t for t, paths in self.restoring.items() if None in paths.values())

    def put_back(
        self,
        task_id: str,
        parts: Mapping[str, frozenset[str]],
        holders_on: HoldersOn,
        being_written: Callable[[str], bool] = lambda _: False,
    ) -> list[PutBack]:
        """Step 2: put each of the task's files back (only its parts, where it held parts);
        file I/O, no transaction open.

        A file whose parts it held and that another task is writing this instant
        (`being_written`: between its grant and its recorded write) is left due: its tool
        read the file before and writes it whole after, so a restore now would either be
        read half-done or be written over. The next tick tries again."""
        rows = self.store.restore_rows(task_id)
        images = {image.path: image for image in self.store.preimages_of_task(task_id)}
        outcomes: list[PutBack] = []
        for row in rows:
            if row.path in parts and being_written(row.path):
                continue
            image: PreImage | str | None = images.get(row.path)
            if isinstance(image, PreImage) and row.path in parts:
                shared = any(t != task_id for t in holders_on(row.path))
                image = self._parts_put_back(image, parts[row.path], shared)
            outcomes.append(_put_back_one(self.tree.root, row, image))
        return outcomes

    def _parts_put_back(
        self, image: PreImage, names: frozenset[str], shared: bool
    ) -> PreImage | str:
        """The file as it is now with the task's parts as they were; the whole pre-image when
        nobody else holds a part of it; else why it cannot be put back."""
        now = current_state(self.tree.root, image.path)
        content = (
            _put_back(image.path, now.content, [(image.content, names)]) if now.existed else None
        )
        if content is not None:
            return replace(image, content=content, mode=now.mode)
        if not shared:
            return image
        return (
            f"{image.path}: its parts {', '.join(sorted(names))} could not be found again "
            "to put back, and other tasks hold other parts of it"
        )

    def settle_restored(self, done: PutBack) -> None:
        """Step 3 for a file that is back (caller's transaction); the lease table releases it."""
        task_id, path = done.row.task_id, done.row.path
        if done.changed and done.image is not None:
            self.store.emit(
                EventType.FILE_RESTORED, task_id=task_id, path=path, existed=done.image.existed
            )
        self.forget(task_id, path)

    def settle_unrestorable(self, failed: PutBack) -> str:
        """A file that could not be put back keeps its intent, with the error; returns it."""
        row, error = failed.row, failed.error or ""
        if row.error != error:
            self.store.fail_restore(row.task_id, row.path, error)
            self.store.emit(
                EventType.RESTORE_FAILED, task_id=row.task_id, path=row.path, error=error
            )
        self.restoring[row.task_id][row.path] = error
        return error

    def load(self) -> None:
        self.restoring = {}
        for row in self.store.restore_rows():
            self.restoring.setdefault(row.task_id, {})[row.path] = row.error

    def reload(self, task_ids: Iterable[str]) -> None:
        """Re-read the restore intents of tasks a rolled-back transaction touched."""
        for task_id in task_ids:
            self.restoring.pop(task_id, None)
            for row in self.store.restore_rows(task_id):
                self.restoring.setdefault(task_id, {})[row.path] = row.error

    def unrestorable_of(self, task_id: str) -> dict[str, str]:
        """The task's paths whose restore failed, with the error."""
        return {p: e for p, e in self.restoring.get(task_id, {}).items() if e is not None}

    def foreign_preimages(
        self,
        task_id: str,
        leased: Mapping[str, tuple[str, str]],
        holders_on: HoldersOn,
        bases: Iterable[str] = (),
    ) -> dict[str, Any]:
        """Pre-images of every file another task holds (or holds parts of): what the isolated
        view puts back. `bases`: the tasks it stacked on, whose work its view keeps.

        Without rollback nothing is captured, so those files are listed as
        `unrestorable` and the view is not isolated from them.
        """
        kept = {task_id, *bases}
        rows = [(t, image) for t, image in self.store.foreign_preimages(task_id) if t not in kept]
        files = self.view_files(rows, holders_on)
        return {
            "task_id": task_id,
            "files": files,
            "unrestorable": uncovered(leased, files, lambda holder: holder not in kept),
        }

    def view_files(
        self, rows: Sequence[tuple[str, PreImage]], holders_on: HoldersOn
    ) -> list[dict[str, Any]]:
        """The wire form of what a view puts back, from (holder, pre-image) rows by file: a
        file held whole is its pre-image; one held in parts is the file as it is now with
        those holders' parts put back (left out where they cannot be: not isolated)."""
        by_path: dict[str, list[tuple[str, PreImage]]] = {}
        for holder, image in rows:
            by_path.setdefault(image.path, []).append((holder, image))
        files: list[dict[str, Any]] = []
        for path, found in by_path.items():
            holders = holders_on(path)
            if all(holders.get(holder) is None for holder, _ in found):
                files.append(_image_json(*found[0]))  # held whole: the bottom of its stack
                continue
            now = self.file_now(path)
            taken = [(image.content, holders.get(h)) for h, image in found]
            if not now.existed or any(names is None for _, names in taken):
                continue
            content = _put_back(path, now.content, [(c, n) for c, n in taken if n is not None])
            if content is not None:
                holder = ",".join(h for h, _ in found)
                files.append(_image_json(holder, replace(now, content=content)))
        return files


def _put_back(
    path: str, current: bytes, taken: Sequence[tuple[bytes, frozenset[str]]]
) -> bytes | None:
    """`parts.putback.put_back_parts` with the file's own mapper; None: it has no parts."""
    mapper = mapper_for(path)
    return None if mapper is None else put_back_parts(current, taken, mapper)


def _not_rebased(path: str, names: frozenset[str]) -> str:
    return (
        f"{path}: its parts {', '.join(sorted(names))} held by this task cannot be found again "
        "in the file as it is now, so it cannot be taken whole without losing what other tasks "
        "changed in it since; read the file again and change it by its parts"
    )


def _image_json(holder: str, image: PreImage) -> dict[str, Any]:
    return {
        "path": image.path,
        "holder_task_id": holder,
        "existed": image.existed,
        "mode": image.mode,
        "created_dirs": list(image.created_dirs),
        "content_b64": base64.b64encode(image.content).decode("ascii"),
    }


def uncovered(
    leased: Mapping[str, tuple[str, str]],
    files: Sequence[Mapping[str, Any]],
    put_back: Callable[[str], bool],
) -> list[str]:
    """The files a view should put back (held by a task `put_back` names) but has no image of
    (a resource is no file: a view has nothing of it to put back)."""
    covered = {f["path"] for f in files}
    held = {key for key, (_, holder) in leased.items() if put_back(holder)}
    return sorted({file_of(key) for key in held if not is_resource_key(key)} - covered)


def _put_back_one(root: Path, row: RestoreRow, image: PreImage | str | None) -> PutBack:
    """One restore row's outcome; an OSError is that file's, not the fleet's."""
    if image is None:  # nothing was captured (rollback was off when it was granted)
        return PutBack(row, False, None, None)
    if isinstance(image, str):  # its parts could not be put back
        return PutBack(row, False, image, None)
    try:
        return PutBack(row, restore(root, image), None, image)
    except OSError as err:
        why = err.strerror or str(err)
        log.warning("could not restore %s: %s", row.path, err)
        return PutBack(row, False, f"{row.path}: {why}", image)
