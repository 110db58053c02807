"""A verify that is the integration check runs once, at landing (issue 53, item 1).

Real server, real runners and landing worker, SQLite; only the agents' brains are
scripted. The task's `verify` names the integration check: the landing check runs
it on the landed tree with the task's change before the task can succeed, so the
runner leaves it to the landing (`check_deferred`) instead of running it at the
session's end too, unless the operator asks for both (`--verify-before-landing`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from codefleet.api.client import FleetClient
from codefleet.fleet.local import FleetOptions, run_fleet
from codefleet.fleet.runner import RunnerOptions
from codefleet.fleet.scripted import ScriptedExecutor, parse_script
from codefleet.server.thread import ServerThread

# These tests are about the rollback and rework: no repair turn first (test_repair.py has those).
FAST = {
    "heartbeat_interval": 0.1,
    "stale_after": 5.0,
    "tick_interval": 0.05,
    "backoff_base": 0.0,
    "repair_turns": 0,
}
SUITE = f'"{sys.executable}" -c "import lib; assert lib.VALUE in (1, 2)"'


async def run(
    make_server: Callable[..., ServerThread], workdir: Path, **settings: Any
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    (workdir / "lib.py").write_text("VALUE = 1\n")
    server = make_server(**FAST, **settings)
    script = {
        "T1": [
            {"write": {"path": "lib.py", "content": "VALUE = 3\n"}, "attempt": 1},
            {"write": {"path": "lib.py", "content": "VALUE = 2\n"}, "attempt": 2},
        ]
    }
    async with FleetClient(server.url) as client:
        await client.create_tasks(
            [{"id": "T1", "title": "two", "description": "make it 2", "verify": "suite"}],
            {"suite": SUITE},
        )
        await client.set_integration("suite")
        executor = ScriptedExecutor(parse_script(script))
        runner = RunnerOptions("runner", workdir, workdir.parent / "runs", repair_turns=0)
        options = FleetOptions(runner)
        result = await run_fleet(server.url, lambda _: executor, options)
        assert result.ok, result.tasks
        return await client.all_events(), await client.task("T1")


def of(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == kind]


async def test_a_verify_that_is_the_integration_check_runs_once_at_landing(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    events, task = await run(make_server, workdir)

    deferred = of(events, "check_deferred")
    assert [(e["payload"]["name"], e["payload"]["attempt"]) for e in deferred] == [
        ("suite", 1),
        ("suite", 2),
    ]
    assert not [e for e in of(events, "check_started") if e["payload"]["purpose"] == "verify"]
    landing = [
        (e["payload"]["check"], e["payload"]["verdict"])
        for e in of(events, "landing_check_finished")
    ]
    assert {name for name, _ in landing} == {"suite"}
    assert ("suite", "failed") in landing and landing[-1] == ("suite", "passed")  # attempt 1
    # broke it at landing (its blame confirmed), attempt 2 landed
    [broke] = of(events, "integration_failed")
    assert broke["task_id"] == "T1" and broke["payload"]["attempt"] == 1
    assert (workdir / "lib.py").read_text() == "VALUE = 2\n"
    assert task["status"] == "succeeded"
    [succeeded] = of(events, "task_succeeded")
    assert "verify: check suite runs at landing" in succeeded["payload"]["summary"]


async def test_the_operator_may_ask_for_both_and_the_verify_runs_at_the_sessions_end(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    events, task = await run(make_server, workdir, verify_before_landing=True)

    assert of(events, "check_deferred") == []
    verifies = [e for e in of(events, "check_finished") if e["payload"]["purpose"] == "verify"]
    assert [e["payload"]["passed"] for e in verifies] == [False, True]  # attempt 1 caught early
    assert of(events, "integration_failed") == []
    assert task["status"] == "succeeded"


async def test_run_verify_reuses_the_last_landing_check_on_this_same_tree(
    make_server: Callable[..., ServerThread], tmp_path: Path
) -> None:
    """`run --verify CMD` after the drain: the last landing check ran CMD on exactly this
    tree (the same content identity, nobody at work), so it is not run again; another
    command runs."""
    import subprocess

    tree = tmp_path / "repo"
    tree.mkdir()
    (tree / "lib.py").write_text("VALUE = 1\n")
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=x", "-c",
                 "user.email=x@example.invalid", "commit", "-qm", "start"]):  # fmt: skip
        subprocess.run(["git", "-C", str(tree), *args], check=True, capture_output=True)
    server = make_server(**FAST, workdir=tree)
    script = {"T1": [{"write": {"path": "lib.py", "content": "VALUE = 2\n"}}]}
    async with FleetClient(server.url) as client:
        await client.create_tasks(
            [{"id": "T1", "title": "two", "description": "make it 2"}], {"suite": SUITE}
        )
        await client.set_integration("suite")
        verified = []
        for command in (SUITE, f"{SUITE} && true"):
            options = FleetOptions(RunnerOptions("runner", tree, tmp_path / "runs"), verify=command)
            executor = ScriptedExecutor(parse_script(script))
            result = await run_fleet(server.url, lambda _, brain=executor: brain, options)
            assert result.ok and result.verify is not None, result
            verified.append(result.verify)

    reused, ran = verified
    assert reused.reused == "suite" and reused.exit_code == 0
    assert "landing check suite passed with this command on this same tree" in reused.output
    assert reused.payload()["reused"] == "suite"
    assert ran.reused is None and ran.exit_code == 0 and ran.duration_s > 0
