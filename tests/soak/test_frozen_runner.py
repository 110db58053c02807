"""A runner frozen with a lease grant in flight never writes after its task was taken back.

What SIGSTOP (a sleeping laptop, a long GC pause) looks like to the runner's
process: every call it makes stops where it is. The transport here forwards
the runner's lease request to a real server, which grants it, and then
freezes the runner (the answer and every later call wait) until the server
has marked it stale, taken its task back and put its files back. When it
thaws, the answer it reads is an old `allow`: the write must not land.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import httpx

from codefleet.api.client import FleetClient
from codefleet.fleet.runner import Runner, RunnerOptions
from codefleet.fleet.scripted import ScriptedExecutor, parse_script
from codefleet.server.thread import ServerThread

FAST = {"heartbeat_interval": 0.1, "stale_after": 1.0, "tick_interval": 0.05, "max_attempts": 1}
BOUND_S = 20.0


class FreezesAfterGrant(httpx.AsyncBaseTransport):
    """Forwards every call; once a lease is granted, holds every answer until `thaw` is set."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport(verify=False)
        self.frozen = asyncio.Event()
        self.thaw = asyncio.Event()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self.frozen.is_set():
            await self.thaw.wait()
        response = await self.inner.handle_async_request(request)
        if request.url.path.endswith("/leases/acquire") and not self.frozen.is_set():
            self.frozen.set()
            await self.thaw.wait()
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_a_grant_answered_after_the_runner_was_taken_back_writes_nothing(
    make_server: Callable[..., ServerThread], workdir: Path, wait_until: Callable[..., object]
) -> None:
    server = make_server(**FAST)
    script = parse_script({"T": [{"write": {"path": "a.py", "content": "written by a zombie\n"}}]})
    options = RunnerOptions("runner-1", workdir, workdir.parent / "runs", poll_wait=0.2)
    transport = FreezesAfterGrant()
    stop = asyncio.Event()
    async with FleetClient(server.url) as observer:
        await observer.create_tasks([{"id": "T", "title": "t", "description": "do it"}])
        async with FleetClient(server.url, transport=transport) as client:
            runner = asyncio.create_task(
                Runner(client, ScriptedExecutor(script), options).run(stop)
            )
            await wait_until(transport.frozen.is_set, timeout=BOUND_S)
            await wait_until(lambda: _failed(observer), timeout=BOUND_S)  # taken back, put back
            assert (workdir / "a.py").read_text() == "A = 1\n"

            transport.thaw.set()
            await wait_until(lambda: _registered_again(observer), timeout=BOUND_S)
            stop.set()
            await asyncio.wait_for(runner, BOUND_S)

        assert (workdir / "a.py").read_text() == "A = 1\n"  # the late grant wrote nothing
        assert await observer.leases() == []


async def _failed(client: FleetClient) -> bool:
    return (await client.task("T"))["status"] == "failed" and not await client.leases()


async def _registered_again(client: FleetClient) -> bool:
    return len(await client.events(type_="agent_registered")) >= 2
