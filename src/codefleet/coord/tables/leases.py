"""The lease table's mirror: who holds which path, answering grants and denials.

Lease exclusion is the primary key of `file_leases`; this part owns the
in-memory mirror of it (`holders`: path -> (agent, task); `of_task`: task ->
its paths) and is the only writer of both, for runners and for people's
interactive sessions alike. The mirror exists to answer a denial with the
holder's name without a query; a rolled-back transaction re-reads the rows
of the tasks it touched (`reload`), so it is never ahead of the table.

Acquisition is all-or-nothing over the canonical paths of one request, inside
the caller's transaction; a new path's pre-image is captured (through the
files part) before its row is inserted. A denial is an answer (with the
holder). A parked request waits in the wait room (`waits`, filled by
`leasewait`); a freed path is handed to its first waiter that can take all
it asked, in the transaction that frees it (`_hand_over`), so no other
request slips in between. Releasing a failed attempt's files asks the files
part for restore intents first: those paths stay held until they are put back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from codefleet.coord.policy.answers import Denial, LeaseAnswer
from codefleet.coord.policy.waits import WaitOutcome, WaitRoom
from codefleet.coord.storage.store import Store
from codefleet.coord.tables.preimages import Files
from codefleet.models import DenyReason, EventType, ReleaseReason, to_iso
from codefleet.paths import TreeRoot, lease_keys
from codefleet.resources import is_resource_key

__all__ = ["HolderOf", "LeaseTable", "denial"]

# (agent id) -> (its name, `task` or `interactive`): who holds a lease, for a denial
HolderOf = Callable[[str], tuple[str | None, str]]


class LeaseTable:
    """The lease mirror of one engine; every method runs on the engine's thread."""

    def __init__(
        self,
        store: Store,
        tree: TreeRoot,
        clock: Callable[[], datetime],
        files: Files,
        holder_of: HolderOf,
    ) -> None:
        self.store = store
        self.tree = tree
        self.clock = clock
        self.files = files
        self.holder_of = holder_of
        self.holders: dict[str, tuple[str, str]] = {}
        self.of_task: dict[str, set[str]] = {}
        self.waits = WaitRoom()

    def load(self) -> None:
        for task_id in list(self.waits.waiters):  # a reset: no parked request outlives it
            self.waits.end(task_id, WaitOutcome.ENDED)
        self.holders = {}
        self.of_task = {}
        for lease in self.store.lease_rows():
            self._mirror(lease.path, lease.agent_id, lease.task_id)

    def reload(self, task_ids: Iterable[str]) -> None:
        """Re-read the leases of tasks a rolled-back transaction touched."""
        for task_id in task_ids:
            for path in self.of_task.pop(task_id, set()):
                if self.holders.get(path, ("", ""))[1] == task_id:
                    del self.holders[path]
            for lease in self.store.lease_rows(task_id):
                self._mirror(lease.path, lease.agent_id, task_id)

    def _mirror(self, path: str, agent_id: str, task_id: str) -> None:
        self.holders[path] = (agent_id, task_id)
        self.of_task.setdefault(task_id, set()).add(path)

    def paths_of(self, task_id: str) -> set[str]:
        return self.of_task.get(task_id, set())

    def all_ours(self, keys: list[str], task_id: str) -> bool:
        """Does the task already hold every key? (Then a grant has nothing to write.)"""
        return all(self.holders.get(k, ("", ""))[1] == task_id for k in keys)

    def held_by_others(self, keys: list[str], task_id: str) -> list[tuple[str, tuple[str, str]]]:
        return [
            (k, self.holders[k])
            for k in keys
            if k in self.holders and self.holders[k][1] != task_id
        ]

    # -- grants ------------------------------------------------------------------------------

    def acquire(
        self, agent_id: str, agent_name: str, task_id: str, keys: list[str], tool: str
    ) -> LeaseAnswer:
        """All-or-nothing grant of canonical `keys` to the task's owner (caller's transaction)."""
        held = self.held_by_others(keys, task_id)
        if held:
            return self.deny_held(agent_id, agent_name, task_id, held, tool)
        return self._take(agent_id, task_id, keys, tool)

    def _take(self, agent_id: str, task_id: str, keys: list[str], tool: str) -> LeaseAnswer:
        new_paths = [k for k in keys if k not in self.holders and not is_resource_key(k)]
        refused = self.files.capture_preimages(task_id, new_paths)  # a resource has no pre-image
        if refused:
            return LeaseAnswer.deny(refused)
        self.grant(keys, agent_id, task_id, tool)
        return LeaseAnswer(True, granted=tuple(keys))

    def grant(self, keys: list[str], agent_id: str, task_id: str, tool: str, **kind: Any) -> None:
        """Insert a row per key not held yet (re-acquiring your own lease is allow)."""
        at = to_iso(self.clock())
        for key in keys:
            if key in self.holders:
                continue
            if not self.store.insert_lease(key, agent_id, task_id, at):
                raise RuntimeError(f"lease mirror out of step with the table for {key}")
            self._mirror(key, agent_id, task_id)
            self.store.emit(
                EventType.LEASE_ACQUIRED,
                task_id=task_id,
                agent_id=agent_id,
                path=key,
                tool=tool,
                **kind,
            )

    def canonical_all(self, paths: list[str]) -> tuple[list[str], list[Denial]]:
        found = lease_keys(self.tree, paths)
        rejected = [denial(raw, err.reason, err.message) for raw, err in found.rejected]
        if not paths:
            rejected.append(denial("", DenyReason.INVALID_PATH, "no path to lease"))
        return found.keys, rejected

    def deny_held(
        self,
        agent_id: str,
        agent_name: str,
        task_id: str,
        held: list[tuple[str, tuple[str, str]]],
        tool: str,
        title_of: Callable[[str, str], str | None] | None = None,
        **kind: Any,
    ) -> LeaseAnswer:
        """The one lease-denied answer and its `lease_denied` events, a runner's or a person's.

        `title_of(holder agent, holder task)`: the holder's task title (a person's answer
        names it); `kind`: extra event fields (`kind: interactive`)."""
        denied: list[Denial] = []
        for path, (holder_agent, holder_task) in held:
            name, holder_kind = self.holder_of(holder_agent)
            denied.append(
                Denial(
                    path,
                    DenyReason.HELD,
                    f"{path} is held by {name} for task {holder_task}",
                    holder_agent,
                    name,
                    holder_task,
                    holder_kind=holder_kind,
                    holder_task_title=None
                    if title_of is None
                    else title_of(holder_agent, holder_task),
                )
            )
            self.store.emit(
                EventType.LEASE_DENIED,
                task_id=task_id,
                agent_id=agent_id,
                path=path,
                tool=tool,
                holder_agent_id=holder_agent,
                holder_agent_name=name,
                holder_task_id=holder_task,
                requester_name=agent_name,
                **kind,
            )
        return LeaseAnswer.deny(denied)

    # -- releases ----------------------------------------------------------------------------

    def release(self, task_id: str, reason: ReleaseReason, succeeded: bool = False) -> None:
        """End the attempt's hold on its files: patch them (success) or restore them, then release.

        A failed attempt's files keep their leases until they are put back, after
        the caller's transaction commits (`files`); the others are released here.
        """
        self.waits.end(task_id, WaitOutcome.ENDED)
        held = self.paths_of(task_id) - set(self.files.restoring.get(task_id, ()))
        if not held:
            return
        if succeeded:
            self.files.record_patches(task_id)
        else:
            held -= self.files.request_restores(task_id, held, reason)
        self.drop(task_id, held, reason)

    def drop(self, task_id: str, paths: Iterable[str], reason: ReleaseReason) -> None:
        """Delete the task's lease rows for `paths` and their mirror; one event per path.

        Then each freed path goes to its first waiter, in this same transaction."""
        freed = sorted(paths)
        for path in freed:
            agent_id, _ = self.holders.pop(path)
            self.store.delete_lease(path, task_id)
            self.store.emit(
                EventType.LEASE_RELEASED,
                task_id=task_id,
                agent_id=agent_id,
                path=path,
                reason=reason,
            )
            held = self.of_task[task_id]
            held.discard(path)
            if not held:
                del self.of_task[task_id]
        for path in freed:
            self._hand_over(path)

    def _hand_over(self, path: str) -> None:
        """Grant a freed path to the first waiter (priority, arrival) that can take all it asked."""
        for waiter in self.waits.queue(path):
            if self.held_by_others(list(waiter.keys), waiter.task_id):
                continue
            taken = self._take(waiter.agent_id, waiter.task_id, list(waiter.keys), waiter.tool)
            outcome = WaitOutcome.GRANTED if taken.allowed else WaitOutcome.REFUSED
            self.waits.end(waiter.task_id, outcome)
            return


def denial(path: str, reason: DenyReason, message: str | None = None) -> Denial:
    """A refusal that names no holder (an unusable path, not the owner, too large)."""
    return Denial(path, reason, message or f"{path}: {reason}")
