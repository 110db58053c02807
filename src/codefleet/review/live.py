"""`run --commit`: commit each task the moment it succeeds, so an interrupted run keeps its work.

The committer follows the event stream from the run's start. On every
`task_succeeded` it reads the task and its patch (the one client), commits
the change on top of the branch's tip in a private index (`HistoryWriter`),
moves the branch with a compare-and-swap `update-ref`, and records the commit
on the server (`task_committed`). Nothing touches the working tree, the
person's index or HEAD. The branch appears with the first commit.

A change git refuses is skipped with its reason (and so is every later change
to its paths); any other git failure stops the committing loudly (the run
goes on, the branch keeps what it has). At the end `finish` catches up with every
success the stream had not delivered yet, then checks the tip against the
working tree for every path a committed task touched and lists what is left out.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from codefleet.api.client import FleetClient, ServerUnavailable
from codefleet.errors import DomainError
from codefleet.models import EventType
from codefleet.review.commit import (
    Author,
    CommitResult,
    HistoryWriter,
    Made,
    Uncommittable,
    check_new_branch,
    default_branch,
    left_out,
    mismatched_paths,
    require_identity,
)
from codefleet.review.git import GitError, Repo
from codefleet.review.history import NO_PATCHES, TaskChange, task_change, wrote_without_patch
from codefleet.review.indexdir import IndexDir

__all__ = ["LiveCommitter", "open_committer"]

RECONNECT_S = 0.5
COMMITTED_ON = frozenset({EventType.TASK_SUCCEEDED})  # all the committer reads of the stream


@dataclass(slots=True)
class _Progress:
    commits: list[Made] = field(default_factory=list)
    empty: list[str] = field(default_factory=list)
    error: str | None = None
    uncommitted: list[str] = field(default_factory=list)


def open_committer(tree: Path, branch: str | None, author: Author | None) -> LiveCommitter:
    """A committer for `tree`'s repository, starting at HEAD; `GitError` says why not."""
    repo = Repo.open(tree)
    base = repo.resolve_commit("HEAD")
    return LiveCommitter(repo, branch or default_branch(repo), base=base, author=author)


class LiveCommitter:
    """Follows a server's events and commits every task that succeeds, in that order."""

    def __init__(
        self,
        repo: Repo,
        branch: str,
        *,
        base: str,
        author: Author | None = None,
    ) -> None:
        check_new_branch(repo, branch)
        require_identity(repo, author)
        self.repo, self.branch, self.base = repo, branch, base
        self.progress = _Progress()
        self.touched: set[str] = set()
        self._done: set[str] = set()
        self._unrecorded: list[tuple[str, str]] = []
        self._cursor = 0
        self._lock = asyncio.Lock()
        self._follower: asyncio.Task[None] | None = None
        self._tmp = IndexDir()
        self._writer = HistoryWriter(repo, self._tmp.index, base, author)

    def start(self, url: str, token: str | None, since: int) -> None:
        """Begin committing every task that succeeds after event `since` (in the background)."""
        self._cursor = max(self._cursor, since)
        self._follower = asyncio.create_task(self._follow(url, token), name="live-commit")

    async def _follow(self, url: str, token: str | None) -> None:
        """Commit successes until cancelled; reconnects when the link drops."""
        while True:
            try:
                async with FleetClient(url, token=token) as client:
                    async for event in client.stream(self._cursor, COMMITTED_ON):
                        await self._on_event(client, event)
            except (ServerUnavailable, DomainError):  # the server restarts or goes: retry
                await asyncio.sleep(RECONNECT_S)

    async def finish(self, url: str, token: str | None) -> CommitResult:
        """Catch up with every success recorded, stop following, check the tip against the tree."""
        try:
            async with FleetClient(url, token=token) as client:
                for event in await client.all_events(self._cursor):
                    await self._on_event(client, event)
                await self._flush(client)
        finally:
            if self._follower is not None:
                self._follower.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._follower
        try:
            return await asyncio.to_thread(self._result)
        finally:
            self._tmp.close()

    async def _on_event(self, client: FleetClient, event: dict[str, Any]) -> None:
        """Commit a success once; the cursor moves only past handled events, so a read
        that fails (and raises) is retried from the same event after the reconnect."""
        async with self._lock:  # the stream and the final catch-up never commit a task twice
            if int(event["id"]) <= self._cursor:
                return
            task_id = str(event.get("task_id") or "")
            if event["type"] == EventType.TASK_SUCCEEDED and task_id not in self._done:
                await self._handle_success(client, task_id)
            self._cursor = int(event["id"])
        await self._flush(client)

    async def _handle_success(self, client: FleetClient, task_id: str) -> None:
        if self.progress.error is None:
            task, patch, denied = await asyncio.gather(
                client.task(task_id), client.patch(task_id), client.conflicts()
            )
            change = task_change(task, patch, sum(c["task_id"] == task_id for c in denied))
            try:
                if wrote_without_patch(task, patch):
                    raise GitError(NO_PATCHES)
                made = await asyncio.to_thread(self._commit, change)
            except Uncommittable:  # recorded in the writer's `skipped`; the others go on
                made = None
            except GitError as err:
                self.progress.error = str(err)
            else:
                if made is not None:
                    self._unrecorded.append((task_id, made.sha))
        if self.progress.error is not None:
            self.progress.uncommitted.append(task_id)
        self._done.add(task_id)

    async def _flush(self, client: FleetClient) -> None:
        """Record the commits on the server; a failed post is tried again with the next event.
        The commits are taken before the post: a flush meanwhile (the follower's, `finish`'s)
        does not post them twice."""
        taken, self._unrecorded = self._unrecorded, []
        if not taken:
            return
        try:
            await client.record_commits(self.branch, taken)
        except (ServerUnavailable, DomainError):
            self._unrecorded = taken + self._unrecorded

    def _commit(self, change: TaskChange) -> Made | None:
        old = self._writer.parent if self.progress.commits else None
        made = self._writer.add(change)
        self.touched.update(change.paths)
        if made is None:
            self.progress.empty.append(change.task_id)
            return None
        self.repo.update_branch(self.branch, made.sha, old)
        self.progress.commits.append(made)
        return made

    def log(self, result: CommitResult) -> str:
        """`git log --oneline` of what was committed (newest first)."""
        return self.repo.log_oneline(result.base, result.tip) if result.commits else ""

    def _result(self) -> CommitResult:
        done = self.progress
        held_back = self._writer.held_back
        result = CommitResult(
            self.branch,
            self.base,
            tuple(done.commits),
            tuple(done.empty),
            error=done.error,
            uncommitted=tuple(done.uncommitted),
            skipped=tuple(self._writer.skipped),
        )
        if not done.commits:
            return result
        checked = self.touched - held_back
        return replace(
            result,
            mismatched=tuple(mismatched_paths(self.repo, result.tip, checked)),
            left_out=tuple(left_out(self.repo, self.base, self.touched | held_back)),
        )
