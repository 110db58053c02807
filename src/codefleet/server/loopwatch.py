"""How long the server's event loop could not run: the time it could not hear heartbeats.

Everything the server does runs on one event loop. A handler that holds it
(a huge graph being validated, a slow disk) also holds back every heartbeat
waiting in a socket: the runner is alive, the server is deaf. `LoopWatch`
measures that deafness from a monotonic clock: each observation compares the
time since the previous one with the probe interval, and lateness beyond a
tolerance is added to a running total. The probe runs on the loop every
`interval`; the engine also observes at the start of every tick, so a stall
is counted before the stale check that follows it, whichever runs first.
The engine moves each agent's last heartbeat later by the deaf time since it
(docs/decisions/0048-stale-means-unheard-while-listening.md, "Stale means unheard while listening").
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

__all__ = ["LoopWatch"]


class LoopWatch:
    def __init__(
        self,
        interval: float = 0.1,
        tolerance: float = 0.25,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.interval = interval
        self.tolerance = tolerance
        self._monotonic = monotonic
        self._last = monotonic()
        self._deaf = 0.0
        self._handle: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def deaf_seconds(self) -> float:
        """Total seconds the loop could not run (observing now first)."""
        self.probe()
        return self._deaf

    def probe(self) -> None:
        now = self._monotonic()
        late = now - self._last - self.interval
        if late > self.tolerance:
            self._deaf += late
        self._last = max(self._last, now)

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """Probe on `loop` every `interval` until `close()`."""
        self._loop = loop
        self._last = self._monotonic()
        self._schedule()

    def close(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
        self._loop = None

    def _schedule(self) -> None:
        if self._loop is not None:
            self._handle = self._loop.call_later(self.interval, self._tick)

    def _tick(self) -> None:
        self.probe()
        self._schedule()
