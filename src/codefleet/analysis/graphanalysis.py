"""What makes a task graph run well here, measured before a cent is spent.

`analyse(tasks, runners)` is pure: typed tasks in (canonical scopes, as
the server would store them), one frozen `GraphAnalysis` out. It reports

- the critical path: the longest dependency chain, in tasks, and in
  estimated minutes when every task carries `estimate_min`;
- the maximum width: the most tasks no dependency path connects (Dilworth),
  an upper bound on what can ever run at once;
- the predicted parallelism on N runners, by playing the graph through the
  real scheduler policy (`simulate`);
- overlap pairs: tasks whose declared scopes exclude each other (a file and
  any part of it do, two different parts of one file do not) and no
  dependency path between them, which the scheduler never runs together;
- hotspots: files in three or more scopes, and named resources in two or
  more tasks (a resource is a lease key like a path, `resources`: tasks
  sharing one overlap and are serialized like tasks sharing a file);
- findings: errors (the graph would be refused or cannot run) and warnings.

`graph check`, `plan` and any other view of a graph use this one function;
the path facts that need the disk come from `scopes` and arrive as findings.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from codefleet.analysis.simulate import SimTask, simulate
from codefleet.dag import longest_path, max_antichain
from codefleet.resources import is_resource_key
from codefleet.toolcalls.leasekeys import excludes, file_of

__all__ = [
    "HOTSPOT_SCOPES",
    "Ancestry",
    "CriticalPath",
    "Finding",
    "GraphAnalysis",
    "Hotspot",
    "Overlap",
    "Parallelism",
    "PlannedTask",
    "analyse",
]

HOTSPOT_SCOPES = 3  # a file in this many declared scopes is a hotspot
RESOURCE_HOTSPOT = 2  # a resource is strict: two tasks naming it already run one at a time

Severity = Literal["error", "warning"]


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem found in a graph: `code` is stable, `message` is for a person."""

    severity: Severity
    code: str
    message: str
    task_id: str | None = None
    path: str | None = None


@dataclass(frozen=True, slots=True)
class PlannedTask:
    """A task as the analysis sees it; `file_scope` holds canonical paths."""

    id: str
    priority: int = 3
    file_scope: tuple[str, ...] = ()
    depends_on: tuple[str, ...] = ()
    estimate_min: float | None = None  # a guess, or (in a run report) the time it really took


@dataclass(frozen=True, slots=True)
class CriticalPath:
    task_ids: tuple[str, ...]
    minutes: float | None  # None unless every task on the graph carries estimate_min

    @property
    def length(self) -> int:
        return len(self.task_ids)


@dataclass(frozen=True, slots=True)
class Overlap:
    task_ids: tuple[str, str]
    paths: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Hotspot:
    path: str
    task_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Parallelism:
    """The simulated run on `runners` runners; times in minutes when `estimated`, else tasks."""

    runners: int
    predicted: float  # busy runners on average
    makespan: float
    total_work: float
    peak: int
    estimated: bool


@dataclass(frozen=True, slots=True)
class GraphAnalysis:
    tasks: int
    critical_path: CriticalPath
    critical_path_minutes: CriticalPath | None  # the longest chain by minutes (may differ)
    max_width: int
    width_exact: bool
    parallelism: Parallelism
    overlaps: tuple[Overlap, ...]
    hotspots: tuple[Hotspot, ...]
    findings: tuple[Finding, ...]
    succeeded: tuple[str, ...] = ()  # tasks done on the tree's server: left out of overlaps

    @property
    def errors(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity == "error")

    @property
    def warnings(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity == "warning")

    @property
    def ok(self) -> bool:
        return not self.errors

    def to_json(self) -> dict[str, Any]:
        """The analysis as plain JSON data (the `graph check --json` shape)."""
        return {
            "ok": self.ok,
            "tasks": self.tasks,
            "critical_path": _path_json(self.critical_path),
            "critical_path_minutes": _path_json(self.critical_path_minutes),
            "max_width": self.max_width,
            "width_exact": self.width_exact,
            "parallelism": {
                "runners": self.parallelism.runners,
                "predicted": round(self.parallelism.predicted, 2),
                "makespan": self.parallelism.makespan,
                "total_work": self.parallelism.total_work,
                "peak": self.parallelism.peak,
                "unit": "minutes" if self.parallelism.estimated else "tasks",
            },
            "overlaps": [
                {"tasks": list(o.task_ids), "paths": list(o.paths)} for o in self.overlaps
            ],
            "hotspots": [{"path": h.path, "tasks": list(h.task_ids)} for h in self.hotspots],
            "succeeded": list(self.succeeded),
            "errors": [_finding_json(f) for f in self.errors],
            "warnings": [_finding_json(f) for f in self.warnings],
        }


def _path_json(path: CriticalPath | None) -> dict[str, Any] | None:
    if path is None:
        return None
    return {"tasks": list(path.task_ids), "length": path.length, "minutes": path.minutes}


def _finding_json(finding: Finding) -> dict[str, Any]:
    return {
        "code": finding.code,
        "message": finding.message,
        "task": finding.task_id,
        "path": finding.path,
    }


def analyse(
    tasks: Sequence[PlannedTask], runners: int = 3, findings: Iterable[Finding] = ()
) -> GraphAnalysis:
    """The analysis of an acyclic graph of `tasks` (see the module docstring).

    `findings` (path facts from `scopefacts.judge`, say) are kept, before the ones found here;
    a task they already fault for a scope entry is not also told it declares no scope.
    """
    findings = tuple(findings)
    by_id = {t.id: t for t in tasks}
    deps = {t.id: [d for d in t.depends_on if d in by_id] for t in tasks}
    estimated = [t.estimate_min for t in tasks if t.estimate_min is not None]
    complete = bool(tasks) and len(estimated) == len(tasks)
    default = statistics.median(estimated) if estimated else 1.0
    minutes = {t.id: default if t.estimate_min is None else float(t.estimate_min) for t in tasks}
    chain, _ = longest_path(deps, lambda _: 1.0)
    by_minutes, total_minutes = longest_path(deps, minutes.__getitem__)
    width, exact = max_antichain(deps)
    sim = simulate(
        [
            SimTask(t.id, t.priority, frozenset(t.file_scope), tuple(deps[t.id]), minutes[t.id])
            for t in tasks
        ],
        runners,
    )
    return GraphAnalysis(
        tasks=len(tasks),
        critical_path=CriticalPath(
            tuple(chain), sum(minutes[t] for t in chain) if complete else None
        ),
        critical_path_minutes=CriticalPath(tuple(by_minutes), total_minutes) if complete else None,
        max_width=width,
        width_exact=exact,
        parallelism=Parallelism(
            runners, sim.parallelism, sim.makespan, sim.total_work, sim.peak, bool(estimated)
        ),
        overlaps=tuple(_overlaps(tasks, deps)),
        hotspots=tuple(_hotspots(tasks)),
        findings=(*findings, *_graph_findings(tasks, estimated, default, runners, width, findings)),
    )


def _overlaps(tasks: Sequence[PlannedTask], deps: dict[str, list[str]]) -> list[Overlap]:
    """Pairs whose declared keys exclude each other and no dependency path between them, by id.

    Keys are compared as leases are (`toolcalls.leasekeys`): a file and any part of it
    overlap, two different parts of one file do not; an overlap names the keys on both
    sides (`api.py`, `api.py::handle`).
    """
    above = Ancestry(deps)
    shared: dict[tuple[str, str], set[str]] = {}
    for keys_by_task in _holders_by_file(tasks).values():
        for (a, keys_a), (b, keys_b) in itertools.combinations(sorted(keys_by_task.items()), 2):
            met = {k for x in keys_a for y in keys_b if excludes(x, y) for k in (x, y)}
            if met and not above.related(a, b):
                shared.setdefault((a, b), set()).update(met)
    return [Overlap(pair, tuple(sorted(paths))) for pair, paths in sorted(shared.items())]


class Ancestry:
    """Ancestor sets, computed only for the tasks asked about (those sharing a path)."""

    def __init__(self, deps: dict[str, list[str]]) -> None:
        self._deps = deps
        self._above: dict[str, frozenset[str]] = {}

    def related(self, a: str, b: str) -> bool:
        return a in self.of(b) or b in self.of(a)

    def of(self, task_id: str) -> frozenset[str]:
        if task_id not in self._above:
            seen: set[str] = set()
            todo = list(self._deps.get(task_id, ()))
            while todo:  # a dependency outside the graph (loaded before) has no parents here
                parent = todo.pop()
                if parent not in seen:
                    seen.add(parent)
                    todo.extend(self._deps.get(parent, ()))
            self._above[task_id] = frozenset(seen)
        return self._above[task_id]


def _holders(tasks: Sequence[PlannedTask]) -> dict[str, list[str]]:
    """Path -> the ids of the tasks declaring it, sorted."""
    holders: dict[str, list[str]] = {}
    for task in tasks:
        for path in set(task.file_scope):
            holders.setdefault(path, []).append(task.id)
    return {path: sorted(ids) for path, ids in holders.items()}


def _holders_by_file(tasks: Sequence[PlannedTask]) -> dict[str, dict[str, set[str]]]:
    """File (or resource) -> each task declaring it or a part of it -> the keys it declares."""
    found: dict[str, dict[str, set[str]]] = {}
    for task in tasks:
        for key in task.file_scope:
            found.setdefault(file_of(key), {}).setdefault(task.id, set()).add(key)
    return found


def _hotspots(tasks: Sequence[PlannedTask]) -> list[Hotspot]:
    """Files in HOTSPOT_SCOPES or more scopes, the most shared first."""
    return [
        Hotspot(path, tuple(ids))
        for path, ids in sorted(_holders(tasks).items(), key=lambda kv: (-len(kv[1]), kv[0]))
        if len(ids) >= (RESOURCE_HOTSPOT if is_resource_key(path) else HOTSPOT_SCOPES)
    ]


def _graph_findings(
    tasks: Sequence[PlannedTask],
    estimated: list[float],
    default: float,
    runners: int,
    width: int,
    given: Sequence[Finding],
) -> list[Finding]:
    faulted = {f.task_id for f in given if f.path is not None}  # refused or doubtful entries
    found = [
        Finding(
            "warning",
            "no_scope",
            f"task {t.id} declares no file_scope: the scheduler "
            "will run it beside anything, and only the write-time lease protects it",
            t.id,
        )
        for t in tasks
        if not t.file_scope and t.id not in faulted
    ]
    missing = [t.id for t in tasks if t.estimate_min is None]
    if estimated and missing:
        found.append(
            Finding(
                "warning",
                "missing_estimate",
                f"{len(missing)} task(s) carry no estimate_min "
                f"({', '.join(missing[:10])}); the simulation assumes {default:g} min each",
            )
        )
    if tasks and width < runners:
        found.append(
            Finding(
                "warning",
                "narrow_graph",
                f"at most {width} task(s) can ever run at once, fewer than the {runners} runners",
            )
        )
    return found
