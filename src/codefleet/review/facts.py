"""What happened in a run, derived from its event log: attempts, vetoes, rollbacks, timing.

Pure functions over a `RunRecord` (no I/O). Attempts are rebuilt from
`task_assigned` (start, runner) and the event that ended them
(`task_succeeded`, `task_requeued`, `task_failed`, `task_cancelled`); a veto
is a `lease_denied` with how long the holder had held the path and how long
the refused task then waited for its next attempt; a rollback is the
`file_restored` events of one failed attempt; a failed verify is a
`check_finished` of purpose `verify` that did not pass. The critical path is
the longest dependency chain weighted by each task's last attempt: the run's
length with unlimited runners and no retries.

With landing (issue 39), an attempt's runner is free at `landing_queued`: the
attempt ends there (outcome `landing`), and the event that settles the task
later (`task_succeeded` at landing, or `task_requeued` after
`integration_failed`) gives it its outcome without moving its end. The landing
facts themselves (`RunFacts.landing`) are `review.landinglog`'s, derived once here.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from codefleet.dag import longest_path
from codefleet.models import EventType, cost_simulated, from_iso
from codefleet.review.landinglog import LandingFacts, landing_of
from codefleet.review.runrecord import RunRecord

__all__ = [
    "Attempt",
    "LastRun",
    "Rollback",
    "RunFacts",
    "VerifyFailure",
    "Veto",
    "attempts_of",
    "critical_path",
    "run_facts",
    "since_start",
]

Row = dict[str, Any]
_ENDS: dict[str, str] = {
    EventType.TASK_SUCCEEDED: "succeeded",
    EventType.TASK_REQUEUED: "requeued",
    EventType.TASK_FAILED: "failed",
    EventType.TASK_CANCELLED: "cancelled",
}


@dataclass(slots=True)
class Attempt:
    task_id: str
    number: int
    runner: str
    start: datetime
    end: datetime | None = None
    outcome: str = "running"  # succeeded | failed | cancelled | running | landing | an error kind
    restored: list[str] = field(default_factory=list)
    cost_usd: float | None = None  # the ending event's own figure (task_succeeded has one)

    @property
    def seconds(self) -> float:
        return (self.end - self.start).total_seconds() if self.end else 0.0


@dataclass(frozen=True, slots=True)
class Veto:
    at: datetime
    path: str
    task_id: str
    runner: str
    holder_task_id: str
    holder_runner: str
    held_s: float | None  # how long the holder had held the path when the write was refused
    waited_s: float | None  # from the refusal to the refused task's next attempt
    resolved: bool  # the refused task succeeded in the end


@dataclass(frozen=True, slots=True)
class Rollback:
    task_id: str
    attempt: int
    reason: str
    restored: tuple[tuple[str, bool], ...]  # (path, existed before the attempt)


@dataclass(frozen=True, slots=True)
class VerifyFailure:
    task_id: str
    attempt: int
    check: str
    exit_code: int | None
    timed_out: bool
    output_tail: str


@dataclass(frozen=True, slots=True)
class RunFacts:
    record: RunRecord
    attempts: tuple[Attempt, ...]
    vetoes: tuple[Veto, ...]
    rollbacks: tuple[Rollback, ...]
    verify_failures: tuple[VerifyFailure, ...]
    wall_s: float
    makespan_s: float
    critical_path: tuple[str, ...]
    critical_s: float
    ok: bool | None  # the last run_finished's verdict; None when no run finished
    verify: Row | None  # the last run_finished's verify payload
    simulated: bool = False  # every fleet run said it had no real model: costs are priced
    landing: LandingFacts = field(default_factory=LandingFacts)
    runs: int = 0  # the `fleet_started` events: the runs on this database
    last_run: LastRun | None = None  # the last run's own part, when several ran


@dataclass(frozen=True, slots=True)
class LastRun:
    """The last run's own figures, apart from the database's (every run's) totals."""

    tasks: tuple[str, ...]  # the tasks with an event in it
    succeeded: int
    vetoes: int


def _at(event: Row) -> datetime:
    return from_iso(str(event["at"]))


def attempts_of(events: Iterable[Row]) -> list[Attempt]:
    """Every attempt, in the order they began, with its runner, span and outcome."""
    found: list[Attempt] = []
    open_: dict[str, Attempt] = {}
    landing: dict[str, Attempt] = {}  # ended at `landing_queued`, its outcome not yet known
    latest: dict[str, Attempt] = {}  # a failed attempt's files are restored after its end
    for e in events:
        kind, task = e["type"], e.get("task_id") or ""
        if kind == EventType.TASK_ASSIGNED:
            body = e["payload"]
            attempt = Attempt(
                task, int(body.get("attempt") or 0), str(body.get("agent_name") or "?"), _at(e)
            )
            open_[task] = latest[task] = attempt
            landing.pop(task, None)
            found.append(attempt)
        elif kind == EventType.FILE_RESTORED and task in latest:
            latest[task].restored.append(str(e["payload"].get("path")))
        elif kind == EventType.LANDING_QUEUED and task in open_:
            attempt = landing[task] = open_.pop(task)
            attempt.end, attempt.outcome = _at(e), "landing"
        elif kind in _ENDS and task in open_:
            attempt = open_.pop(task)
            attempt.end = _at(e)
            _settle(attempt, kind, e["payload"])
        elif kind in _ENDS and task in landing:
            _settle(landing.pop(task), kind, e["payload"])
        elif kind == EventType.REPAIR_STARTED and task in landing:  # its session repairs it
            landing.pop(task).outcome = "repaired"
    return found


def _settle(attempt: Attempt, kind: str, body: Row) -> None:
    """The outcome (and cost) an attempt's ending event gives it."""
    if body.get("cost_usd") is not None:
        attempt.cost_usd = float(body["cost_usd"])
    attempt.outcome = (
        str(body.get("error_kind") or _ENDS[kind])
        if kind != EventType.TASK_SUCCEEDED
        else "succeeded"
    )


def critical_path(tasks: Sequence[Row], seconds: dict[str, float]) -> tuple[list[str], float]:
    """The longest chain of dependencies by `seconds` per task: (task ids, total)."""
    deps = {t["id"]: list(t.get("depends_on") or []) for t in tasks}
    chain, total = longest_path(deps, lambda task_id: seconds.get(task_id, 0.0))
    return chain, total


def _vetoes(events: Sequence[Row], record: RunRecord) -> list[Veto]:
    held_since: dict[tuple[str, str], datetime] = {}
    next_start: dict[str, list[datetime]] = defaultdict(list)
    for e in events:
        if e["type"] == EventType.TASK_ASSIGNED:
            next_start[e["task_id"]].append(_at(e))
    status = {t["id"]: t["status"] for t in record.tasks}
    found = []
    for e in events:
        body = e["payload"]
        if e["type"] == EventType.LEASE_ACQUIRED:
            held_since.setdefault((str(e["task_id"]), str(body.get("path"))), _at(e))
        elif e["type"] == EventType.LEASE_RELEASED:
            held_since.pop((str(e["task_id"]), str(body.get("path"))), None)
        elif e["type"] == EventType.LEASE_DENIED:
            at, holder = _at(e), str(body.get("holder_task_id") or "?")
            since = held_since.get((holder, str(body.get("path"))))
            later = [s for s in next_start[e["task_id"]] if s > at]
            found.append(
                Veto(
                    at=at,
                    path=str(body.get("path")),
                    task_id=str(e["task_id"]),
                    runner=str(body.get("requester_name") or "?"),
                    holder_task_id=holder,
                    holder_runner=str(body.get("holder_agent_name") or "?"),
                    held_s=(at - since).total_seconds() if since else None,
                    waited_s=(later[0] - at).total_seconds() if later else None,
                    resolved=status.get(e["task_id"]) == "succeeded",
                )
            )
    return found


def _rollbacks(events: Sequence[Row], attempts: Sequence[Attempt]) -> list[Rollback]:
    existed: dict[tuple[str, str], bool] = {}
    for e in events:
        if e["type"] == EventType.FILE_RESTORED:
            existed[(str(e["task_id"]), str(e["payload"].get("path")))] = bool(
                e["payload"].get("existed")
            )
    return [
        Rollback(
            a.task_id,
            a.number,
            a.outcome,
            tuple((p, existed.get((a.task_id, p), True)) for p in a.restored),
        )
        for a in attempts
        if a.restored
    ]


def _verify_failures(events: Sequence[Row]) -> list[VerifyFailure]:
    found = []
    for e in events:
        body = e["payload"]
        if e["type"] != EventType.CHECK_FINISHED or body.get("purpose") != "verify":
            continue
        if body.get("passed"):
            continue
        found.append(
            VerifyFailure(
                task_id=str(e["task_id"]),
                attempt=int(body.get("attempt") or 0),
                check=str(body.get("name")),
                exit_code=body.get("exit_code"),
                timed_out=bool(body.get("timed_out")),
                output_tail=str(body.get("output_tail") or body.get("error") or ""),
            )
        )
    return found


def _span(events: Sequence[Row], starts: set[str], ends: set[str]) -> float:
    first = next((_at(e) for e in events if e["type"] in starts), None)
    last = next((_at(e) for e in reversed(events) if e["type"] in ends), None)
    return max(0.0, (last - first).total_seconds()) if first and last else 0.0


def _runs(events: Sequence[Row]) -> list[list[Row]]:
    """The events split at each `fleet_started`: those before any run, then each run's."""
    runs: list[list[Row]] = [[]]
    for event in events:
        if event["type"] == EventType.FLEET_STARTED:
            runs.append([])
        runs[-1].append(event)
    return runs


def _wall(events: Sequence[Row]) -> float:
    """The sum of the runs' spans: each `fleet_started` to the first `run_finished` after it
    (a run that died: to its last event before the next start). Time between runs on one
    database is not counted, nor events after a run (a runner going stale, a commit).
    With no `fleet_started` (runners started by hand): the first event to the last
    `run_finished`, else to the last event. The dashboard's `runWall` counts alike.
    """
    before, *runs = _runs(events)
    if not runs:
        kinds = {e["type"] for e in before}
        ends = {EventType.RUN_FINISHED} if EventType.RUN_FINISHED in kinds else kinds
        return _span(before, kinds, ends)
    total = 0.0
    for run in runs:
        finished = next((e for e in run if e["type"] == EventType.RUN_FINISHED), run[-1])
        total += max(0.0, (_at(finished) - _at(run[0])).total_seconds())
    return total


def _makespan(events: Sequence[Row]) -> float:
    """The sum over the runs of each one's first assignment to its last attempt's end: as
    `_wall`, the time between runs is not counted."""
    return sum(_span(run, {EventType.TASK_ASSIGNED}, set(_ENDS)) for run in _runs(events))


def run_facts(record: RunRecord) -> RunFacts:
    """Everything the report shows, derived from the record."""
    events = list(record.events)
    attempts = attempts_of(events)
    last = {a.task_id: a.seconds for a in attempts if a.end}
    chain, critical_s = critical_path(record.tasks, last)
    finished = [e for e in events if e["type"] == EventType.RUN_FINISHED]
    return RunFacts(
        record=record,
        attempts=tuple(attempts),
        vetoes=tuple(_vetoes(events, record)),
        rollbacks=tuple(_rollbacks(events, attempts)),
        verify_failures=tuple(_verify_failures(events)),
        wall_s=_wall(events),
        makespan_s=_makespan(events),
        critical_path=tuple(chain),
        critical_s=critical_s,
        ok=finished[-1]["payload"].get("ok") if finished else None,
        verify=finished[-1]["payload"].get("verify") if finished else None,
        simulated=_simulated(events),
        landing=landing_of(events),
        runs=sum(e["type"] == EventType.FLEET_STARTED for e in events),
        last_run=_last_run(events),
    )


def _last_run(events: Sequence[Row]) -> LastRun | None:
    """The events after the last `fleet_started`, when there were several runs."""
    runs = _runs(events)
    if len(runs) < 3:  # those before any run, then one run: its figures are the totals
        return None
    last = runs[-1]
    touched = dict.fromkeys(
        str(e["task_id"]) for e in last if e.get("task_id") and str(e["type"]).startswith("task_")
    )
    succeeded = {str(e["task_id"]) for e in last if e["type"] == EventType.TASK_SUCCEEDED}
    vetoes = sum(e["type"] == EventType.LEASE_DENIED for e in last)
    return LastRun(tuple(touched), len(succeeded), vetoes)


def _simulated(events: Iterable[Row]) -> bool:
    """Whether every fleet run on this server was simulated (`fleet_started.simulated`)."""
    return cost_simulated(e["payload"] for e in events if e["type"] == EventType.FLEET_STARTED)


def _origin(facts: RunFacts) -> datetime | None:
    """The run's time zero: the first `fleet_started`, else the first event."""
    events = facts.record.events
    first = next((e for e in events if e["type"] == EventType.FLEET_STARTED), None)
    first = first or (events[0] if events else None)
    return from_iso(str(first["at"])) if first else None


def since_start(facts: RunFacts, at: datetime) -> float:
    """Seconds from the run's time zero to `at` (the report's timeline and its "at" columns)."""
    origin = _origin(facts)
    return (at - origin).total_seconds() if origin else 0.0
