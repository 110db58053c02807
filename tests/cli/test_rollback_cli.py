"""Through the real CLI: a vetoed session's earlier writes are rolled back by the server."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from cli_support import run_attempt

from codefleet.api.client import FleetClient
from codefleet.models import ErrorKind
from codefleet.offlinemodels.anthropicapi import FakeModel, Text, ToolUse, Turn
from codefleet.session.sdk import SessionExecutor

if TYPE_CHECKING:
    from conftest import StartAttempt


def tool(name: str, **tool_input: str) -> Turn:
    return Turn(content=(ToolUse(name, dict(tool_input)),))


async def test_a_vetoed_session_leaves_no_trace_of_its_earlier_writes(
    fake_model: FakeModel,
    client: FleetClient,
    start_attempt: StartAttempt,
    workdir: Path,
    offline: Callable[..., SessionExecutor],
) -> None:
    holder = await start_attempt("H", runner="holder", scope=["a.py"])
    assert (await holder.gate.check("Write", {"file_path": "a.py"})).allowed
    fake_model.add_script(
        "V",
        [
            tool("Write", file_path="pkg/new/helper.py", content="HELPER = 1\n"),
            tool("Edit", file_path="pkg/b.py", old_string="B = 2", new_string="B = 99"),
            tool("Write", file_path="a.py", content="stolen\n"),
            Turn(content=(Text("Blocked on a.py; stopping."),)),
        ],
    )
    attempt = await start_attempt("V", runner="runner-2", scope=["pkg/b.py"])

    outcome = await run_attempt(offline(), attempt)
    assert (workdir / "pkg/new/helper.py").read_text() == "HELPER = 1\n"  # the CLI did write
    assert (workdir / "pkg/b.py").read_text() == "B = 99\n"
    await client.complete("V", attempt.gate.agent_id, attempt.gate.epoch, outcome)

    assert outcome.error_kind is ErrorKind.VETO and outcome.blocked_on_path == "a.py"
    assert not (workdir / "pkg/new").exists()
    assert (workdir / "pkg/b.py").read_text() == "B = 2\n"
    assert (workdir / "a.py").read_text() == "A = 1\n"
    restored = await client.events(type_="file_restored")
    assert sorted(e["payload"]["path"] for e in restored) == ["pkg/b.py", "pkg/new/helper.py"]
