"""Fixtures for the real-CLI tier: the bundled Claude Code CLI against the fake model.

Every session runs the real CLI through `claude_agent_sdk.query()` with the options the
production executor uses (DESIGN.md §7): `dontAsk`, the write/read tool set and nothing
else, no filesystem settings, strict MCP config, its own HOME/TMPDIR under `tmp_path`,
and the fake model's env. A PreToolUse hook, when given, is registered on the write-tool
matcher with `on_failure="block"`, as in production.

The executor fixtures below go one level up: the production `SessionExecutor` (through
`offline.offline_executor`), a real server (`server`, `client` from tests/conftest.py) and a
real `WriteGate`, so a test sees what a runner would report.
"""

from __future__ import annotations

import asyncio
import itertools
import os
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import (
    ClaudeAgentOptions,
    HookCallback,
    HookMatcher,
    Message,
    ResultError,
    ResultMessage,
    SystemMessage,
    query,
)

from codefleet.api.client import FleetClient
from codefleet.fleet.executor import Attempt
from codefleet.fleet.gate.prewrite import WriteGate
from codefleet.offlinemodels.anthropicapi import FakeModel, marker, session_env
from codefleet.offlinemodels.openaiapi import FAKE_API_KEY, FakeCodexModel
from codefleet.paths import TreeRoot
from codefleet.session.codex import CodexExecutor
from codefleet.session.codexconfig import CodexProvider
from codefleet.session.offline import offline_executor
from codefleet.session.sdk import SessionExecutor

SESSION_TOOLS = ["Read", "Write", "Edit", "MultiEdit", "NotebookEdit", "Glob", "Grep"]
WRITE_TOOLS_MATCHER = "Write|Edit|MultiEdit|NotebookEdit"
SESSION_TIMEOUT_S = 60.0


@dataclass
class SessionRun:
    """Everything one CLI session produced."""

    messages: list[Message]
    error: ResultError | None
    stderr: list[str] = field(default_factory=list)

    @property
    def result(self) -> ResultMessage:
        """The session's (last) ResultMessage; a session without one fails the test."""
        results = [m for m in self.messages if isinstance(m, ResultMessage)]
        assert results, f"no ResultMessage; stderr: {self.stderr}"
        return results[-1]

    @property
    def init(self) -> SystemMessage:
        """The `init` system frame: tools, model, permission mode, cwd."""
        frames = [m for m in self.messages if isinstance(m, SystemMessage)]
        return next(m for m in frames if m.subtype == "init")


RunSession = Callable[..., Awaitable[SessionRun]]


@pytest.fixture
def fake_model() -> Iterator[FakeModel]:
    """A started fake model, closed after the test."""
    with FakeModel() as fm:
        yield fm


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """An empty working tree for the sessions of one test."""
    path = tmp_path / "tree"
    path.mkdir()
    return path


@pytest.fixture
def run_session(fake_model: FakeModel, tree: Path, tmp_path: Path) -> RunSession:
    """`await run_session(script_id, pre_tool_use=..., post_tool_use=...)` runs one CLI session."""
    homes = itertools.count()

    async def run(
        script_id: str,
        *,
        pre_tool_use: HookCallback | None = None,
        post_tool_use: HookCallback | None = None,
    ) -> SessionRun:
        home = tmp_path / f"home{next(homes)}"
        stderr: list[str] = []
        options = ClaudeAgentOptions(
            tools=SESSION_TOOLS,
            allowed_tools=SESSION_TOOLS,
            permission_mode="dontAsk",
            setting_sources=[],
            strict_mcp_config=True,
            cwd=str(tree),
            env=session_env(fake_model, home),
            hooks=_hooks(pre_tool_use, post_tool_use),
            stderr=stderr.append,
        )
        prompt = f"Follow the script. {marker(script_id)}"
        async with asyncio.timeout(SESSION_TIMEOUT_S):
            messages, error = await _drain(prompt, options)
        return SessionRun(messages, error, stderr)

    return run


def _hooks(
    pre_tool_use: HookCallback | None, post_tool_use: HookCallback | None
) -> dict[Any, list[HookMatcher]]:
    hooks: dict[Any, list[HookMatcher]] = {}
    if pre_tool_use is not None:
        matcher = HookMatcher(matcher=WRITE_TOOLS_MATCHER, hooks=[pre_tool_use], on_failure="block")
        hooks["PreToolUse"] = [matcher]
    if post_tool_use is not None:
        hooks["PostToolUse"] = [HookMatcher(matcher=None, hooks=[post_tool_use])]
    return hooks


async def _drain(
    prompt: str, options: ClaudeAgentOptions
) -> tuple[list[Message], ResultError | None]:
    """Collect every message; an error result is yielded first, then raised (kept, not lost)."""
    messages: list[Message] = []
    try:
        async for message in query(prompt=prompt, options=options):
            messages.append(message)
    except ResultError as error:
        return messages, error
    return messages, None


# --- the executor tier: a real server, a real WriteGate, the real SessionExecutor -----------

StartAttempt = Callable[..., Awaitable[Attempt]]


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    """The run directory of one test: session records, stderr logs, per-session HOMEs."""
    return tmp_path / "runs"


@pytest.fixture
def start_attempt(client: FleetClient, workdir: Path, runs: Path) -> StartAttempt:
    """`await start_attempt(task_id, runner=..., scope=[...])`: a started task and its gate.

    Creates the task, registers a new agent, takes the assignment and starts it, exactly
    as a runner does; the returned `Attempt` carries a real `WriteGate` on the server.
    """

    async def start(
        task_id: str, *, runner: str = "runner-1", scope: Any = (), gate_type: type = WriteGate
    ) -> Attempt:
        await client.create_tasks(
            [
                {
                    "id": task_id,
                    "title": f"task {task_id}",
                    "file_scope": list(scope),
                    "description": f"Do {task_id}.",
                    "max_attempts": 1,
                }
            ]
        )
        agent = await client.register(runner, str(workdir), os.getpid())
        agent_id, epoch = agent["agent_id"], agent["epoch"]
        task = None
        for _ in range(10):  # each poll waits server-side for the assignment (no sleep here)
            task = await client.assignment(agent_id, epoch, wait=1.0)
            if task is not None:
                break
        assert task is not None and task.id == task_id, f"{task_id} was not assigned"
        await client.start(task_id, agent_id, epoch)
        tree = TreeRoot(workdir)
        gate = gate_type(client, tree, agent_id, epoch, task_id)
        return Attempt(task, gate, tree.root, runs, runner)

    return start


@pytest.fixture
def offline(fake_model: FakeModel) -> Callable[..., SessionExecutor]:
    """`offline(**limits)`: the production SDK executor talking to the test's fake model.

    The fake serves the script named like the task id (see `offline.script_id_for`).
    """

    def make(**limits: Any) -> SessionExecutor:
        return offline_executor(fake_model, **limits)

    return make


# --- the Codex executor tier: the real Codex CLI against the fake Responses API ------------

CODEX_KEY_ENV = "CODEFLEET_TEST_CODEX_KEY"


@pytest.fixture
def fake_codex() -> Iterator[FakeCodexModel]:
    with FakeCodexModel() as fm:
        yield fm


@pytest.fixture
def codex(fake_codex: FakeCodexModel) -> CodexExecutor:
    """The production Codex executor talking to the test's fake, the script named like the task."""
    return CodexExecutor(
        CodexProvider(fake_codex.responses_url, CODEX_KEY_ENV),
        env=lambda _attempt: {CODEX_KEY_ENV: FAKE_API_KEY},
        prompt_marker=lambda attempt: marker(attempt.task_id),
    )
