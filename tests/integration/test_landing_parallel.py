"""Landing steps in parallel: free landing workers check more prefixes at once.

Real server, real runners, real landing workers (three, as beside three runners) and
SQLite; only the agents' brains are scripted. The check waits, outside every view, until
a second check has started (or a few seconds have passed), so two steps overlap exactly
when two workers hold steps at once: the events show it. The outcome must be the one a
single worker reaches: the breaker blamed and reworked, every other task landed in
order, and the landing invariants hold for the history (decision 0160).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from test_landing import FAST, drain, finish_by_hand, of_type, queued, write
from test_landing_faults import carrying, running

from codefleet.api.client import FleetClient
from codefleet.fleet.landingworker import LandingOptions
from codefleet.fleet.local import start_landing
from codefleet.fleet.runner import RunnerOptions
from codefleet.paths import TreeRoot
from codefleet.server.thread import ServerThread
from codefleet.testing.invariants_landing import check_landing

IDS = [f"T{n}" for n in range(1, 7)]
MEET_S = 10  # how long a check waits for the others to start before going on alone


def meeting_check(meet: Path, alone: int = 0) -> str:
    """Fails when a candidate file says BROKEN; first says it started (a file in `meet`, by
    a random name: a view may have a PID namespace of its own) and waits until a second
    check has started, for at most MEET_S. A view with `alone` task files (the batch, when
    it runs alone) neither says it started nor waits."""
    script = (
        "import glob, os, sys, time, uuid; d = sys.argv[1]; files = glob.glob('f*.txt')\n"
        f"if len(files) != {alone}: open(os.path.join(d, uuid.uuid4().hex), 'w').close()\n"
        f"end = time.time() + {MEET_S}\n"
        f"while len(files) != {alone} and len(os.listdir(d)) < 2 and time.time() < end: "
        "time.sleep(0.02)\n"
        "sys.exit(any('BROKEN' in open(p).read() for p in files))"
    )
    return f'"{sys.executable}" -c "{script}" "{meet}"'


def workers(server: ServerThread, workdir: Path, stop: asyncio.Event, n: int) -> list[Any]:
    tree = TreeRoot(workdir)
    runner = RunnerOptions("runner", workdir, workdir.parent / "runs", protected_names=tree.names)
    return [
        start_landing(lambda: FleetClient(server.url), runner, LandingOptions(f"lw-{i}"), stop)
        for i in range(1, n + 1)
    ]


def most_at_once(events: list[dict[str, Any]]) -> int:
    """The most steps in flight at once: started and not yet finished (a step whose answer
    stopped mattering has no `landing_check_finished`: it counts from its start on, which
    only one worker never shows, since alone it never runs a step that stops mattering)."""
    running: set[int] = set()
    most = 0
    for e in events:
        if e["type"] == "landing_check_started":
            running.add(int(e["payload"]["step"]))
        elif e["type"] == "landing_check_finished":
            running.discard(int(e["payload"]["step"]))
        most = max(most, len(running))
    return most


async def test_two_steps_run_at_once_and_a_breaker_in_the_batch_is_still_the_one_blamed(
    make_server: Callable[..., ServerThread], workdir: Path, tmp_path: Path, wait_until: Any
) -> None:
    """Six tasks wait; the batch is three, so a second worker checks all six ahead of the
    first three. T4 breaks the check: it is blamed and reworked, the rest land in order."""
    server = make_server(**FAST, landing_batch=3, landing_parallel=4)
    meet = tmp_path / "meet"
    meet.mkdir()
    script: dict[str, Any] = {t: [write(f"f{t[1:]}.txt", "ok")] for t in IDS}
    script["T4"] = [write("f4.txt", "BROKEN", attempt=1), write("f4.txt", "ok", attempt=2)]
    tasks = [{"id": t, "title": t, "description": "do it"} for t in IDS]
    async with FleetClient(server.url) as client:
        await client.create_tasks(tasks, {"clean": meeting_check(meet)})
        await client.set_integration("clean")
        stop = asyncio.Event()
        fleet = asyncio.create_task(drain(server, workdir, script, runners=6, landing_worker=False))
        await wait_until(lambda: queued(client, 6), timeout=20)
        started = workers(server, workdir, stop, 3)
        result, _ = await fleet
        stop.set()
        await asyncio.gather(*started)
        events = await client.all_events()

    assert result.ok, result.tasks
    assert most_at_once(events) >= 2, "no two landing steps ran at the same time"
    first = [e for e in of_type(events, "landing_check_started")][:2]
    assert [e["payload"]["purpose"] for e in first] in (["batch", "ahead"], ["ahead", "batch"])
    queue = max((e["payload"]["batch"] for e in first), key=len)
    assert sorted(queue) == IDS
    assert [e["task_id"] for e in of_type(events, "integration_failed")] == ["T4"]
    order = [e["task_id"] for e in of_type(events, "landed")]
    breaker = queue.index("T4")
    assert order[:breaker] == queue[:breaker] and sorted(order) == IDS
    assert check_landing(events, "clean") == []


async def test_a_failing_batch_is_searched_with_several_prefixes_at_once(
    make_server: Callable[..., ServerThread], workdir: Path, tmp_path: Path, wait_until: Any
) -> None:
    """One batch of six fails; the free workers check the landed tree alone and prefixes
    of the batch at the same time, and the first breaker is the one blamed. (The batch
    runs alone: its check, on all six, does not wait for another.)"""
    server = make_server(**FAST, landing_batch=8, landing_parallel=4)
    meet = tmp_path / "meet"
    meet.mkdir()
    script: dict[str, Any] = {t: [write(f"f{t[1:]}.txt", "ok")] for t in IDS}
    script["T4"] = [write("f4.txt", "BROKEN", attempt=1), write("f4.txt", "ok", attempt=2)]
    tasks = [{"id": t, "title": t, "description": "do it"} for t in IDS]
    async with FleetClient(server.url) as client:
        await client.create_tasks(tasks, {"clean": meeting_check(meet, alone=len(IDS))})
        await client.set_integration("clean")
        stop = asyncio.Event()
        fleet = asyncio.create_task(drain(server, workdir, script, runners=6, landing_worker=False))
        await wait_until(lambda: queued(client, 6), timeout=20)
        started = workers(server, workdir, stop, 3)
        result, _ = await fleet
        stop.set()
        await asyncio.gather(*started)
        events = await client.all_events()

    assert result.ok, result.tasks
    [batch] = [e for e in of_type(events, "landing_check_finished") if e["payload"]["step"] == 1]
    assert (batch["payload"]["purpose"], batch["payload"]["verdict"]) == ("batch", "failed")
    search = [e for e in events if e["id"] > batch["id"]]
    assert most_at_once(search) >= 2, "the search of the failing batch ran one step at a time"
    assert [e["task_id"] for e in of_type(events, "integration_failed")] == ["T4"]
    assert check_landing(events, "clean") == []


def hanging_ahead(ahead: Path, marker: str) -> str:
    """A's work is broken. With B in the view too (the step ahead) the check says it started
    (`ahead`) and hangs in a child carrying `marker` (put together by the shell, so that only
    the child carries it); without B (the batch) it waits for the step ahead to start, then
    fails; without A's work it passes."""
    child = f'"{sys.executable}" -c "import time; time.sleep(600)" "${{m}}{marker[8:]}"'
    return (
        f"m={marker[:8]}; "
        f'if [ -e b.txt ] && grep -q BROKEN a.txt 2>/dev/null; then touch "{ahead}"; '
        f"{child} & wait; fi; "
        "if grep -q BROKEN a.txt 2>/dev/null; then n=0; "
        f'while [ ! -e "{ahead}" ] && [ $n -lt 300 ]; do sleep 0.1; n=$((n + 1)); done; '
        "exit 1; fi"
    )


async def test_a_step_ahead_whose_batch_failed_is_stopped_and_its_check_killed(
    make_server: Callable[..., ServerThread], workdir: Path, tmp_path: Path, wait_until: Any
) -> None:
    """A then B wait (batch 1): one worker checks A, the other A + B ahead of it, whose
    check hangs. A fails: the step ahead stops mattering, the log says its check stopped,
    its worker kills the check at its next beat, and B lands without waiting for it."""
    marker = f"hanging-ahead-{uuid.uuid4().hex}"
    server = make_server(**FAST, landing_batch=1, landing_parallel=4)
    tasks = [{"id": t, "title": t, "description": "do it"} for t in ("A", "B")]
    group: list[int] = []
    async with FleetClient(server.url) as client:
        await client.create_tasks(tasks[:1], {"clean": hanging_ahead(tmp_path / "ahead", marker)})
        await client.set_integration("clean")
        await finish_by_hand(client, workdir, "A", "a.txt", "BROKEN")
        await client.create_tasks(tasks[1:])  # now, so that A's runner took nothing more
        await finish_by_hand(client, workdir, "B", "b.txt")
        stop = asyncio.Event()
        started = workers(server, workdir, stop, 2)
        try:
            group = await wait_until(lambda: carrying(marker), timeout=30)
            await wait_until(lambda: not any(map(running, group)), timeout=FAST["stale_after"] * 4)
            await wait_until(lambda: landed(client, "B"), timeout=30)
        finally:
            for pid in filter(running, group):  # never leave it behind when the test fails
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            stop.set()
            await asyncio.gather(*started)
        events = await client.all_events()
        a = await client.task("A")

    stopped = [
        e["payload"] for e in of_type(events, "landing_check_finished")
        if e["payload"]["verdict"] == "stopped"
    ]  # fmt: skip
    assert [(p["purpose"], p["batch"]) for p in stopped] == [("ahead", ["A", "B"])]
    assert [e["task_id"] for e in of_type(events, "integration_failed")] == ["A"]
    assert a["status"] == "pending"  # blamed, rolled back, waiting for its next attempt
    assert check_landing(events, "clean") == []


async def landed(client: FleetClient, task_id: str) -> bool:
    return bool((await client.task(task_id))["status"] == "succeeded")
