"""The events of an attempt's read-set validation, as its runner reports them.

A runner validates its attempt's reads at the end of the session
(`fleet.reconcile`) and says what it found with `POST /tasks/{id}/reads`:
each validation that found stale files is one `stale_read` event (`paths`:
path, who changed it, the hash read and the hash now), sent before the
reconcile turn it leads to; the turns' end is one `reconciled` event (rounds,
outcome, their cost), sent before the attempt's report. So the log reads in
the order it happened, and a session that could not take its turn still left
its `stale_read`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from codefleet.coord.storage.store import Store
from codefleet.models import EventType

__all__ = ["emit_read_events"]


def emit_read_events(
    store: Store,
    task_id: str,
    agent_id: str,
    attempt: int,
    stale: Sequence[Mapping[str, Any]],
    reconciled: Mapping[str, Any] | None,
) -> None:
    """`stale_read` when `stale` names files, `reconciled` when given (caller's transaction)."""
    if stale:
        store.emit(
            EventType.STALE_READ,
            task_id=task_id,
            agent_id=agent_id,
            attempt=attempt,
            paths=[dict(s) for s in stale],
        )
    if reconciled is not None:
        store.emit(
            EventType.RECONCILED,
            task_id=task_id,
            agent_id=agent_id,
            attempt=attempt,
            rounds=reconciled["rounds"],
            outcome=reconciled["outcome"],
            cost_usd=round(float(reconciled["cost_usd"]), 6),
        )
