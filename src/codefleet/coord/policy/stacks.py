"""Stacks: a file passed on by a task waiting to land to its next writer.

A task waiting to land keeps its leases so nothing changes its files before its
check. A *stack* lets the next writer of such a file start now instead: the
whole-file lease moves to it, on top of the waiting task's change (its pre-image
is that change), and the waiting task stays *under* it on that file. The order
rule keeps it sound: the task on top finishes after the one under it, so it lands
after it, on a base that holds it. What lives here is the bookkeeping, pure: per
file, the tasks under its holder (bottom first) with the agent each held it for.

- a task under others on a file lands first: `landed` takes it off the bottom;
- the holder of a file that ends without landing hands the lease back down (`pop`);
- a task under others that is rolled back takes its files back from the top
  (`cut`): everything above it on them is unwound, its work built on what fails.

`may_stack` is the rule: only whole files, only from tasks waiting to land, only for a
fleet task in the shared tree (docs/decisions/0159-a-hot-file-is-stacked-on-a-task-waiting-to-land.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from codefleet.resources import is_resource_key
from codefleet.toolcalls.leasekeys import PART_SEPARATOR

__all__ = ["Stacks", "may_stack"]


def may_stack(held: Sequence[tuple[str, tuple[str, str]]], landing: Callable[[str], bool]) -> bool:
    """May a request refused by `held` ((key, (agent, holder task))) stack on its holders?
    Yes when every key is a whole file (no part, no resource) of a task waiting to land."""
    return bool(held) and all(
        PART_SEPARATOR not in key and not is_resource_key(key) and landing(holder)
        for key, (_, holder) in held
    )


@dataclass
class Stacks:
    """File -> the (task, agent) under its holder, bottom first; on the engine's thread."""

    under: dict[str, list[tuple[str, str]]] = field(default_factory=dict)

    def load(self, rows: Iterable[tuple[str, str, str]]) -> None:
        """(file, task, agent) of each task under a file, in the order they stacked."""
        self.under = {}
        for path, task_id, agent_id in rows:
            self.push(path, task_id, agent_id)

    def push(self, path: str, task_id: str, agent_id: str) -> None:
        """`task_id` (holding `path` for `agent_id`) goes under the file's next holder."""
        self.under.setdefault(path, []).append((task_id, agent_id))

    def pop(self, path: str) -> tuple[str, str] | None:
        """The task just under the holder of `path`, taken off: the lease goes back to it."""
        below = self.under.get(path)
        if not below:
            return None
        top = below.pop()
        if not below:
            del self.under[path]
        return top

    def files_under(self, task_id: str) -> list[str]:
        """The files `task_id` is under someone on."""
        return sorted(p for p, below in self.under.items() if any(t == task_id for t, _ in below))

    def above(self, task_id: str, path: str) -> str | None:
        """The task right above `task_id` on `path` (None: the holder is, or it is not under)."""
        tasks = [t for t, _ in self.under.get(path, ())]
        if task_id not in tasks:
            return None
        at = tasks.index(task_id)
        return tasks[at + 1] if at + 1 < len(tasks) else None

    def cut(self, task_id: str, path: str) -> tuple[str, list[str]]:
        """Take `task_id` and everything above it off `path`'s stack (it holds the file again):
        the agent it held the file for, and the tasks above it under the holder, bottom first."""
        below = self.under.get(path, [])
        tasks = [t for t, _ in below]
        at = tasks.index(task_id)
        agent_id = below[at][1]
        above = tasks[at + 1 :]
        del below[at:]
        if not below:
            self.under.pop(path, None)
        return agent_id, above

    def landed(self, task_id: str) -> None:
        """A task that landed is under nobody any more (it was at the bottom of its stacks)."""
        for path in self.files_under(task_id):
            below = self.under[path]
            below[:] = [(t, a) for t, a in below if t != task_id]
            if not below:
                del self.under[path]

    def bases(self, task_id: str, holder: Callable[[str], str | None]) -> set[str]:
        """The tasks `task_id` is stacked on, directly or not: their work is in its view.
        `holder(path)`: the task holding the file now."""
        found: set[str] = set()
        for path, below in self.under.items():
            tasks = [t for t, _ in below]
            top = holder(path)
            chain = [*tasks, top] if top is not None else tasks
            if task_id in chain:
                found.update(chain[: chain.index(task_id)])
        return found
