"""A usage limit through the real Claude Code CLI: the fleet pauses and resumes by itself.

Three tasks on three runners, each a real CLI session against the fake model, which
answers ONE of them (T2's first attempt) with a 429 saying the limit lifts in two
seconds. The sessions log in with a (fake) subscription token: that is the login under
which the CLI reports when a limit lifts (measured; under an API key it keeps the
`retry-after` to itself, see docs/decisions/0055-what-a-session-knows-about-a-usage-limit.md "What a session knows about a usage
limit"). Every task allows one attempt only, so T2 can only succeed if its limited
attempt was not charged. T1 and T3 hold their first reply until the pause has begun,
so they are in flight while the fleet is paused, and must carry on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from cli_support import run_attempt

from codefleet.api.client import FleetClient
from codefleet.fleet.local import FleetOptions, run_fleet
from codefleet.fleet.runner import RunnerOptions
from codefleet.models import ErrorKind, EventType
from codefleet.offlinemodels.anthropicapi import ApiError, FakeModel, Text, ToolUse, Turn, WaitFor
from codefleet.server.thread import ServerThread
from codefleet.session.offline import offline_executor
from codefleet.session.sdk import SessionExecutor

if TYPE_CHECKING:
    from conftest import StartAttempt

RETRY_AFTER_S = 2.0
GO = "the-fleet-is-paused"


def write_turn(path: Path, content: str, wait_for: WaitFor | None = None) -> Turn:
    tool = ToolUse("Write", {"file_path": str(path), "content": content})
    return Turn(content=(Text(f"Writing {path.name}."), tool), wait_for=wait_for)


async def test_a_429_with_retry_after_pauses_the_fleet_charges_nothing_and_all_succeed(
    fake_model: FakeModel, server: ServerThread, client: FleetClient, workdir: Path, runs: Path
) -> None:
    held = WaitFor(substring=GO, timeout_s=60)
    fake_model.add_script("T1", [write_turn(workdir / "one.py", "ONE = 1\n", held)])
    fake_model.add_script("T3", [write_turn(workdir / "three.py", "THREE = 3\n", held)])
    limit = ApiError(429, "rate_limit_error", "usage limit reached", retry_after_s=RETRY_AFTER_S)
    fake_model.add_script("T2-a1", [Turn(error=limit)])
    fake_model.add_script("T2", [write_turn(workdir / "two.py", "TWO = 2\n")])
    executor = offline_executor(fake_model, {"T1", "T2", "T2-a1", "T3"}, login="subscription")
    await client.create_tasks(
        [
            {"id": t, "title": f"task {t}", "description": f"Do {t}.", "max_attempts": 1}
            for t in ("T1", "T2", "T3")
        ]
    )

    paused = asyncio.create_task(_signal_when_paused(client, fake_model))
    result = await _run(server, executor, workdir, runs)
    pause = await asyncio.wait_for(paused, 5)

    assert result.all_succeeded, result.tasks
    assert fake_model.wait_timeouts() == []
    assert 0 < pause["payload"]["retry_after_s"] <= RETRY_AFTER_S + 1
    assert pause["task_id"] == "T2" and pause["payload"]["change"] == "started"
    events = await client.all_events()
    kinds = [(e["type"], e["task_id"]) for e in events]
    paused_at, resumed_at = _index(kinds, "fleet_paused"), _index(kinds, "fleet_resumed")
    assert paused_at < resumed_at
    assert not [k for k in kinds[paused_at:resumed_at] if k[0] == EventType.TASK_ASSIGNED]
    assert kinds.index(("task_assigned", "T2"), resumed_at) > resumed_at  # T2 ran again after
    requeued = next(e for e in events if e["type"] == EventType.TASK_REQUEUED)
    assert (requeued["task_id"], requeued["payload"]["error_kind"]) == ("T2", "rate_limited")
    assert requeued["payload"]["charged"] is False
    tasks = {t["id"]: t for t in await client.tasks()}
    assert (tasks["T2"]["attempts"], tasks["T2"]["uncharged_attempts"]) == (2, 1)
    assert [tasks[t]["attempts"] for t in ("T1", "T3")] == [1, 1]  # in flight: carried on
    assert (workdir / "two.py").read_text() == "TWO = 2\n"
    assert (await client.health())["paused_until"] is None


async def _signal_when_paused(client: FleetClient, fake: FakeModel) -> dict[str, Any]:
    """Release T1's and T3's held replies once the fleet has paused (an event, not a sleep)."""
    async for event in client.stream(0):
        if event["type"] == EventType.FLEET_PAUSED:
            fake.signal(GO)
            return event
    raise AssertionError("the event stream ended before the fleet paused")


async def _run(server: ServerThread, executor: SessionExecutor, workdir: Path, runs: Path) -> Any:
    return await run_fleet(
        server.url,
        lambda _: executor,
        FleetOptions(
            RunnerOptions("runner", workdir, runs, protected=(runs,), task_timeout=60), runners=3
        ),
    )


def _index(kinds: list[tuple[str, str | None]], kind: str) -> int:
    return next(i for i, k in enumerate(kinds) if k[0] == kind)


@pytest.mark.parametrize(
    ("login", "status", "said"),
    [("api_key", 429, False), ("subscription", 429, True), ("api_key", 529, False)],
)
async def test_what_a_session_learns_of_a_limit_depends_on_the_login(
    fake_model: FakeModel,
    start_attempt: StartAttempt,
    offline: Callable[..., SessionExecutor],
    login: str,
    status: int,
    said: bool,
) -> None:
    """The measurement behind `retry_after_s`: the CLI keeps `retry-after` to itself under
    an API key, and reports the reset under a subscription login; a 529 is a limit too."""
    kind = "rate_limit_error" if status == 429 else "overloaded_error"
    fake_model.add_script("T1", [Turn(error=ApiError(status, kind, "limit", retry_after_s=30))])
    attempt = await start_attempt("T1")

    outcome = await run_attempt(offline(login=login), attempt)

    assert (outcome.ok, outcome.error_kind) == (False, ErrorKind.RATE_LIMITED)
    assert f"HTTP {status}" in (outcome.error or "")
    if said:
        assert outcome.retry_after_s is not None and 28 <= outcome.retry_after_s <= 31
    else:
        assert outcome.retry_after_s is None
    assert len(fake_model.requests("T1")) == 1  # no retry: CLAUDE_CODE_MAX_RETRIES=0
