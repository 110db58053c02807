"""Collision analytics: where a run's time and money went, from its event log.

`fleet_stats(facts)` is pure: the `RunFacts` the run report is built from (its
attempts, vetoes, rollbacks, makespan and critical path, all derived from the
events `review.fetch.fetch_record` read through the one client) in, one frozen
`FleetStats` out. Three views:

- per resource (a veto on a resource's lease key, `/resource:db`): how often
  a task was refused it, the tasks involved and the attempt time lost, apart
  from the files;
- per file: how often a write to it was refused, which tasks were involved
  (the refused and the holders), the attempt time lost to those vetoes (each
  vetoed attempt, whole: its edits were undone), and the attempt time lost to
  rollbacks of other failed attempts that had edited it (an attempt that
  restored several files counts in each file, once in the fleet's total); a
  file leased by part (`api.py::handle`) counts its parts and its whole-file
  key together, and lists each beneath it (`FileStats.parts`), so a hub
  module's total and its hot part are both seen;
- per task: attempts (and how many a usage limit ended, not charged), the
  time it waited (ready but not running) and ran, its cost;
- per agent kind (claude, codex): attempts, vetoed attempts and attempt time of
  the runners driving it (a runner's kind is the one it registered with);
- per file, the writes that waited for it instead of a veto (`lease_waited`),
  its parts beneath it as for vetoes: how they ended, the time spent waiting, and the attempt time a wait kept
  (the attempt's elapsed time when it parked, for each wait that ended with
  the lease: what the veto-and-rerun alternative would have thrown away), and
  its estimated cost (the attempt's cost pro rata to that elapsed time);
- landing (issue 39, when the run landed its tasks): landing checks run, checks per
  landed task, the time tasks waited to land (`landing_queued` to `landed`), the
  integration breaks and how many were reworked and landed, the halts; per task,
  its landing order and its time waiting to land (not counted as waiting to run);
- the fleet: achieved parallelism (attempt time over the makespan: the mean
  number of busy runners) against the runners it had, and the makespan
  against the critical path.

`review.statsjson` turns the figures into plain data. Definitions and their limits: docs/decisions/0057-collision-analytics.md, "Collision analytics".
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from codefleet.models import EventType, from_iso
from codefleet.resources import is_resource_key, resource_name
from codefleet.review.facts import Attempt, RunFacts, Veto
from codefleet.review.landinglog import LandingFacts
from codefleet.toolcalls.leasekeys import file_of, split_part_key

__all__ = [
    "FileStats",
    "FleetStats",
    "KindStats",
    "LandingStats",
    "LeaseWaitStats",
    "ResourceStats",
    "StaleReadStats",
    "TaskStats",
    "fleet_stats",
    "lease_wait_stats",
    "part_row_label",
    "stale_read_stats",
]

Row = dict[str, Any]
_TERMINAL = {
    EventType.TASK_SUCCEEDED,
    EventType.TASK_FAILED,
    EventType.TASK_CANCELLED,
    EventType.TASK_BLOCKED_UPSTREAM,
}


@dataclass(frozen=True, slots=True)
class FileStats:
    """A file's contention; one leased by part has its parts (and its whole key) in `parts`."""

    path: str  # a file; in `parts`, a part's lease key (`api.py::handle`) or the file's own
    vetoes: int  # of a file leased by part: its parts' and its whole key's together
    tasks: tuple[str, ...]  # refused tasks and holders, sorted
    veto_lost_s: float  # the vetoed attempts' time (each attempt once per file)
    rollback_lost_s: float  # other failed attempts whose edits to this file were undone
    rollbacks: int  # a rollback puts a file back: counted on the file, never on a part
    parts: tuple[FileStats, ...] = ()  # most contested first; () for a file leased whole


@dataclass(frozen=True, slots=True)
class ResourceStats:
    """How often a task was refused resource `name` (`db`), and what those vetoes cost."""

    name: str
    vetoes: int
    tasks: tuple[str, ...]  # refused tasks and holders, sorted
    veto_lost_s: float  # the vetoed attempts' time


@dataclass(frozen=True, slots=True)
class StaleReadStats:
    """How often `reader`'s read of `path` went stale because `changed_by` changed it."""

    path: str
    reader: str
    changed_by: str  # a task id, "a person" or "outside the lock"
    count: int


@dataclass(frozen=True, slots=True)
class LeaseWaitStats:
    """The writes that waited for `path` instead of a veto, and what the waits kept."""

    path: str  # a file; in `parts`, a part's lease key or the file's own
    waits: int  # one write's wait for several parts of the file counts once for the file
    outcomes: tuple[tuple[str, int], ...]  # (outcome, count), by outcome
    waited_s: float
    kept_s: float  # attempt time before each wait that ended with the lease
    kept_usd: float = 0.0  # that time's share of its attempt's cost (an estimate)
    parts: tuple[LeaseWaitStats, ...] = ()  # most waited first; () for a file leased whole


def part_row_label(key: str) -> str:
    """A row beneath its file: `  ::handle` for a part's key, `  (whole file)` for the file's."""
    name = split_part_key(key)[1]
    return "  (whole file)" if name is None else f"  ::{name}"


@dataclass(frozen=True, slots=True)
class TaskStats:
    id: str
    status: str
    attempts: int
    uncharged: int  # attempts a usage limit ended (not charged against max_attempts)
    vetoed: int
    waiting_s: float  # ready (dependencies met, inside the run) but not running
    running_s: float  # the sum of its attempts
    cost_usd: float
    order: int | None = None  # its landing order number (a run before landing: None)
    landing_s: float = 0.0  # waiting to land, every attempt's wait


@dataclass(frozen=True, slots=True)
class KindStats:
    agent: str  # the agent kind its runners drive
    attempts: int
    vetoed: int
    attempt_s: float


@dataclass(frozen=True, slots=True)
class LandingStats:
    """What landing cost the run: its checks, the waits to land, the breaks and halts."""

    checks: int  # landing checks that ran to a verdict
    landed: int
    checks_per_landed: float | None
    waited_s: float  # landing_queued -> landed, summed over the landed tasks
    waited_max_s: float
    breaks: int  # integration_failed
    reworked: int  # of those, the tasks that landed on a later attempt
    halts: int


def landing_stats(landing: LandingFacts) -> LandingStats | None:
    """The landing figures, or None for a run that landed nothing (a run before landing)."""
    if not landing.seen:
        return None
    waits = [x.waited_s for x in landing.landed if x.waited_s is not None]
    return LandingStats(
        checks=sum(c.verdict is not None for c in landing.checks),
        landed=len(landing.orders),
        checks_per_landed=landing.checks_per_landed,
        waited_s=sum(waits),
        waited_max_s=max(waits, default=0.0),
        breaks=len(landing.breaks),
        reworked=sum(b.reworked for b in landing.breaks),
        halts=len(landing.halts),
    )


@dataclass(frozen=True, slots=True)
class FleetStats:
    runners: int
    busy_mean: float  # attempt time / makespan: the mean number of busy runners
    makespan_s: float
    critical_s: float
    critical_path: tuple[str, ...]
    attempt_s: float
    veto_lost_s: float
    rollback_lost_s: float
    pauses: int
    paused_s: float
    cost_usd: float
    files: tuple[FileStats, ...]
    tasks: tuple[TaskStats, ...]
    stale_reads: tuple[StaleReadStats, ...] = ()
    lease_waits: tuple[LeaseWaitStats, ...] = ()
    simulated: bool = False  # no real model ran: `cost_usd` is priced, not spent
    kinds: tuple[KindStats, ...] = ()
    resources: tuple[ResourceStats, ...] = ()
    landing: LandingStats | None = None

    @property
    def parallelism(self) -> float:
        """Achieved parallelism as a share of the runners (1.0: every runner always busy)."""
        return self.busy_mean / self.runners if self.runners else 0.0

    @property
    def stretch(self) -> float | None:
        """Makespan over the critical path (1.0: as fast as the dependencies allow)."""
        return self.makespan_s / self.critical_s if self.critical_s else None


def _at(event: Row) -> datetime:
    return from_iso(str(event["at"]))


def _attempt_at(attempts: Sequence[Attempt], task_id: str, at: datetime) -> Attempt | None:
    """The attempt of `task_id` under way at `at` (a veto ends the attempt it refused)."""
    for a in attempts:
        if a.task_id == task_id and a.start <= at and (a.end is None or at <= a.end):
            return a
    return None


def _vetoed_attempts(facts: RunFacts) -> dict[int, tuple[Attempt, set[str]]]:
    """Each attempt a veto ended (by identity), with the paths it was refused."""
    found: dict[int, tuple[Attempt, set[str]]] = {}
    for v in facts.vetoes:
        attempt = _attempt_at(facts.attempts, v.task_id, v.at)
        if attempt is not None:
            found.setdefault(id(attempt), (attempt, set()))[1].add(v.path)
    return found


def _lost(facts: RunFacts) -> tuple[float, float]:
    """Attempt time lost to vetoes and to other rollbacks, each attempt counted once."""
    vetoed = _vetoed_attempts(facts)
    rolled = [a for a in facts.attempts if a.restored and id(a) not in vetoed]
    return sum(a.seconds for a, _ in vetoed.values()), sum(a.seconds for a in rolled)


def _vetoes_by_key(facts: RunFacts) -> tuple[dict[str, list[Veto]], dict[str, float]]:
    """The vetoes per lease key (a path or a resource's key), and the attempt time each cost."""
    vetoed: dict[str, list[Veto]] = defaultdict(list)
    for v in facts.vetoes:
        vetoed[v.path].append(v)
    veto_lost: dict[str, float] = defaultdict(float)
    for attempt, keys in _vetoed_attempts(facts).values():
        for key in keys:
            veto_lost[key] += attempt.seconds
    return vetoed, veto_lost


def _involved(vetoes: list[Veto]) -> tuple[str, ...]:
    return tuple(sorted({v.task_id for v in vetoes} | {v.holder_task_id for v in vetoes}))


def _resources(facts: RunFacts) -> list[ResourceStats]:
    """Per resource, the vetoes on it, most refused first."""
    vetoed, veto_lost = _vetoes_by_key(facts)
    found = [
        ResourceStats(resource_name(key), len(vetoes), _involved(vetoes), veto_lost[key])
        for key, vetoes in vetoed.items()
        if is_resource_key(key)
    ]
    return sorted(found, key=lambda r: (-r.vetoes, -r.veto_lost_s, r.name))


def _files(facts: RunFacts) -> list[FileStats]:
    """Per file, its vetoes (of its whole key and of its parts) and rollbacks, most refused first."""
    vetoed, veto_lost = _vetoes_by_key(facts)
    for key in [k for k in vetoed if is_resource_key(k)]:  # counted in `_resources`
        del vetoed[key]
    veto_attempts = _vetoed_attempts(facts)
    rolled: dict[str, list[Attempt]] = defaultdict(list)
    for a in facts.attempts:
        if a.restored and id(a) not in veto_attempts:
            for path in set(a.restored):
                rolled[path].append(a)
    keys_of: dict[str, list[str]] = defaultdict(list)
    for key in vetoed:
        keys_of[file_of(key)].append(key)
    found = []
    for path in sorted(set(keys_of) | set(rolled)):
        keys = keys_of[path]
        refusals = [v for key in keys for v in vetoed[key]]
        parts = [_key_row(key, vetoed[key], veto_lost[key]) for key in keys]
        found.append(
            FileStats(
                path=path,
                vetoes=len(refusals),
                tasks=_involved(refusals),
                veto_lost_s=sum(
                    a.seconds
                    for a, refused in veto_attempts.values()
                    if any(file_of(key) == path for key in refused)
                ),
                rollback_lost_s=sum(a.seconds for a in rolled[path]),
                rollbacks=len(rolled[path]),
                parts=tuple(sorted(parts, key=_most_contested)) if keys != [path] else (),
            )
        )
    return sorted(found, key=_most_contested)


def _key_row(key: str, vetoes: list[Veto], lost_s: float) -> FileStats:
    """One lease key's vetoes, as a row beneath its file (rollbacks are the file's)."""
    return FileStats(key, len(vetoes), _involved(vetoes), lost_s, 0.0, 0)


def _most_contested(f: FileStats) -> tuple[int, float, str]:
    return (-f.vetoes, -(f.veto_lost_s + f.rollback_lost_s), f.path)


def _origin(events: Sequence[Row]) -> datetime | None:
    first = next((e for e in events if e["type"] == EventType.FLEET_STARTED), None)
    first = first or (events[0] if events else None)
    return _at(first) if first else None


def _tasks(facts: RunFacts) -> list[TaskStats]:
    events = facts.record.events
    origin = _origin(events)
    last = _at(events[-1]) if events else None
    ready: dict[str, datetime] = {}
    ended: dict[str, datetime] = {}
    for e in events:
        task = e.get("task_id")
        if not task:
            continue
        if e["type"] in (EventType.TASK_CREATED, EventType.TASK_UNBLOCKED):
            ready[task] = _at(e)
        elif e["type"] in _TERMINAL:
            ended[task] = _at(e)
    found = []
    for t in facts.record.tasks:
        mine = [a for a in facts.attempts if a.task_id == t["id"]]
        running = sum(a.seconds for a in mine)
        landing = facts.landing.waited_s(t["id"])
        start = max(filter(None, (ready.get(t["id"]), origin)), default=None)
        end = ended.get(t["id"], last)
        span = (end - start).total_seconds() if start and end and end > start else 0.0
        found.append(
            TaskStats(
                id=t["id"],
                status=str(t["status"]),
                attempts=len(mine),
                uncharged=int(t.get("uncharged_attempts") or 0),
                vetoed=sum(v.task_id == t["id"] for v in facts.vetoes),
                waiting_s=max(0.0, span - running - landing) if mine else span,
                running_s=running,
                cost_usd=float(t.get("cost_usd") or 0.0),
                order=facts.landing.order_of(t["id"]),
                landing_s=landing,
            )
        )
    return found


def _runners(facts: RunFacts) -> int:
    declared = [
        int(e["payload"].get("runners") or 0)
        for e in facts.record.events
        if e["type"] == EventType.FLEET_STARTED
    ]
    lanes = len({a.runner for a in facts.attempts})
    return max([*declared, lanes], default=0)


def _pauses(events: Sequence[Row]) -> tuple[int, float]:
    paused = [e for e in events if e["type"] == EventType.FLEET_RESUMED]
    return (
        sum(
            e["type"] == EventType.FLEET_PAUSED and e["payload"].get("change") == "started"
            for e in events
        ),
        sum(float(e["payload"].get("paused_s") or 0.0) for e in paused),
    )


def stale_read_stats(events: Sequence[Row]) -> list[StaleReadStats]:
    """Stale reads per (file, reader, changer), most frequent first: files to serialize."""
    counts: Counter[tuple[str, str, str]] = Counter()
    for e in events:
        if e["type"] != EventType.STALE_READ:
            continue
        for item in e["payload"].get("paths") or ():
            for who in item.get("changed_by") or ():
                counts[(str(item["path"]), str(e.get("task_id")), str(who))] += 1
    return [
        StaleReadStats(path, reader, who, n)
        for (path, reader, who), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    ]


def lease_wait_stats(facts: RunFacts) -> list[LeaseWaitStats]:
    """Per file, the writes that waited for it (`lease_waited`), its parts beneath it, most
    waited first."""
    rows: dict[str, list[Row]] = defaultdict(list)
    for e in facts.record.events:
        if e["type"] == EventType.LEASE_WAITED:
            rows[str(e["payload"]["path"])].append(e)
    keys_of: dict[str, list[str]] = defaultdict(list)
    for key in rows:
        keys_of[file_of(key)].append(key)
    costs = _attempt_costs(facts)
    found = []
    for path, keys in keys_of.items():
        # One write's wait for several parts is one event per key, all in one transaction.
        waits = {(e.get("task_id"), e["at"]): e for key in keys for e in rows[key]}
        parts = [_waits_of(key, rows[key], facts.attempts, costs) for key in keys]
        total = _waits_of(path, list(waits.values()), facts.attempts, costs)
        if keys != [path]:
            total = replace(total, parts=tuple(sorted(parts, key=lambda w: (-w.waited_s, w.path))))
        found.append(total)
    return sorted(found, key=lambda w: (-w.waited_s, w.path))


def _attempt_costs(facts: RunFacts) -> dict[int, float]:
    """Each attempt's cost (by identity): its ending event's, else its task's over its attempts."""
    per_task = Counter(a.task_id for a in facts.attempts)
    task_cost = {str(t["id"]): float(t.get("cost_usd") or 0.0) for t in facts.record.tasks}
    return {
        id(a): a.cost_usd
        if a.cost_usd is not None
        else task_cost.get(a.task_id, 0.0) / per_task[a.task_id]
        for a in facts.attempts
    }


def _waits_of(
    path: str, events: list[Row], attempts: Sequence[Attempt], costs: dict[int, float]
) -> LeaseWaitStats:
    outcomes = Counter(str(e["payload"]["outcome"]) for e in events)
    kept = kept_usd = 0.0
    for e in events:
        if e["payload"]["outcome"] not in ("granted", "changed"):
            continue
        parked = _at(e).timestamp() - float(e["payload"]["waited_s"])
        attempt = _attempt_at(attempts, str(e.get("task_id")), _at(e))
        if attempt is None:
            continue
        elapsed = max(0.0, parked - attempt.start.timestamp())
        kept += elapsed
        if attempt.seconds > 0:  # an attempt still under way has no cost yet
            kept_usd += costs[id(attempt)] * min(1.0, elapsed / attempt.seconds)
    return LeaseWaitStats(
        path,
        len(events),
        tuple(sorted(outcomes.items())),
        sum(float(e["payload"]["waited_s"]) for e in events),
        kept,
        kept_usd,
    )


def fleet_stats(facts: RunFacts) -> FleetStats:
    """Per file, per task and fleet-wide figures of the run `facts` describes."""
    files = _files(facts)
    veto_lost, rollback_lost = _lost(facts)
    attempt_s = sum(a.seconds for a in facts.attempts)
    pauses, paused_s = _pauses(facts.record.events)
    return FleetStats(
        runners=_runners(facts),
        busy_mean=attempt_s / facts.makespan_s if facts.makespan_s else 0.0,
        makespan_s=facts.makespan_s,
        critical_s=facts.critical_s,
        critical_path=facts.critical_path,
        attempt_s=attempt_s,
        veto_lost_s=veto_lost,
        rollback_lost_s=rollback_lost,
        pauses=pauses,
        paused_s=paused_s,
        cost_usd=sum(float(t.get("cost_usd") or 0.0) for t in facts.record.tasks),
        simulated=facts.simulated,
        files=tuple(files),
        tasks=tuple(_tasks(facts)),
        stale_reads=tuple(stale_read_stats(facts.record.events)),
        kinds=tuple(_kinds(facts)),
        lease_waits=tuple(lease_wait_stats(facts)),
        resources=tuple(_resources(facts)),
        landing=landing_stats(facts.landing),
    )


def _kinds(facts: RunFacts) -> list[KindStats]:
    """Attempts grouped by the agent kind of the runner that made them."""
    kind_of = {str(a.get("name")): str(a.get("agent") or "claude") for a in facts.record.agents}
    groups: dict[str, list[Attempt]] = defaultdict(list)
    for attempt in facts.attempts:
        groups[kind_of.get(attempt.runner, "claude")].append(attempt)
    return [
        KindStats(
            kind,
            len(made),
            sum(1 for a in made if a.outcome == "veto"),
            sum(a.seconds for a in made),
        )
        for kind, made in sorted(groups.items())
    ]
