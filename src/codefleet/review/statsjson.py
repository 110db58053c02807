"""`FleetStats` as plain data: `codefleet stats --json`, `GET /stats`, the report's `stats` section.

One shape for all three, rounded to the millisecond (and the cost to the millionth
of a dollar). A file leased by part carries its parts beneath it (`parts`, each
row with its `part`, None for the file's whole-file key); a file leased whole has
`parts: []`, and every other key is as it was before parts existed.
"""

from __future__ import annotations

from typing import Any

from codefleet.review.collisionstats import (
    FileStats,
    FleetStats,
    LandingStats,
    LeaseWaitStats,
    TaskStats,
)
from codefleet.toolcalls.leasekeys import split_part_key

__all__ = ["stats_json"]


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def stats_json(stats: FleetStats) -> dict[str, Any]:
    """The figures as plain data (`codefleet stats --json`, the report's `stats` section)."""
    return {
        "fleet": _fleet_json(stats),
        "files": [_file_json(f) for f in stats.files],
        "resources": [
            {
                "name": r.name,
                "vetoes": r.vetoes,
                "tasks": list(r.tasks),
                "veto_lost_s": _r(r.veto_lost_s),
            }
            for r in stats.resources
        ],
        "agents": [
            {
                "agent": k.agent,
                "attempts": k.attempts,
                "vetoed": k.vetoed,
                "attempt_s": _r(k.attempt_s),
            }
            for k in stats.kinds
        ],
        "tasks": [_task_json(t) for t in stats.tasks],
        "landing": _landing_json(stats.landing),
        "stale_reads": [
            {"path": s.path, "reader": s.reader, "changed_by": s.changed_by, "count": s.count}
            for s in stats.stale_reads
        ],
        "lease_waits": [_wait_json(w) for w in stats.lease_waits],
    }


def _file_json(f: FileStats) -> dict[str, Any]:
    """A file's figures; `parts`: its parts' rows (each with `part`, None for the whole file)."""
    return {
        "path": f.path,
        "vetoes": f.vetoes,
        "tasks": list(f.tasks),
        "veto_lost_s": _r(f.veto_lost_s),
        "rollback_lost_s": _r(f.rollback_lost_s),
        "rollbacks": f.rollbacks,
        "parts": [{**_file_json(p), "part": split_part_key(p.path)[1]} for p in f.parts],
    }


def _wait_json(w: LeaseWaitStats) -> dict[str, Any]:
    """A file's waits; `parts` as in `_file_json`."""
    return {
        "path": w.path,
        "waits": w.waits,
        "outcomes": dict(w.outcomes),
        "waited_s": _r(w.waited_s),
        "kept_s": _r(w.kept_s),
        "kept_usd": round(w.kept_usd, 6),
        "parts": [{**_wait_json(p), "part": split_part_key(p.path)[1]} for p in w.parts],
    }


def _fleet_json(stats: FleetStats) -> dict[str, Any]:
    """The fleet's own figures."""
    return {
        "runners": stats.runners,
        "busy_mean": _r(stats.busy_mean),
        "parallelism": _r(stats.parallelism),
        "makespan_s": _r(stats.makespan_s),
        "critical_path": list(stats.critical_path),
        "critical_path_s": _r(stats.critical_s),
        "stretch": _r(stats.stretch),
        "attempt_s": _r(stats.attempt_s),
        "veto_lost_s": _r(stats.veto_lost_s),
        "rollback_lost_s": _r(stats.rollback_lost_s),
        "pauses": stats.pauses,
        "paused_s": _r(stats.paused_s),
        "cost_usd": round(stats.cost_usd, 6),
        "simulated": stats.simulated,
    }


def _task_json(t: TaskStats) -> dict[str, Any]:
    """One task's figures."""
    return {
        "id": t.id,
        "status": t.status,
        "attempts": t.attempts,
        "uncharged": t.uncharged,
        "vetoed": t.vetoed,
        "waiting_s": _r(t.waiting_s),
        "running_s": _r(t.running_s),
        "cost_usd": round(t.cost_usd, 6),
        "order": t.order,
        "landing_s": _r(t.landing_s),
    }


def _landing_json(landing: LandingStats | None) -> dict[str, Any] | None:
    if landing is None:
        return None
    return {
        "checks": landing.checks,
        "landed": landing.landed,
        "checks_per_landed": _r(landing.checks_per_landed),
        "waited_s": _r(landing.waited_s),
        "waited_max_s": _r(landing.waited_max_s),
        "breaks": landing.breaks,
        "reworked": landing.reworked,
        "halts": landing.halts,
    }
