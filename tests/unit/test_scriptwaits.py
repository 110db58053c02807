"""`fleet.scriptwaits`: how often a wait asks the server, and the demo's own pace.

The clock, the pause and the server's answers are stood in for (a wait's pace is
what is asserted, not how long it took); the wait, its condition, its doorbell and
its pauses are the real code's.
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
from codefleet.fleet.scriptwaits import (
    BELL_PAUSE_S,
    QUICK_S,
    WAIT_POLL_MAX_S,
    WAIT_POLL_S,
    wait_until,
)


class _Client:
    """Answers `task` with `running` until it has been asked `until` times; its log's last
    event is 40, and a read that waits sees event 41 (`task_succeeded`) after `rings` reads."""

    def __init__(self, until: int, rings: int = 1) -> None:
        self.asked = 0
        self.until = until
        self.rings = rings
        self.waits: list[tuple[int, str | None, float]] = []  # (since, type, wait) of each

    async def task(self, task_id: str) -> dict[str, Any]:
        self.asked += 1
        return {"id": task_id, "status": "succeeded" if self.asked >= self.until else "running"}

    async def health(self) -> dict[str, Any]:
        return {"last_event_id": 40}

    async def events(
        self, since: int = 0, limit: int = 10_000, type_: str | None = None, wait: float = 0.0
    ) -> list[dict[str, Any]]:
        self.waits.append((since, type_, wait))
        rung = len(self.waits) >= self.rings and since < 41
        return [{"id": 41, "type": "task_succeeded"}] if rung else []


class _Inbox:
    """An operator message that arrives once the wait has looked `until` times."""

    def __init__(self, until: int) -> None:
        self.asked = 0
        self.until = until

    @property
    def waiting(self) -> list[Any]:
        self.asked += 1
        return [SimpleNamespace(text="go on")] if self.asked >= self.until else []


def paused(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The pauses the waits take (the clock moves by each)."""
    clock = [0.0]
    pauses: list[float] = []

    async def pause(seconds: float) -> None:
        pauses.append(seconds)
        clock[0] += seconds

    monkeypatch.setattr(scriptwaits.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(scriptwaits.asyncio, "sleep", pause)
    return pauses


def pauses_of(
    monkeypatch: pytest.MonkeyPatch, poll: float | None, asks: int
) -> tuple[list[float], int]:
    """The pauses a `wait_message` takes before its `asks`-th look finds the message."""
    pauses = paused(monkeypatch)
    inbox = _Inbox(asks)
    attempt = cast(Attempt, SimpleNamespace(inbox=inbox))
    paced = () if poll is None else (poll,)
    gave_up = run(wait_until("wait_message", "go on", attempt, 600.0, *paced))
    assert gave_up is None
    return pauses, inbox.asked


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


def test_a_wait_on_the_server_sleeps_on_its_doorbell_and_asks_again_when_it_rings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pauses = paused(monkeypatch)
    client = _Client(until=3, rings=1)
    attempt = cast(Attempt, SimpleNamespace(gate=SimpleNamespace(client=client)))

    assert run(wait_until("wait_succeeded", "T1", attempt, 600.0, DEMO_WAIT_POLL_S)) is None
    # asked, took the log's last id (40) and asked again at once, then slept until the
    # `task_succeeded` after 40 was logged, and asked a third time: no poll's pause
    assert client.asked == 3 and pauses == []
    assert client.waits == [(40, "task_succeeded", BELL_PAUSE_S)]


def test_a_doorbell_that_does_not_ring_is_asked_again_after_its_pause(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    paused(monkeypatch)
    client = _Client(until=6, rings=3)
    attempt = cast(Attempt, SimpleNamespace(gate=SimpleNamespace(client=client)))

    assert run(wait_until("wait_succeeded", "T1", attempt, 600.0)) is None
    assert client.waits == [(40, "task_succeeded", BELL_PAUSE_S)] * 3 + [
        (41, "task_succeeded", BELL_PAUSE_S)
    ]


def test_the_dry_run_demo_paces_its_waits_at_25_ms() -> None:
    executor = demo_executor("dry-run", examples_dir())

    assert isinstance(executor, ScriptedExecutor)
    assert executor.wait_poll == DEMO_WAIT_POLL_S == 0.025
    assert ScriptedExecutor().wait_poll == WAIT_POLL_S  # every other dry run: as before
