"""A runner cancelled mid long-poll leaves no orphaned request behind.

At shutdown the fleet cancels its runners while their assignment long-poll is
in flight; the server then closes the connection and the poll fails. That
failure must be collected, not reported by asyncio as "Task exception was
never retrieved" (a traceback in the demo's output).
"""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path
from typing import Any

from codefleet.api.client import ServerUnavailable
from codefleet.fleet.runner import Runner, RunnerOptions


class PollThatFailsLater:
    """The one client call `_next_task` makes: blocks, then fails like a closed server."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.fail = asyncio.Event()

    async def assignment(self, agent_id: str, epoch: int, wait: float) -> Any:
        self.entered.set()
        await asyncio.shield(self.fail.wait())
        raise ServerUnavailable("GET /agents/a/assignment: ReadError")


def test_a_runner_cancelled_during_its_long_poll_collects_the_polls_failure(
    tmp_path: Path,
) -> None:
    unretrieved: list[dict[str, Any]] = []

    async def scenario() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _l, ctx: unretrieved.append(ctx))
        client = PollThatFailsLater()
        runner = Runner(
            client,  # type: ignore[arg-type]
            executor=None,  # type: ignore[arg-type]
            options=RunnerOptions(name="runner-1", workdir=tmp_path, run_dir=tmp_path),
        )
        waiting = asyncio.create_task(runner._next_task(asyncio.Event()))
        await client.entered.wait()
        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)
        client.fail.set()
        for _ in range(5):
            await asyncio.sleep(0)
        gc.collect()

    asyncio.run(scenario())
    gc.collect()
    assert not [c for c in unretrieved if "never retrieved" in c.get("message", "")], unretrieved
