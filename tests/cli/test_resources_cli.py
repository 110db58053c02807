"""Sequence numbers and resources through the real Claude Code CLI (offline, fake model).

The fake model calls `mcp__codefleet__next_number` like a real model would; the tool runs
in-process on the attempt's gate against a real server. Two tasks, one after the other,
each write the migration their number names: `0003_x.py`, then `0004_y.py`.
"""

from __future__ import annotations

import os
from pathlib import Path

from cli_support import run_attempt

from codefleet.api.client import FleetClient
from codefleet.api.graphfile import GraphTasks
from codefleet.fleet.executor import Attempt
from codefleet.fleet.gate.prewrite import WriteGate
from codefleet.offlinemodels.anthropicapi import FakeModel, Text, ToolUse, Turn
from codefleet.paths import TreeRoot
from codefleet.session.offline import offline_executor

NEXT_NUMBER = "mcp__codefleet__next_number"
ACQUIRE = "mcp__codefleet__acquire_resource"
MIGRATIONS = {"migrations": {"start_after": "migrations/[0-9]*_*.py"}}


def call(tool: str, **args: str) -> Turn:
    return Turn(content=(Text(f"Calling {tool}."), ToolUse(tool, args)))


def write(path: str, content: str) -> Turn:
    return Turn(content=(ToolUse("Write", {"file_path": path, "content": content}),))


def done() -> Turn:
    return Turn(content=(Text("Done."),))


async def start(
    client: FleetClient, workdir: Path, runs: Path, task_id: str, **spec: object
) -> Attempt:
    """Load `task_id` (with the migrations sequence), register a runner, take and start it."""
    tasks = [
        {
            "id": task_id,
            "title": task_id,
            "description": f"Do {task_id}.",
            "max_attempts": 1,
            **spec,
        }
    ]
    await client.create_tasks(GraphTasks(tasks, sequences=MIGRATIONS))
    agent = await client.register(f"runner-{task_id}", str(workdir), os.getpid())
    task = None
    for _ in range(10):  # each poll waits server-side for the assignment (no sleep here)
        task = await client.assignment(agent["agent_id"], agent["epoch"], wait=1.0)
        if task is not None:
            break
    assert task is not None and task.id == task_id
    await client.start(task_id, agent["agent_id"], agent["epoch"])
    tree = TreeRoot(workdir)
    gate = WriteGate(client, tree, agent["agent_id"], agent["epoch"], task_id)
    return Attempt(task, gate, tree.root, runs, f"runner-{task_id}")


async def test_two_sessions_each_take_a_migration_number_and_write_distinct_files(
    fake_model: FakeModel, client: FleetClient, workdir: Path, runs: Path
) -> None:
    (workdir / "migrations").mkdir()
    (workdir / "migrations" / "0001_init.py").write_text("# 1\n")
    (workdir / "migrations" / "0002_users.py").write_text("# 2\n")
    fake_model.add_script(
        "M1",
        [call(NEXT_NUMBER, sequence="migrations"), write("migrations/0003_x.py", "# 3\n"), done()],
    )
    fake_model.add_script(
        "M2",
        [call(NEXT_NUMBER, sequence="migrations"), write("migrations/0004_y.py", "# 4\n"), done()],
    )

    first = await run_attempt(
        offline_executor(fake_model), await start(client, workdir, runs, "M1")
    )
    second = await run_attempt(
        offline_executor(fake_model), await start(client, workdir, runs, "M2")
    )

    (one,) = fake_model.tool_results("M1")[:1]
    (two,) = fake_model.tool_results("M2")[:1]
    assert one.content.startswith("3 ") and not one.is_error
    assert two.content.startswith("4 ") and not two.is_error
    assert first.ok and second.ok
    assert sorted(p.name for p in (workdir / "migrations").iterdir()) == [
        "0001_init.py",
        "0002_users.py",
        "0003_x.py",
        "0004_y.py",
    ]
    allocated = await client.events(type_="number_allocated")
    assert [(e["task_id"], e["payload"]["value"]) for e in allocated] == [("M1", 3), ("M2", 4)]


async def test_a_session_refused_a_resource_another_task_holds_ends_as_a_veto_naming_it(
    fake_model: FakeModel, client: FleetClient, workdir: Path, runs: Path
) -> None:
    await start(client, workdir, runs, "H1", resources=["db"])
    fake_model.add_script("R1", [call(ACQUIRE, name="db"), write("after.txt", "no\n"), done()])

    outcome = await run_attempt(
        offline_executor(fake_model), await start(client, workdir, runs, "R1")
    )

    refused = fake_model.tool_results("R1")[0]
    assert (
        refused.is_error and "The resource db is held by runner-H1 for task H1" in refused.content
    )
    assert outcome.error_kind == "veto" and outcome.blocked_on_path == "/resource:db"
    assert not (workdir / "after.txt").exists()  # the stop is enforced after the veto
