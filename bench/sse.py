"""SSE clients attached to `GET /events/stream` while another benchmark runs.

`SseClients(port, token, n)` starts one process holding `n` raw keep-alive
connections to the stream (from the current end of the log), each reading
and counting frames until `stop()`, which returns what they read and the CPU
seconds that process used. `bench.leases --sse N` runs its lease load with
them attached: the cost of N dashboards on the lease path.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import resource
import time
from typing import Any

import httpx

from bench.harness import HOST, BenchError

CONNECT_TIMEOUT_S = 30.0


async def _read_stream(port: int, token: str | None, since: int, stop: Any, out: list[int]) -> None:
    reader, writer = await asyncio.open_connection(HOST, port)
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    writer.write(
        f"GET /events/stream?since={since} HTTP/1.1\r\nHost: {HOST}:{port}\r\n{auth}"
        "Accept: text/event-stream\r\n\r\n".encode()
    )
    head = await reader.readuntil(b"\r\n\r\n")
    if b" 200 " not in head.split(b"\r\n", 1)[0]:
        raise BenchError(f"SSE stream refused: {head[:200]!r}")
    out[0] += 1  # connected
    while not stop.is_set():
        try:
            chunk = await asyncio.wait_for(reader.read(65536), timeout=0.2)
        except TimeoutError:
            continue
        if not chunk:
            break
        out[1] += chunk.count(b"\n\n")
        out[2] += len(chunk)
    writer.close()


async def _clients(
    port: int, token: str | None, n: int, since: int, ready: Any, stop: Any
) -> list[int]:
    out = [0, 0, 0]  # connected, frames, bytes
    tasks = [asyncio.create_task(_read_stream(port, token, since, stop, out)) for _ in range(n)]
    deadline = time.monotonic() + CONNECT_TIMEOUT_S
    while out[0] < n and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    ready.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    return out


def _main(port: int, token: str | None, n: int, since: int, ready: Any, stop: Any, q: Any) -> None:
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    connected, frames, size = asyncio.run(_clients(port, token, n, since, ready, stop))
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = cpu1.ru_utime - cpu0.ru_utime + cpu1.ru_stime - cpu0.ru_stime
    q.put({"clients": n, "connected": connected, "frames": frames, "bytes": size, "cpu_s": cpu})


class SseClients:
    def __init__(self, url: str, port: int, token: str | None, n: int) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        last = httpx.get(f"{url}/health", headers=headers).json()["last_event_id"]  # no replay
        ctx = mp.get_context("spawn")
        self._ready, self._stop, self._q = ctx.Event(), ctx.Event(), ctx.Queue()
        self._proc = ctx.Process(
            target=_main, args=(port, token, n, int(last), self._ready, self._stop, self._q)
        )
        self.n = n

    def start(self) -> None:
        self._proc.start()
        if not self._ready.wait(CONNECT_TIMEOUT_S + 10):
            raise BenchError("SSE clients did not connect")

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        found: dict[str, Any] = self._q.get(timeout=30)
        self._proc.join(timeout=10)
        if found["connected"] < self.n:
            raise BenchError(f"only {found['connected']} of {self.n} SSE clients connected")
        return found
