"""No check twice on the same content (issue 53, item 1): a passing result is its content's.

Real server and runner, SQLite, the real `git`; only the agent's brain is scripted.
The agent runs its check with `run_check`, then the runner verifies its session with
the same check: on exactly the content the agent's run saw, the verify is that run
(`check_reused`); a file written after the run, or a check its operator declared
`reuse: false`, runs again. A landing check on the content the task's own check
passed on is that run too (`reused_event`, decision 0177).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from codefleet.api.client import FleetClient
from codefleet.api.graphfile import load_graph
from codefleet.fleet.local import FleetOptions, run_fleet
from codefleet.fleet.runner import RunnerOptions
from codefleet.fleet.scripted import ScriptedExecutor, parse_script
from codefleet.review.fetch import fetch_record
from codefleet.review.report.runreport import build_report, report_json
from codefleet.review.report.sparedwork import checks_text, reused_seconds
from codefleet.server.thread import ServerThread
from codefleet.testing.invariants_landing import check_landing
from codefleet.testing.invariants_reuse import check_reuse
from codefleet.wording import phrase

FAST = {"heartbeat_interval": 0.1, "stale_after": 5.0, "tick_interval": 0.05, "backoff_base": 0.0}
SUITE = f'"{sys.executable}" -c "import lib; assert lib.VALUE == 2"'


def repository(tree: Path) -> None:
    (tree / "lib.py").write_text("VALUE = 1\n")
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=x", "-c",
                 "user.email=x@example.invalid", "commit", "-qm", "start"]):  # fmt: skip
        subprocess.run(["git", "-C", str(tree), *args], check=True, capture_output=True)


async def run(
    make_server: Callable[..., ServerThread], tree: Path, steps: list[Any], reuse: bool = True
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The attempt's check events, and its success's payload."""
    events = await fleet_events(make_server, tree, steps, reuse)
    [succeeded] = [e for e in events if e["type"] == "task_succeeded"]
    return [e for e in events if e["type"].startswith("check_")], succeeded["payload"]


async def fleet_events(
    make_server: Callable[..., ServerThread],
    tree: Path,
    steps: list[Any],
    reuse: bool = True,
    integration: bool = False,
) -> list[dict[str, Any]]:
    """Every event of a fleet that drains T1 (`verify: suite`, the integration check too
    with `integration`) with `steps`; the report and the invariants agree with the log."""
    repository(tree)
    server = make_server(**FAST, workdir=tree)
    check: dict[str, Any] = {"run": SUITE} if reuse else {"run": SUITE, "reuse": False}
    graph_file = tree.parent / "graph.yaml"  # read as a person's graph file is
    graph_file.write_text(
        yaml.safe_dump(
            {
                "checks": {"suite": check},
                "tasks": [
                    {"id": "T1", "title": "two", "description": "make it 2", "verify": "suite"}
                ],
            }
        )
    )
    graph = load_graph(graph_file)
    async with FleetClient(server.url) as client:
        await client.create_tasks(graph)
        if integration:  # T1's verify is left to its landing (decision 0157)
            await client.set_integration("suite")
        executor = ScriptedExecutor(parse_script({"T1": steps}))
        options = FleetOptions(RunnerOptions("runner", tree, tree.parent / "runs"))
        result = await run_fleet(server.url, lambda _: executor, options)
        assert result.ok, result.tasks
        events = await client.all_events()
        summary = report_json(build_report(await fetch_record(client)))["sections"]["summary"]
    fresh = frozenset() if reuse else {"suite"}
    assert summary["checks"]["run"] == sum(e["type"] == "check_finished" for e in events)
    assert summary["checks"]["reused"] == sum(
        e["type"] == "check_reused" or "reused_event" in e["payload"] for e in events
    )  # a landing check that stands for the task's pass is a reuse too
    assert summary["checks"]["reused_s"] == round(reused_seconds(events), 3)
    assert check_reuse(events, fresh) == []  # the log proves it
    assert check_landing(events, "suite" if integration else None, fresh) == []
    return events


WRITE = {"write": {"path": "lib.py", "content": "VALUE = 2\n"}}
CHECK = {"check": "suite"}


def kinds(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["type"], e["payload"]["purpose"]) for e in events if e["type"] != "check_defined"]


async def test_a_verify_on_exactly_what_the_agents_check_saw_is_that_check(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    events, succeeded = await run(make_server, workdir, [WRITE, CHECK])

    assert kinds(events) == [
        ("check_started", "tool"),
        ("check_finished", "tool"),
        ("check_reused", "verify"),
    ]
    [reused] = [e for e in events if e["type"] == "check_reused"]
    [ran] = [e for e in events if e["type"] == "check_finished"]
    assert reused["payload"]["reused_from"] == "tool"
    assert reused["payload"]["reused_event"] == ran["id"]  # the run it is, in the log
    said = ("command", "identity")
    assert [reused["payload"][k] for k in said] == [ran["payload"][k] for k in said]
    assert reused["payload"]["command"] == SUITE and len(reused["payload"]["identity"]) == 64
    moved = {**reused, "payload": {**reused["payload"], "identity": "0" * 64}}
    tampered = [moved if e is reused else e for e in events]  # the control: it is not asleep
    assert [v.rule for v in check_reuse(tampered)] == ["check_reuse"]
    assert reused_seconds(events) == ran["payload"]["duration_ms"] / 1000
    assert checks_text({"run": 1, "reused": 1, "deferred": 0, "landing": 0, "reused_s": 0.4}) == (
        "1 run · 1 reused (passed before on the same content: 0.4 s not run)"
    )
    assert "passed on this same content before" in succeeded["summary"]


async def test_a_landing_check_on_exactly_what_the_tasks_check_passed_on_is_that_check(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    """T1's own `run_check` passed and nothing moved since: its landing step's check is not
    run, it names that `check_finished` and says whose it was (decision 0177)."""
    events = await fleet_events(make_server, workdir, [WRITE, CHECK], integration=True)

    attempt = [e["type"] for e in events if e["type"].startswith("check_")]
    assert attempt[-3:] == ["check_started", "check_finished", "check_deferred"]  # its only run
    [ran] = [e for e in events if e["type"] == "check_finished"]
    [landing] = [e for e in events if e["type"] == "landing_check_finished"]
    body = landing["payload"]
    assert (body["verdict"], body["view"], body["duration_ms"]) == ("passed", "reused", 0)
    assert (body["reused_event"], body["reused_task"], body["reused_purpose"]) == (
        ran["id"], "T1", "tool",
    )  # fmt: skip
    assert "reused_step" not in body and body["batch"] == ["T1"]
    said = ("command", "identity")
    assert [body[k] for k in said] == [ran["payload"][k] for k in said]
    assert phrase("landing_check_finished", body) == (
        "landing check suite: T1 (batch) passed, not run: T1's run_check of suite passed with "
        "this command on this same content"
    )
    assert reused_seconds(events) == ran["payload"]["duration_ms"] / 1000
    moved = {**landing, "payload": {**body, "identity": "0" * 64}}
    tampered = [moved if e is landing else e for e in events]  # the control: it is not asleep
    assert [v.rule for v in check_landing(tampered, "suite")] == ["check_reuse"]


async def test_a_landing_check_of_a_check_declared_reuse_false_runs(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    events = await fleet_events(make_server, workdir, [WRITE, CHECK], reuse=False, integration=True)

    [landing] = [e for e in events if e["type"] == "landing_check_finished"]
    assert landing["payload"]["view"] != "reused" and "reused_event" not in landing["payload"]


async def test_a_file_written_after_the_agents_check_makes_the_verify_run_again(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    notes = {"write": {"path": "notes.txt", "content": "a note\n"}}  # untracked, new content
    events, _ = await run(make_server, workdir, [WRITE, CHECK, notes])

    assert kinds(events) == [
        ("check_started", "tool"),
        ("check_finished", "tool"),
        ("check_started", "verify"),
        ("check_finished", "verify"),
    ]


async def test_a_check_its_graph_declares_reuse_false_always_runs(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    events, _ = await run(make_server, workdir, [WRITE, CHECK], reuse=False)

    assert ("check_reused", "verify") not in kinds(events)
    assert kinds(events)[-2:] == [("check_started", "verify"), ("check_finished", "verify")]


async def test_a_landing_check_is_not_run_again_on_the_content_it_passed_on(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    """A lands (its batch passed on the base plus A); B's batch fails, and the base alone
    is checked to tell who broke it: that base is exactly what A's batch passed on, so the
    check is not run again (`view: reused`). B is still blamed, reworked, and lands."""
    from test_landing import FAST as LANDING
    from test_landing import LIB, RENAME_AND_CALLER, TASKS, TEST_LIB
    from test_landing import SUITE as LIB_SUITE

    repository(workdir)
    (workdir / "lib.py").write_text(LIB)
    (workdir / "test_lib.py").write_text(TEST_LIB)
    for args in (["add", "-A"], ["-c", "user.name=x", "-c", "user.email=x@example.invalid",
                 "commit", "-qm", "lib"]):  # fmt: skip
        subprocess.run(["git", "-C", str(workdir), *args], check=True, capture_output=True)
    server = make_server(**LANDING, workdir=workdir)
    async with FleetClient(server.url) as client:
        await client.create_tasks(TASKS, {"test": LIB_SUITE})
        await client.set_integration("test")
        executor = ScriptedExecutor(parse_script(RENAME_AND_CALLER))
        options = FleetOptions(RunnerOptions("runner", workdir, workdir.parent / "runs"), runners=2)
        result = await run_fleet(server.url, lambda _: executor, options)
        events = await client.all_events()

    assert result.ok, result.tasks
    finished = [e["payload"] for e in events if e["type"] == "landing_check_finished"]
    [base] = [p for p in finished if p["purpose"] == "base"]
    assert (base["verdict"], base["view"], base["duration_ms"]) == ("passed", "reused", 0)
    [batch_a] = [p for p in finished if p["batch"] == ["A"]]
    assert batch_a["identity"] == base["identity"] and batch_a.get("view") != "reused"
    assert base["reused_step"] == batch_a["step"] and base["command"] == batch_a["command"]
    assert check_landing(events, "test") == []  # the log proves the reuse
