"""Isolated checks through the scripted tier: real runner, server, SQLite, files and processes.

Only the agent's brain is scripted (`check: NAME` plays the `run_check` tool). The
checks are real shell commands in real throwaway views; nothing sleeps to synchronize.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from fleet_support import drain, started_holder
from typer.testing import CliRunner

from codefleet.api.client import FleetClient
from codefleet.api.graphfile import GraphError, parse_graph
from codefleet.attempt import AttemptReport
from codefleet.cli.app import app
from codefleet.fleet.runner import Runner, RunnerOptions
from codefleet.fleet.scripted import ScriptedExecutor, parse_script
from codefleet.models import ErrorKind
from codefleet.server.thread import ServerThread
from codefleet.session.taskprompt import build_prompt

FAST = {"heartbeat_interval": 0.1, "stale_after": 5.0, "tick_interval": 0.05, "backoff_base": 0.0}
PY = f'"{sys.executable}"'
V_SAYS = "import sys; t = open('v.txt').read(); sys.exit(0 if t == 'good' else 'v.txt says ' + t)"


@pytest.fixture
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Views are made under this directory, so a test can see that each one was deleted."""
    found = tmp_path / "tmp"
    found.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(found))
    return found


async def finished_checks(client: FleetClient) -> list[dict[str, Any]]:
    return [e["payload"] for e in await client.events(type_="check_finished")]


async def test_nothing_a_check_writes_reaches_the_shared_tree(
    make_server: Callable[..., ServerThread], workdir: Path, private_tmp: Path
) -> None:
    server = make_server(**FAST)
    mess = "echo new > new.txt && echo more >> a.py && rm pkg/b.py && mkdir d && cat a.py"
    script = {"t": [{"check": "mess"}, {"expect_check": "pass"}]}
    async with FleetClient(server.url) as client:
        await client.create_tasks(
            [{"id": "t", "title": "t", "description": "do it"}], {"mess": mess}
        )
        result, _ = await drain(server, workdir, script)
        [finished] = await finished_checks(client)

    assert result.all_succeeded
    assert finished["passed"] and finished["output_tail"] == "A = 1\nmore\n"
    assert (workdir / "a.py").read_text() == "A = 1\n"
    assert (workdir / "pkg" / "b.py").read_text() == "B = 2\n"
    assert not (workdir / "new.txt").exists() and not (workdir / "d").exists()
    assert list(private_tmp.iterdir()) == []  # the view was deleted


async def test_the_view_has_the_tasks_own_edits_but_not_another_running_tasks(
    make_server: Callable[..., ServerThread],
    workdir: Path,
    wait_until: Callable[..., Awaitable[Any]],
    private_tmp: Path,
) -> None:
    server = make_server(**FAST)
    snap = "cat a.py own.py; test -e pkg/extra.py && echo EXTRA || echo NO-EXTRA"
    script = {"T": [{"write": {"path": "own.py", "content": "OWN = 1\n"}}, {"check": "snap"}]}
    async with FleetClient(server.url) as client:
        agent, epoch = await started_holder(client, workdir)
        granted = await client.acquire(agent, epoch, "H", ["a.py", "pkg/extra.py"], "Write")
        assert granted["decision"] == "allow"
        (workdir / "a.py").write_text("A = 'half-done'\n")  # H's unfinished work
        (workdir / "pkg" / "extra.py").write_text("EXTRA = 1\n")
        await client.create_tasks(
            [{"id": "T", "title": "t", "description": "do it", "file_scope": ["own.py"]}],
            {"snap": snap},
        )
        executor = ScriptedExecutor(parse_script(script))
        stop = asyncio.Event()
        options = RunnerOptions("runner-1", workdir, workdir.parent / "runs", poll_wait=0.2)
        runner = asyncio.create_task(Runner(client, executor, options).run(stop))
        await wait_until(lambda: _status(client, "T", "succeeded"), timeout=10)
        stop.set()
        await runner
        [finished] = await finished_checks(client)
        await client.complete("H", agent, epoch, AttemptReport(attempt=1, ok=False, error="stop"))

    assert finished["output_tail"] == "A = 1\nOWN = 1\nNO-EXTRA\n"
    assert finished["isolated"] == ["a.py", "pkg/extra.py"]
    assert (workdir / "a.py").read_text() == "A = 1\n"  # H's failed attempt was rolled back
    assert list(private_tmp.iterdir()) == []


async def _status(client: FleetClient, task_id: str, status: str) -> bool:
    return bool((await client.task(task_id))["status"] == status)


async def test_a_failed_verification_is_rolled_back_and_the_retry_is_told_the_output(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    server = make_server(**FAST)
    script = {
        "V": [{"write": {"path": "v.txt", "content": "bad"}, "attempt": 1},
              {"expect_error": "v.txt says bad", "attempt": 2},
              {"write": {"path": "v.txt", "content": "good"}, "attempt": 2}],
    }  # fmt: skip
    async with FleetClient(server.url) as client:
        await client.create_tasks(
            [{"id": "V", "title": "v", "description": "do it", "verify": "test"}],
            {"test": f'{PY} -c "{V_SAYS}"'},
        )
        # no repair turn first: this is the rollback (test_repair.py repairs it in the session)
        result, executor = await drain(server, workdir, script, repair_turns=0)
        task = await client.task("V")
        events = await client.all_events()

    assert result.all_succeeded and task["attempts"] == 2
    kinds = [(e["type"], e["payload"].get("error_kind")) for e in events if e["task_id"] == "V"]
    assert ("task_requeued", "verify_failed") in kinds
    verdicts = [
        (e["payload"]["purpose"], e["payload"]["passed"])
        for e in events
        if e["type"] == "check_finished"
    ]
    assert verdicts == [("verify", False), ("verify", True)]
    restored = [e for e in events if e["type"] == "file_restored"]
    assert [(e["payload"]["path"], e["payload"]["existed"]) for e in restored] == [("v.txt", False)]
    retry = executor.assignments[1]
    assert retry.error_kind is ErrorKind.VERIFY_FAILED and "v.txt says bad" in (retry.error or "")
    prompt = build_prompt(retry, checks=["test"])
    assert "Its verification failed" in prompt and "v.txt says bad" in prompt
    assert "runs the check `test`" in prompt
    assert (workdir / "v.txt").read_text() == "good"
    assert "verified: check test passed" in task["result_summary"]


async def test_a_check_past_its_time_limit_is_killed_and_fails_the_verification(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    server = make_server(**FAST)
    async with FleetClient(server.url) as client:
        await client.create_tasks(
            [
                {
                    "id": "S",
                    "title": "s",
                    "description": "do it",
                    "verify": "slow",
                    "max_attempts": 1,
                }
            ],
            {"slow": "sleep 30"},
        )
        result, _ = await drain(server, workdir, {}, check_timeout=0.5, repair_turns=0)
        [finished] = await finished_checks(client)
        [failed] = await client.events(type_="task_failed")

    assert not result.all_succeeded
    assert finished["timed_out"] and finished["duration_ms"] < 5000
    assert failed["payload"]["error_kind"] == "attempts_exhausted"  # its only attempt
    assert failed["payload"]["last_error_kind"] == "verify_failed"
    assert "TIMED OUT after 0.5s" in failed["payload"]["error"]


async def test_the_agent_gets_the_tail_of_a_long_output_and_the_event_a_shorter_one(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    server = make_server(**FAST)
    loud = f"{PY} -c \"print('x' * 50000); print('THE END')\""
    async with FleetClient(server.url) as client:
        await client.create_tasks(
            [{"id": "L", "title": "l", "description": "do it"}], {"loud": loud}
        )
        _, executor = await drain(server, workdir, {"L": [{"check": "loud"}]})
        [finished] = await finished_checks(client)

    [(_, _, result)] = executor.check_results
    assert result.output.endswith("THE END\n") and result.output_bytes == 50_009
    assert len(result.output.split("\n", 1)[1]) == 20_000  # the cap, after the cut notice
    assert len(finished["output_tail"]) == 2000 and finished["output_bytes"] == 50_009


async def test_an_unknown_check_name_is_refused_at_load_and_at_call(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    server = make_server(**FAST)  # the tree's one server (one lock per tree)
    async with httpx.AsyncClient(base_url=server.url) as http:
        bad = await http.post(
            "/tasks",
            json={"tasks": [{"id": "x", "title": "x", "description": "do it", "verify": "nope"}]},
        )
    assert bad.status_code == 422
    assert "unknown check 'nope'" in bad.json()["error"]["message"]
    with pytest.raises(GraphError, match="unknown check 'nope'"):
        parse_graph(
            {
                "checks": {"test": "true"},
                "tasks": [{"title": "x", "description": "do it", "verify": "nope"}],
            }
        )
    script = {"t": [{"check": "nope"}, {"expect_check": "fail"}]}
    async with FleetClient(server.url) as client:
        await client.create_tasks(
            [{"id": "t", "title": "t", "description": "do it"}], {"ok": "true"}
        )
        result, executor = await drain(server, workdir, script)
        assert await client.events(type_="check_started") == []

    [(_, _, refused)] = executor.check_results
    assert result.all_succeeded
    assert refused.refused == (
        "There is no check named 'nope'. The available checks are: ok. "
        "Call run_check with one of these names; you cannot run any other command."
    )


async def test_checks_are_defined_listed_and_validated_on_the_wire(
    http: httpx.AsyncClient, client: FleetClient, workdir: Path
) -> None:
    assert (await http.post("/checks", json={"checks": {"Bad Name": "x"}})).status_code == 422
    assert (await http.post("/checks", json={"checks": {"t": ""}})).status_code == 422
    first = await client.define_checks({"test": "pytest -q", "lint": "ruff check ."})
    again = await client.define_checks({"test": "pytest -q", "lint": "ruff check src"})
    defined = await client.events(type_="check_defined")
    await client.create_tasks([{"id": "T", "title": "t", "description": "do it"}])
    agent = await client.register("r", str(workdir), None)
    report = {"attempt": 5, "name": "test", "phase": "started", "purpose": "tool"}  # not its
    refused = await http.post(
        "/tasks/T/checks",
        json={"agent_id": agent["agent_id"], **report},
        headers={"X-Agent-Epoch": str(agent["epoch"])},
    )

    assert await client.checks() == {"lint": "ruff check src", "test": "pytest -q"}
    assert (first["changed"], again["changed"]) == (["lint", "test"], ["lint"])
    assert [(e["payload"]["name"], e["payload"]["replaced"]) for e in defined] == [
        ("lint", False),
        ("test", False),
        ("lint", True),
    ]
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "not_owner"


async def test_without_rollback_the_files_another_task_holds_are_reported_unrestorable(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    server = make_server(**FAST, keep_failed_edits=True)
    async with FleetClient(server.url) as client:
        await client.create_tasks(
            [
                {"id": "H", "title": "h", "description": "do it"},
                {"id": "T", "title": "t", "description": "do it"},
            ]
        )
        holder = await client.register("holder", str(workdir), None)
        assert await client.assignment(holder["agent_id"], holder["epoch"], wait=5)
        held = await client.acquire(holder["agent_id"], holder["epoch"], "H", ["a.py"], "Write")
        assert held["decision"] == "allow"
        other = await client.foreign_preimages("T")
        own = await client.foreign_preimages("H")

    assert (other["files"], other["unrestorable"]) == ([], ["a.py"])
    assert (own["files"], own["unrestorable"]) == ([], [])


def test_run_and_load_take_checks_on_the_command_line(
    make_server: Callable[..., ServerThread], workdir: Path, tmp_path: Path
) -> None:
    server = make_server(**FAST)
    graph = tmp_path / "graph.yaml"
    graph.write_text("tasks:\n  - {id: T, title: t, verify: ok, description: d}\n")
    script = tmp_path / "script.yaml"
    script.write_text("T:\n  - check: extra\n  - expect_check: fail\n")
    cli = CliRunner()

    loaded = cli.invoke(app, ["load", str(graph), "--check", "ok=true", "--server", server.url])
    ran = cli.invoke(
        app,
        [
            "run",
            "--dry-run",
            "--script",
            str(script),
            "--check",
            "extra=exit 4",
            "--runners",
            "1",
            "--server",
            server.url,
            "--workdir",
            str(workdir),
            "--run-dir",
            str(tmp_path / "runs"),
        ],
    )
    bad = cli.invoke(app, ["run", "--check", "no-equals-sign", "--server", server.url])

    assert loaded.exit_code == 0, loaded.output
    assert ran.exit_code == 0, ran.output
    assert bad.exit_code == 1 and "expected NAME=COMMAND" in " ".join(bad.output.split())


async def test_a_check_whose_program_is_missing_fails_its_task_at_once_naming_the_program(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    server = make_server(**FAST)
    (workdir / "lint.sh").write_text("#!/bin/sh\nexit 0\n")  # present, but not executable
    script = {"L": [{"write": {"path": "a.py", "content": "A = 2\n"}}]}
    async with FleetClient(server.url) as client:
        await client.create_tasks(
            [{"id": "L", "title": "l", "description": "do it", "verify": "lint", "max_attempts": 3},
             {"id": "X", "title": "x", "description": "do it", "verify": "exec", "max_attempts": 2},
             {"id": "D", "title": "d", "description": "do it", "depends_on": ["L"]}],
            {"lint": "flake9-is-not-installed .", "exec": "./lint.sh"},
        )  # fmt: skip
        result, executor = await drain(server, workdir, script)
        failed = {e["task_id"]: e["payload"] for e in await client.events(type_="task_failed")}
        requeued = await client.events(type_="task_requeued")
        finished = [p["exit_code"] for p in await finished_checks(client)]
        dependent = await client.task("D")

    assert not result.all_succeeded
    assert sorted(finished) == [126, 127]  # one attempt each: retrying cannot install a program
    assert requeued == [] and sorted(a.id for a in executor.assignments) == ["L", "X"]
    assert dependent["status"] == "blocked_upstream"
    assert (workdir / "a.py").read_text() == "A = 1\n"  # the attempt was rolled back
    for task_id, program, why in (
        ("L", "flake9-is-not-installed", "was not found"),
        ("X", "./lint.sh", "is not executable"),
    ):
        assert failed[task_id]["error_kind"] == "check_unrunnable"
        error = " ".join(failed[task_id]["error"].split())
        assert f"{program} {why} where checks run" in error, error
        assert f"Install {program} where checks run, or fix the check's command" in error, error
        assert f"then `codefleet retry {task_id}`" in error, error
    for command in (["tasks", "L"], ["report"]):  # the operator reads it where they look
        shown = await asyncio.to_thread(CliRunner().invoke, app, [*command, "--server", server.url])
        text = " ".join(shown.output.replace("│", " ").split())
        assert "Install flake9-is-not-installed where checks run" in text, shown.output
        assert "then `codefleet retry L`" in text, shown.output


def test_load_warns_about_a_check_whose_program_is_not_found_where_checks_run(
    make_server: Callable[..., ServerThread], tmp_path: Path
) -> None:
    server = make_server(**FAST)
    graph = tmp_path / "graph.yaml"
    graph.write_text(
        "checks: {lint: flake9-is-not-installed ., test: 'true'}\n"
        "tasks:\n  - {id: T, title: t, verify: lint, description: d}\n"
    )
    loaded = CliRunner().invoke(app, ["load", str(graph), "--server", server.url])
    assert loaded.exit_code == 0, loaded.output
    text = " ".join(loaded.output.split())
    assert "warning: check lint: flake9-is-not-installed was not found" in text
    assert "check test" not in text
