"""`run --verify` that fails after the drain names the first failing landing.

The real `codefleet run --dry-run --script` process against a real server:
scripted agents land tasks in an order the scripts fix (`wait_succeeded`),
with no check of their own and no integration check, so a pair that breaks the
suite together lands green; the verify command then fails, and the bisection
over the recorded patches must name the landing that broke it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from history_support import (
    CALLER_STEPS,
    RENAME_STEPS,
    RENAMED,
    SUITE,
    run_scripted,
    write_lib,
)

from codefleet.api.client import FleetClient
from codefleet.server.thread import ServerThread

FAST = {"heartbeat_interval": 0.1, "stale_after": 5.0, "tick_interval": 0.05, "backoff_base": 0.0}


def tasks(*rows: tuple[str, str]) -> list[dict[str, Any]]:
    return [{"id": i, "title": title, "description": "scripted"} for i, title in rows]


async def test_a_failing_verify_names_the_landing_after_which_the_suite_fails(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    write_lib(workdir)
    server = make_server(**FAST)
    script = {
        "T1": [{"write": {"path": "notes.txt", "content": "notes\n"}}],
        "T2": [{"wait_succeeded": "T1"}, *CALLER_STEPS],
        "T3": [{"wait_succeeded": "T2"}, *RENAME_STEPS],
        "T4": [{"wait_succeeded": "T3"}, {"write": {"path": "more.txt", "content": "more\n"}}],
    }
    rows = [("T1", "Add notes"), ("T2", "Add welcome"), ("T3", "Rename greet"), ("T4", "More")]
    async with FleetClient(server.url) as client:
        await client.create_tasks(tasks(*rows))

        done = run_scripted(server.url, workdir, script, "--verify", SUITE, "--json", runners=4)

        events = await client.all_events()
    assert done.returncode == 1, done.stderr
    verify = json.loads(done.stdout)["verify"]
    assert (verify["ok"], verify["first_failing"], verify["title"]) == (False, "T3", "Rename greet")
    assert (verify["order"], verify["landings"], verify["before_run_fails"]) == (3, 4, False)
    assert [(s["landed"], s["verdict"]) for s in verify["steps"]] == [
        (4, "failed"),  # the control: the final tree's view fails as the tree did
        (2, "passed"),
        (3, "failed"),
    ]
    assert "verify bisect 3: with landings 1-3 of 4 (last T3): fails" in done.stderr
    [finished] = [e for e in events if e["type"] == "run_finished"]
    assert finished["payload"]["verify"]["first_failing"] == "T3"
    assert (workdir / "lib.py").read_text() == RENAMED  # the tree is left as the run made it


async def test_a_verify_that_fails_before_the_run_too_blames_no_task(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    server = make_server(**FAST)
    script = {
        "A": [{"write": {"path": "a.txt", "content": "a\n"}}],
        "B": [{"wait_succeeded": "A"}, {"write": {"path": "b.txt", "content": "b\n"}}],
    }
    async with FleetClient(server.url) as client:
        await client.create_tasks(tasks(("A", "Add a"), ("B", "Add b")))

        done = run_scripted(server.url, workdir, script, "--verify", "test -e never-there")

    assert done.returncode == 1, done.stderr
    assert (
        "verify failed with every one of the 2 landing(s) undone too: the tree before the run "
        "fails it, no task is to blame"
    ) in " ".join(done.stdout.split())
    report = subprocess.run(
        [sys.executable, "-m", "codefleet.cli", "report", "--server", server.url],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "no task is to blame" in report.stdout
