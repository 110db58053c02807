"""A read-only Claude Code conversation: the session behind `codefleet plan`.

The hardened options of the fleet's sessions (`session.sdk`: `dontAsk`, no
setting sources, strict MCP, cwd = the tree, turn and budget caps) with the
tools Read, Glob and Grep only, and a PreToolUse hook (`on_failure="block"`)
that refuses any read outside the tree (`fleet.gate.readguard`). One conversation
is kept open across messages, so CodeFleet's feedback on an answer is the
next user message (docs/decisions/0037-plan-one-read-only-session-errors-fed-back-in-the-same.md, "`plan`: one read-only session, errors
fed back in the same conversation"). With the fleet's session modules
(`session.sdk`, `session.attempthooks`, `session.clistream`, `session.conversation`),
the only modules that import `claude_agent_sdk`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from claude_agent_sdk import (
    ClaudeAgentOptions,
    ClaudeSDKClient,
    ClaudeSDKError,
    HookContext,
    HookInput,
    HookJSONOutput,
    HookMatcher,
    ResultMessage,
    SystemMessage,
)

from codefleet.attempt import AttemptReport
from codefleet.fleet.gate.readguard import READ_TOOLS, read_refusal
from codefleet.models import ErrorKind
from codefleet.session.attempthooks import HOOK_TIMEOUT_S, READ_MATCHER, deny
from codefleet.session.clistream import classify_crash, session_result
from codefleet.session.outcome import Crash, HookRecord, session_outcome
from codefleet.session.sdk import MAX_BUFFER_SIZE

__all__ = ["ReadOnlySession", "Reply", "SessionFailed"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Reply:
    """One answer of a `ReadOnlySession`: its whole final text and the session so far.

    `outcome` is what the fleet's sessions report (ok, error and kind, cost and tokens,
    cumulative over the conversation; `attempt` counts the asks so far); `model` comes
    from the CLI's `init` frame.
    """

    text: str
    outcome: AttemptReport
    model: str | None = None


class ReadOnlySession:
    """One Claude Code session that may only read the tree, kept open across messages.

    The hardened options of the fleet's sessions (`dontAsk`, no setting sources, strict
    MCP, cwd = the tree, turn and budget caps) with the tools Read, Glob and Grep only;
    a PreToolUse hook (`on_failure="block"`) refuses any read outside the tree
    (`readguard`). `ask` sends one user message and waits for the result; the next
    `ask` continues the same conversation. Leaving the `async with` ends the CLI.
    """

    def __init__(
        self,
        workdir: Path,
        *,
        model: str | None = None,
        max_turns: int = 40,
        max_budget_usd: float = 0.50,
        timeout: float = 600.0,
        env: Mapping[str, str] | None = None,
        stderr: Callable[[str], None] | None = None,
    ) -> None:
        self.workdir = workdir.resolve()
        self.timeout = timeout
        self.refusals: list[str] = []
        self._init: dict[str, Any] | None = None
        self._asks = 0
        guard = HookMatcher(
            matcher=READ_MATCHER, hooks=[self._guard], timeout=HOOK_TIMEOUT_S, on_failure="block"
        )
        self._client = ClaudeSDKClient(
            ClaudeAgentOptions(
                tools=list(READ_TOOLS),
                allowed_tools=list(READ_TOOLS),
                mcp_servers={},
                permission_mode="dontAsk",
                setting_sources=[],
                strict_mcp_config=True,
                cwd=str(self.workdir),
                model=model,
                max_turns=max_turns,
                max_budget_usd=max_budget_usd,
                max_buffer_size=MAX_BUFFER_SIZE,
                stderr=stderr,
                env=dict(env or {}),
                hooks={"PreToolUse": [guard]},
                system_prompt={"type": "preset", "preset": "claude_code"},
            )
        )

    async def __aenter__(self) -> ReadOnlySession:
        try:
            await self._client.connect()
        except ClaudeSDKError as err:
            raise SessionFailed(classify_crash(err).message) from err
        return self

    async def __aexit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):  # closing a CLI that already died is not an error
            await self._client.disconnect()

    @property
    def init(self) -> dict[str, Any] | None:
        """The CLI's `init` frame (tools, model, permission mode, cwd), once it arrived."""
        return self._init

    async def ask(self, text: str) -> Reply:
        """Send `text` as the next user message; the reply ends with the CLI's result."""
        result: ResultMessage | None = None
        crash: Crash | None = None
        self._asks += 1
        try:
            async with asyncio.timeout(self.timeout):
                await self._client.query(text)
                async for message in self._client.receive_response():
                    if isinstance(message, SystemMessage) and message.subtype == "init":
                        self._init = dict(message.data)
                    elif isinstance(message, ResultMessage):
                        result = message
        except TimeoutError:
            crash = Crash(ErrorKind.TIMEOUT, f"no answer within {self.timeout:g} s")
        except ClaudeSDKError as err:  # after a result: expected for an error result
            crash = None if result is not None else classify_crash(err)
        # A refused read is not a failed answer: the model was told, and the answer decides.
        summary = replace(session_result(result), permission_denials=0) if result else None
        outcome = session_outcome(summary, crash, HookRecord(), attempt=self._asks)
        model = str(self._init.get("model")) if self._init and self._init.get("model") else None
        return Reply(result.result or "" if result is not None else "", outcome, model)

    async def _guard(
        self, input_data: HookInput, tool_use_id: str | None, context: HookContext
    ) -> HookJSONOutput:
        data = dict(input_data)
        try:
            tool = str(data.get("tool_name") or "")
            refusal = read_refusal(str(self.workdir), tool, data.get("tool_input"))
        except Exception:  # the hook fails closed: anything unexpected is a refusal
            log.exception("read guard failed; refusing the call")
            refusal = "The call could not be checked, so it was refused."
        if refusal is None:
            return {}
        self.refusals.append(refusal)
        return deny(refusal)


class SessionFailed(Exception):
    """The Claude Code CLI could not be started for a read-only session."""
