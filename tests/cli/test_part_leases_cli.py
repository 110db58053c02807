"""Through the real CLI: two tasks in one Python file, each leasing only the part it edits.

The holder is a started task whose gate (leases by part) edited `handle` in
`api.py` and still holds that part; the other session is the production SDK
executor running the bundled Claude Code CLI against the fake model, its gate
leasing by part as a runner's does under `lease_granularity: part`. Its Edit of
another function goes through the real PreToolUse hook while the holder's part
is held; its Edit of the held function is vetoed naming the part.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cli_support import run_attempt

from codefleet.api.client import FleetClient
from codefleet.fleet.executor import Attempt
from codefleet.models import ErrorKind, Granularity
from codefleet.offlinemodels.anthropicapi import FakeModel, Text, ToolUse, Turn, WaitFor
from codefleet.session.sdk import SessionExecutor

if TYPE_CHECKING:
    from conftest import StartAttempt

API = '''"""The API."""


def handle(request):
    return 1


def route(path):
    return path
'''


def tool(name: str, **tool_input: str) -> Turn:
    return Turn(content=(ToolUse(name, dict(tool_input)),))


async def holding_handle(start_attempt: StartAttempt, workdir: Path) -> Attempt:
    """H edits `handle` through its gate (leases by part) and keeps the part."""
    (workdir / "api.py").write_text(API)
    holder = await start_attempt("H", runner="holder", scope=["h.py"])
    holder.gate.granularity = Granularity.PART
    edit = {"file_path": "api.py", "old_string": "return 1", "new_string": "return 'one'"}
    verdict = await holder.gate.check("Edit", edit)
    assert verdict.allowed and verdict.paths == ("api.py::handle",)
    (workdir / "api.py").write_text(API.replace("return 1", "return 'one'"))
    await holder.gate.record("api.py", "Edit")  # its PostToolUse: the write moment is over
    return holder


async def by_part(start_attempt: StartAttempt, task_id: str) -> Attempt:
    attempt = await start_attempt(task_id, runner="runner-2", scope=["w.py"])
    attempt.gate.granularity = Granularity.PART  # as a runner under lease_granularity: part
    return attempt


async def test_a_claude_code_edit_of_another_function_lands_while_a_part_is_held(
    fake_model: FakeModel,
    client: FleetClient,
    start_attempt: StartAttempt,
    workdir: Path,
    offline: Callable[..., SessionExecutor],
) -> None:
    await holding_handle(start_attempt, workdir)
    path = str(workdir / "api.py")
    fake_model.add_script(
        "W",
        [
            tool("Read", file_path=path),
            tool("Edit", file_path=path, old_string="return path", new_string="return path[1:]"),
            Turn(content=(Text("Done."),)),
        ],
    )

    outcome = await run_attempt(offline(), await by_part(start_attempt, "W"))

    assert outcome.ok and outcome.error_kind is None
    assert (workdir / "api.py").read_text() == API.replace("return 1", "return 'one'").replace(
        "return path", "return path[1:]"
    )
    acquired = [
        (e["task_id"], e["payload"]["path"]) for e in await client.events(type_="lease_acquired")
    ]
    assert acquired == [("H", "api.py::handle"), ("W", "api.py::route")]
    assert await client.events(type_="lease_denied") == []


async def test_a_claude_code_edit_of_the_held_function_is_vetoed_naming_the_part(
    fake_model: FakeModel,
    client: FleetClient,
    start_attempt: StartAttempt,
    workdir: Path,
    offline: Callable[..., SessionExecutor],
) -> None:
    await holding_handle(start_attempt, workdir)
    path = str(workdir / "api.py")
    fake_model.add_script(
        "W",
        [
            tool("Read", file_path=path),
            tool("Edit", file_path=path, old_string="return 'one'", new_string="return 2"),
            Turn(content=(Text("Stopping."),)),
        ],
    )

    outcome = await run_attempt(offline(), await by_part(start_attempt, "W"))

    assert (outcome.ok, outcome.error_kind, outcome.blocked_on_path) == (
        False,
        ErrorKind.VETO,
        "api.py::handle",
    )
    assert (workdir / "api.py").read_text() == API.replace("return 1", "return 'one'")
    [denied] = await client.events(type_="lease_denied")
    assert (denied["task_id"], denied["payload"]["holder_task_id"]) == ("W", "H")


async def concurrent_change(
    fake_model: FakeModel, holder: Attempt, workdir: Path, wait_until: Callable[..., Any]
) -> None:
    """Once W has read api.py, H edits its own part again; then W's next turn goes."""
    await wait_until(lambda: len(fake_model.requests("W")) >= 2, timeout=60.0)  # W has read
    again = {"file_path": "api.py", "old_string": "return 'one'", "new_string": "return 'uno'"}
    assert (await holder.gate.check("Edit", again)).allowed
    (workdir / "api.py").write_text((workdir / "api.py").read_text().replace("'one'", "'uno'"))
    await holder.gate.record("api.py", "Edit")
    fake_model.signal("go")


def tool_errors(fake_model: FakeModel) -> list[str]:
    return sorted(
        {
            str(block.get("content"))
            for request in fake_model.requests("W")
            for m in request.body["messages"]
            if m["role"] == "user" and isinstance(m["content"], list)
            for block in m["content"]
            if block.get("type") == "tool_result" and block.get("is_error")
        }
    )


async def test_an_edit_after_another_parts_change_since_the_read_applies_with_no_reread(
    fake_model: FakeModel,
    client: FleetClient,
    start_attempt: StartAttempt,
    workdir: Path,
    offline: Callable[..., SessionExecutor],
    wait_until: Callable[..., Any],
) -> None:
    """The cost of Claude Code's own "modified since read" guard for a concurrent editor,
    measured: its Edit applies to the file as it is now, no error, no extra turn."""
    holder = await holding_handle(start_attempt, workdir)
    path = str(workdir / "api.py")
    edit = {"file_path": path, "old_string": "return path", "new_string": "return path[1:]"}
    fake_model.add_script(
        "W",
        [
            tool("Read", file_path=path),
            Turn(content=(ToolUse("Edit", edit),), wait_for=WaitFor("go")),
            Turn(content=(Text("Done."),)),
        ],
    )
    session = asyncio.create_task(run_attempt(offline(), await by_part(start_attempt, "W")))
    await concurrent_change(fake_model, holder, workdir, wait_until)
    outcome = await session

    assert outcome.ok and outcome.error_kind is None
    assert (workdir / "api.py").read_text() == API.replace("return 1", "return 'uno'").replace(
        "return path", "return path[1:]"
    )
    assert tool_errors(fake_model) == []  # no reread asked for: the edit found its text
    assert len(fake_model.requests("W")) == 3  # Read, Edit, the answer: no turn added


async def test_a_write_of_the_whole_file_from_a_stale_read_is_vetoed_on_the_others_part(
    fake_model: FakeModel,
    client: FleetClient,
    start_attempt: StartAttempt,
    workdir: Path,
    offline: Callable[..., SessionExecutor],
    wait_until: Callable[..., Any],
) -> None:
    """W read api.py before H changed `handle` again; W's Write of the whole file from what it
    read would put H's old `handle` back. Claude Code refuses it as "modified since read"
    (the one turn a concurrent writer pays: read again), and the file keeps H's change."""
    holder = await holding_handle(start_attempt, workdir)
    path = str(workdir / "api.py")
    stale = API.replace("return 1", "return 'one'").replace("return path", "return path[1:]")
    fake_model.add_script(
        "W",
        [
            tool("Read", file_path=path),
            Turn(
                content=(ToolUse("Write", {"file_path": path, "content": stale}),),
                wait_for=WaitFor("go"),
            ),
            Turn(content=(Text("Stopping."),)),
        ],
    )
    session = asyncio.create_task(run_attempt(offline(), await by_part(start_attempt, "W")))
    await concurrent_change(fake_model, holder, workdir, wait_until)
    outcome = await session

    # measured with the bundled CLI: its own guard refuses the Write before the hook runs
    # (the gate would refuse it too, on H's part); either way H's change stands
    assert (workdir / "api.py").read_text() == API.replace("return 1", "return 'uno'")
    [error] = tool_errors(fake_model)
    assert "File has been modified since read" in error
    assert outcome.files_written == ()
