"""The landed line's follower stops when cancelled, even when it is woken at that moment.

The server's lifespan cancels the follower and awaits it; on Python 3.11,
`asyncio.wait_for` loses a cancel that arrives as its wait completes, and the
follower went on: the server's stop then waited for ever (the demo ended 10 s late,
once in a few runs). Real hub and follower; only its step (git) is idle.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from codefleet.server.linefollower import LineFollower
from codefleet.server.sse import EventHub


class _IdleFollower(LineFollower):
    """The follower's loop as the server runs it, with nothing for its step to do."""

    async def _step(self, line: Any) -> None:
        return None


class _Line:
    closed = False

    def close(self) -> None:
        self.closed = True


async def test_a_follower_woken_as_it_is_cancelled_stops(tmp_path: Path) -> None:
    hub = EventHub()
    hub.attach(asyncio.get_running_loop())
    follower = _IdleFollower(None, hub, tmp_path)  # type: ignore[arg-type]
    line = _Line()
    follower.line = line  # type: ignore[assignment]
    task = asyncio.create_task(follower.run())
    while not hub._wakeups:  # parked on the hub, as after every step
        await asyncio.sleep(0)
    await asyncio.sleep(0)
    hub.publish([])  # a commit wakes it ...
    task.cancel()  # ... in the same step as the lifespan cancels it
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 60)
    assert line.closed
