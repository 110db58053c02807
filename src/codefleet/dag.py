"""Pure algorithms over a task dependency graph: order, cycles, chains, width.

A graph is a mapping of task id to the ids it depends on (its parents).
Dependencies on ids that are not keys are ignored (tasks already on a
server, say). Every function here is pure and deterministic: ties break on
task id, so two runs over one graph give one answer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

__all__ = [
    "EXACT_WIDTH_LIMIT",
    "Deps",
    "chain_lengths",
    "children_of",
    "find_cycle",
    "longest_path",
    "max_antichain",
    "topological_order",
]

Deps = Mapping[str, Sequence[str]]
EXACT_WIDTH_LIMIT = 2000  # tasks; past it `max_antichain` answers a lower bound (the widest level)


def _parents(deps: Deps, task_id: str) -> list[str]:
    return sorted({p for p in deps[task_id] if p in deps})


def children_of(deps: Deps) -> dict[str, list[str]]:
    """Task id -> the ids that depend on it, sorted."""
    children: dict[str, list[str]] = {t: [] for t in deps}
    for child in sorted(deps):
        for parent in _parents(deps, child):
            children[parent].append(child)
    return children


def topological_order(deps: Deps) -> list[str] | None:
    """Parents before children, ties by id; None if the graph has a cycle."""
    waiting = {t: len(_parents(deps, t)) for t in deps}
    children = children_of(deps)
    ready = sorted(t for t, n in waiting.items() if n == 0)
    order: list[str] = []
    while ready:
        task_id = ready.pop(0)
        order.append(task_id)
        for child in children[task_id]:
            waiting[child] -= 1
            if waiting[child] == 0:
                ready.append(child)
        ready.sort()
    return order if len(order) == len(deps) else None


def find_cycle(deps: Deps) -> list[str] | None:
    """One dependency cycle as `[A, B, ..., A]` (A depends on B ...), or None.

    Iterative depth-first search from the smallest id, so the answer is
    deterministic and a deep chain cannot overflow the stack.
    """
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    for start in sorted(deps):
        if start in state:
            continue
        path: list[str] = [start]
        todo: list[list[str]] = [_parents(deps, start)[::-1]]
        state[start] = 1
        while path:
            if not todo[-1]:
                state[path.pop()] = 2
                todo.pop()
                continue
            nxt = todo[-1].pop()
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                todo.append(_parents(deps, nxt)[::-1])
    return None


def longest_path(deps: Deps, weight: Callable[[str], float]) -> tuple[list[str], float]:
    """The heaviest dependency chain (roots first) and its total weight.

    Among equally heavy chains the one with more tasks wins, then the one
    whose ids sort first. The graph must be acyclic.
    """
    order = topological_order(deps)
    if order is None:
        raise ValueError("the graph has a cycle")
    best: dict[str, tuple[float, int, str]] = {}  # id -> (weight, tasks, parent or "")
    for task_id in order:
        head = max(
            ((best[p][0], best[p][1], p) for p in _parents(deps, task_id)),
            key=lambda c: (c[0], c[1], _reverse_key(c[2])),
            default=(0.0, 0, ""),
        )
        best[task_id] = (head[0] + weight(task_id), head[1] + 1, head[2])
    if not best:
        return [], 0.0
    end = max(best, key=lambda t: (best[t][0], best[t][1], _reverse_key(t)))
    path = [end]
    while best[path[-1]][2]:
        path.append(best[path[-1]][2])
    return path[::-1], best[end][0]


def _reverse_key(task_id: str) -> tuple[int, ...]:
    """Sorts so that `max` prefers the smallest id."""
    return (*(-ord(c) for c in task_id), 1)


def chain_lengths(deps: Deps) -> dict[str, int]:
    """Each task's longest chain of dependents, counting itself (the scheduler's tie-break)."""
    order = topological_order(deps)
    if order is None:
        raise ValueError("the graph has a cycle")
    children = children_of(deps)
    chain: dict[str, int] = {}
    for task_id in reversed(order):
        chain[task_id] = 1 + max((chain[c] for c in children[task_id]), default=0)
    return chain


def max_antichain(deps: Deps) -> tuple[int, bool]:
    """The most tasks no dependency path connects, and whether the number is exact.

    Exact (Dilworth: tasks minus a maximum matching over reachability) up to
    `EXACT_WIDTH_LIMIT` tasks; past it, the size of the widest level, a lower bound.
    """
    order = topological_order(deps)
    if order is None:
        raise ValueError("the graph has a cycle")
    if len(order) > EXACT_WIDTH_LIMIT:
        return _widest_level(deps, order), False
    reach = _reachability(deps, order)
    match_of: dict[int, int] = {}  # right node -> left node
    for left in range(len(order)):
        _augment(left, reach, match_of, set())
    return len(order) - len(match_of), True


def _reachability(deps: Deps, order: list[str]) -> list[list[int]]:
    """For each task (by position in `order`), the positions of all its descendants."""
    position = {t: i for i, t in enumerate(order)}
    children = children_of(deps)
    below = [0] * len(order)
    for i in range(len(order) - 1, -1, -1):
        for child in children[order[i]]:
            j = position[child]
            below[i] |= below[j] | (1 << j)
    return [[j for j in range(len(order)) if bits >> j & 1] for bits in below]


def _augment(root: int, reach: list[list[int]], match_of: dict[int, int], seen: set[int]) -> bool:
    """Kuhn's augmenting path from `root`, iterative so long chains cannot overflow the stack."""
    lefts, cursor, via = [root], [0], list[int]()  # via[i]: the right node lefts[i] reached
    while lefts:
        options, k = reach[lefts[-1]], cursor[-1]
        while k < len(options) and options[k] in seen:
            k += 1
        if k == len(options):  # a dead end: back up one step
            lefts.pop()
            cursor.pop()
            if via:
                via.pop()
            continue
        cursor[-1] = k + 1
        right = options[k]
        seen.add(right)
        if right not in match_of:
            for left, taken in zip(lefts, [*via, right], strict=True):
                match_of[taken] = left
            return True
        via.append(right)
        lefts.append(match_of[right])
        cursor.append(0)
    return False


def _widest_level(deps: Deps, order: list[str]) -> int:
    level: dict[str, int] = {}
    for task_id in order:
        level[task_id] = 1 + max((level[p] for p in _parents(deps, task_id)), default=0)
    counts: dict[int, int] = {}
    for n in level.values():
        counts[n] = counts.get(n, 0) + 1
    return max(counts.values(), default=0)
