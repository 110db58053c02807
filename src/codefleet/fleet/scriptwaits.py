"""A dry-run script's `wait_*` steps: each waits as long as what it waits for can still happen.

A wait on another task (`wait_succeeded`, `wait_landing`) gives up at once when that
task can no longer get there (it failed, was cancelled, or is past the state waited
for), and never while it is alive: running, waiting to land, landing, or pending with
attempts left. A wait on a lease or an event (`wait_leased`, `wait_acquired`,
`wait_denied`, `wait_parked`) gives up once every other task has ended (while there is
none yet, an operator may still add one, so it waits). Every
wait also stops at its limit: the step's `timeout: S`, else the script's
`wait_timeout: S`, else `DEFAULT_WAIT_S` (long enough for a landing: a check, a verify
and a landing check on a real library took 50 s). The give-up names what it waited
for and why it stopped (docs/decisions/0166-a-scripted-wait-follows-what-it-waits-for.md).
Between two asks a wait on the server sleeps until the event that can make it
true is logged (`_Doorbell`: `/events?wait=`, e.g. a `lease_acquired` for
`wait_leased`), so it sees it at once, and at most `BELL_PAUSE_S` (what no such
event says is still seen). `wait_message` (the runner's own inbox) asks every
`WAIT_POLL_S` (or the executor's own `poll`, the demo's `DEMO_WAIT_POLL_S`) for a
second, then every `WAIT_POLL_MAX_S` at least.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final

from codefleet.fleet.executor import Attempt
from codefleet.models import TERMINAL_STATUSES, EventType, TaskStatus
from codefleet.toolcalls.leasekeys import excludes

__all__ = ["DEFAULT_WAIT_S", "WAIT_KINDS", "wait_until"]

DEFAULT_WAIT_S: Final = 600.0  # a wait's limit when neither the step nor the script says one
WAIT_POLL_S: Final = 0.01  # the first polls: a staged collision is seen at once
WAIT_POLL_MAX_S: Final = 0.05  # a long wait (a landing) asks less often, still seen at once
QUICK_S: Final = 1.0  # a wait this young asks every WAIT_POLL_S (a staged order costs nothing)
LIVENESS_EVERY_S: Final = 0.5  # how often a lease or event wait asks whether others are alive
BELL_PAUSE_S: Final = 0.1  # the longest a wait sleeps on its doorbell before it asks again

# A task's status, as far as a wait on it can tell: reached, still possible, or never.
_REACHED: Final = "reached"
_ALIVE: Final = "alive"


@dataclass(frozen=True, slots=True)
class _TaskWait:
    """A wait on another task's status: the status that satisfies it, and how it reads."""

    target: TaskStatus
    reads: str  # "to succeed"


_TASK_WAITS: Final = {
    "wait_succeeded": _TaskWait(TaskStatus.SUCCEEDED, "to succeed"),
    "wait_landing": _TaskWait(TaskStatus.LANDING, "to wait to land"),
}
_EVENT_WAITS: Final = {
    "wait_leased": "another task to hold the lease on",
    "wait_acquired": "another task to be granted",
    "wait_denied": "some task to be denied",
    "wait_parked": "some task's write to wait for",
}
WAIT_KINDS: Final = frozenset({*_TASK_WAITS, *_EVENT_WAITS, "wait_message"})
# The event that can make each wait on the server true: its doorbell.
_BELLS: Final = {
    "wait_succeeded": EventType.TASK_SUCCEEDED,
    "wait_landing": EventType.LANDING_QUEUED,
    "wait_leased": EventType.LEASE_ACQUIRED,
    "wait_acquired": EventType.LEASE_ACQUIRED,
    "wait_denied": EventType.LEASE_DENIED,
    "wait_parked": EventType.LEASE_WAITING,
}


async def wait_until(
    kind: str, arg: str, attempt: Attempt, limit: float, poll: float = WAIT_POLL_S
) -> str | None:
    """Wait as step `kind: arg` says, asking every `poll` s at first; None once it happened,
    else why it gave up."""
    if kind == "wait_message":
        return await _poll(
            f"an operator message saying {arg!r}",
            _Limits(limit, poll),
            lambda: _heard(attempt, arg),
            None,
        )
    limits = _Limits(limit, poll, _Doorbell(attempt, _BELLS[kind]))
    if kind in _TASK_WAITS:
        return await _wait_for_task(_TASK_WAITS[kind], arg, attempt, limits)
    condition = _EVENT_CONDITIONS[kind]
    return await _poll(
        f"{_EVENT_WAITS[kind]} {arg}",
        limits,
        lambda: condition(attempt, arg),
        lambda: _others_alive(attempt),
    )


@dataclass(slots=True)
class _Doorbell:
    """Sleeps until an event of `kind` is logged after the last it saw (the server holds
    `/events?wait=`), so the wait asks again at once instead of at its next poll."""

    attempt: Attempt
    kind: EventType
    seen: int | None = None  # the last event id it knows of; None: not read yet

    async def ready(self) -> bool:
        """Take the log's last event id, once (False the first time: ask again before
        sleeping, so nothing logged before it was taken is missed)."""
        if self.seen is not None:
            return True
        health = await self.attempt.gate.client.health()
        self.seen = int(health.get("last_event_id") or 0)
        return False

    async def sleep(self, most: float) -> None:
        """Until an event of `kind` past the last seen is logged, at most `most` s."""
        page = await self.attempt.gate.client.events(
            self.seen or 0, limit=100, type_=self.kind, wait=most
        )
        if page:
            self.seen = int(page[-1]["id"])


@dataclass(frozen=True, slots=True)
class _Limits:
    """A wait's limit (s), how often it asks while it is young (s), and its doorbell."""

    limit: float
    poll: float = WAIT_POLL_S
    bell: _Doorbell | None = None

    def pause(self, waited: float) -> float:
        """The pause before the next ask of a wait `waited` s old."""
        if self.bell is not None:
            return BELL_PAUSE_S
        return self.poll if waited < QUICK_S else max(self.poll, WAIT_POLL_MAX_S)

    async def rest(self, waited: float) -> None:
        """Sleep until the next ask: on the doorbell where there is one."""
        if self.bell is None:
            await asyncio.sleep(self.pause(waited))
        elif await self.bell.ready():
            await self.bell.sleep(self.pause(waited))


async def _wait_for_task(
    wait: _TaskWait, task_id: str, attempt: Attempt, limits: _Limits
) -> str | None:
    """Until `task_id` has the status waited for; at once when it never can."""
    verdict: dict[str, str] = {}

    async def reached() -> bool:
        task = await attempt.gate.client.task(task_id)
        verdict["status"] = str(task["status"])
        return _task_verdict(wait.target, verdict["status"]) == _REACHED

    async def alive() -> bool:
        return _task_verdict(wait.target, verdict.get("status", "")) == _ALIVE

    gave_up = await _poll(f"{task_id} {wait.reads}", limits, reached, alive, every=0.0)
    if gave_up is not None and verdict.get("status") and not await alive():
        return f"gave up waiting for {task_id} {wait.reads}: it is {verdict['status']} and cannot any more"
    return gave_up


def _task_verdict(target: TaskStatus, status: str) -> str:
    """Whether a task in `status` has reached `target`, may still, or never will."""
    if status == target:
        return _REACHED
    if status in TERMINAL_STATUSES:
        return "never"
    if target is TaskStatus.LANDING and status == TaskStatus.SUCCEEDED:
        return "never"
    return _ALIVE


async def _poll(
    what: str,
    limits: _Limits,
    happened: Callable[[], Awaitable[bool]],
    possible: Callable[[], Awaitable[bool]] | None,
    every: float = LIVENESS_EVERY_S,
) -> str | None:
    """Ask `happened` until it says so (None), `possible` says it never will, or the limit."""
    limit = limits.limit
    started = time.monotonic()
    asked = started
    while not await happened():
        now = time.monotonic()
        if possible is not None and now - asked >= every:
            asked = now
            if not await possible():
                return f"gave up waiting for {what}: every other task has ended"
        if now - started > limit:
            return (
                f"gave up waiting for {what} after {limit:g} s, its limit (a step's "
                "`timeout: S` or the script's `wait_timeout: S` sets it)"
            )
        await limits.rest(now - started)
    return None


async def _others_alive(attempt: Attempt) -> bool:
    """Whether a task other than this attempt's may still take a lease or cause an event:
    one that has not ended, or none yet (a task added later may)."""
    others = [t for t in await attempt.gate.client.tasks() if t["id"] != attempt.task_id]
    return not others or any(t["status"] not in TERMINAL_STATUSES for t in others)


async def _heard(attempt: Attempt, text: str) -> bool:
    return any(text in note.text for note in attempt.inbox.waiting)


async def _leased_by_other(attempt: Attempt, path: str) -> bool:
    leases = await attempt.gate.client.leases()
    return any(excludes(x["path"], path) and x["task_id"] != attempt.task_id for x in leases)


async def _was_acquired(attempt: Attempt, path: str) -> bool:
    events = await attempt.gate.client.events(type_=EventType.LEASE_ACQUIRED)
    return any(
        excludes(str(e["payload"].get("path")), path) and e["task_id"] != attempt.task_id
        for e in events
    )


async def _was_denied(attempt: Attempt, path: str) -> bool:
    return _names(await attempt.gate.client.events(type_=EventType.LEASE_DENIED), path)


async def _was_parked(attempt: Attempt, path: str) -> bool:
    return _names(await attempt.gate.client.events(type_=EventType.LEASE_WAITING), path)


def _names(events: list[dict[str, Any]], path: str) -> bool:
    return any(excludes(str(e["payload"].get("path")), path) for e in events)


_EVENT_CONDITIONS: Final[dict[str, Callable[[Attempt, str], Awaitable[bool]]]] = {
    "wait_leased": _leased_by_other,
    "wait_acquired": _was_acquired,
    "wait_denied": _was_denied,
    "wait_parked": _was_parked,
}
