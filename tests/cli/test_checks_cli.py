"""Checks through the real Claude Code CLI: the `run_check` MCP tool and the verify loop.

The fake model calls `mcp__codefleet__run_check` like a real model would; the tool runs
in-process (the SDK's MCP server) on the attempt's `Checker`, against a real server.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from cli_support import run_attempt

from codefleet.api.client import FleetClient
from codefleet.fleet.runner import Runner, RunnerOptions
from codefleet.fleet.tools.attemptchecks import Checker, CheckLimits
from codefleet.offlinemodels.anthropicapi import FakeModel, Text, ToolUse, Turn
from codefleet.session.offline import offline_executor
from codefleet.session.sdk import CHECK_TOOL_NAME
from codefleet.session.sessionfiles import record_path

if TYPE_CHECKING:
    from conftest import StartAttempt

V_SAYS = "import sys; t = open('v.txt').read(); sys.exit(0 if t == 'good' else 'v.txt says ' + t)"


def run_check(name: str) -> Turn:
    return Turn(content=(Text(f"Running {name}."), ToolUse(CHECK_TOOL_NAME, {"name": name})))


def write(path: str, content: str) -> Turn:
    return Turn(content=(ToolUse("Write", {"file_path": path, "content": content}),))


async def test_the_agent_runs_a_named_check_and_an_unknown_name_is_refused(
    fake_model: FakeModel, client: FleetClient, start_attempt: StartAttempt, workdir: Path
) -> None:
    await client.define_checks({"test": "cat own.py a.py; echo x > junk.txt; exit 1"})
    fake_model.add_script(
        "T1",
        [
            write("own.py", "OWN = 1\n"),
            run_check("test"),
            run_check("rm -rf /"),
            Turn(content=(Text("Done."),)),
        ],
    )
    attempt = await start_attempt("T1")
    checker = Checker(attempt.gate, await client.checks(), attempt.number, CheckLimits())
    attempt = dataclasses.replace(attempt, checks=checker)

    outcome = await run_attempt(offline_executor(fake_model), attempt)

    ran, refused = fake_model.tool_results("T1")[1:]
    assert not ran.is_error and "Check `test` FAILED (exit code 1)" in ran.content
    assert ran.content.endswith("OWN = 1\nA = 1\n")  # its own edit, in the isolated view
    assert refused.is_error and "There is no check named 'rm -rf /'" in refused.content
    assert "The available checks are: test." in refused.content
    assert outcome.ok and not (workdir / "junk.txt").exists()
    record = json.loads(record_path(attempt).read_text())
    assert CHECK_TOOL_NAME in record["init"]["tools"]
    assert [(s["name"], s["status"]) for s in record["init"]["mcp_servers"]] == [
        ("codefleet", "connected")
    ]
    assert [(c["name"], c["passed"]) for c in record["checks"]] == [("test", False)]
    finished = await client.events(type_="check_finished")
    assert [(e["task_id"], e["payload"]["purpose"]) for e in finished] == [("T1", "tool")]
    prompt = fake_model.requests("T1")[0].body["messages"][0]["content"]
    assert "run_check tool, by name: test" in json.dumps(prompt)


async def test_a_failed_verification_reaches_the_next_sessions_prompt_and_the_retry_passes(
    fake_model: FakeModel, client: FleetClient, workdir: Path, runs: Path
) -> None:
    fake_model.add_script("V-a1", [write("v.txt", "bad"), Turn(content=(Text("Done."),))])
    fake_model.add_script("V-a2", [write("v.txt", "good"), Turn(content=(Text("Fixed."),))])
    check = f'"{sys.executable}" -c "{V_SAYS}"'
    await client.create_tasks(
        [{"id": "V", "title": "v", "description": "do it", "verify": "test"}], {"test": check}
    )
    executor = offline_executor(fake_model, ["V-a1", "V-a2"])
    options = RunnerOptions(  # the retry's prompt, so no repair turn first (test_repair_cli)
        "runner-1", workdir, runs, poll_wait=0.2, exit_when_drained=True, repair_turns=0
    )

    await Runner(client, executor, options).run()

    task = await client.task("V")
    assert (task["status"], task["attempts"]) == ("succeeded", 2)
    retry_prompt = json.dumps(fake_model.requests("V-a2")[0].body["messages"][0]["content"])
    assert "Its verification failed" in retry_prompt and "v.txt says bad" in retry_prompt
    assert "CodeFleet runs the check `test`" in retry_prompt
    assert (workdir / "v.txt").read_text() == "good"
    verdicts = [e["payload"]["passed"] for e in await client.events(type_="check_finished")]
    assert verdicts == [False, True]
