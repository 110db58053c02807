"""The server's side of the landed line: follow the log, commit each landing, git off the loop.

`LineFollower` runs beside the engine for the server's life. It opens the tree's
line (`review.landedline`) and starts it at the first moment no task holds a
lease: the tree is snapshotted in a thread and the snapshot kept only if no
lease was granted meanwhile (else it tries again at the next commit). Then,
after every commit that emitted events, it reads the `task_succeeded` events
past the line's cursor and the tasks' recorded patches on the loop (the
record's reads belong to the loop), and commits each one in a thread: git never
runs on the loop, so no lease waits for it. A tree that is not a git repository
has no line, and the fleet runs as before (`state` says why). `open_early`
opens the line and snapshots the tree in a thread while the app is still being
built (nobody is served yet, so no lease can be granted meanwhile); the
snapshot is kept only if the log has not moved since (decision 0176).

With a remote the operator names (`serve --line-remote`), the line's branch is
pushed there after it moves (in a thread, forced: a line started again starts
from another base), so runners (`runner --line URL`) and people can fetch it
from that remote too; `state` says what was pushed last and why a push failed.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from concurrent.futures import Future
from contextlib import suppress
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

from codefleet.coord.engineview import EngineReads
from codefleet.models import EventType
from codefleet.readmodel.readapi import Reads
from codefleet.review.git import GitError
from codefleet.review.history import (
    NO_PATCHES,
    TaskChange,
    task_change,
    veto_counts,
    wrote_without_patch,
)
from codefleet.review.landedline import BRANCH, LandedLine, LineStart
from codefleet.server.sse import EventHub

__all__ = ["LineFollower"]

log = logging.getLogger(__name__)

PAGE: Final = 200
RECHECK_S: Final = 5.0  # a line that could not start or move looks again after this long
ALL: Final = 1_000_000


def _open_and_prepare(tree: Path, since: int | None) -> tuple[LandedLine, LineStart | None]:
    """The tree's line, and a snapshot for its start after event `since` (None: not now,
    or it failed: `LineFollower._start` takes it again and says why)."""
    line = LandedLine.open(tree)
    if since is None or line.started:
        return line, None
    try:
        return line, line.prepare(since)
    except GitError:
        return line, None


class LineFollower:
    """Keeps the tree's landed line one commit per landed task, in landing order."""

    def __init__(self, reads: Reads, hub: EventHub, tree: Path, remote: str | None = None) -> None:
        self.reads, self.hub, self.tree = reads, hub, tree
        self.remote = remote  # where the line is pushed as it moves (None: nowhere)
        self.pushed: str | None = None  # the tip last pushed there
        self.push_problem: str | None = None  # why the last push failed, until one works
        self.line: LandedLine | None = None
        self.off: str | None = None  # why there is no line (not a git repository, ...)
        self.problem: str | None = None  # the last failure to move the line, until it moves
        self._early: Future[tuple[LandedLine, LineStart | None]] | None = None  # `open_early`

    def open_early(self) -> None:
        """Open the line and snapshot the tree for its start in a thread of its own, now,
        before anyone is served: its git runs while the app is built; `open` takes it."""
        since = None if self.record.lease_rows() else self.record.last_event_id()
        early: Future[tuple[LandedLine, LineStart | None]] = Future()
        self._early = early

        def run() -> None:
            try:
                early.set_result(_open_and_prepare(self.tree, since))
            except BaseException as err:  # handed to `open`, which says a GitError, as before
                early.set_exception(err)

        threading.Thread(target=run, name="landed-line-open", daemon=True).start()

    @property
    def record(self) -> EngineReads:
        return self.reads.engine

    async def open(self) -> None:
        """Open the line, and start it if it can start now: before the server serves anyone,
        no lease can be granted while the tree is read, so the line starts at the tree as is."""
        ready: LineStart | None = None
        try:
            if self._early is None:
                line = await asyncio.to_thread(LandedLine.open, self.tree)
            else:
                line, ready = await asyncio.wrap_future(self._early)
        except GitError as err:
            self.off = str(err)
            log.info("no landed line: %s", err)
            return
        self.line = line
        await self._step(line, ready)

    async def run(self) -> None:
        """Follow until cancelled (after `open`)."""
        if self.line is None:
            return
        try:
            with self.hub.woken() as wakeup:
                while True:
                    wakeup.clear()
                    await self._step(self.line)
                    with suppress(TimeoutError):  # not `wait_for`: woken as it is cancelled,
                        async with asyncio.timeout(RECHECK_S):  # 3.11's loses the cancel and
                            await wakeup.wait()  # the server's stop waits for ever
        finally:
            self.line.close()

    async def _step(self, line: LandedLine, ready: LineStart | None = None) -> None:
        try:
            if line.started or await self._start(line, ready):
                await self._catch_up(line)
                await self._push(line)
            self.problem = None
        except GitError as err:  # the repository is damaged or busy: said, tried again
            self.problem = str(err)
            log.warning("the landed line did not move: %s", err)

    async def _start(self, line: LandedLine, ready: LineStart | None = None) -> bool:
        """Start the line from the tree as it is while no lease is held; False: not now.
        `ready`: a snapshot taken early, kept only if no event came after it."""
        if self.record.lease_rows():
            return False
        since = self.record.last_event_id()
        if ready is not None and ready.since == since:
            start = ready
        else:
            start = await asyncio.to_thread(line.prepare, since)
        if self.record.events(since, 1, EventType.LEASE_ACQUIRED):
            return False  # a write may have begun while the tree was read
        await asyncio.to_thread(line.begin, start)
        log.info("the landed line starts at %s (after event %s)", start.base[:12], since)
        return True

    async def _catch_up(self, line: LandedLine) -> None:
        """Commit each landing past the cursor; the cursor moves once a page is done."""
        while events := self.record.events(line.cursor, PAGE, EventType.TASK_SUCCEEDED):
            vetoes = veto_counts(self.record.events(0, ALL, EventType.LEASE_DENIED))
            for event in events:
                task_id = str(event["task_id"])
                change = self._change(task_id, vetoes[task_id])
                if change is None:
                    line.skipped.append(f"{task_id}: {NO_PATCHES}")
                else:
                    await asyncio.to_thread(line.append, change)
            await asyncio.to_thread(line.pass_event, int(events[-1]["id"]))

    async def _push(self, line: LandedLine) -> None:
        """Push the line to the operator's remote, if there is one and the line moved."""
        if self.remote is None or line.tip is None or line.tip == self.pushed:
            return
        tip = line.tip
        try:
            await asyncio.to_thread(line.push, self.remote)
        except GitError as err:  # the remote is down or refuses: said, tried at the next move
            self.push_problem = str(err)
            log.warning("the landed line was not pushed to its remote: %s", err)
            return
        self.pushed, self.push_problem = tip, None

    def _change(self, task_id: str, vetoes: int) -> TaskChange | None:
        task, patch = self.reads.task(task_id), self.reads.patch(task_id)
        return None if wrote_without_patch(task, patch) else task_change(task, patch, vetoes)

    def state(self) -> dict[str, Any]:
        """The line as `GET /landed` shows it."""
        line = self.line
        started = bool(line and line.started)
        past = self.record.events(line.cursor, 1, EventType.TASK_SUCCEEDED) if line else []
        return {
            "branch": BRANCH,
            "path": "/git/landed.git",
            "off": self.off,
            "started": started,
            # every task that landed so far is on the line: a fetch now sees them all
            "current": started and not past,
            "base": line.base if line else "",
            "tip": (line.tip or "") if line else "",
            "cursor": line.cursor if line else 0,
            "skipped": list(line.skipped) if line else [],
            "problem": self.problem,
            "remote": _without_credentials(self.remote) if self.remote else None,
            "pushed": self.pushed,
            "push_problem": self.push_problem,
        }


def _without_credentials(remote: str) -> str:
    """A remote's URL as it may be shown: any user and password in it left out."""
    parts = urlsplit(remote)
    if not parts.netloc or "@" not in parts.netloc:
        return remote
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))
