"""`fleet.scriptwaits`: how often a wait asks the server, and the demo's own pace.

The clock and the pause are stood in for (a wait's pace is what is asserted, not how
long it took); the wait, its condition and its pauses are the real code's.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, cast

import pytest

from codefleet.cli.start.demo_run import DEMO_WAIT_POLL_S, demo_executor, examples_dir
from codefleet.fleet import scriptwaits
from codefleet.fleet.executor import Attempt
from codefleet.fleet.scripted import ScriptedExecutor
from codefleet.fleet.scriptwaits import QUICK_S, WAIT_POLL_MAX_S, WAIT_POLL_S, wait_until


class _Client:
    """Answers `task` with `running` until it has been asked `until` times."""

    def __init__(self, until: int) -> None:
        self.asked = 0
        self.until = until

    async def task(self, task_id: str) -> dict[str, Any]:
        self.asked += 1
        return {"id": task_id, "status": "succeeded" if self.asked >= self.until else "running"}


def pauses_of(
    monkeypatch: pytest.MonkeyPatch, poll: float | None, asks: int
) -> tuple[list[float], int]:
    """The pauses a `wait_succeeded` takes before its `asks`-th ask sees the task succeed."""
    clock = [0.0]
    pauses: list[float] = []

    async def pause(seconds: float) -> None:
        pauses.append(seconds)
        clock[0] += seconds

    monkeypatch.setattr(scriptwaits.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(scriptwaits.asyncio, "sleep", pause)
    client = _Client(asks)
    attempt = cast(Attempt, SimpleNamespace(gate=SimpleNamespace(client=client)))
    paced = () if poll is None else (poll,)
    gave_up = run(wait_until("wait_succeeded", "T1", attempt, 600.0, *paced))
    assert gave_up is None
    return pauses, client.asked


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def paced(pauses: list[float], young: float) -> tuple[int, set[float]]:
    """How many pauses at `young` open the wait, and the pauses after them."""
    first = next((n for n, p in enumerate(pauses) if p != young), len(pauses))
    return first, set(pauses[first:])


def test_a_young_wait_asks_every_ten_ms_then_every_fifty_once_a_second_old(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pauses, asked = pauses_of(monkeypatch, None, 150)
    young, later = paced(pauses, WAIT_POLL_S)

    assert asked == 150
    assert young == pytest.approx(QUICK_S / WAIT_POLL_S, abs=1)  # the first second
    assert later == {WAIT_POLL_MAX_S}


def test_an_executors_own_pace_is_its_waits_and_a_long_wait_asks_no_more_often_than_fifty_ms(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pauses, _ = pauses_of(monkeypatch, 0.025, 60)
    young, later = paced(pauses, 0.025)

    assert young == pytest.approx(QUICK_S / 0.025, abs=1)
    assert later == {WAIT_POLL_MAX_S}


def test_the_dry_run_demo_paces_its_waits_at_25_ms() -> None:
    executor = demo_executor("dry-run", examples_dir())

    assert isinstance(executor, ScriptedExecutor)
    assert executor.wait_poll == DEMO_WAIT_POLL_S == 0.025
    assert ScriptedExecutor().wait_poll == WAIT_POLL_S  # every other dry run: as before
