"""One contract, both executors (STYLE 6): the scripted one and the real Claude Code session.

The same work is played by each: write new.py, edit pkg/b.py, then write a.py, which
another task holds, then (a model that does not listen) write after.py. Both must ask
the gate before every write, stop at the denial (report a veto naming a.py), and leave
a ledger of exactly the writes that landed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from cli_support import run_attempt

from codefleet.api.client import FleetClient
from codefleet.fleet.executor import Executor
from codefleet.fleet.gate.prewrite import Verdict, WriteGate
from codefleet.fleet.scripted import ScriptedExecutor, parse_script
from codefleet.models import ErrorKind
from codefleet.offlinemodels.anthropicapi import FakeModel, Text, ToolUse, Turn
from codefleet.session.sdk import SessionExecutor

if TYPE_CHECKING:
    from conftest import StartAttempt

WORK = [
    ("Write", {"file_path": "new.py", "content": "N = 1\n"}),
    ("Edit", {"file_path": "pkg/b.py", "old_string": "B = 2", "new_string": "B = 3"}),
    ("Write", {"file_path": "a.py", "content": "taken\n"}),
    ("Write", {"file_path": "after.py", "content": "too late\n"}),
]


@dataclass
class RecordingGate(WriteGate):
    """The real gate, plus a log of every check (with its verdict) and every ledger record."""

    calls: list[tuple[str, str, bool]] = field(default_factory=list)

    async def check(self, tool_name: str, tool_input: Any) -> Verdict:
        verdict = await super().check(tool_name, tool_input)
        for path in verdict.paths:
            self.calls.append(("check", path, verdict.allowed))
        return verdict

    async def record(self, path: str, tool_name: str) -> None:
        self.calls.append(("record", self.tree.canonical(path), True))
        await super().record(path, tool_name)


def scripted() -> Executor:
    steps = [
        {"write": {"path": "new.py", "content": "N = 1\n"}},
        {"edit": {"path": "pkg/b.py", "old": "B = 2", "new": "B = 3"}},
        {"write": {"path": "a.py", "content": "taken\n"}},
        {"write": {"path": "after.py", "content": "too late\n"}},
    ]
    return ScriptedExecutor(parse_script({"T": steps}))


def sdk(fake_model: FakeModel, offline: Callable[..., SessionExecutor]) -> Executor:
    turns = [
        Turn(content=(Text(f"{name} {args['file_path']}"), ToolUse(name, args)))
        for name, args in WORK
    ]
    fake_model.add_script("T", [*turns, Turn(content=(Text("Done."),))])
    return offline()


@pytest.mark.parametrize("kind", ["scripted", "sdk"])
async def test_an_executor_asks_before_every_write_stops_when_denied_and_reports_its_ledger(
    kind: str,
    fake_model: FakeModel,
    offline: Callable[..., SessionExecutor],
    client: FleetClient,
    start_attempt: StartAttempt,
    workdir: Path,
) -> None:
    holder = await start_attempt("H", runner="holder", scope=["a.py"])
    assert (await holder.gate.check("Write", {"file_path": "a.py"})).allowed
    executor = scripted() if kind == "scripted" else sdk(fake_model, offline)
    attempt = await start_attempt(
        "T", runner="runner-2", scope=["new.py", "pkg/b.py"], gate_type=RecordingGate
    )

    outcome = await run_attempt(executor, attempt)

    calls = attempt.gate.calls  # type: ignore[attr-defined]
    assert [c for c in calls if c[0] == "check"] == [
        ("check", "new.py", True),
        ("check", "pkg/b.py", True),
        ("check", "a.py", False),
    ]
    for n, (what, path, _) in enumerate(calls):
        if what == "record":
            assert ("check", path, True) in calls[:n], f"{path} was written without asking first"
    assert (outcome.ok, outcome.error_kind, outcome.blocked_on_path) == (
        False,
        ErrorKind.VETO,
        "a.py",
    )
    assert outcome.files_written == ("new.py", "pkg/b.py")
    assert (outcome.attempt, outcome.duration_ms) == (attempt.number, None)  # the runner times it
    assert (workdir / "a.py").read_text() == "A = 1\n" and not (workdir / "after.py").exists()
    assert (workdir / "pkg" / "b.py").read_text() == "B = 3\n"
    ledger = (await client.task("T"))["file_changes"]
    assert [c["path"] for c in ledger] == ["new.py", "pkg/b.py"]
