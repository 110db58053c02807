"""A write that may wait: `acquire`, but parked while other fleet tasks hold its paths.

Only a fleet task's request refused only because other *fleet* tasks hold
paths may park (never behind a person; a protected or outside path, a fenced
caller or a task it does not own gets its ordinary answer first), and only
while its holders are expected to end within the bound (`waits.
holder_ends_soon`) and the wait closes no cycle it would lose. The bound is
`lease_wait`, cut to what is left of the waiter's own wall clock. The lease
table hands the freed path over in the transaction that frees it; this piece
then compares each granted file with what the session last saw (`seen`: path
-> SHA-256, None for no content) and answers `changed` when it moved — a lease
held, a write refused, no veto. Events `lease_waiting` (per held path) and
`lease_waited` (once). Docs: docs/decisions/0119-waiting-for-a-lease-instead-of-starting-over.md, "Waiting for a lease instead of
starting over".
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from codefleet.coord.calls.callparts import CallParts
from codefleet.coord.policy.answers import LeaseAnswer, WaitReport
from codefleet.coord.policy.waits import Contender, Waiter, WaitOutcome, holder_ends_soon
from codefleet.coord.tables.persons import TASK_PREFIX as PERSON_TASK_PREFIX
from codefleet.models import EventType
from codefleet.rollback import content_sha256
from codefleet.toolcalls.leasekeys import file_of

__all__ = ["LeaseWaiting"]

Acquire = Callable[[str, int, str, list[str], str], LeaseAnswer]


@dataclass(frozen=True, slots=True)
class _Parked:
    waiter: Waiter
    holder_task_id: str
    bound_s: float


class LeaseWaiting:
    """One engine's parked writes; every method runs on the engine's thread."""

    def __init__(
        self, parts: CallParts, acquire: Acquire, *, lease_wait: float, task_timeout: float
    ) -> None:
        self.store = parts.store
        self.tree = parts.tree
        self.clock = parts.clock
        self.agents = parts.agents
        self.tasks = parts.tasks
        self.leases = parts.leases
        self.transition = parts.transition
        self.acquire = acquire
        self.lease_wait = lease_wait
        self.task_timeout = task_timeout
        self.woken: dict[int, asyncio.Future[WaitOutcome]] = {}  # waiter seq -> its wake-up
        self.leases.waits.on_end = self._woken

    async def acquire_waiting(
        self,
        agent_id: str,
        epoch: int,
        task_id: str,
        paths: list[str],
        tool: str,
        seen: Mapping[str, str | None],
        wait: float,
    ) -> LeaseAnswer:
        """`acquire`, parked up to `wait` s (and `lease_wait`) while other fleet tasks hold
        the paths, when the rules allow it."""
        parked = self._park(agent_id, epoch, task_id, paths, tool, wait)
        if not isinstance(parked, _Parked):
            answer = self.acquire(agent_id, epoch, task_id, paths, tool)
            return answer if parked is None else replace(answer, waited=parked)
        started = time.monotonic()
        outcome = await self._sleep(parked)
        keys = parked.waiter.keys
        # Handed over, timed out, lost a deadlock, or a hand-over a rollback undid: it asks
        # as any write does (`leaserule.decide`: handed over, the keys are its own, unless
        # another part's write is under way).
        answer = self.acquire(agent_id, epoch, task_id, paths, tool)
        if answer.allowed:  # however the lease came, never over content the session did not see
            changed = _changed(self.tree.root, keys, seen)
            outcome = WaitOutcome.CHANGED if changed else WaitOutcome.GRANTED
            if changed:
                self.leases.write_latch.unlatch(task_id)  # it reads the file again before it writes
        report = WaitReport(outcome, round(time.monotonic() - started, 3), parked.holder_task_id)
        self._record(parked.waiter, report)
        return replace(answer, waited=report)

    async def _sleep(self, parked: _Parked) -> WaitOutcome:
        """Until the request is handed over or given up, or the bound passes (`timed_out`)."""
        woken = self.woken[parked.waiter.seq]
        try:
            return await asyncio.wait_for(asyncio.shield(woken), parked.bound_s)
        except TimeoutError:
            if woken.done():  # handed over in the same turn the bound passed
                return woken.result()
            with self.transition():
                self.leases.waits.end(parked.waiter.task_id, WaitOutcome.TIMED_OUT)
            return WaitOutcome.TIMED_OUT
        finally:
            self.woken.pop(parked.waiter.seq, None)

    def _park(
        self, agent_id: str, epoch: int, task_id: str, paths: list[str], tool: str, wait: float
    ) -> _Parked | WaitReport | None:
        """Queue the request if it may wait (`lease_waiting`); a deadlock's report; else None."""
        if self.lease_wait <= 0:
            return None
        agent = self.agents.check_epoch(agent_id, epoch)
        task = self.tasks.index.in_flight.get(task_id)
        if task is None or task.agent_id != agent_id or task.assigned_at is None:
            return None
        keys, rejected = self.leases.canonical_all(paths)
        held = self.leases.held_by_others(keys, task_id)
        holders = sorted({holder_task for _, (_, holder_task) in held})
        if rejected or not held or not all(self._fleet_ends_soon(h) for h in holders):
            return None
        now = self.clock()
        left = task.assigned_at.timestamp() + self.task_timeout - now.timestamp()
        bound = min(self.lease_wait, wait, left)
        who = Contender(task.id, task.priority, task.created_at)
        mirror = {path: holder[1] for path, holder in self.leases.holders.items()}
        may, losers = self.leases.waits.resolve(who, holders, mirror)
        if not may:
            refused = WaitReport(WaitOutcome.DEADLOCK, 0.0, holders[0])
            self._record(Waiter(who, agent.id, tuple(keys), tool, 0), refused)
            return refused
        if bound <= 0:
            return None
        with self.transition():
            for loser in losers:
                self.leases.waits.end(loser, WaitOutcome.DEADLOCK)
            waiter = self.leases.waits.park(who, agent.id, keys, tool)
            self.woken[waiter.seq] = asyncio.get_running_loop().create_future()
            for path, (_, holder_task) in held:
                self.store.emit(
                    EventType.LEASE_WAITING,
                    task_id=task_id,
                    agent_id=agent_id,
                    path=path,
                    holder_task_id=holder_task,
                    queue_position=self.leases.waits.position(waiter, path),
                )
        return _Parked(waiter, holders[0], bound)

    def _fleet_ends_soon(self, holder_task_id: str) -> bool:
        """A fleet task's attempt expected to end within the bound (never a person's session)."""
        if holder_task_id.startswith(PERSON_TASK_PREFIX):
            return False
        holder = self.tasks.index.in_flight.get(holder_task_id)
        if holder is None or holder.assigned_at is None:
            return False
        elapsed = (self.clock() - holder.assigned_at).total_seconds()
        return self._ends_soon(elapsed)

    def _ends_soon(self, elapsed_s: float) -> bool:
        return holder_ends_soon(elapsed_s, self.leases.waits.finished_s, self.lease_wait)

    def _woken(self, waiter: Waiter, outcome: WaitOutcome) -> None:
        woken = self.woken.get(waiter.seq)
        if woken is not None and not woken.done():
            woken.set_result(outcome)

    def _record(self, waiter: Waiter, report: WaitReport) -> None:
        if report.outcome is WaitOutcome.ENDED:
            return  # the attempt is over: its end is the record
        with self.transition():
            for path in waiter.keys:
                self.store.emit(
                    EventType.LEASE_WAITED,
                    task_id=waiter.task_id,
                    agent_id=waiter.agent_id,
                    path=path,
                    waited_s=report.waited_s,
                    outcome=report.outcome,
                    holder_task_id=report.holder_task_id,
                )


def _changed(root: Path, keys: tuple[str, ...], seen: Mapping[str, str | None]) -> bool:
    """Does any granted file differ from what the session last saw (None: no content)?
    A part key's file is its path's (`seen` is keyed as the request was)."""
    return any(content_sha256(root / file_of(key)) != seen.get(key) for key in keys)
