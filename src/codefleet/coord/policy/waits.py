"""Parked lease requests: one queue per path and the wait-for graph over tasks.

A fleet task's write refused only because another fleet task holds the path
may park here instead of being vetoed (docs/decisions/0119-waiting-for-a-lease-instead-of-starting-over.md, "Waiting for a
lease instead of starting over"). The room owns the parked requests (one per
task: a runner's gate asks for one write at a time) and nothing else: who
holds what is the lease mirror's, and the mirror hands a freed path to the
first waiter of its queue (priority, then arrival) in the transaction that
frees it. A wait is an edge waiter-task -> holder-task; a request that would
close a cycle is never parked: the cycle's worst-ranked task (the one the
scheduler would run last: lowest priority, newest, highest id) is refused,
which is the requester at once or a parked waiter woken with `deadlock`.
Pure: no I/O, no clock, no event loop; `on_end` is told how each wait ended.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from codefleet.toolcalls.leasekeys import KeyIndex, excludes

__all__ = [
    "Contender",
    "WaitOutcome",
    "WaitRoom",
    "Waiter",
    "find_cycle",
    "holder_ends_soon",
    "rank_key",
    "victim",
]


class WaitOutcome(StrEnum):
    """How a wait ended (`lease_waited.outcome`)."""

    GRANTED = "granted"  # the lease was handed over and the file is as the agent saw it
    CHANGED = "changed"  # handed over, but the file changed meanwhile: read it again
    TIMED_OUT = "timed_out"  # the bound passed: the ordinary veto
    DEADLOCK = "deadlock"  # this task was the cycle's victim: the ordinary veto
    REFUSED = "refused"  # handed over, but the path cannot be leased (too large, a hard link)
    ENDED = "ended"  # the waiting attempt ended (fenced, cancelled, taken back)


@dataclass(frozen=True, slots=True)
class Contender:
    """A task as the deadlock rule ranks it: the scheduler's own order, best first."""

    task_id: str
    priority: int
    created_at: str


def rank_key(c: Contender) -> tuple[int, str, str]:
    """Best first: priority desc, then created_at, then id (a total order)."""
    return (-c.priority, c.created_at, c.task_id)


@dataclass(frozen=True, slots=True)
class Waiter:
    """One parked request: all of `keys`, for `task_id`'s owner `agent_id`."""

    who: Contender
    agent_id: str
    keys: tuple[str, ...]
    tool: str
    seq: int  # arrival order

    @property
    def task_id(self) -> str:
        return self.who.task_id


WaitGraph = Mapping[str, Iterable[str]]  # task -> the tasks holding what it waits for


def find_cycle(graph: WaitGraph, start: str, holders: Iterable[str]) -> tuple[str, ...] | None:
    """The cycle `start` would close by waiting on `holders`, as a task list from `start`."""
    for first in sorted(set(holders)):
        path = _path(graph, first, start, (start,))
        if path is not None:
            return path
    return None


def _path(graph: WaitGraph, node: str, goal: str, trail: tuple[str, ...]) -> tuple[str, ...] | None:
    if node == goal:
        return trail
    if node in trail:
        return None
    for nxt in sorted(set(graph.get(node, ()))):
        found = _path(graph, nxt, goal, (*trail, node))
        if found is not None:
            return found
    return None


def victim(cycle: Iterable[Contender]) -> str:
    """The task a deadlock refuses: the one the scheduler ranks last."""
    return max(cycle, key=rank_key).task_id


def holder_ends_soon(elapsed_s: float, finished_s: Iterable[float], bound_s: float) -> bool:
    """Is the holder expected to end within the wait's bound?

    Expected remaining = the median duration of this run's succeeded attempts minus
    the holder's elapsed time; with no history yet, it is assumed to end soon.
    """
    durations = list(finished_s)
    if not durations:
        return True
    return statistics.median(durations) - elapsed_s <= bound_s


@dataclass
class WaitRoom:
    """The parked requests of one engine; the lease mirror is its only caller."""

    on_end: Callable[[Waiter, WaitOutcome], None] = lambda _w, _o: None
    waiters: dict[str, Waiter] = field(default_factory=dict)  # task id -> its parked request
    finished_s: list[float] = field(default_factory=list)  # durations of succeeded attempts
    _seq: int = 0

    def park(self, who: Contender, agent_id: str, keys: Iterable[str], tool: str) -> Waiter:
        """Queue the task's request (ending an earlier one of the same task)."""
        self.end(who.task_id, WaitOutcome.ENDED)
        self._seq += 1
        waiter = Waiter(who, agent_id, tuple(keys), tool, self._seq)
        self.waiters[who.task_id] = waiter
        return waiter

    def queue(self, key: str) -> list[Waiter]:
        """The waiters for `key` (or a key it excludes: a part of the file, the file of a part),
        first to be handed it first: priority desc, then arrival."""
        found = [w for w in self.waiters.values() if any(excludes(key, k) for k in w.keys)]
        return sorted(found, key=lambda w: (-w.who.priority, w.seq))

    def position(self, waiter: Waiter, path: str) -> int:
        """1 for the head of `path`'s queue."""
        return [w.seq for w in self.queue(path)].index(waiter.seq) + 1

    def graph(self, holders: Mapping[str, str]) -> dict[str, set[str]]:
        """Wait-for edges: each waiting task -> the tasks holding its keys or keys they exclude
        (`holders`: lease key -> task)."""
        index: KeyIndex[str] = KeyIndex()
        for key, task_id in holders.items():
            index.put(key, task_id)
        edges: dict[str, set[str]] = {}
        for w in self.waiters.values():
            held = {
                index.held[held_key]
                for k in w.keys
                for held_key in index.excluded_by(k)
                if index.held[held_key] != w.task_id
            }
            if held:
                edges[w.task_id] = held
        return edges

    def resolve(
        self, who: Contender, blocking: Iterable[str], holders: Mapping[str, str]
    ) -> tuple[bool, list[str]]:
        """May `who` park behind the tasks `blocking` it? And which waiters must give way.

        Each cycle the wait would close loses its worst-ranked task: `who` (do not
        park) or a parked waiter (returned, to be woken with `deadlock`).
        """
        graph = self.graph(holders)
        ranks = {t: w.who for t, w in self.waiters.items()} | {who.task_id: who}
        losers: list[str] = []
        while (cycle := find_cycle(graph, who.task_id, blocking)) is not None:
            loser = victim(ranks[t] for t in cycle)
            if loser == who.task_id:
                return False, losers
            losers.append(loser)
            graph.pop(loser, None)
        return True, losers

    def end(self, task_id: str, outcome: WaitOutcome) -> Waiter | None:
        """Unpark the task's request, if any, and tell `on_end` how it ended."""
        waiter = self.waiters.pop(task_id, None)
        if waiter is not None:
            self.on_end(waiter, outcome)
        return waiter

    def note_finished(self, duration_s: float, keep: int = 50) -> None:
        """A succeeded attempt's duration: the history `holder_ends_soon` reads."""
        self.finished_s = [*self.finished_s[-(keep - 1) :], duration_s]
