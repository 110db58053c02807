"""A landing check's failure reads as the failing test, where people read it.

Real server, real runners and landing worker, SQLite; the check prints a real pytest
run's output (one failing test, then pytest-benchmark's table) and fails. The `BROKE`
and `LANDING HALTED` log lines and `codefleet landing` show the `FAILED` line and the
assertion, with real line breaks, whole lines, and an escape sequence shown escaped.
"""

from __future__ import annotations

import asyncio
import io
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from typer.testing import CliRunner

from codefleet.api.client import FleetClient
from codefleet.cli.app import app
from codefleet.fleet.local import FleetOptions, run_fleet
from codefleet.fleet.runner import RunnerOptions
from codefleet.fleet.scripted import ScriptedExecutor, parse_script
from codefleet.server.thread import ServerThread
from codefleet.ui.dashboardrender import log_text
from codefleet.ui.viewmodel import describe

# These tests are about the rollback and rework: no repair turn first (test_repair.py has those).
FAST = {
    "heartbeat_interval": 0.1,
    "stale_after": 5.0,
    "tick_interval": 0.05,
    "backoff_base": 0.0,
    "repair_turns": 0,
}
OUTPUT = Path(__file__).parents[1] / "unit" / "checkoutputs" / "pytest-benchmark-failed.txt"
FAILED = "FAILED test_shop.py::test_total_with_tax - assert 36.0 == 36.5"
ASSERTION = "E       assert 36.0 == 36.5"
TITLE = "\x1b]0;owned\x07"  # a terminal title change, printed by the check
# Fails, printing the pytest run (and a title change), once t.txt is in the tree.
BREAKS_WITH_T = f"test ! -e t.txt || {{ cat out.txt; printf '{TITLE}'; exit 1; }}"
FAILS_ALONE = f"cat out.txt; printf '{TITLE}'; exit 1"


def printed(event: dict[str, Any]) -> str:
    """The log line `codefleet run` and `watch` print for `event`, as a terminal shows it."""
    console = Console(record=True, width=400, file=io.StringIO())
    console.print(log_text(describe(event, {})))
    return console.export_text()


async def land(server: ServerThread, tree: Path, check: str) -> list[dict[str, Any]]:
    """T writes t.txt under the integration check `check`; the run's events."""
    shutil.copy(OUTPUT, tree / "out.txt")
    executor = ScriptedExecutor(parse_script({"T": [{"write": {"path": "t.txt", "content": "x"}}]}))
    options = FleetOptions(RunnerOptions("runner", tree, tree.parent / "runs"), runners=1)
    async with FleetClient(server.url) as client:
        await client.create_tasks(
            [{"id": "T", "title": "t", "description": "do it", "max_attempts": 1}],
            {"suite": check},
        )
        await client.set_integration("suite")
        await run_fleet(server.url, lambda _: executor, options)
        return await client.all_events()


def whole_lines(shown: str) -> list[str]:
    """The lines of the excerpt that are not whole lines of the check's output nor a gap."""
    whole = {line.strip() for line in OUTPUT.read_text().splitlines()} | {"…", ""}
    return [line.strip() for line in shown.splitlines() if line.strip() not in whole]


async def test_the_broke_line_shows_the_failing_test_on_lines_of_its_own(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    server = make_server(**FAST)

    events = await land(server, workdir, BREAKS_WITH_T)

    [broke] = [e for e in events if e["type"] == "integration_failed"]
    shown = printed(broke)
    lines = [line.strip() for line in shown.splitlines()]
    assert "BROKE suite: rolled back for rework" in lines[0]
    assert FAILED in lines and ASSERTION.strip() in lines
    assert "\\x0a" not in shown and "\\x1b]0;owned\\x07" in shown and "\x1b" not in shown
    assert all(line.startswith("    ") for line in shown.splitlines()[1:])  # under its event


async def test_a_halt_shows_the_failing_test_in_its_log_line_and_in_codefleet_landing(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    server = make_server(**FAST)

    events = await land(server, workdir, FAILS_ALONE)
    shown = await asyncio.to_thread(CliRunner().invoke, app, ["landing", "--server", server.url])

    [halt] = [e for e in events if e["type"] == "landing_halted"]
    logged = printed(halt)
    assert "LANDING HALTED: the landed tree alone fails suite" in logged.splitlines()[0]
    assert FAILED in [line.strip() for line in logged.splitlines()[1:]]
    assert shown.exit_code == 0, shown.output
    said = shown.output.splitlines()
    assert any(line.strip() == FAILED for line in said), shown.output
    assert any(line.strip() == ASSERTION.strip() for line in said), shown.output
    for text in (logged, shown.output):
        assert "\\x0a" not in text and "\x1b" not in text
        assert "\\x1b]0;owned\\x07" in text
    excerpt = shown.output[shown.output.index("output:") :]
    assert whole_lines(excerpt.replace("output:", "")) == ["\\x1b]0;owned\\x07"]
