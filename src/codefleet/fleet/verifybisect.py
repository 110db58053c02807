"""A failing `run --verify`, bisected over the run's landed changes: which one broke it.

A landed change is one succeeded task's recorded patch; their order is the order of
the `task_succeeded` events (`history.success_order`, the order `commit` uses). State *i* is the tree as it stood after the first *i*
landings; the final tree is state *n*, and `--verify` failed there. Each probe
builds a throwaway view of the final tree outside it (`fleet.views.copyview.copy_tree`,
a fresh one per probe, so a command's own outputs never leak into the next) and
undoes the last *n - i* landed changes, newest first, one `git apply -R` of each
change's recorded patch (exact for text: new files go, deleted files come back
with their mode, symlinks and type changes included). A binary file's patch
carries no bytes: a new one is removed, any other binary change cannot be
undone, so states before that landing are out of reach ("Verify: bisecting the
landings" in docs/decisions/0025-verify-bisecting-the-landings.md). The command runs there through `fleet.views.shell`.

Cost: one probe of the final tree's view first (the control: a command that
passes there depends on what a view leaves out, or is flaky, and nobody is
blamed), then a binary search over the landings that changed files, and the
state before them only when the search reaches it: at most ceil(log2 n) + 2 runs.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from codefleet.api.client import FleetClient, ServerUnavailable
from codefleet.errors import DomainError
from codefleet.fleet.views.copyview import copy_tree
from codefleet.fleet.views.shell import check_env, run_command
from codefleet.review.fetch import fetch_record
from codefleet.review.history import FileChange, planned_changes
from codefleet.review.runrecord import RunRecord

__all__ = [
    "BisectStep",
    "LandedChange",
    "VerifyBlame",
    "bisect_verify",
    "first_failing",
    "landed_changes",
    "undo_changes",
]

PROBE_OUTPUT_CHARS: Final = 2_000  # a probe's verdict is its exit code; the tail is for errors
NEW_FILE: Final = re.compile(r"(?m)^new file mode ")


@dataclass(frozen=True, slots=True)
class LandedChange:
    """One landed change: a succeeded task's recorded patch; `order` is its 1-based number."""

    task_id: str
    title: str
    order: int
    files: tuple[FileChange, ...]

    @property
    def stuck_on(self) -> str | None:
        """A binary file this change touched whose earlier bytes are not recorded, if any."""
        for f in self.files:
            if f.binary and not NEW_FILE.search(f.diff):
                return f.path
        return None


@dataclass(frozen=True, slots=True)
class BisectStep:
    landed: int  # how many landings the probed view holds
    failed: bool
    exit_code: int | None  # None: it timed out
    duration_s: float


@dataclass(frozen=True, slots=True)
class VerifyBlame:
    """What the bisection found: the first failing landing, or why nobody is blamed."""

    landings: int
    first_failing: str | None = None
    title: str | None = None
    order: int | None = None
    before_run_fails: bool = False  # with every landing undone it fails too
    not_bisected: str | None = None  # why no landing could be named
    steps: tuple[BisectStep, ...] = ()

    def payload(self) -> dict[str, Any]:
        """The `verify` keys of `run_finished` and of `run --json` (`wording.verify_blame_text`)."""
        return {
            "landings": self.landings,
            "first_failing": self.first_failing,
            "title": self.title,
            "order": self.order,
            "before_run_fails": self.before_run_fails,
            "not_bisected": self.not_bisected,
            "steps": [
                {
                    "landed": s.landed,
                    "verdict": "failed" if s.failed else "passed",
                    "exit_code": s.exit_code,
                    "duration_s": round(s.duration_s, 3),
                }
                for s in self.steps
            ],
        }


def landed_changes(record: RunRecord) -> list[LandedChange]:
    """Every succeeded task's recorded change, in landing order."""
    return [
        LandedChange(c.task_id, c.title, n, c.files)
        for n, c in enumerate(planned_changes(record), start=1)
    ]


async def first_failing(good: int, bad: int, fails: Callable[[int], Awaitable[bool]]) -> int | None:
    """The least state in (`good`, `bad`] that fails, given `bad` fails; `good` is assumed
    to pass and probed only when the search reaches it: None when it fails too."""
    low = good
    while bad - low > 1:
        mid = (low + bad) // 2
        if await fails(mid):
            bad = mid
        else:
            low = mid
    if low == good and await fails(good):
        return None
    return bad


def undo_changes(view: Path, landings: Sequence[LandedChange]) -> None:
    """Undo the landed changes `landings` in `view` (whose parent is no repository), newest
    first; `OSError` names the one git refused."""
    for landing in reversed(landings):
        text = [f for f in landing.files if not f.binary]
        if text:
            _reverse_apply(view, "".join(f.diff for f in text), landing.task_id)
        for f in landing.files:
            if f.binary:  # only new ones reach here (`stuck_on`): undoing one removes it
                _remove_new(view, f.path)


def _reverse_apply(view: Path, diff: str, task_id: str) -> None:
    # Outside any repository (from the view's parent, which has none, up to a ceiling):
    # inside one, git apply would convert line ends by its config and attributes.
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env["GIT_CEILING_DIRECTORIES"] = str(view.parent.parent)
    done = subprocess.run(
        ["git", "apply", "-R", "--whitespace=nowarn", f"--directory={view.name}", "-"],
        cwd=view.parent,
        input=diff.encode("utf-8", "surrogateescape"),
        capture_output=True,
        env=env,
        check=False,
    )
    if done.returncode != 0:
        why = done.stderr.decode("utf-8", "replace").strip()
        raise OSError(f"git apply -R of {task_id}'s patch failed: {why}")


def _remove_new(view: Path, path: str) -> None:
    target = view / path
    target.unlink(missing_ok=True)
    for parent in target.parents:
        if parent == view:
            return
        try:
            parent.rmdir()
        except OSError:
            return  # not empty: it held something else


class _Prober:
    """Runs the command in a fresh view of the final tree with the last landings undone."""

    def __init__(
        self,
        command: str,
        tree: Path,
        landings: Sequence[LandedChange],
        *,
        timeout: float,
        exclude: Iterable[Path],
        view_dir: Path | None,
        say: Callable[[str], object],
    ) -> None:
        self.command, self.tree, self.landings = command, tree.resolve(), landings
        self.timeout, self.exclude, self.view_dir, self.say = timeout, tuple(exclude), view_dir, say
        self.steps: list[BisectStep] = []

    async def fails(self, landed: int) -> bool:
        base = Path(tempfile.mkdtemp(prefix="codefleet-bisect-", dir=self.view_dir))
        view = base / self.tree.name
        try:
            await asyncio.to_thread(copy_tree, self.tree, view, self.exclude)
            await asyncio.to_thread(undo_changes, view, self.landings[landed:])
            ran = await run_command(
                self.command,
                view,
                timeout=self.timeout,
                cap=PROBE_OUTPUT_CHARS,
                env=check_env(view),
            )
        finally:
            await asyncio.to_thread(shutil.rmtree, base, True)
        failed = ran.timed_out or ran.exit_code != 0
        self.steps.append(BisectStep(landed, failed, ran.exit_code, ran.duration_s))
        self.say(self._line(landed, failed, ran.exit_code, ran.duration_s))
        return failed

    def _line(self, landed: int, failed: bool, code: int | None, duration_s: float) -> str:
        n = len(self.landings)
        held = f"landings 1-{landed} of {n}" if landed else f"none of the {n} landings"
        last = f" (last {self.landings[landed - 1].task_id})" if landed else ""
        verdict = "fails" if failed else "passes"
        exit_text = "timed out" if code is None else f"exit {code}"
        return (
            f"verify bisect {len(self.steps)}: with {held}{last}: {verdict} "
            f"({exit_text}, {duration_s:.1f} s)"
        )


async def bisect_verify(
    client: FleetClient,
    command: str,
    tree: Path,
    *,
    timeout: float,
    exclude: Iterable[Path] = (),
    view_dir: Path | None = None,
    say: Callable[[str], object] = lambda _: None,
) -> VerifyBlame:
    """Find the first landing after which `command` fails (each probe said through `say`)."""
    try:
        landings = landed_changes(await fetch_record(client, with_ledgers=False))
        why = await _unpatched(client, landings)
    except (ServerUnavailable, DomainError) as err:  # the verdict stands without the blame
        return VerifyBlame(0, not_bisected=f"the run's record could not be read ({err})")
    if why is not None:
        return VerifyBlame(len(landings), not_bisected=why)
    probe = _Prober(
        command, tree, landings, timeout=timeout, exclude=exclude, view_dir=view_dir, say=say
    )
    try:
        return await _search(probe, landings)
    except OSError as err:
        why = f"a view could not be built ({err})"
        return VerifyBlame(len(landings), not_bisected=why, steps=tuple(probe.steps))


async def _search(probe: _Prober, landings: Sequence[LandedChange]) -> VerifyBlame:
    n = len(landings)
    if not await probe.fails(n):
        why = (
            "it passes in a copy of the final tree: it depends on something a view leaves "
            "out (a virtualenv, node_modules, the run directory) or it is flaky"
        )
        return VerifyBlame(n, not_bisected=why, steps=tuple(probe.steps))
    floor = max((x.order for x in landings if x.stuck_on), default=0)
    # The states worth probing: the lowest reachable one, then after each landing that
    # changed files (an empty landing leaves the state it found); the last is state n's.
    states = [floor, *(x.order for x in landings[floor:] if x.files)]

    async def fails_at(i: int) -> bool:
        return await probe.fails(states[i])

    found = await first_failing(0, len(states) - 1, fails_at) if len(states) > 1 else None
    steps = tuple(probe.steps)
    if found is None and floor:
        stuck = landings[floor - 1]
        why = (
            f"it fails with landings 1-{floor} kept, and they cannot be undone: {stuck.task_id} "
            f"changed the binary file {stuck.stuck_on}, whose earlier bytes are not recorded"
        )
        return VerifyBlame(n, not_bisected=why, steps=steps)
    if found is None:
        return VerifyBlame(n, before_run_fails=True, steps=steps)
    blamed = landings[states[found] - 1]
    return VerifyBlame(n, blamed.task_id, blamed.title, blamed.order, steps=steps)


async def _unpatched(client: FleetClient, landings: Sequence[LandedChange]) -> str | None:
    """Why the record cannot be bisected: a landing wrote files but has no patch recorded."""
    for landing in landings:
        if not landing.files and (await client.task(landing.task_id)).get("file_changes"):
            return (
                f"the server recorded no patch for {landing.task_id}, which wrote files "
                "(--keep-failed-edits keeps no pre-images)"
            )
    return None
