"""A hot file keeps moving: its next writer stacks on a task waiting to land.

Real server, real runners, the real landing worker and SQLite; only the agents'
brains are scripted. T1 changes `hub.py` and waits to land behind a slow
integration check; T2 waits for that (`wait_landing`), then writes `hub.py` too:
it takes the lease over at once (no veto), lands after T1, and each landed patch
is the task's own change. When T1 breaks the check instead, T2's work, built on
T1's change, is undone with it (`stack_unwound`, not charged) and both run again.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from fleet_support import drain as drain_fleet

from codefleet.api.client import FleetClient
from codefleet.models import from_iso
from codefleet.review.fetch import fetch_record
from codefleet.review.report.runreport import build_report, report_json
from codefleet.server.thread import ServerThread
from codefleet.testing.invariants_landing import check_landing

# Whole files: stacking hands a file over (parts are not stacked, decision 0159), and under
# `auto` an integration check would lease hub.py by part (decision 0164).
FAST = {
    "heartbeat_interval": 0.1,
    "stale_after": 5.0,
    "tick_interval": 0.05,
    "backoff_base": 0.0,
    "lease_granularity": "file",
}
# Slow enough that T2 stacks while T1's check runs; fails while hub.py holds BROKEN.
CHECK = f"sleep 0.5 && \"{sys.executable}\" -c \"assert 'BROKEN' not in open('hub.py').read()\""
HUB = "A = 0\n"
drain = partial(drain_fleet, wait_timeout=20)  # each scripted wait here is bounded at 20 s
TASKS = [
    {"id": "T1", "title": "first", "description": "do it"},
    {"id": "T2", "title": "second", "description": "do it"},
]


async def load(client: FleetClient) -> None:
    await client.create_tasks(TASKS, checks={"clean": CHECK})
    await client.set_integration("clean")


def kinds(events: list[dict[str, Any]], task_id: str) -> list[str]:
    return [e["type"] for e in events if e.get("task_id") == task_id]


async def test_the_next_writer_of_a_file_waiting_to_land_stacks_on_it_and_lands_after_it(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    (workdir / "hub.py").write_text(HUB)
    server = make_server(**FAST)
    script = {
        "T1": [{"write": {"path": "hub.py", "content": "A = 1\n"}}],
        "T2": [{"wait_landing": "T1"}, {"append": {"path": "hub.py", "text": "B = 2\n"}}],
    }
    async with FleetClient(server.url) as client:
        await load(client)
        await drain(server, workdir, script)
        events = await client.all_events()
        patches = {t: (await client.patch(t))["files"] for t in ("T1", "T2")}
        statuses = {t: (await client.task(t))["status"] for t in ("T1", "T2")}
        summary = report_json(build_report(await fetch_record(client)))["sections"]["summary"]
    assert statuses == {"T1": "succeeded", "T2": "succeeded"}
    taken = next(e["at"] for e in events if e["payload"].get("stacked_on"))
    landed = next(e["at"] for e in events if e["type"] == "landed" and e["task_id"] == "T1")
    not_waited = (from_iso(landed) - from_iso(taken)).total_seconds()
    assert not_waited > 0  # T1's slow check was still running when T2 took hub.py over
    assert summary["stacks"] == {"stacked": 1, "undone": 0, "not_waited_s": round(not_waited, 3)}
    assert check_landing(events, "clean") == []
    assert (workdir / "hub.py").read_text() == "A = 1\nB = 2\n"
    assert not [e for e in events if e["type"] == "lease_denied"]  # no veto: it stacked
    [stacked] = [e for e in events if e["payload"].get("stacked_on")]
    assert (stacked["task_id"], stacked["payload"]["path"]) == ("T2", "hub.py")
    assert [e["task_id"] for e in events if e["type"] == "landed"] == ["T1", "T2"]
    assert [e["payload"]["attempt"] for e in events if e["type"] == "task_assigned"] == [1, 1]
    t1_diff, t2_diff = (patches[t][0]["diff"] for t in ("T1", "T2"))
    assert "+A = 1" in t1_diff and "B = 2" not in t1_diff  # T1's own change, not T2's on it
    assert "+B = 2" in t2_diff and "-A = 0" not in t2_diff  # T2's, on top of T1's


async def test_a_task_stacked_on_one_that_breaks_the_check_is_undone_with_it_uncharged(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    (workdir / "hub.py").write_text(HUB)
    server = make_server(**FAST)
    script = {
        "T1": [
            {"write": {"path": "hub.py", "content": "A = 'BROKEN'\n"}, "attempt": 1},
            {"edit": {"path": "hub.py", "old": "A = 0", "new": "A = 1"}, "attempt": 2},
        ],
        "T2": [
            {"wait_landing": "T1", "attempt": 1},
            {"wait_succeeded": "T1", "attempt": 2},  # not while T1's rework holds hub.py
            {"append": {"path": "hub.py", "text": "B = 2\n"}},
            {"wait_succeeded": "T1", "attempt": 1},  # still running when T1 is blamed
        ],
    }
    async with FleetClient(server.url) as client:
        await load(client)
        await drain(server, workdir, script)
        events = await client.all_events()
        tasks = {t: await client.task(t) for t in ("T1", "T2")}
        summary = report_json(build_report(await fetch_record(client)))["sections"]["summary"]
    # undone with T1 before it landed: T1's later landing spared T2 no wait
    assert summary["stacks"] == {"stacked": 1, "undone": 1, "not_waited_s": 0.0}
    assert {t: row["status"] for t, row in tasks.items()} == {
        "T1": "succeeded",
        "T2": "succeeded",
    }
    assert check_landing(events, "clean") == []
    [unwound] = [e for e in events if e["type"] == "stack_unwound"]
    assert (unwound["task_id"], unwound["payload"]["under_task_id"]) == ("T2", "T1")
    blamed = next(i for i, e in enumerate(events) if e["type"] == "integration_failed")
    assert events[blamed]["task_id"] == "T1"
    requeued = [e for e in events if e["type"] == "task_requeued" and e["task_id"] == "T2"]
    assert requeued[0]["payload"]["error_kind"] == "stack_unwound"
    assert (tasks["T2"]["attempts"], tasks["T2"]["uncharged_attempts"]) == (2, 1)  # not its fault
    assert (workdir / "hub.py").read_text() == "A = 1\nB = 2\n"
    t1_restored = [
        e for e in events if e["type"] == "file_restored" and e["task_id"] == "T1"
    ]  # T1's rollback put hub.py back to before T1 (T2's stacked restore was dropped)
    assert [e["payload"]["path"] for e in t1_restored] == ["hub.py"]
    assert not [e for e in events if e["type"] == "file_restored" and e["task_id"] == "T2"]
