"""What the run's checks and stacks cost, and what reuse and stacking spared, for the summary.

Issue 53's promise is about one check per task and a hot file that keeps
moving, so the report says both in figures from the event log alone:

- `check_counts`: checks run in attempts, reused on the same content
  (`check_reused`, and a landing check that stands for a task's own pass:
  `reused_event`), left to the landing check (`check_deferred`) and run at
  landing, and the seconds the reused ones did not take (the duration of the
  passing run each reused);
- `stack_counts`: files taken over from a task waiting to land, attempts undone
  with a task that did not land, and the seconds of landing not waited for
  (from each take-over to the landing of the task it built on).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Final

from codefleet.models import EventType, from_iso
from codefleet.review.facts import RunFacts

__all__ = [
    "CHECK_KINDS",
    "check_counts",
    "checks_text",
    "not_waited_seconds",
    "reused_seconds",
    "stack_counts",
    "stacks_text",
]

Row = Mapping[str, Any]

CHECK_KINDS: Final = {
    EventType.CHECK_FINISHED: "run",
    EventType.CHECK_REUSED: "reused",
    EventType.CHECK_DEFERRED: "deferred",
    EventType.LANDING_CHECK_FINISHED: "landing",
}


def check_counts(facts: RunFacts) -> dict[str, float]:
    """The attempts' checks run, reused, left to landing; the landing's; the seconds reused."""
    events = facts.record.events
    counts = Counter(_check_kind(e) for e in events if e["type"] in CHECK_KINDS)
    spared: dict[str, float] = {kind: counts[kind] for kind in CHECK_KINDS.values()}
    spared["reused_s"] = round(reused_seconds(events), 3)
    return spared


def _check_kind(event: Row) -> str:
    """What a check event counts as; a landing check that names a task's pass is a reuse."""
    if _names_a_task_pass(event):
        return "reused"
    return CHECK_KINDS[event["type"]]


def _names_a_task_pass(event: Row) -> bool:
    body = event.get("payload") or {}
    return (
        event["type"] == EventType.LANDING_CHECK_FINISHED and body.get("reused_event") is not None
    )


def reused_seconds(events: Iterable[Row]) -> float:
    """The seconds the reused checks did not take: the duration of the run each reuse names
    (`reused_event`, an attempt's or a landing's), or, in a log from before reuses named it,
    the last passing run of that check in the same task and attempt."""
    took: dict[Any, float] = {}  # a passing run's event id -> its seconds
    last: dict[tuple[Any, Any, Any], float] = {}
    spared = 0.0
    for event in events:
        body = event.get("payload") or {}
        key = (event.get("task_id"), body.get("attempt"), body.get("name"))
        if event["type"] == EventType.CHECK_FINISHED and body.get("passed"):
            last[key] = took[event.get("id")] = int(body.get("duration_ms") or 0) / 1000
        elif event["type"] == EventType.CHECK_REUSED:
            named = body.get("reused_event")
            spared += took.get(named, 0.0) if named is not None else last.get(key, 0.0)
        elif _names_a_task_pass(event):
            spared += took.get(body["reused_event"], 0.0)
    return spared


def checks_text(counts: Mapping[str, float]) -> str | None:
    """`5 run · 2 reused (passed before on the same content: 4.1 s not run) · …`, or None."""
    if not any(counts.get(kind) for kind in CHECK_KINDS.values()):
        return None
    parts = [f"{counts['run']} run"]
    if counts["reused"]:
        took = counts.get("reused_s")
        said = f": {took:.1f} s not run" if took else ""
        parts.append(f"{counts['reused']} reused (passed before on the same content{said})")
    if counts["deferred"]:
        parts.append(f"{counts['deferred']} left to the landing check")
    if counts["landing"]:
        parts.append(f"{counts['landing']} at landing")
    return " · ".join(parts)


def stack_counts(facts: RunFacts) -> dict[str, float]:
    """Files taken over from a task waiting to land, attempts undone with what they built on,
    and the seconds of landing the take-overs did not wait for."""
    events = facts.record.events
    return {
        "stacked": sum(
            1 for e in events if e["type"] == EventType.LEASE_ACQUIRED and _stacked_on(e)
        ),
        "undone": sum(1 for e in events if e["type"] == EventType.STACK_UNWOUND),
        "not_waited_s": round(not_waited_seconds(events), 3),
    }


def not_waited_seconds(events: Iterable[Row]) -> float:
    """From each take-over to the landing of the task it built on; nothing for a take-over
    undone with it (`stack_unwound`) before it landed."""
    pending: dict[tuple[str, str], datetime] = {}  # (task on top, task under it) -> taken at
    spared = 0.0
    for event in events:
        kind, task = event["type"], str(event.get("task_id"))
        if kind == EventType.LEASE_ACQUIRED and (under := _stacked_on(event)):
            pending.setdefault((task, str(under)), from_iso(str(event["at"])))
        elif kind == EventType.STACK_UNWOUND:
            under = (event.get("payload") or {}).get("under_task_id")
            pending.pop((task, str(under)), None)
        elif kind == EventType.LANDED:
            for top, under in [k for k in pending if k[1] == task]:
                taken = pending.pop((top, under))
                spared += max(0.0, (from_iso(str(event["at"])) - taken).total_seconds())
    return spared


def _stacked_on(event: Row) -> Any:
    return (event.get("payload") or {}).get("stacked_on")


def stacks_text(counts: Mapping[str, float]) -> str | None:
    """`4 file(s) taken over … (no wait for their landing: 9.2 s not waited) · 1 … undone`."""
    if not counts["stacked"]:
        return None
    waited = counts.get("not_waited_s")
    said = f": {waited:.1f} s not waited" if waited else ""
    text = f"{counts['stacked']} file(s) taken over from tasks waiting to land (no wait for their landing{said})"
    if counts["undone"]:
        text += f" · {counts['undone']} attempt(s) undone with a task that did not land"
    return text
