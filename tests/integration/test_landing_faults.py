"""Landing under faults: a flaky check, a candidate that breaks the check's program, a
landing worker killed mid-check.

Real server, real runners, the real landing worker and SQLite; only the agents' brains
are scripted. What is asserted is what the operator would see: who is blamed (nobody,
for a flaky check; the culprit, for a deleted program), whether landing halts, and that
a killed worker leaves neither a running check nor a claim that blocks the next worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fleet_support import shell_here
from test_landing import FAST, drain, finish_by_hand, of_type, start_worker, write

from codefleet.api.client import FleetClient
from codefleet.fleet.landingworker import LandingOptions, LandingWorker
from codefleet.paths import TreeRoot
from codefleet.server.thread import ServerThread

ONE = [{"id": "T", "title": "t", "description": "do it"}]


def counting_check(count: Path) -> str:
    """A check that fails its first run and passes every later one (runs counted in `count`,
    outside the tree and so outside every view)."""
    return f'n=$(cat "{count}" 2>/dev/null || echo 0); echo $((n + 1)) > "{count}"; [ "$n" -ge 1 ]'


async def test_a_check_that_fails_once_then_passes_halts_as_flaky_and_blames_nobody(
    make_server: Callable[..., ServerThread], workdir: Path, tmp_path: Path
) -> None:
    server = make_server(**FAST)
    count = tmp_path / "runs-of-the-check"
    async with FleetClient(server.url) as client:
        await client.create_tasks(ONE, {"flaky": counting_check(count)})
        await client.set_integration("flaky")
        result, _ = await drain(server, workdir, {"T": [write("t.txt", "work")]}, runners=1)
        events = await client.all_events()
        task = await client.task("T")
        runs = count.read_text()
        await client.landing_resume()
        again, _ = await drain(server, workdir, {}, runners=1)
        after = await client.all_events()

    purposes = [e["payload"]["purpose"] for e in of_type(events, "landing_check_finished")]
    assert purposes == ["batch", "base", "confirm"] and runs == "3\n"
    [halt] = of_type(events, "landing_halted")
    assert halt["payload"]["why"].startswith("flaky") and "landing halted" in (result.stopped or "")
    assert of_type(events, "integration_failed") == []
    assert task["status"] == "landing" and task["attempts"] == 1  # not rolled back, not charged
    assert (workdir / "t.txt").read_text() == "work"
    assert again.ok and [e["task_id"] for e in of_type(after, "landed")] == ["T"]


async def test_a_candidate_that_deletes_the_checks_program_is_blamed_and_landing_goes_on(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    """T's first attempt deletes `check.sh`, the program the integration check runs: the
    check exits 127 with T, starts without it, so T is reworked; its second attempt lands."""
    program = workdir / "check.sh"
    program.write_text("#!/bin/sh\nexit 0\n")
    program.chmod(0o755)
    server = make_server(**FAST)
    script = {
        "T": [
            {"command": "rm check.sh", "attempt": 1},
            write("t.txt", "work"),
            {"expect_error": "Integration failed", "attempt": 2},
        ]
    }
    async with FleetClient(server.url) as client:
        await client.create_tasks(ONE, {"program": "./check.sh"})
        await client.set_integration("program")
        result, _ = await drain(
            server, workdir, script, runners=1, shell_default=True, shell_config=shell_here()
        )
        events = await client.all_events()

    assert result.ok, result.stopped
    assert of_type(events, "landing_halted") == []
    [broke] = of_type(events, "integration_failed")
    assert broke["task_id"] == "T"
    finished = [
        (e["payload"]["purpose"], e["payload"]["verdict"])
        for e in of_type(events, "landing_check_finished")
    ]
    assert finished[:3] == [("batch", "unrunnable"), ("base", "passed"), ("confirm", "unrunnable")]
    assert [e["task_id"] for e in of_type(events, "landed")] == ["T"]
    assert program.exists() and (workdir / "t.txt").read_text() == "work"


# A landing worker of its own process, killed with SIGKILL while its check runs.
WORKER = """
import asyncio, sys
from pathlib import Path
from codefleet.api.client import FleetClient
from codefleet.fleet.landingworker import LandingOptions, LandingWorker
from codefleet.paths import TreeRoot

async def main() -> None:
    async with FleetClient(sys.argv[1]) as client:
        options = LandingOptions("doomed", check_timeout=600.0)
        await LandingWorker(client, TreeRoot(Path(sys.argv[2])), options).run(asyncio.Event())

asyncio.run(main())
"""


def running(pid: int) -> bool:
    """Whether `pid` is in the process table and not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def carrying(marker: str) -> list[int]:
    """The running processes whose command line holds `marker` (host pids, whatever
    namespace the check's view put them in)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if marker.encode() in (entry / "cmdline").read_bytes() and running(int(entry.name)):
                found.append(int(entry.name))
    return found


async def test_a_killed_landing_worker_takes_its_check_with_it_and_its_claim_lapses(
    make_server: Callable[..., ServerThread], workdir: Path, tmp_path: Path, wait_until: Any
) -> None:
    """The check hangs in a child; its worker gets SIGKILL. The check's whole process group
    dies with it (not reparented and left running), and another worker gets the step once
    the dead one's claim lapses (stale_after), then lands the task."""
    marker = f"hanging-check-{uuid.uuid4().hex}"
    started, done = tmp_path / "child-started", tmp_path / "let-it-pass"
    child = f'"{sys.executable}" -c "import time; time.sleep(600)" {marker}'
    hang = f'if [ -e "{done}" ]; then exit 0; fi; {child} & touch "{started}"; wait'
    server = make_server(**FAST)
    async with FleetClient(server.url) as client:
        await client.create_tasks(ONE, {"hang": hang})
        await client.set_integration("hang")
        await finish_by_hand(client, workdir, "T", "t.txt")
        worker = subprocess.Popen([sys.executable, "-c", WORKER, server.url, str(workdir)])
        group: list[int] = []
        try:
            await wait_until(started.exists, timeout=60)  # a worker process starting
            group = await wait_until(lambda: carrying(marker))
            worker.send_signal(signal.SIGKILL)
            worker.wait()
            await wait_until(lambda: not any(map(running, group)), timeout=10)
        finally:
            worker.kill()
            for pid in filter(running, group):  # never leave them behind when the test fails
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        done.touch()
        stop = asyncio.Event()
        other = await start_worker(server, workdir, stop)
        try:
            await wait_until(lambda: task_landed(client), timeout=FAST["stale_after"] * 6)
        finally:
            stop.set()
            await other
        steps = of_type(await client.all_events(), "landing_check_started")

    assert len(steps) == 2 and steps[0]["payload"]["step"] != steps[1]["payload"]["step"]


async def task_landed(client: FleetClient) -> bool:
    return bool((await client.task("T"))["status"] == "succeeded")


class _NeverAnswers:
    """A client whose claim long-polls for ever: what an idle worker waits on."""

    def __init__(self) -> None:
        self.asked = asyncio.Event()

    async def landing_claim(self, worker: str, timeout_s: float, wait: float = 0.0) -> None:
        self.asked.set()
        await asyncio.Event().wait()


async def test_a_worker_parked_on_a_claim_stops_with_its_fleet_without_waiting_for_the_answer(
    workdir: Path,
) -> None:
    """A drained fleet sets `stop`; its idle workers end then, not when their claim's
    long-poll ends (the demo ended a second late)."""
    client = _NeverAnswers()
    worker = LandingWorker(client, TreeRoot(workdir), LandingOptions("lw"))  # type: ignore[arg-type]
    stop = asyncio.Event()
    running = asyncio.create_task(worker.run(stop))
    await client.asked.wait()
    stop.set()
    await asyncio.wait_for(running, 60)  # the claim never answers: only `stop` ends the run
    assert worker.steps == 0


async def test_a_stopping_server_answers_a_parked_claim_with_no_step(
    make_server: Callable[..., ServerThread],
) -> None:
    """The server's stop ends a worker's parked claim (no step) instead of waiting it out."""
    server = make_server(**FAST)
    queue = server.app.state.engine.landing_queue
    asked = threading.Event()
    claim = queue.claim

    def claim_and_say(worker: str, timeout_s: float) -> Any:
        step = claim(worker, timeout_s)
        asked.set()  # the route parks right after, before its loop runs anything else
        return step

    queue.claim = claim_and_say
    async with FleetClient(server.url) as client:
        parked = asyncio.create_task(client.landing_claim("lw", 60.0, wait=5.0))
        assert await asyncio.to_thread(asked.wait, 60)
        server.request_stop()
        assert await parked is None
    assert queue.closing
