"""The engine as the read routes see it: one narrow surface over its parts.

`server.reads` shapes the wire answers; this module is the only reader of the
engine's inner attributes (its store, live index, agent registry, lease
mirror, restores, limits), so the engine's layout can change behind it and a
rebase touches this file alone. Nothing here changes state.

Two kinds of read:

- live reads run on the event loop beside the single writer and see its
  memory; each is bounded by the live fleet (agents, leases) or by one task;
- `projection()` keeps the reads that grow with the run (every task, every
  denial) encoded, fed by the store's commits and refreshed off the loop on a
  read snapshot (docs/decisions.md, "Reads are projections").
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from codefleet.coord.agents import AgentState
from codefleet.coord.projection import Projection
from codefleet.coord.store import Row, Store
from codefleet.models import TaskStatus

if TYPE_CHECKING:
    from codefleet.coord.engine import Engine

__all__ = ["EngineReads"]


class EngineReads:
    """Read-only access to one engine's record and memory."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    # -- the record, off the loop ------------------------------------------------------

    def projection(self) -> Projection:
        """The store's one projection: every commit it makes from now on feeds it."""
        store = self._engine.store
        if store.on_committed is not None:
            raise RuntimeError("the store already feeds a projection")
        projection = Projection(store.path, self.parents)
        store.on_committed = projection.committed
        return projection

    # -- the record, on the loop ---------------------------------------------------------

    @property
    def store(self) -> Store:
        """The server's own connection: for small reads on the event loop only."""
        return self._engine.store

    def require_task(self, task_id: str) -> None:
        self._engine.require_task(task_id)

    def now(self) -> datetime:
        """The engine's time: what every read derives at (the wall clock, but in tests)."""
        return self._engine.clock()

    @property
    def workdir(self) -> str:
        return str(self._engine.tree.root)

    # -- the live index ----------------------------------------------------------------

    def parents(self, task_id: str) -> list[str]:
        return list(self._engine.tasks.index.parents.get(task_id, ()))

    def children(self, task_id: str) -> list[str]:
        return list(self._engine.tasks.index.children.get(task_id, ()))

    def status(self, task_id: str) -> TaskStatus | None:
        return self._engine.tasks.index.status.get(task_id)

    def live_count(self) -> int:
        return len(self._engine.tasks.index.live)

    def in_flight_count(self) -> int:
        return len(self._engine.tasks.index.in_flight)

    # -- agents, holders, restores, limits ------------------------------------------------

    def live_agent(self, agent_id: str) -> AgentState | None:
        return self._engine.agents.get(agent_id)

    def deaf_seconds(self) -> float:
        return self._engine.deaf_seconds()

    def interactive_agents(self) -> list[Row]:
        return self._engine.interactive.agent_rows()

    def holder(self, agent_id: str) -> tuple[str | None, str]:
        """(name, kind) of a lease holder: a runner's task, or a person's interactive session."""
        return self._engine.holder(agent_id)

    def restoring(self, task_id: str) -> dict[str, str | None]:
        """Paths of the task whose ended attempt is not yet put back, with any restore error."""
        return dict(self._engine.restoring.get(task_id, {}))

    def limits_view(self, now: datetime) -> dict[str, Any]:
        return self._engine.limits.view(now)

    def budget(self) -> dict[str, Any]:
        return self._engine.limits.budget_json()
