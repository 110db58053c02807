"""A write that waits for its lease, over the wire: parked, handed over, deadlock, changed.

Two hand-driven runners (A then B, so A is the older task) talk to a real
server with `CODEFLEET_LEASE_WAIT` set; B's writes go through the real
`WriteGate`, the function the session's `PreToolUse` hook calls.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
from fleet_support import Runner, register
from test_api_runner import take
from test_persons import writes

from codefleet.api.client import FleetClient
from codefleet.attempt import AttemptReport
from codefleet.fleet.gate.prewrite import Verdict, WriteGate
from codefleet.fleet.gate.readset import look
from codefleet.fleet.local import FleetOptions, run_fleet
from codefleet.fleet.runner import RunnerOptions
from codefleet.fleet.scripted import ScriptedExecutor, parse_script
from codefleet.models import ErrorKind
from codefleet.paths import TreeRoot
from codefleet.server.thread import ServerThread

WaitUntil = Callable[..., Awaitable[Any]]
LEASE_WAIT_S = 20.0


async def started(client: FleetClient, task_id: str, scope: str) -> Runner:
    runner = await register(client, f"runner-{task_id}")
    await client.create_tasks(
        [{"id": task_id, "title": task_id, "description": "do it", "file_scope": [scope]}]
    )
    task = await take(client, runner)
    assert task.id == task_id
    await client.start(task_id, runner.id, runner.epoch)
    return runner


def gate_of(client: FleetClient, workdir: Path, runner: Runner, task_id: str) -> WriteGate:
    return WriteGate(
        client, TreeRoot(workdir), runner.id, runner.epoch, task_id, lease_wait_s=LEASE_WAIT_S
    )


async def parked(client: FleetClient, wait_until: WaitUntil, task_id: str) -> dict[str, Any]:
    found = await wait_until(
        lambda: _first(client.events(type_="lease_waiting"), task_id), timeout=10.0
    )
    return dict(found)


async def _first(events: Awaitable[list[dict[str, Any]]], task_id: str) -> dict[str, Any] | None:
    return next((e for e in await events if e["task_id"] == task_id), None)


async def finish(client: FleetClient, runner: Runner, task_id: str, ok: bool = True) -> None:
    fields: dict[str, Any] = {} if ok else {"error_kind": ErrorKind.VETO, "error": "vetoed"}
    await client.complete(
        task_id, runner.id, runner.epoch, AttemptReport(attempt=1, ok=ok, **fields)
    )


async def test_a_parked_write_is_granted_when_the_holder_completes(
    make_server: Callable[..., ServerThread], workdir: Path, wait_until: WaitUntil
) -> None:
    (workdir / "x.py").write_text("x = 1\n")
    server = make_server(lease_wait=LEASE_WAIT_S)
    async with FleetClient(server.url, transport=httpx.AsyncHTTPTransport(verify=False)) as client:
        a = await started(client, "A", "a.py")
        assert (await client.acquire(a.id, a.epoch, "A", ["x.py"], "Edit"))["decision"] == "allow"
        b = await started(client, "B", "b.py")
        gate = gate_of(client, workdir, b, "B")
        gate.reads = {"x.py": look(workdir, "x.py", "Read")}
        write = asyncio.create_task(gate.check("Edit", {"file_path": str(workdir / "x.py")}))
        event = (await parked(client, wait_until, "B"))["payload"]
        assert (event["path"], event["holder_task_id"], event["queue_position"]) == ("x.py", "A", 1)
        await finish(client, a, "A")
        verdict = await asyncio.wait_for(write, 10.0)
        assert verdict == Verdict(True, ("x.py",))
        waited = (await client.events(type_="lease_waited"))[-1]
        assert (waited["task_id"], waited["payload"]["outcome"]) == ("B", "granted")
        assert [(x["path"], x["task_id"]) for x in await client.leases()] == [("x.py", "B")]


async def test_a_wait_that_would_close_a_cycle_is_refused_at_once_and_nothing_hangs(
    make_server: Callable[..., ServerThread], workdir: Path, wait_until: WaitUntil
) -> None:
    server = make_server(lease_wait=LEASE_WAIT_S)
    async with FleetClient(server.url, transport=httpx.AsyncHTTPTransport(verify=False)) as client:
        a = await started(client, "A", "a.py")
        b = await started(client, "B", "b.py")
        assert (await client.acquire(a.id, a.epoch, "A", ["x.py"], "Edit"))["decision"] == "allow"
        assert (await client.acquire(b.id, b.epoch, "B", ["y.py"], "Edit"))["decision"] == "allow"
        a_waits = asyncio.create_task(
            gate_of(client, workdir, a, "A").check("Write", {"file_path": "y.py"})
        )
        await parked(client, wait_until, "A")
        b_gate = gate_of(client, workdir, b, "B")
        verdict = await asyncio.wait_for(b_gate.check("Write", {"file_path": "x.py"}), 5.0)
        assert not verdict.allowed and verdict.blocked_on == "x.py"  # the ordinary veto
        waited = (await client.events(type_="lease_waited"))[-1]
        outcome = (waited["task_id"], waited["payload"]["outcome"], waited["payload"]["waited_s"])
        assert outcome == ("B", "deadlock", 0.0)
        await finish(client, b, "B", ok=False)  # B's veto releases y: A, parked, gets it
        assert (await asyncio.wait_for(a_waits, 10.0)).allowed


async def test_a_file_the_holder_changed_meanwhile_is_a_reread_not_a_veto(
    make_server: Callable[..., ServerThread], workdir: Path, wait_until: WaitUntil
) -> None:
    (workdir / "api.py").write_text("v = 1\n")
    server = make_server(lease_wait=LEASE_WAIT_S)
    async with FleetClient(server.url, transport=httpx.AsyncHTTPTransport(verify=False)) as client:
        a = await started(client, "A", "a.py")
        assert (await client.acquire(a.id, a.epoch, "A", ["api.py"], "Edit"))["decision"] == "allow"
        b = await started(client, "B", "b.py")
        gate = gate_of(client, workdir, b, "B")
        gate.reads = {"api.py": look(workdir, "api.py", "Read")}
        write = asyncio.create_task(gate.check("Edit", {"file_path": str(workdir / "api.py")}))
        await parked(client, wait_until, "B")
        (workdir / "api.py").write_text("v = 2\n")  # the holder's edit
        await finish(client, a, "A")
        verdict = await asyncio.wait_for(write, 10.0)
        assert not verdict.allowed and verdict.reread and verdict.blocked_on is None
        assert "api.py changed while you waited (A finished): Read it again" in verdict.reason
        assert gate.blocked_on is None  # not a veto: the session goes on
        waited = (await client.events(type_="lease_waited"))[-1]
        assert (waited["task_id"], waited["payload"]["outcome"]) == ("B", "changed")
        gate.reads = {"api.py": look(workdir, "api.py", "Read")}  # it reads the file again
        again = await gate.check("Edit", {"file_path": str(workdir / "api.py")})
        assert again == Verdict(True, ("api.py",))


async def test_a_write_over_content_never_read_does_not_land_after_a_wait(
    make_server: Callable[..., ServerThread], workdir: Path, wait_until: WaitUntil
) -> None:
    server = make_server(lease_wait=LEASE_WAIT_S)
    async with FleetClient(server.url, transport=httpx.AsyncHTTPTransport(verify=False)) as client:
        a = await started(client, "A", "a.py")
        assert (await client.acquire(a.id, a.epoch, "A", ["new.py"], "Write"))[
            "decision"
        ] == "allow"
        b = await started(client, "B", "b.py")
        gate = gate_of(client, workdir, b, "B")  # B never read new.py: it did not exist
        write = asyncio.create_task(gate.check("Write", {"file_path": "new.py"}))
        await parked(client, wait_until, "B")
        (workdir / "new.py").write_text("made by A\n")
        await finish(client, a, "A")
        verdict = await asyncio.wait_for(write, 10.0)
        assert not verdict.allowed and verdict.reread


async def test_with_no_lease_wait_a_held_path_is_the_veto_at_once(
    client: FleetClient, workdir: Path
) -> None:
    a = await started(client, "A", "a.py")
    assert (await client.acquire(a.id, a.epoch, "A", ["x.py"], "Edit"))["decision"] == "allow"
    b = await started(client, "B", "b.py")
    verdict = await gate_of(client, workdir, b, "B").check("Write", {"file_path": "x.py"})
    assert not verdict.allowed and verdict.blocked_on == "x.py"
    assert await client.events(type_="lease_waiting") == []


async def test_a_parked_write_past_its_bound_gets_the_ordinary_veto(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    server = make_server(lease_wait=0.2)  # the holder never ends: the bound is what ends the wait
    async with FleetClient(server.url, transport=httpx.AsyncHTTPTransport(verify=False)) as client:
        a = await started(client, "A", "a.py")
        assert (await client.acquire(a.id, a.epoch, "A", ["x.py"], "Edit"))["decision"] == "allow"
        b = await started(client, "B", "b.py")
        gate = WriteGate(client, TreeRoot(workdir), b.id, b.epoch, "B", lease_wait_s=0.2)
        verdict = await asyncio.wait_for(gate.check("Write", {"file_path": "x.py"}), 10.0)
        assert not verdict.allowed and verdict.blocked_on == "x.py"
        waited = (await client.events(type_="lease_waited"))[-1]["payload"]
        assert (waited["outcome"], waited["holder_task_id"]) == ("timed_out", "A")


async def test_a_fleet_write_never_waits_behind_a_person(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    server = make_server(lease_wait=LEASE_WAIT_S)
    async with FleetClient(server.url, transport=httpx.AsyncHTTPTransport(verify=False)) as client:
        assert writes(server, workdir, "a.py") == ""  # a person's session holds a.py
        b = await started(client, "B", "b.py")
        verdict = await asyncio.wait_for(
            gate_of(client, workdir, b, "B").check("Write", {"file_path": "a.py"}), 5.0
        )
        assert not verdict.allowed and verdict.blocked_on == "a.py"
        assert await client.events(type_="lease_waiting") == []


async def test_real_runners_keep_heartbeating_through_a_wait_longer_than_the_stale_window(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    server = make_server(
        lease_wait=LEASE_WAIT_S, heartbeat_interval=0.1, stale_after=1.0, tick_interval=0.05
    )
    script = {  # the holder works 2.5 s on x.py: the waiter's wait outlasts the stale window
        "holder": [{"write": {"path": "x.py", "content": "mine\n"}}, {"sleep": 2.5}],
        "waiter": [
            {"wait_leased": "x.py"},
            {"read": "x.py"},
            {"append": {"path": "x.py", "text": "theirs\n"}},
        ],
    }
    async with FleetClient(server.url, transport=httpx.AsyncHTTPTransport(verify=False)) as client:
        await client.create_tasks(
            [
                {"id": t, "title": t, "description": "do it", "file_scope": [f"{t}.py"]}
                for t in ("holder", "waiter")
            ]
        )
        executor = ScriptedExecutor(parse_script(script), wait_timeout=10)
        result = await run_fleet(
            server.url,
            lambda _: executor,
            FleetOptions(RunnerOptions("runner", workdir, workdir.parent / "runs"), runners=2),
        )
        assert result.ok
        offline = {e["payload"]["reason"] for e in await client.events(type_="agent_offline")}
        assert "agent_stale" not in offline  # they left at the end, none went stale
        [waited] = await client.events(type_="lease_waited")
        assert (waited["task_id"], waited["payload"]["outcome"]) == ("waiter", "granted")
        assert waited["payload"]["waited_s"] > 1.0  # longer than the stale window
    assert (workdir / "x.py").read_text() == "mine\ntheirs\n"
