"""The events of an attempt's read-set validation, from its completion report.

A runner validates its attempt's reads at the end of the session
(`fleet.reconcile`) and says what it found on the report: each validation
that found stale files is one `stale_read` event (`paths`: path, who changed
it, the hash read and the hash now), and the reconcile turns one `reconciled`
event (rounds, outcome, their cost). They are emitted in the transition that
applies the report, before its own events, so the log reads in the order it
happened; a fenced runner's report is never applied, so nothing is emitted.
"""

from __future__ import annotations

from codefleet.attempt import AttemptReport
from codefleet.coord.store import Store
from codefleet.models import EventType

__all__ = ["emit_read_events"]


def emit_read_events(store: Store, task_id: str, agent_id: str, report: AttemptReport) -> None:
    """`stale_read` per validation that found stale reads, then `reconciled` (caller's transaction)."""
    for found in report.stale_reads:
        store.emit(
            EventType.STALE_READ, task_id=task_id, agent_id=agent_id, attempt=report.attempt,
            paths=[s.to_wire() for s in found],
        )  # fmt: skip
    done = report.reconciled
    if done is not None:
        store.emit(
            EventType.RECONCILED, task_id=task_id, agent_id=agent_id, attempt=report.attempt,
            rounds=done.rounds, outcome=done.outcome, cost_usd=round(done.cost_usd, 6),
        )  # fmt: skip
