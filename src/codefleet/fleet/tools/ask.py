"""`ask_operator` on the runner's side: ask the server, wait for the answer the heartbeat brings.

The session's tool calls `Asker.ask(question)`: one `POST /tasks/{id}/questions`,
then a wait on the attempt's `Inbox` until a heartbeat's answer carries the
question's answer (the operator's, or the server's `NO_ANSWER` after the
question timeout). The runner keeps heartbeating meanwhile (its own task), and
the wait is not charged against the attempt's wall clock (`Inbox.waited`).
Unattended (`run --no-questions`) the answer is `NO_ANSWER` at once. A question
the server refuses (asking is off, too many) is answered `NO_ANSWER` with the
reason: the agent goes on either way.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Final

from codefleet.api.client import FleetClient
from codefleet.errors import DomainError
from codefleet.fleet.tools.inbox import Inbox
from codefleet.models import NO_ANSWER

__all__ = ["Asker"]

log = logging.getLogger(__name__)
MARGIN_S: Final = 30.0  # past the server's timeout: a heartbeat answer lost on the way


@dataclass(frozen=True, slots=True)
class Asker:
    """One attempt's way to ask the operator; see the module docstring."""

    client: FleetClient
    agent_id: str
    epoch: int
    task_id: str
    inbox: Inbox
    timeout: float  # the server's question timeout, seconds
    unattended: bool = False

    async def ask(self, question: str) -> str:
        """The operator's answer to `question`, or `NO_ANSWER`."""
        if self.unattended:
            return NO_ANSWER
        try:
            asked = await self.client.ask(self.task_id, self.agent_id, self.epoch, question)
        except DomainError as err:
            return f"{NO_ANSWER} (the question could not be asked: {err.message})"
        waiting = self.inbox.expect(str(asked["question_id"]))
        try:
            return await asyncio.wait_for(waiting, self.timeout + MARGIN_S)
        except TimeoutError:
            log.warning(
                "%s: no answer to %s reached the runner", self.task_id, asked["question_id"]
            )
            return NO_ANSWER
        finally:
            self.inbox.settled(str(asked["question_id"]))
