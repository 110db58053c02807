"""The lease table's mirror: who holds which key, answering grants and denials.

Lease exclusion is the primary key of `file_leases` plus the part rule: a key is a
file's path, a part of a file (`path::name`, `toolcalls.leasekeys`) or a resource, and
a whole file excludes every part of it. This part owns the in-memory mirror of the
table (`index`: key -> (agent, task), by file, answering by the one rule of
`toolcalls.leasekeys`; `of_task`: task -> its keys) and is the only writer of both, for
runners and for people's interactive sessions alike. The mirror answers a denial with the holder's
name without a query; a rolled-back transaction re-reads the rows of the tasks it
touched (`reload`), so it is never ahead of the table.

Acquisition is all-or-nothing over the canonical keys of one request, inside the
caller's transaction; a task's first key on a file captures the file's pre-image
(through the pre-images part) before its row is inserted, and a whole file granted to a
task that held only parts of it moves its pre-image to the file as it now is with
only its parts as they were (`Preimages.rebased`), so others' landed changes stay. A denial is an answer (with
the holder). A parked request waits in the wait room (`waits`, filled by
`leasewaiting`); a freed key is handed to its first waiter that can take all it
asked, in the transaction that frees it (`_hand_over`), so no other request slips
in between. Releasing a failed attempt's files asks the pre-images part for restore
intents first: every key on those files stays held until they are put back (only
the parts it held, for a task that held parts).

The write moment is the write latch's (`write_latch`, `coord.policy.writelatch`):
a grant of parts latches the file to its writer until the write is recorded, so no
write of a file lands between another task's reading of it for a write and that
write; what the server itself reads of the file meanwhile (a landed task's patch, a
check's view) is the file as the writer found it (`Preimages.hold_still`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

from codefleet.coord.policy.answers import Denial, LeaseAnswer
from codefleet.coord.policy.leaserule import (
    ALL_FREE,
    FLEET,
    HOLDS_ALL,
    Door,
    Request,
    Verdict,
    decide,
)
from codefleet.coord.policy.stacks import Stacks
from codefleet.coord.policy.waits import WaitOutcome, WaitRoom
from codefleet.coord.policy.writelatch import WriteLatch
from codefleet.coord.storage.store import Store
from codefleet.coord.tables.preimages import Preimages
from codefleet.models import DenyReason, EventType, ReleaseReason, to_iso
from codefleet.paths import TreeRoot, lease_keys
from codefleet.resources import is_resource_key
from codefleet.rollback import PreImage
from codefleet.toolcalls.leasekeys import (
    PART_SEPARATOR,
    KeyIndex,
    covering,
    file_of,
    part_key,
    split_part_key,
)

__all__ = ["HolderOf", "LeaseTable", "denial"]

# (agent id) -> (its name, `task` or `interactive`): who holds a lease, for a denial
HolderOf = Callable[[str], tuple[str | None, str]]
# (the tasks unwound, the task under them that is rolled back): ends their attempts
Unwound = Callable[[list[str], str], None]
# the keys a refused request met, with their holders: may it stack on them? (`policy.stacks`)
MayStack = Callable[[list[tuple[str, tuple[str, str]]]], bool]


class LeaseTable:
    """The lease mirror of one engine; every method runs on the engine's thread."""

    def __init__(
        self,
        store: Store,
        tree: TreeRoot,
        clock: Callable[[], datetime],
        preimages: Preimages,
        holder_of: HolderOf,
    ) -> None:
        self.store = store
        self.tree = tree
        self.clock = clock
        self.preimages = preimages
        self.holder_of = holder_of
        self.index: KeyIndex[tuple[str, str]] = KeyIndex()  # key -> (agent, task), by file
        self.holders = self.index.held  # every held key -> (agent, task): the index's own dict
        self.of_task: dict[str, set[str]] = {}
        # the write moment (`coord.policy.writelatch`)
        self.write_latch = WriteLatch(clock, preimages.hold_still, preimages.let_go)
        self.waits = WaitRoom()
        self.stacks = Stacks()  # files passed on by tasks waiting to land (`policy.stacks`)
        self.on_unwound: Unwound = lambda _tasks, _under: None  # set by the engine

    def load(self) -> None:
        for task_id in list(self.waits.waiters):  # a reset: no parked request outlives it
            self.waits.end(task_id, WaitOutcome.ENDED)
        self.index = KeyIndex()
        self.holders = self.index.held
        self.of_task = {}
        for lease in self.store.lease_rows():
            self._mirror(lease.path, lease.agent_id, lease.task_id)
        self.stacks.load(self.store.stacked_under())

    def reload(self, task_ids: Iterable[str]) -> None:
        """Re-read the leases of tasks a rolled-back transaction touched."""
        for task_id in task_ids:
            for key in self.of_task.pop(task_id, set()):
                if self.holders.get(key, ("", ""))[1] == task_id:
                    self._unmirror(key)
            for lease in self.store.lease_rows(task_id):
                self._mirror(lease.path, lease.agent_id, task_id)
        self.stacks.load(self.store.stacked_under())

    def _mirror(self, key: str, agent_id: str, task_id: str) -> None:
        self.index.put(key, (agent_id, task_id))
        self.of_task.setdefault(task_id, set()).add(key)

    def _unmirror(self, key: str) -> tuple[str, str]:
        return self.index.pop(key)

    def paths_of(self, task_id: str) -> set[str]:
        """The task's keys: paths, part keys and resources."""
        return self.of_task.get(task_id, set())

    def keys_on(self, task_id: str, path: str) -> list[str]:
        """The task's keys on one file: the whole file, its parts, or both."""
        return sorted(k for k in self.index.keys_on(path) if self.holders[k][1] == task_id)

    def part_names(self, task_id: str) -> dict[str, frozenset[str]]:
        """File -> the parts the task holds of it, for each file it holds parts of and not whole."""
        found: dict[str, set[str]] = {}
        whole: set[str] = set()
        for key in self.paths_of(task_id):
            path, name = split_part_key(key)
            if name is None:
                whole.add(path)
            else:
                found.setdefault(path, set()).add(name)
        return {path: frozenset(names) for path, names in found.items() if path not in whole}

    def holders_on(self, path: str) -> dict[str, frozenset[str] | None]:
        """Task -> the parts of `path` it holds (None: the whole file), for every holder."""
        whole: set[str] = set()
        parts: dict[str, set[str]] = {}
        for key in self.index.keys_on(path):
            task_id, name = self.holders[key][1], split_part_key(key)[1]
            if name is None:
                whole.add(task_id)
            else:
                parts.setdefault(task_id, set()).add(name)
        found: dict[str, frozenset[str] | None] = dict.fromkeys(whole)
        found.update((t, frozenset(n)) for t, n in parts.items() if t not in whole)
        return found

    def _on_file_of(self, path: str, task_id: str) -> bool:
        """Does the task hold a key on `path` (the file, or a part of it)?"""
        return any(self.holders[k][1] == task_id for k in self.index.keys_on(path))

    def _covered(self, key: str, task_id: str) -> bool:
        """Does the task hold `key`, or the whole file a part key is on?"""
        return any(self.holders.get(k, ("", ""))[1] == task_id for k in covering(key))

    def all_ours(self, keys: list[str], task_id: str) -> bool:
        """Does the task already hold every key? (Then a grant has nothing to write.) A key it
        holds itself is one look-up; only another key asks what covers it (`_covered`)."""
        holders = self.holders
        for key in keys:
            holder = holders.get(key)
            if (holder is None or holder[1] != task_id) and not self._covered(key, task_id):
                return False
        return True

    def held_by_others(self, keys: list[str], task_id: str) -> list[tuple[str, tuple[str, str]]]:
        """(held key, its holder) for each key another task holds that one of `keys` excludes."""
        seen: dict[str, tuple[str, str]] = {}
        for key in keys:
            for held in self.index.excluded_by(key):
                holder = self.holders[held]
                if holder[1] != task_id:
                    seen.setdefault(held, holder)
        return list(seen.items())

    # -- grants ------------------------------------------------------------------------------

    def ask(
        self,
        door: Door,
        task_id: str,
        keys: list[str],
        rejected: Sequence[Denial] = (),
        may_stack: MayStack | None = None,
    ) -> Request:
        """What the table sees of a request for `keys` by `task_id` now, for `decide`: others
        are looked up only for keys it does not hold; held keys (the steady state's re-acquire)
        and free ones build nothing, the door's shared `HOLDS_ALL` or `ALL_FREE`."""
        busy = self.write_latch.busy(keys, task_id) if door is FLEET else ()
        if rejected or busy:
            return Request(door, rejected=tuple(rejected), busy=tuple(busy))
        if self.all_ours(keys, task_id):
            return HOLDS_ALL[door]
        held = self.held_by_others(keys, task_id)
        if not held:
            return ALL_FREE[door]
        stackable = False  # a stack is undone by restores: never without pre-images
        if may_stack is not None and self.preimages.rollback:
            stackable = may_stack(held)
        return Request(door, held=tuple(held), stackable=stackable)

    def acquire(
        self,
        agent_id: str,
        agent_name: str,
        task_id: str,
        keys: list[str],
        tool: str,
        may_stack: MayStack | None = None,
    ) -> LeaseAnswer:
        """A fleet task's all-or-nothing grant of canonical `keys`, by the lease rule
        (`policy.leaserule`; the caller's transaction). Keys held only by tasks waiting to
        land are stacked on when `may_stack` says so."""
        request = self.ask(Door.FLEET, task_id, keys, may_stack=may_stack)
        return self.settle(request, decide(request), (agent_id, agent_name, task_id), keys, tool)

    def settle(
        self,
        request: Request,
        verdict: Verdict,
        who: tuple[str, str, str],
        keys: list[str],
        tool: str,
    ) -> LeaseAnswer:
        """Carry out a fleet task's `verdict` on `request` (`who`: agent id, its name, task)."""
        agent_id, agent_name, task_id = who
        match verdict:  # a first grant's TAKE first: each case reads its member off the class
            case Verdict.TAKE:
                return self._take(agent_id, task_id, keys, tool)
            case Verdict.REFUSE | Verdict.BUSY:
                return LeaseAnswer.deny([*request.rejected, *request.busy])
            case Verdict.OURS:
                return LeaseAnswer(True, granted=tuple(keys))  # a re-acquire writes nothing
            case Verdict.STACK:
                return self._take(agent_id, task_id, keys, tool, stacked=request.held)
            case Verdict.DENY:
                return self.deny_held(agent_id, agent_name, task_id, list(request.held), tool)

    def _take(
        self,
        agent_id: str,
        task_id: str,
        keys: list[str],
        tool: str,
        stacked: Sequence[tuple[str, tuple[str, str]]] = (),
    ) -> LeaseAnswer:
        new_files = sorted(
            {
                path
                for path in map(file_of, keys)
                if not is_resource_key(path) and not self._on_file_of(path, task_id)
            }
        )  # a task's first key on a file captures the file; a resource has no pre-image
        rebased, refused = self.preimages.rebased(task_id, self._upgrades(task_id, keys))
        if not refused:
            refused = self.preimages.capture_preimages(task_id, new_files)
        if refused:
            return LeaseAnswer.deny(refused)
        self.preimages.rebase(task_id, rebased)
        for key, (under_agent, under_task) in stacked:
            self._move(key, under_task, (agent_id, task_id), tool, stacked_on=under_task)
            self.stacks.push(key, under_task, under_agent)
        self.grant(keys, agent_id, task_id, tool)
        return LeaseAnswer(True, granted=tuple(keys))

    def _move(self, key: str, from_task: str, to: tuple[str, str], tool: str, **kind: Any) -> None:
        """The lease on `key` passes from `from_task` to `to` (agent, task): up onto a stack,
        or back down when what is above is unwound; one release and one grant, in the
        caller's transaction."""
        agent_id, task_id = to
        from_agent, _ = self._unmirror(key)
        self.store.delete_lease(key, from_task)
        held = self.of_task[from_task]
        held.discard(key)
        if not held:
            del self.of_task[from_task]
        self.store.emit(
            EventType.LEASE_RELEASED,
            task_id=from_task,
            agent_id=from_agent,
            path=key,
            reason=ReleaseReason.STACKED,
            to_task_id=task_id,
        )
        self.grant([key], agent_id, task_id, tool, **kind)

    def _upgrades(self, task_id: str, keys: list[str]) -> dict[str, frozenset[str]]:
        """File -> the parts the task holds of it, for each file `keys` asks for whole that the
        task holds only parts of: its pre-image moves to the file as it is now (`rebased`)."""
        whole = [k for k in keys if PART_SEPARATOR not in k and self._on_file_of(k, task_id)]
        if not whole:
            return {}
        parts = self.part_names(task_id)
        return {path: parts[path] for path in whole if path in parts}

    def grant(self, keys: list[str], agent_id: str, task_id: str, tool: str, **kind: Any) -> None:
        """Insert a row per key the task does not hold yet (re-acquiring your own lease is allow;
        a part of a file it holds whole is held)."""
        at = to_iso(self.clock())
        for key in keys:
            if self._covered(key, task_id):
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

    def canonical_all(self, raws: list[str]) -> tuple[list[str], list[Denial]]:
        """Raw paths and part keys (`path::name`) as canonical keys, and the ones refused."""
        if any(PART_SEPARATOR in raw for raw in raws):
            keys, rejected = self._canonical_parts(raws)
        else:  # whole files: one pass, as ever
            found = lease_keys(self.tree, raws)
            keys = found.keys
            rejected = [denial(raw, err.reason, err.message) for raw, err in found.rejected]
        if not raws:
            rejected.append(denial("", DenyReason.INVALID_PATH, "no path to lease"))
        return keys, rejected

    def _canonical_parts(self, raws: list[str]) -> tuple[list[str], list[Denial]]:
        keys: list[str] = []
        rejected: list[Denial] = []
        for raw in raws:
            try:
                path, name = split_part_key(raw)
            except ValueError as err:
                rejected.append(denial(raw, DenyReason.INVALID_PATH, str(err)))
                continue
            found = lease_keys(self.tree, [path])
            for _, refused in found.rejected:
                rejected.append(denial(raw, refused.reason, refused.message))
            for path_key in found.keys:
                key = path_key if name is None else part_key(path_key, name)
                if key not in keys:
                    keys.append(key)
        return keys, rejected

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

        One denial per file and holder: a whole file refused because its holder has five
        of its parts is one veto, named by the first of them. `title_of(holder agent,
        holder task)`: the holder's task title (a person's answer names it); `kind`: extra
        event fields (`kind: interactive`)."""
        denied: list[Denial] = []
        named: set[tuple[str, str]] = set()
        for path, (holder_agent, holder_task) in held:
            if (file_of(path), holder_task) in named:
                continue
            named.add((file_of(path), holder_task))
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

        A failed attempt's files keep their leases (every key on them) until they are put
        back, after the caller's transaction commits (`files`); the others are released here.
        """
        self.waits.end(task_id, WaitOutcome.ENDED)
        self.write_latch.unlatch(task_id)
        if succeeded:
            after = self._passed_on(task_id)
            if after or self.paths_of(task_id):  # a pre-image is of a file held or passed on
                parts = self.part_names(task_id)
                self.preimages.record_patches(task_id, parts, self.holders_on, after)
            self.stacks.landed(task_id)
        else:
            self._unwind(task_id)
        restoring = self.preimages.restoring.get(task_id, {})
        held = {k for k in self.paths_of(task_id) if file_of(k) not in restoring}
        if not held:
            return
        if not succeeded:
            kept = self.preimages.request_restores(task_id, {file_of(k) for k in held}, reason)
            held = {k for k in held if file_of(k) not in kept}
        self.drop(task_id, held, reason)

    # -- stacks: a file passed on while its holder waits to land (`policy.stacks`) ---------

    def _passed_on(self, task_id: str) -> dict[str, PreImage]:
        """File -> the task's result in it, for each file it passed on: what the task right
        above it found there (the file itself has moved on since)."""
        found: dict[str, PreImage] = {}
        for path in self.stacks.files_under(task_id):
            above = self.stacks.above(task_id, path) or self.holders[path][1]
            image = self.store.preimage_of(above, path)
            if image is not None:
                found[path] = image
        return found

    def _unwind(self, task_id: str) -> None:
        """A task under others that is rolled back takes its files back from the top: what
        was stacked on them is dropped (its restore would only be undone by this one), and
        the tasks above are ended (`on_unwound`), before anything of this task is put back."""
        victims: list[str] = []
        for path in self.stacks.files_under(task_id):
            agent_id, above = self.stacks.cut(task_id, path)
            top = self.holders[path][1]
            self._move(path, top, (agent_id, task_id), "unwind", unwound=[*above, top])
            for stacked in (*above, top):
                self.preimages.forget(stacked, path)
                if stacked not in victims:
                    victims.append(stacked)
        if victims:
            self.on_unwound(victims[::-1], task_id)

    def stacked_bases(self, task_id: str) -> set[str]:
        """The tasks waiting to land whose work `task_id` builds on (it stacked on them)."""
        if not self.stacks.under:
            return set()
        return self.stacks.bases(task_id, lambda path: self.holders.get(path, ("", None))[1])

    def drop(self, task_id: str, keys: Iterable[str], reason: ReleaseReason) -> None:
        """Delete the task's lease rows for `keys` and their mirror; one event per key.

        Then each freed key goes to its first waiter, in this same transaction."""
        freed = sorted(keys)
        for key in freed:
            agent_id, _ = self._unmirror(key)
            self.store.delete_lease(key, task_id)
            self.store.emit(
                EventType.LEASE_RELEASED,
                task_id=task_id,
                agent_id=agent_id,
                path=key,
                reason=reason,
            )
            held = self.of_task[task_id]
            held.discard(key)
            if not held:
                del self.of_task[task_id]
        for key in freed:
            below = self.stacks.pop(key)
            if below is None:
                self._hand_over(key)
            else:  # back to the task under it, waiting to land
                self.grant([key], below[1], below[0], "unstack", returned_by=task_id)

    def _hand_over(self, key: str) -> None:
        """Grant a freed key to the first waiter (priority, arrival) that can take all it asked."""
        for waiter in self.waits.queue(key):
            if self.held_by_others(list(waiter.keys), waiter.task_id):
                continue
            taken = self._take(waiter.agent_id, waiter.task_id, list(waiter.keys), waiter.tool)
            outcome = WaitOutcome.GRANTED if taken.allowed else WaitOutcome.REFUSED
            self.waits.end(waiter.task_id, outcome)
            return


def denial(path: str, reason: DenyReason, message: str | None = None) -> Denial:
    """A refusal that names no holder (an unusable path, not the owner, too large)."""
    return Denial(path, reason, message or f"{path}: {reason}")
