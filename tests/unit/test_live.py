"""The live committer records each commit on the server once.

`_flush` posts the commits made since the last post. The stream's follower and the final
catch-up (`finish`) may both flush at once: the second must not post what the first is
posting (a run's log showed one `task_committed` twice, with one sha).
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from codefleet.api.client import ServerUnavailable
from codefleet.review.live import LiveCommitter


class SlowServer:
    """`record_commits` as the server answers it, one post at a time, each held open."""

    def __init__(self, fail: bool = False) -> None:
        self.posts: list[list[tuple[str, str]]] = []
        self.fail = fail

    async def record_commits(self, branch: str, commits: list[tuple[str, str]]) -> None:
        self.posts.append(list(commits))
        await asyncio.sleep(0.01)  # the post in flight while the other flush runs
        if self.fail:
            raise ServerUnavailable("down")


async def test_two_flushes_at_once_post_each_commit_once() -> None:
    committer: Any = SimpleNamespace(branch="codefleet/x", _unrecorded=[("T3", "abc")])
    server = SlowServer()
    await asyncio.gather(
        LiveCommitter._flush(committer, server),  # type: ignore[arg-type]
        LiveCommitter._flush(committer, server),  # type: ignore[arg-type]
    )
    assert server.posts == [[("T3", "abc")]]
    assert committer._unrecorded == []


async def test_a_failed_post_is_kept_for_the_next_flush() -> None:
    committer: Any = SimpleNamespace(branch="codefleet/x", _unrecorded=[("T3", "abc")])
    await LiveCommitter._flush(committer, SlowServer(fail=True))  # type: ignore[arg-type]
    assert committer._unrecorded == [("T3", "abc")]
