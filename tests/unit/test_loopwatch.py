"""The loop watch: how long the server's event loop could not run, from a given clock."""

from __future__ import annotations

import pytest

from codefleet.server.loopwatch import LoopWatch


class Ticks:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_on_time_probes_add_no_deaf_time() -> None:
    ticks = Ticks()
    watch = LoopWatch(interval=0.1, tolerance=0.25, monotonic=ticks)
    for _ in range(10):
        ticks.now += 0.12  # ordinary jitter
        watch.probe()

    assert watch.deaf_seconds() == 0.0


def test_a_late_probe_counts_the_lateness_as_deaf_time_once() -> None:
    ticks = Ticks()
    watch = LoopWatch(interval=0.1, tolerance=0.25, monotonic=ticks)
    ticks.now += 36.1  # a handler held the loop for 36 s

    assert watch.deaf_seconds() == pytest.approx(36.0)  # seen by whoever asks first (the tick) ...
    watch.probe()
    assert watch.deaf_seconds() == pytest.approx(36.0)  # ... and never counted twice
    ticks.now += 0.1
    watch.probe()
    assert watch.deaf_seconds() == pytest.approx(36.0)
