"""When the kicked tick runs: a long-poll that parks runs a pending one at once.

Same harness as `test_engine.py`, attached to the test's event loop so that
`kick()` schedules a real callback.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import test_engine
from test_engine import Fleet

make_fleet = test_engine.make_fleet  # the engine harness's fixtures
fleet = test_engine.fleet


def _record_ticks(fleet: Fleet, order: list[str]) -> None:
    tick = fleet.engine.ticks.tick

    def recorded() -> Any:
        order.append("tick")
        return tick()

    fleet.engine.ticks.tick = recorded  # type: ignore[method-assign]


async def test_a_parked_long_poll_runs_the_pending_tick_before_requests_queued_ahead_of_it(
    fleet: Fleet,
):
    loop = asyncio.get_running_loop()
    fleet.engine.attach(loop)
    agent = fleet.register("runner-1")
    await asyncio.sleep(0)  # the registration's tick ran
    order: list[str] = []
    _record_ticks(fleet, order)
    loop.call_soon(order.append, "queued request")  # ahead of the kick in the loop's queue
    fleet.add("T")  # kicks: a tick is pending behind the queued request

    task = await fleet.engine.runner.wait_assignment(
        agent, fleet.epoch(agent), 5
    )  # awaited in place,
    # as a request handler does: a task wrapped around it would start behind the queue

    assert task is not None and task.id == "T"
    await asyncio.sleep(0)  # the kick's own callback has run by now: it found nothing to do
    assert order == ["tick", "queued request"]


async def test_a_parked_long_poll_with_no_tick_pending_asks_for_one(fleet: Fleet):
    loop = asyncio.get_running_loop()
    fleet.engine.attach(loop)
    fleet.add("T")
    await asyncio.sleep(0)  # the creation's tick ran with nobody to assign to
    agent = fleet.register("runner-1")
    order: list[str] = []
    _record_ticks(fleet, order)

    task = await asyncio.wait_for(
        fleet.engine.runner.wait_assignment(agent, fleet.epoch(agent), 30), 5
    )

    assert task is not None and task.id == "T"
    assert order == ["tick"]


async def test_a_pulled_tick_that_fails_is_logged_and_the_poll_waits_on(
    fleet: Fleet, caplog: pytest.LogCaptureFixture
):
    fleet.engine.attach(asyncio.get_running_loop())
    agent = fleet.register("runner-1")
    fleet.add("T")

    def broken() -> Any:
        raise RuntimeError("boom")

    fleet.engine.ticks.tick = broken  # type: ignore[method-assign]

    assert await fleet.engine.runner.wait_assignment(agent, fleet.epoch(agent), 0.01) is None
    assert "tick failed" in caplog.text
