"""A TCP relay that adds round-trip time: the latency benchmark's stand-in for `tc netem`.

Where the kernel has no `sch_netem` (this machine's has none, and loads no
modules), `bench/hosts.py` puts this relay between the runner host and the
server: it listens on one address, connects each accepted connection to the
target, and holds every chunk of bytes for half the round trip in each
direction before passing it on. Order within a direction is kept (one queue
per direction, released first in, first out); a new connection waits one
full round trip first, as a TCP handshake over the link would. Bandwidth is
not limited and nothing is dropped: it models distance, not a bad link.

    python -m codefleet.testing.delay --listen 127.0.0.1:9000 --to 10.0.0.1:8099 --rtt-ms 50

prints `listening HOST:PORT` once it accepts connections.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from dataclasses import dataclass
from typing import Final

__all__ = ["Relay", "main"]

CHUNK: Final = 65536
_EOF: Final = b""


@dataclass(frozen=True, slots=True)
class Relay:
    """Forward connections to `target` (host, port), each direction delayed by `rtt_s / 2`."""

    target: tuple[str, int]
    rtt_s: float

    async def serve(self, host: str, port: int) -> asyncio.Server:
        return await asyncio.start_server(self._connection, host, port)

    async def _connection(self, near_r: asyncio.StreamReader, near_w: asyncio.StreamWriter) -> None:
        await asyncio.sleep(self.rtt_s)  # the handshake's round trip
        try:
            far_r, far_w = await asyncio.open_connection(*self.target)
        except OSError:
            near_w.close()
            return
        half = self.rtt_s / 2
        try:
            await asyncio.gather(_pipe(near_r, far_w, half), _pipe(far_r, near_w, half))
        finally:
            for writer in (near_w, far_w):
                writer.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
    """Copy `reader` to `writer`, each chunk released `delay` seconds after it arrived."""
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()
    loop = asyncio.get_running_loop()
    sender = asyncio.create_task(_release(queue, writer))
    try:
        while True:
            try:
                data = await reader.read(CHUNK)
            except OSError:
                data = _EOF
            queue.put_nowait((loop.time() + delay, data))
            if data == _EOF:
                break
        await sender
    finally:
        sender.cancel()


async def _release(queue: asyncio.Queue[tuple[float, bytes]], writer: asyncio.StreamWriter) -> None:
    loop = asyncio.get_running_loop()
    while True:
        due, data = await queue.get()
        await asyncio.sleep(max(0.0, due - loop.time()))
        try:
            if data == _EOF:
                if writer.can_write_eof():
                    writer.write_eof()
                return
            writer.write(data)
            await writer.drain()
        except OSError:  # the other side went away: nothing left to deliver to
            with contextlib.suppress(OSError):
                writer.close()
            return


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


async def _run(listen: tuple[str, int], relay: Relay) -> None:
    server = await relay.serve(*listen)
    bound = server.sockets[0].getsockname()
    print(f"listening {bound[0]}:{bound[1]}", flush=True)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--listen", type=_address, required=True, help="HOST:PORT (port 0: any)")
    parser.add_argument("--to", type=_address, required=True, help="the server's HOST:PORT")
    parser.add_argument("--rtt-ms", type=float, required=True, help="added round trip, ms")
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_run(args.listen, Relay(args.to, args.rtt_ms / 1000.0)))


if __name__ == "__main__":
    main()
