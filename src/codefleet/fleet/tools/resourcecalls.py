"""A session's calls for things that are not files: resources, sequence numbers, ports.

`ResourceTools` is what the in-process MCP tools (`acquire_resource`,
`next_number`, `allocate_port`) and the scripted executor's steps call, over
the attempt's `WriteGate` (its client, agent, epoch and task). Each answer is
an `Answer`: `ok` and the text the model reads.

- `acquire_resource(name)` leases the resource for the rest of the attempt,
  like a file at its first write. Held by another task: the same veto as a
  file (`gate.blocked_on` is the resource's lease key; the runner reports it
  and the server adds the resource to the task's `resources`).
- `next_number(sequence)` takes the sequence's next value, committed by the
  server before it answers; an unknown name is refused with the known ones.
- `allocate_port()` binds a free TCP port on this host and releases it, then
  leases `port:<n>` for the attempt; a port another task holds is skipped.

A fenced runner (`409 stale_epoch`) sets `gate.fenced` and is told to stop.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from dataclasses import dataclass
from typing import Any, Final

from codefleet.api.client import ServerUnavailable
from codefleet.errors import DomainError, StaleEpoch
from codefleet.fleet.gate.prewrite import WriteGate, stop_instruction
from codefleet.models import DenyReason
from codefleet.resources import port_resource, valid_resource_name

__all__ = [
    "DEFAULT_RESOURCE_WAIT_S",
    "Answer",
    "ResourceTools",
    "free_port",
    "wait_for_resources",
]

log = logging.getLogger(__name__)

PORT_TRIES: Final = 20
DEFAULT_RESOURCE_WAIT_S: Final = 30.0  # CODEFLEET_RESOURCE_WAIT
FENCED: Final = "This runner was fenced by the coordination server; stop now."


@dataclass(frozen=True, slots=True)
class Answer:
    ok: bool
    text: str
    value: int | None = None  # the number or the port


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now: bound to port 0, read, released."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


class ResourceTools:
    """The resource calls of one attempt; never raises (a failure is an answer)."""

    def __init__(self, gate: WriteGate) -> None:
        self.gate = gate

    async def acquire_resource(self, name: str) -> Answer:
        if not valid_resource_name(name):
            return Answer(False, f"{name!r} is not a resource name (lowercase, e.g. db).")
        answer = await self.try_acquire(name)
        if isinstance(answer, Answer):
            return answer
        if answer.get("decision") == "allow":
            return Answer(True, f"You now hold the resource {name} until this task ends.")
        return self._denied(name, answer, veto=True)

    async def next_number(self, sequence: str) -> Answer:
        answer = await self._call(self._next, sequence)
        if isinstance(answer, Answer):
            return answer
        if answer.get("value") is None:
            return Answer(False, str(answer.get("refused") or "no number was handed out"))
        value = int(answer["value"])
        return Answer(True, f"{value} (the next number of {sequence}; it is yours)", value)

    async def allocate_port(self) -> Answer:
        for _ in range(PORT_TRIES):
            port = free_port()
            answer = await self.try_acquire(port_resource(port))
            if isinstance(answer, Answer):
                return answer
            if answer.get("decision") == "allow":
                return Answer(True, f"{port} (free on this host, yours until this task ends)", port)
        return Answer(False, f"no free port found in {PORT_TRIES} tries")

    async def try_acquire(self, name: str) -> dict[str, Any] | Answer:
        """The raw lease answer for `name`, or the `Answer` that ends the call (fenced, down)."""
        return await self._call(self._acquire, name)

    # -- the wire ------------------------------------------------------------------------------

    async def _acquire(self, name: str) -> dict[str, Any]:
        g = self.gate
        return await g.client.acquire_resource(g.agent_id, g.epoch, g.task_id, name)

    async def _next(self, sequence: str) -> dict[str, Any]:
        g = self.gate
        return await g.client.next_number(g.agent_id, g.epoch, g.task_id, sequence)

    async def _call(self, call: Any, arg: str) -> dict[str, Any] | Answer:
        try:
            answer: dict[str, Any] = await call(arg)
            return answer
        except StaleEpoch:
            self.gate.fenced = True
            return Answer(False, FENCED)
        except (ServerUnavailable, DomainError) as err:
            log.warning("resource call for %s failed: %s", self.gate.task_id, err)
            return Answer(False, f"The coordination server could not answer ({err}). Stop now.")

    def _denied(self, name: str, answer: dict[str, Any], veto: bool) -> Answer:
        denied = answer.get("denied") or [{}]
        first = denied[0]
        if veto and first.get("reason") == DenyReason.HELD:
            key = str(first["path"])
            if self.gate.blocked_on is None:
                self.gate.blocked_on = key
            who = f"{first.get('holder_agent_name')} for task {first.get('holder_task_id')}"
            return Answer(False, stop_instruction(name, f"The resource {name} is held by {who}"))
        return Answer(False, str(answer.get("message") or f"the resource {name} was refused"))


async def wait_for_resources(tools: ResourceTools, names: list[str], wait_s: float) -> str | None:
    """Take every resource a check names, waiting up to `wait_s`; None, or why not ("busy: ...")."""
    deadline = time.monotonic() + wait_s
    delay = 0.05
    for name in names:
        while True:
            answer = await tools.try_acquire(name)
            if isinstance(answer, Answer):
                return answer.text
            if answer.get("decision") == "allow":
                break
            first = (answer.get("denied") or [{}])[0]
            if first.get("reason") != DenyReason.HELD or time.monotonic() + delay > deadline:
                return f"busy: {name} is held by {first.get('holder_task_id') or 'another task'}"
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)
    return None
