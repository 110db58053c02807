"""Where a check runs: `run_in_view`, an overlay layer on the tree's path, or the copy.

`run_in_view` is the one way a check command runs, for a task's checks
(`fleet.tools.attemptchecks`) and for landing alike: it asks its `MaskSource` which files
to show at their pre-images (the caller decides whose: a task's checks mask
every OTHER in-flight task's files), builds the view, runs the command there
(`fleet.views.shell.run_command`: time limit, output cap, whole process group
killed), tears the view down and says what it was (`ViewRun`).

- **layer** (`fleet.views.layer`): an overlayfs mounted on the tree's own path in a
  user + mount namespace, the pre-images above the live tree, a private upper
  that is deleted afterwards. Building it writes one file per masked path,
  never a walk. The command runs unprivileged in a nested namespace (the
  mount locked), not under bubblewrap. The lower is the live tree, so the
  mask is fetched again after the run: a path masked then but not before was
  leased DURING the run (the check may have read a half-done edit), it is
  `disturbed`, and the command runs once more, in a copy.
- **copy** (`fleet.views.copyview`): where no layer can be mounted over this tree
  (`host_view`), or when asked: fetch the mask, copy the tree, fetch again
  (the later answer wins per path), bring every unmasked file the tree removed or
  rewrote meanwhile level with it (`settle`), put the pre-images back.

Handed a `LockCache`, a `uv run` check starts frozen on the lock kept for its
project files' content, or keeps the lock its view had (`fleet.views.uvlock`).

docs/decisions/0105-check-views-are-overlay-layers.md, "Check views are overlay layers".
"""

from __future__ import annotations

import asyncio
import base64
import functools
import logging
import shutil
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import Any, Final

from codefleet.api.client import FleetClient, ServerUnavailable
from codefleet.errors import DomainError
from codefleet.fleet.views.copyview import copy_tree, overlay, settle
from codefleet.fleet.views.identity import view_identity
from codefleet.fleet.views.layer import (
    MOUNT_UNSAFE,
    PROBE_TIMEOUT_S,
    Layer,
    Sandbox,
    build_layer,
    layer_argv,
    shell_line,
    shell_support,
)
from codefleet.fleet.views.programs import NOT_RUNNABLE, missing_programs
from codefleet.fleet.views.shell import CommandResult, check_env, run_command
from codefleet.fleet.views.uvlock import LOCK, LockCache, LockPlan, Resolution, view_reader
from codefleet.rollback import PreImage, TooLarge, capture

__all__ = [
    "Mask",
    "MaskSource",
    "Removals",
    "ViewFailed",
    "ViewKind",
    "ViewRun",
    "decode_preimages",
    "foreign_mask",
    "host_view",
    "layer_problem",
    "masked_identity",
    "run_in_view",
]

log = logging.getLogger(__name__)

VIEW_PREFIX: Final = "codefleet-view-"
# Checks keep their reach (home caches, /tmp, network): bubblewrap's read-only root would
# break `uv run` and friends. The tree is still reached only through the locked layer.
CHECK_SANDBOX: Final = Sandbox(None)
# Failures of fetching the mask, building, running or removing a view: infrastructure.
VIEW_ERRORS: Final = (ServerUnavailable, DomainError, OSError, ValueError)


class ViewKind(StrEnum):
    LAYER = "layer"
    COPY = "copy"


@dataclass(frozen=True, slots=True)
class Mask:
    """The files a view shows at their pre-images, and the held ones it cannot (no pre-image)."""

    images: Mapping[str, PreImage]
    unrestorable: tuple[str, ...] = ()

    @classmethod
    def from_answer(cls, answer: Mapping[str, Any]) -> Mask:
        """The server's `foreign-preimages` answer as a mask."""
        return cls(decode_preimages(answer), tuple(answer.get("unrestorable") or ()))

    @property
    def paths(self) -> frozenset[str]:
        return frozenset(self.images) | frozenset(self.unrestorable)


# What a caller hands `run_in_view`: called once per view build (twice for a copy), and
# once after a layer run; not for the first build when the caller hands its answer (`mask`).
MaskSource = Callable[[], Awaitable[Mask | Mapping[str, PreImage]]]


@dataclass(frozen=True, slots=True)
class ViewRun:
    """One command run in one view: its result, and what the view was."""

    ran: CommandResult
    view: ViewKind
    ms: float  # building the view (the layer's mount is in the command's own time)
    files: int  # files the view made: pre-images laid out (layer), or copied (copy)
    isolated: tuple[str, ...]  # masked paths whose live state differs from the view's
    unrestorable: tuple[str, ...]  # held by another task, no pre-image (rollback off)
    disturbed: tuple[str, ...] = ()  # newly masked during a layer run: it ran again in a copy
    unstartable: tuple[tuple[str, str], ...] = ()  # (program, why) on exit 126/127
    resolution: Resolution | None = None  # a `uv run` check's lock: resolved, or kept (skipped)
    identity: str | None = None  # the content identity once it ran (asked with `identify`)


class ViewFailed(Exception):
    """The view could not be built or the command not started: no fault of the command."""

    def __init__(self, step: str, error: BaseException) -> None:
        super().__init__(f"{step} ({type(error).__name__}: {error})")
        self.step = step


def decode_preimages(answer: Mapping[str, Any]) -> dict[str, PreImage]:
    """The pre-images of a `foreign-preimages` answer, by path."""
    return {
        f["path"]: PreImage(
            path=f["path"],
            existed=bool(f["existed"]),
            mode=f.get("mode"),
            content=base64.b64decode(f.get("content_b64") or ""),
            created_dirs=tuple(f.get("created_dirs") or ()),
        )
        for f in answer.get("files") or ()
    }


def foreign_mask(client: FleetClient, task_id: str) -> MaskSource:
    """The mask of a task's checks: every path another in-flight task holds."""

    async def fetch() -> Mask:
        return Mask.from_answer(await client.foreign_preimages(task_id))

    return fetch


async def run_in_view(
    root: Path,
    images: MaskSource,
    command: str,
    *,
    timeout: float,
    cap: int,
    exclude: tuple[Path, ...] = (),
    view_dir: Path | None = None,
    view: ViewKind | None = None,
    locks: LockCache | None = None,
    mask: Mask | None = None,
    identify: bool = False,
    removals: Removals | None = None,
) -> ViewRun:
    """Run `command` in a view of `root` masked by `images`; `view` None: the layer where
    `host_view` says one works, else the copy; `locks`: a `uv run` check resolves once per
    content (`fleet.views.uvlock`); `mask`: `images`' answer the caller already fetched for
    this run, shown by the first view instead of a fetch; `identify`: say the view's content
    identity once it ran (`ViewRun.identity`); `removals`: the view is removed while the
    caller goes on (it awaits `Removals.wait`), else before this returns. Raises
    `ViewFailed`, never for the command."""
    kind = view or await asyncio.to_thread(host_view, root, view_dir)
    run = _Run(command, timeout, cap, locks, exclude, identify, removals)
    if kind is ViewKind.COPY:
        return await _copy_run(root, images, run, view_dir, mask)
    first = await _layer_run(root, images, run, view_dir, mask)
    if not first.disturbed:
        return first
    log.info("check view disturbed by new leases on %s: running it again in a copy",
             ", ".join(first.disturbed[:10]))  # fmt: skip
    again = replace(run, identify=False)  # disturbed: no identity stands for it
    return replace(await _copy_run(root, images, again, view_dir, None), disturbed=first.disturbed)


class Removals:
    """Views being removed while their caller goes on (`run_in_view(removals=...)`): the
    caller awaits `wait` before it is done, so no view outlives it."""

    def __init__(self) -> None:
        self._pending: list[asyncio.Future[None]] = []

    def remove(self, base: Path) -> None:
        self._pending.append(asyncio.ensure_future(asyncio.to_thread(shutil.rmtree, base, True)))

    async def wait(self) -> None:
        """Every view handed over so far is removed."""
        pending, self._pending = self._pending, []
        await asyncio.gather(*pending)


async def _remove(base: Path, removals: Removals | None) -> None:
    """Remove a view now (if still there), or hand it to `removals`."""
    if removals is not None:
        removals.remove(base)
    elif base.exists():
        await asyncio.to_thread(shutil.rmtree, base, True)


async def masked_identity(
    root: Path, images: MaskSource, exclude: Collection[Path] = ()
) -> tuple[Mask, str | None]:
    """`images`' answer now, and the content identity of the view it makes of `root`
    (`fleet.views.identity`; None: not said)."""
    mask = await _fetch(images)
    identity = await asyncio.to_thread(view_identity, root, mask.images, mask.unrestorable, exclude)
    return mask, identity


def host_view(root: Path, view_dir: Path | None = None) -> ViewKind:
    """The layer if one can be mounted over `root` with views under `view_dir`, else the copy."""
    return ViewKind.COPY if layer_problem(root, view_dir) is not None else ViewKind.LAYER


def layer_problem(root: Path, view_dir: Path | None = None) -> str | None:
    """Why no layer can be mounted over `root` with views under `view_dir`, or None."""
    return _probed(root.resolve(), (view_dir or Path(tempfile.gettempdir())).resolve())


@functools.cache
def _probed(root: Path, view_dir: Path) -> str | None:
    """`layer_problem`, probed once per tree and view directory (logged when it is a copy)."""
    problem = _probe(root, view_dir)
    if problem is not None:
        log.info("checks of %s run in a copy of the tree: %s", root, problem)
    return problem


def _probe(root: Path, view_dir: Path) -> str | None:
    """Mount a real layer over `root` from `view_dir` and run `true` in it."""
    support = shell_support()
    if support.problem is not None or support.unshare is None:
        return support.problem or "no `unshare`"
    if view_dir.is_relative_to(root):
        return f"views are made inside the tree ({view_dir})"
    if MOUNT_UNSAFE.intersection(f"{root}{view_dir}"):
        return "the tree's path has a character a mount option cannot hold"
    try:
        base = Path(tempfile.mkdtemp(prefix=VIEW_PREFIX, dir=view_dir))
    except OSError as err:
        return f"no view can be made in {view_dir} ({err.strerror})"
    try:
        argv = layer_argv(build_layer(root, base, ()), "true", CHECK_SANDBOX, support.unshare)
        ran = subprocess.run(argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"the layer probe failed ({err})"
    finally:
        shutil.rmtree(base, ignore_errors=True)
    if ran.returncode != 0:
        return f"overlayfs refused this tree ({ran.stderr.strip()[-300:]})"
    return None


async def _fetch(images: MaskSource, fetched: Mask | None = None) -> Mask:
    """`images`' answer (`fetched`, where the caller already has it for this view)."""
    if fetched is not None:
        return fetched
    found = await images()
    return found if isinstance(found, Mask) else Mask(found)


@dataclass(frozen=True, slots=True)
class _Run:
    """What runs in a view: the command, its limits, the kept locks (None: none), whether
    the view's identity is said once it ran (`exclude`: paths not in it), and who removes
    the view (None: the run, before it returns)."""

    command: str
    timeout: float
    cap: int
    locks: LockCache | None
    exclude: tuple[Path, ...] = ()
    identify: bool = False
    removals: Removals | None = None

    def plan(self, read: Callable[[str], bytes | None], env: Mapping[str, str]) -> LockPlan | None:
        return None if self.locks is None else self.locks.plan(read, self.command, env)

    def line(self, plan: LockPlan | None) -> str:
        """The command line that runs: `plan`'s (frozen on a kept lock), else as named."""
        return self.command if plan is None else plan.command(self.command)

    async def start(self, line: str, cwd: Path, env: Mapping[str, str]) -> CommandResult:
        return await run_command(line, cwd, timeout=self.timeout, cap=self.cap, env=env)

    def keep(
        self,
        plan: LockPlan | None,
        read: Callable[[str], bytes | None],
        lock: bytes | None,
        env: Mapping[str, str],
        ran: CommandResult,
    ) -> None:
        """Keep the lock the view had after a resolving run (`LockCache.keep`)."""
        if self.locks is None or plan is None or plan.lock is not None:
            return
        still = self.locks.held_still(plan, read, self.command, env)
        self.locks.keep(plan, lock, ran.exit_code, still)


async def _layer_run(
    root: Path, images: MaskSource, run: _Run, view_dir: Path | None, fetched: Mask | None
) -> ViewRun:
    """Mask, lay out, run in the namespace, mask again: `disturbed` is what was added."""
    unshare = shell_support().unshare or "unshare"
    base = Path(tempfile.mkdtemp(prefix=VIEW_PREFIX, dir=view_dir))
    step = "the isolated view could not be built"
    env = check_env(root)
    try:
        mask = await _fetch(images, fetched)
        plan = run.plan(view_reader(root, mask.images), env)
        shown = [*mask.images.values(), *([plan.image] if plan and plan.image else [])]
        started = time.perf_counter()
        layer = await asyncio.to_thread(build_layer, root, base, shown)
        ms = (time.perf_counter() - started) * 1000.0
        step = "the command could not be started"
        argv = layer_argv(layer, run.line(plan), CHECK_SANDBOX, unshare)
        ran = await run.start(shell_line(argv), base, env)
        step = "the view could not be checked after the run"
        remove = run.removals is None
        isolated, lock = await asyncio.to_thread(_look_back, root, layer, mask, plan, remove)
        after, identity = await _after(root, images, run)
        if plan is not None:
            run.keep(plan, view_reader(root, after.images), lock, env, ran)
    except VIEW_ERRORS as err:
        raise ViewFailed(step, err) from err
    finally:
        await _remove(base, run.removals)  # unless removed with the look back
    return ViewRun(
        ran,
        ViewKind.LAYER,
        ms,
        len(layer.shadowed),
        isolated,
        mask.unrestorable,
        tuple(sorted(after.paths - mask.paths)),
        _unstartable(run.command, root, ran),
        None if plan is None else plan.resolution,
        identity,
    )


def _look_back(
    root: Path, layer: Layer, mask: Mask, plan: LockPlan | None, remove: bool
) -> tuple[tuple[str, ...], bytes | None]:
    """After a layer run, in one thread: what the view reset and the lock it left; then the
    layer removed if `remove` (else the caller's `Removals` removes it)."""
    try:
        return _isolated(root, layer, mask), None if plan is None else _upper_lock(layer, plan)
    finally:
        if remove:
            shutil.rmtree(layer.base, ignore_errors=True)


async def _after(root: Path, images: MaskSource, run: _Run) -> tuple[Mask, str | None]:
    """The mask once the run ended, and the view's identity then if `run` asks for it."""
    if not run.identify:
        return await _fetch(images), None
    return await masked_identity(root, images, run.exclude)


def _upper_lock(layer: Layer, plan: LockPlan) -> bytes | None:
    """The view's lock after the run: the one the run wrote (in the upper), else as it was."""
    written = layer.upper / LOCK
    if not written.exists() and not written.is_symlink():
        return plan.before
    return written.read_bytes() if written.is_file() and not written.is_symlink() else None


def _isolated(root: Path, layer: Layer, mask: Mask) -> tuple[str, ...]:
    """The masked paths the live tree has in another state than the view shows (O(masked))."""
    shown = (layer.shadowed | layer.hidden) & mask.images.keys()  # not a kept lock laid in
    return tuple(sorted(p for p in shown if _differs(root, mask.images[p])))


def _differs(root: Path, image: PreImage) -> bool:
    try:
        now = capture(root, image.path, max_bytes=len(image.content))
    except (TooLarge, OSError):  # grown past its pre-image, or no longer a file
        return True
    return (now.existed, now.content, now.mode) != (image.existed, image.content, image.mode)


async def _copy_run(
    root: Path, images: MaskSource, run: _Run, view_dir: Path | None, fetched: Mask | None
) -> ViewRun:
    """Fetch (unless `fetched`), copy, fetch again, overlay, run in the copy; the copy is
    deleted."""
    base = Path(tempfile.mkdtemp(prefix=VIEW_PREFIX, dir=view_dir))
    view = base / root.name
    step = "the isolated view could not be built"
    env = check_env(view)
    try:
        before = await _fetch(images, fetched)
        skipped = (*run.exclude, base.parent)  # other views, if they are made in the tree
        stats = await asyncio.to_thread(copy_tree, root, view, skipped)
        after = await _fetch(images)
        started = time.perf_counter()
        masked = {**before.images, **after.images}
        await asyncio.to_thread(settle, root, view, stats.copied, masked)
        isolated = await asyncio.to_thread(overlay, view, masked.values())
        plan = run.plan(view_reader(view), env)
        if plan is not None and plan.image is not None:
            await asyncio.to_thread(overlay, view, [plan.image])
        ms = stats.ms + (time.perf_counter() - started) * 1000.0
        step = "the command could not be started"
        ran = await run.start(run.line(plan), view, env)
        unstartable = _unstartable(run.command, view, ran)
        if plan is not None:
            run.keep(plan, view_reader(view), view_reader(view)(LOCK), env, ran)
        identity = await _copy_identity(root, images, run)
    except VIEW_ERRORS as err:
        raise ViewFailed(step, err) from err
    finally:
        await _remove(base, run.removals)
    return ViewRun(
        ran,
        ViewKind.COPY,
        ms,
        stats.files,
        tuple(sorted(isolated)),
        after.unrestorable,
        unstartable=unstartable,
        resolution=None if plan is None else plan.resolution,
        identity=identity,
    )


async def _copy_identity(root: Path, images: MaskSource, run: _Run) -> str | None:
    """A copy's identity once it ran, if asked (None: the mask could not be fetched)."""
    if not run.identify:
        return None
    try:
        return (await _after(root, images, run))[1]
    except VIEW_ERRORS as err:  # the run stands; only its identity is not said
        log.info("no identity for a check run in a copy: %s", err)
        return None


def _unstartable(command: str, tree: Path, ran: CommandResult) -> tuple[tuple[str, str], ...]:
    if ran.exit_code not in NOT_RUNNABLE:
        return ()
    return tuple(missing_programs(command, tree, check_env(tree)))
