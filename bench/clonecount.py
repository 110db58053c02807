"""What clone runners spend on git, counted from outside: `bench.clones`' two meters.

`CloneProbe` wraps `fleet.clone.Clone`'s methods in the benchmark's process (the
one place the benchmark reaches into them; `src` is unchanged): it counts each
`fetch` and each `git` process by the step that made it (open, reset, level,
catch_up), and times every `level` (the wait between a grant and the write it
allows) with whether the file had to be taken from the line. With a `GitMeter`
it sends each `git fetch` through the meter's port for its step (git's own
`url.<base>.insteadOf`, given with `-c` to that one process). `GitMeter` is a
TCP relay in a process of its own in front of the server's port: only the
clones' fetches go through it (the runners' API calls go straight to the
server), so its byte counts are the fetch traffic, HTTP heads included, and its
request count the git HTTP requests the server answered, both by step.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing as mp
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from bench.harness import HOST, BenchError
from codefleet.fleet.clone import LINE_PATH, Clone

__all__ = ["STEPS", "CloneProbe", "GitMeter", "MeterCounts"]

CHUNK: Final = 65536
# a request line of git's smart HTTP, as git's curl sends it (bodies are pkt-lines and packs)
REQUEST: Final = re.compile(
    rb"(?:GET|POST) " + re.escape(LINE_PATH.encode()) + rb"/\S* HTTP/1\.1\r\n"
)
STEPS: Final = ("open", "reset", "level", "catch_up")  # the steps a fetch is counted under
METERED: Final = (*STEPS, "other")  # "other": a fetch outside those steps (none today)


# -- the relay ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MeterCounts:
    """What went through one of the relay's ports: connections, git requests, bytes each way."""

    connections: int = 0
    requests: int = 0
    sent: int = 0  # client to server (requests and their bodies)
    received: int = 0  # server to client (the answers: refs, packs)

    @property
    def bytes(self) -> int:
        return self.sent + self.received


class GitMeter:
    """A byte-counting TCP relay to `target_port` in its own process, one listening port per
    step (`METERED`), so each step's traffic is counted apart (`counts`)."""

    def __init__(self, target_port: int) -> None:
        ctx = mp.get_context("spawn")
        self.ports: dict[str, int] = {}  # known once started: the relay binds its own
        self._bound = ctx.Array("i", len(METERED))  # the port each step's socket got
        self._totals = ctx.Array("q", 4 * len(METERED))  # per step: connections, requests, bytes
        self._ready = ctx.Event()
        self._proc = ctx.Process(
            target=_relay_main,
            args=(self._bound, target_port, self._totals, self._ready),
            daemon=True,
        )

    def url(self, step: str) -> str:
        return f"http://{HOST}:{self.ports[step]}"

    def start(self) -> GitMeter:
        self._proc.start()
        if not self._ready.wait(30):
            raise BenchError("the git meter's relay did not start within 30 s")
        self.ports = dict(zip(METERED, self._bound[:], strict=True))
        return self

    def counts(self) -> dict[str, MeterCounts]:
        with self._totals.get_lock():
            totals = list(self._totals[:])
        return {step: MeterCounts(*totals[4 * i : 4 * i + 4]) for i, step in enumerate(METERED)}

    def stop(self) -> None:
        if self._proc.is_alive():
            self._proc.terminate()
        self._proc.join(timeout=10)


def _relay_main(bound: Any, target: int, totals: Any, ready: Any) -> None:
    asyncio.run(_relay(bound, target, totals, ready))


async def _relay(bound: Any, target: int, totals: Any, ready: Any) -> None:
    """Serve one port per step, each bound here (port 0: no other process can take it between
    a choice and the bind) and written to `bound`."""
    live: set[asyncio.Task[Any]] = set()  # the loop holds tasks weakly: a connection's is here

    def serving(slot: int) -> Callable[..., Any]:
        def add(index: int, amount: int) -> None:
            with totals.get_lock():
                totals[4 * slot + index] += amount

        async def connection(near_r: asyncio.StreamReader, near_w: asyncio.StreamWriter) -> None:
            add(0, 1)
            me = asyncio.current_task()
            if me is not None:
                live.add(me)
                me.add_done_callback(live.discard)
            far_r, far_w = await asyncio.open_connection(HOST, target)
            try:
                await asyncio.gather(
                    _pipe(near_r, far_w, add, 2, requests=True), _pipe(far_r, near_w, add, 3)
                )
            finally:
                for writer in (near_w, far_w):
                    writer.close()

        return connection

    servers = [await asyncio.start_server(serving(i), HOST, 0) for i in range(len(bound))]
    for i, server in enumerate(servers):
        bound[i] = server.sockets[0].getsockname()[1]
    ready.set()
    await asyncio.gather(*(server.serve_forever() for server in servers))


async def _pipe(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    add: Callable[[int, int], None],
    index: int,
    requests: bool = False,
) -> None:
    """Copy `reader` to `writer`, counting bytes (and, one way, request lines) as they pass."""
    tail = b""  # a request line split across two reads is still counted once
    with contextlib.suppress(ConnectionError):
        while chunk := await reader.read(CHUNK):
            add(index, len(chunk))
            if requests:
                seen = tail + chunk
                add(1, len(REQUEST.findall(seen)) - len(REQUEST.findall(tail)))
                tail = seen[-200:]
            writer.write(chunk)
            await writer.drain()
        with contextlib.suppress(OSError):
            writer.write_eof()


# -- the probe ------------------------------------------------------------------------------


@dataclass
class CloneProbe:
    """Counts and times what every `Clone` of this process does while `installed`; with a
    `meter`, each fetch goes through the meter's port for the step that made it."""

    server_url: str  # the URL the clones are given (their remote)
    meter: GitMeter | None = None
    fetches: Counter[str] = field(default_factory=Counter)  # by step
    gits: Counter[str] = field(default_factory=Counter)  # git processes, by step
    levels: list[tuple[float, bool]] = field(default_factory=list)  # (seconds, taken)
    _step: threading.local = field(default_factory=threading.local)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @contextlib.contextmanager
    def installed(self) -> Iterator[CloneProbe]:
        """Wrap `Clone`'s methods for the block; the originals are back after it."""
        saved = {name: Clone.__dict__[name] for name in (*STEPS, "_run")}
        try:
            wrappers = {name: self._stepping(name, saved[name]) for name in STEPS}
            wrappers["_run"] = self._counting(saved["_run"])
            for name, wrapper in wrappers.items():
                setattr(Clone, name, wrapper)
            yield self
        finally:
            for name, original in saved.items():
                setattr(Clone, name, original)

    def _stepping(self, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def step(clone: Clone, *args: Any, **kwargs: Any) -> Any:
            outer = getattr(self._step, "name", None)
            self._step.name = outer or name  # `open` resets: counted under `open`
            started = time.monotonic()
            try:
                done = original(clone, *args, **kwargs)
            finally:
                self._step.name = outer
            if name == "level":
                with self._lock:
                    self.levels.append((time.monotonic() - started, bool(done)))
            return done

        return step

    def _counting(self, original: Callable[..., Any]) -> Callable[..., Any]:
        """Every git process a clone starts, and among them the fetches (a `fetch` call that
        finds the line where it was starts none)."""

        def count(clone: Clone, *args: Any, **kwargs: Any) -> Any:
            step = getattr(self._step, "name", None) or "other"
            with self._lock:
                self.gits[step] += 1
                if args[:1] == ("fetch",):
                    self.fetches[step] += 1
            if args[:1] == ("fetch",) and self.meter is not None:
                # git's own URL rewriting sends this fetch through the step's port
                rewrite = f"url.{self.meter.url(step)}/.insteadOf={self.server_url.rstrip('/')}/"
                args = ("-c", rewrite, *args)
            return original(clone, *args, **kwargs)

        return count
