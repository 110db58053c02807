"""Commands through the real Claude Code CLI: the `run_command` MCP tool under the lock.

The fake model calls `mcp__codefleet__run_command` as a real model would; the tool runs
in-process (the SDK's MCP server) on the attempt's `CommandRunner`: a real layer, the
real sandbox where bubblewrap is installed, and the leases of a real server.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from cli_support import run_attempt
from tool_support import COMMAND_PYTHON as PYTHON
from tool_support import require_tool

from codefleet.api.client import FleetClient
from codefleet.attempt import AttemptReport
from codefleet.fleet.executor import Attempt
from codefleet.fleet.tools.commandtool import CommandRunner, host_shell
from codefleet.fleet.views.layerapply import ShellLimits
from codefleet.offlinemodels.anthropicapi import FakeModel, Text, ToolUse, Turn
from codefleet.session.offline import offline_executor
from codefleet.session.sdk import COMMAND_TOOL_NAME
from codefleet.session.sessionfiles import record_path

if TYPE_CHECKING:
    from conftest import StartAttempt


def run_command(command: str) -> Turn:
    return Turn(content=(Text("Running it."), ToolUse(COMMAND_TOOL_NAME, {"command": command})))


def with_shell(attempt: Attempt, *, sandboxed: bool) -> Attempt:
    config = host_shell(ShellLimits(), unsandboxed=not sandboxed)
    assert config is not None, "no command layer on this host"
    return dataclasses.replace(
        attempt, commands=CommandRunner(attempt.gate, attempt.number, config)
    )


async def test_a_session_generates_a_file_with_a_command_and_it_lands_leased_in_the_patch(
    fake_model: FakeModel, client: FleetClient, start_attempt: StartAttempt, workdir: Path
) -> None:
    generate = f"\"{PYTHON}\" -c \"open('gen.py', 'w').write('GEN = 1\\n')\""
    fake_model.add_script("T1", [run_command(generate), Turn(content=(Text("Done."),))])
    attempt = with_shell(await start_attempt("T1"), sandboxed=False)

    outcome = await run_attempt(offline_executor(fake_model), attempt)
    leases = await client.leases()
    await client.complete(
        "T1",
        attempt.gate.agent_id,
        attempt.gate.epoch,
        dataclasses.replace(outcome, attempt=attempt.number),
    )
    patch = await client.patch("T1")

    [answer] = fake_model.tool_results("T1")
    print(f"\n--- run_command answer (applied) ---\n{answer.content}")
    assert not answer.is_error and "Command exited with code 0" in answer.content
    assert "Applied to the shared tree: gen.py" in answer.content
    assert outcome.ok and (workdir / "gen.py").read_text() == "GEN = 1\n"
    assert [(x["path"], x["task_id"]) for x in leases] == [("gen.py", "T1")]
    assert [f["path"] for f in patch["files"]] == ["gen.py"]
    record = json.loads(record_path(attempt).read_text())
    assert COMMAND_TOOL_NAME in record["init"]["tools"] and "Bash" not in record["init"]["tools"]
    prompt = json.dumps(fake_model.requests("T1")[0].body["messages"][0]["content"])
    assert "run_command tool" in prompt


async def test_a_sandboxed_command_cannot_write_outside_its_layer_nor_reach_loopback(
    fake_model: FakeModel,
    client: FleetClient,
    start_attempt: StartAttempt,
    workdir: Path,
    tmp_path: Path,
) -> None:
    require_tool("bwrap", "sandboxes run_command", package="bubblewrap")
    port = urlsplit(client.base_url).port
    home = Path.home()
    probe = (
        f"import socket; s = socket.socket(); s.settimeout(2); "
        f"print('connected' if s.connect_ex(('127.0.0.1', {port})) == 0 else 'no network')"
    )
    command = (
        f"echo x > /usr/codefleet-escape; echo x > '{home}/codefleet-escape'; "
        f"echo x > '{tmp_path}/codefleet-escape'; echo x > /tmp/private.txt; "
        f'echo x > \'{workdir}/through-the-layer.txt\'; "{PYTHON}" -c "{probe}"; true'
    )
    fake_model.add_script("T1", [run_command(command), Turn(content=(Text("Done."),))])
    attempt = with_shell(await start_attempt("T1"), sandboxed=True)

    outcome = await run_attempt(offline_executor(fake_model), attempt)
    await client.complete(
        "T1",
        attempt.gate.agent_id,
        attempt.gate.epoch,
        AttemptReport(attempt=attempt.number, ok=False, error="done"),
    )

    [answer] = fake_model.tool_results("T1")
    # /usr and the home directory are read-only; /tmp is private (the write stays in it)
    assert answer.content.count("Read-only file system") == 2, answer.content
    assert "no network" in answer.content and "connected" not in answer.content.split("Output:")[1]
    assert not Path("/usr/codefleet-escape").exists()
    assert not (home / "codefleet-escape").exists()
    assert not (tmp_path / "codefleet-escape").exists()
    assert not Path("/tmp/private.txt").exists()
    # the tree's own path is the layer: that write reached the tree only through a lease
    assert "Applied to the shared tree: through-the-layer.txt" in answer.content
    assert outcome.ok
    [changed] = await client.events(type_="lease_acquired")
    assert changed["payload"]["path"] == "through-the-layer.txt"
    assert changed["payload"]["tool"] == "run_command"


async def test_a_sessions_command_touching_a_held_file_is_vetoed_and_nothing_lands(
    fake_model: FakeModel, client: FleetClient, start_attempt: StartAttempt, workdir: Path
) -> None:
    holder = await start_attempt("H", runner="runner-2")
    granted = await client.acquire(holder.gate.agent_id, holder.gate.epoch, "H", ["a.py"], "Write")
    assert granted["decision"] == "allow"
    fake_model.add_script(
        "T1",
        [
            run_command("echo made > gen.txt && echo 'A = 9' > a.py"),
            Turn(content=(Text("Blocked on a.py."),)),
        ],
    )
    attempt = with_shell(await start_attempt("T1"), sandboxed=False)

    outcome = await run_attempt(offline_executor(fake_model), attempt)

    [answer] = fake_model.tool_results("T1")
    print(f"\n--- run_command answer (vetoed) ---\n{answer.content}")
    assert answer.is_error and "NOTHING it changed was applied" in answer.content
    assert "a.py is held by runner-2 for task H" in answer.content
    assert (outcome.error_kind, outcome.blocked_on_path) == ("veto", "a.py")
    assert not (workdir / "gen.txt").exists() and (workdir / "a.py").read_text() == "A = 1\n"
