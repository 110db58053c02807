"""The Codex executor through the real Codex CLI (the pinned runtime), a real server and a
real WriteGate, against the scripted fake Responses API (`offlinemodels.openaiapi`).

Each test plays a script named like its task through `CodexExecutor` and checks what
reached the disk, what the model was told, what the executor reported and what the
server recorded.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cli_support import run_attempt

from codefleet.api.client import FleetClient
from codefleet.fleet.executor import Attempt
from codefleet.fleet.gate.prewrite import WriteGate
from codefleet.models import ErrorKind
from codefleet.offlinemodels.openaiapi import FakeCodexModel, patch_call
from codefleet.paths import TreeRoot
from codefleet.session.codex import CodexExecutor
from codefleet.session.sessionfiles import record_path

if TYPE_CHECKING:
    from conftest import StartAttempt


def say(text: str) -> dict[str, Any]:
    return {"content": [{"text": text}]}


async def test_a_patch_on_a_free_file_is_leased_lands_and_is_in_the_ledger(
    fake_codex: FakeCodexModel,
    client: FleetClient,
    start_attempt: StartAttempt,
    workdir: Path,
    codex: CodexExecutor,
) -> None:
    fake_codex.add_script(
        "T1",
        [
            {
                "content": [
                    patch_call(
                        "*** Update File: a.py",
                        "@@",
                        "-A = 1",
                        "+A = 2",
                        "*** Add File: new file.py",
                        "+N = 1",
                    )
                ]
            },
            say("Changed a.py and added new file.py."),
        ],
    )
    attempt = await start_attempt("T1", scope=["a.py"])

    outcome = await run_attempt(codex, attempt)

    assert (workdir / "a.py").read_text() == "A = 2\n"
    assert (workdir / "new file.py").read_text() == "N = 1\n"
    assert (outcome.ok, outcome.summary) == (True, "Changed a.py and added new file.py.")
    assert sorted(outcome.files_written) == ["a.py", "new file.py"]
    assert outcome.input_tokens == 2000 and outcome.output_tokens == 100  # two model calls
    granted = await client.events(type_="lease_acquired")
    assert sorted(e["payload"]["path"] for e in granted) == ["a.py", "new file.py"]
    tools = {t.get("name") for t in fake_codex.requests("T1")[0].body["tools"]}
    assert "apply_patch" in tools and not tools & {"exec_command", "shell", "write_stdin"}
    record = json.loads(record_path(attempt).read_text())
    assert record["agent"] == "codex" and record["hook"]["count"] == 1  # one pre-write decision


async def test_a_patch_touching_a_held_file_is_refused_before_the_disk_is_touched(
    fake_codex: FakeCodexModel,
    client: FleetClient,
    start_attempt: StartAttempt,
    workdir: Path,
    codex: CodexExecutor,
) -> None:
    holder = await start_attempt("H", runner="holder", scope=["a.py"])
    assert (await holder.gate.check("Write", {"file_path": "a.py"})).allowed
    fake_codex.add_script(
        "T4",
        [
            {"content": [patch_call("*** Add File: free.py", "+F = 1", "*** Update File: a.py", "@@", "-A = 1", "+A = 9")]},
            {"content": [patch_call("*** Add File: later.py", "+L = 1")]},
            say("I was told to stop."),
        ],
    )  # fmt: skip
    attempt = await start_attempt("T4", runner="runner-2", scope=["pkg/b.py"])

    outcome = await run_attempt(codex, attempt)

    assert (workdir / "a.py").read_text() == "A = 1\n"
    assert not (workdir / "free.py").exists(), "a patch is all or nothing"
    assert not (workdir / "later.py").exists(), "after a veto every further patch is refused"
    told = [r.content for r in fake_codex.tool_results("T4")]
    assert "a.py is held by holder for task H" in told[0]
    assert (outcome.ok, outcome.error_kind, outcome.blocked_on_path) == (
        False,
        ErrorKind.VETO,
        "a.py",
    )
    denied = await client.events(type_="lease_denied")
    assert [(e["task_id"], e["payload"]["path"]) for e in denied] == [("T4", "a.py")]


async def test_a_vetoed_codex_attempt_requeues_its_task_with_the_held_file_in_scope(
    fake_codex: FakeCodexModel,
    client: FleetClient,
    start_attempt: StartAttempt,
    workdir: Path,
    runs: Path,
    codex: CodexExecutor,
) -> None:
    holder = await start_attempt("H", runner="holder", scope=["a.py"])
    assert (await holder.gate.check("Write", {"file_path": "a.py"})).allowed
    fake_codex.add_script(
        "T5", [{"content": [patch_call("*** Delete File: a.py")]}, say("Blocked on a.py.")]
    )
    await client.create_tasks(
        [{"id": "T5", "title": "t", "description": "go", "file_scope": ["pkg/b.py"]}]
    )
    agent = await client.register("codex-1", str(workdir), os.getpid())
    agent_id, epoch = agent["agent_id"], agent["epoch"]
    assigned = await client.assignment(agent_id, epoch, wait=5.0)
    assert assigned is not None and assigned.id == "T5"
    await client.start("T5", agent_id, epoch)
    gate = WriteGate(client, TreeRoot(workdir), agent_id, epoch, "T5")

    outcome = await run_attempt(codex, Attempt(assigned, gate, workdir, runs, "codex-1"))
    await client.complete("T5", agent_id, epoch, outcome)  # as the runner reports it
    task = await client.task("T5")

    assert (workdir / "a.py").exists()
    assert "a.py" in task["file_scope"]  # after the holder, not beside it
    requeued = await client.events(type_="task_requeued")
    assert [(e["task_id"], e["payload"].get("blocked_on_path")) for e in requeued] == [
        ("T5", "a.py")
    ]


async def test_a_rate_limit_is_reported_as_rate_limited(
    fake_codex: FakeCodexModel, start_attempt: StartAttempt, codex: CodexExecutor
) -> None:
    fake_codex.add_script(
        "T6", [{"error": {"status": 429, "type": "rate_limit_exceeded", "message": "slow down"}}]
    )
    attempt = await start_attempt("T6")

    outcome = await run_attempt(codex, attempt)

    assert (outcome.ok, outcome.error_kind) == (False, ErrorKind.RATE_LIMITED)
    assert "429" in (outcome.error or "")


async def test_a_malformed_patch_is_refused_and_fails_the_attempt(
    fake_codex: FakeCodexModel,
    client: FleetClient,
    start_attempt: StartAttempt,
    workdir: Path,
    codex: CodexExecutor,
) -> None:
    bad = {
        "tool_use": {
            "name": "apply_patch",
            "input": {"input": "*** Begin Patch\n*** Frob File: a.py\n*** End Patch\n"},
        }
    }
    fake_codex.add_script("T7", [{"content": [bad]}, say("Refused.")])
    attempt = await start_attempt("T7")

    outcome = await run_attempt(codex, attempt)

    assert (workdir / "a.py").read_text() == "A = 1\n"
    assert (outcome.ok, outcome.error_kind) == (False, ErrorKind.AGENT_ERROR)
    assert await client.events(type_="lease_acquired") == []


async def test_a_shell_call_is_not_a_tool_of_the_session_and_runs_nothing(
    fake_codex: FakeCodexModel, start_attempt: StartAttempt, workdir: Path, codex: CodexExecutor
) -> None:
    shell = {"tool_use": {"name": "exec_command", "input": {"cmd": "echo x > shell.txt"}}}
    fake_codex.add_script("T8", [{"content": [shell]}, say("No shell here.")])
    attempt = await start_attempt("T8")

    outcome = await run_attempt(codex, attempt)

    assert not (workdir / "shell.txt").exists()
    assert [r.content for r in fake_codex.tool_results("T8")] == ["unsupported call: exec_command"]
    assert outcome.ok  # nothing was written, nothing refused: the model simply had no shell


async def test_a_codex_runner_in_a_clone_lands_its_patch_through_the_line(
    fake_codex: FakeCodexModel, codex: CodexExecutor, tmp_path: Path
) -> None:
    """A real Codex session in a runner's own clone of the landed line: its patch is leased,
    written in the clone, delivered to the server's tree at the end, and lands on the line."""
    import subprocess

    from codefleet.config import Settings
    from codefleet.fleet.local import FleetOptions, run_fleet
    from codefleet.fleet.runner import RunnerOptions
    from codefleet.server.thread import ServerThread

    tree = tmp_path / "repo"
    tree.mkdir()
    (tree / "a.py").write_text("A = 1\n")
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=x", "-c",
                 "user.email=x@example.invalid", "commit", "-qm", "a"]):  # fmt: skip
        subprocess.run(["git", "-C", str(tree), *args], check=True)
    fake_codex.add_script(
        "T1",
        [
            {"content": [patch_call("*** Update File: a.py", "@@", "-A = 1", "+A = 2")]},
            say("Changed a.py."),
        ],
    )
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None, host="127.0.0.1", port=0, workdir=tree, db=tmp_path / "db.sqlite",
        run_dir=tmp_path / "runs", tick_interval=0.05, heartbeat_interval=0.1, backoff_base=0.0,
    )  # fmt: skip
    server = ServerThread(settings).start()
    try:
        async with FleetClient(server.url) as client:
            await client.create_tasks(
                [{"id": "T1", "title": "t", "description": "d", "agent": "codex"}]
            )
        options = FleetOptions(
            RunnerOptions("runner", tree, tmp_path / "runs"),
            clones=tmp_path / "clones",
            agent_for=lambda _: "codex",
        )
        result = await run_fleet(server.url, lambda _: codex, options)
        assert result.ok, result
        assert (tree / "a.py").read_text() == "A = 2\n"
        assert (tmp_path / "clones" / "codex-1" / "a.py").read_text() == "A = 2\n"
        async with FleetClient(server.url) as client:
            agents = await client.agents()
            events = await client.all_events()
        assert [a["workspace"] for a in agents] == ["clone"]
        assert [e["payload"]["tool"] for e in events if e["type"] == "lease_acquired"] == [
            "apply_patch"
        ]
    finally:
        server.stop()
