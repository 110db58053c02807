"""One Claude Code session as a conversation: a first user message, then more.

The one way CodeFleet sends a running session another user message in the
same conversation (same session id, its context kept): the SDK's
`ClaudeSDKClient` over the streaming input (`--input-format stream-json`) of a
`SubprocessCLITransport` we build ourselves (so the caller can reap the CLI
process: `session.clistream`). `send(text)` writes one user message and drains the
session's messages up to that turn's `ResultMessage`, handing each message to
`watch`. Used by the reconcile turn; anything else that must reach a running
session (steering it, answering it) goes through `send` too.

A session that can take no further message (the CLI could not start, died or
its pipe broke) is `broken`; `send` then answers `(None, error)` rather than
raising. Standard SDK only: no CodeFleet policy lives here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from types import TracebackType
from typing import Any

from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient, ClaudeSDKError, ResultMessage
from claude_agent_sdk._internal.transport.subprocess_cli import SubprocessCLITransport

__all__ = ["Conversation", "no_input"]


async def no_input() -> AsyncIterator[dict[str, Any]]:
    """The transport's prompt stream: empty, since every message goes through `send`."""
    return
    yield {}  # an async generator that never yields


class Conversation:
    """A session that takes user messages one turn at a time (see the module docstring)."""

    def __init__(
        self,
        options: ClaudeAgentOptions,
        transport: SubprocessCLITransport,
        watch: Callable[[Any], None],
    ) -> None:
        self._client = ClaudeSDKClient(options, transport=transport)
        self._watch = watch
        self._connected = False
        self.broken = False
        self.turns = 0

    async def __aenter__(self) -> Conversation:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._connected:
            self._connected = False
            await self._client.disconnect()

    async def send(self, text: str) -> tuple[ResultMessage | None, ClaudeSDKError | None]:
        """One user message, drained to its result: `(result, None)` or `(None, why)`."""
        if self.broken:
            return None, None
        try:
            if not self._connected:
                self._connected = True
                await self._client.connect()
            self.turns += 1
            await self._client.query(text)
            async for message in self._client.receive_response():
                self._watch(message)
                if isinstance(message, ResultMessage):
                    return message, None
        except ClaudeSDKError as err:  # the CLI could not start, died, or broke its pipe
            self.broken = True
            return None, err
        self.broken = True  # the stream ended without a result: the CLI is gone
        return None, None
