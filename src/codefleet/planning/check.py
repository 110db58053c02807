"""`graph check` without the command line: a loaded graph and a tree in, an analysis out.

The loader (`api.graphfile.load_graph` / `parse_graph`) has already refused what the
server would refuse about the graph's shape; here its scope paths are
checked against the tree with the server's own path rule (`scopes`), its
checks' programs are looked up where checks run (`fleet.views.programs`), and the
result is measured by `analysis.graphanalysis.analyse`. No server, no model, no engine.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from codefleet.analysis.graphanalysis import Finding, GraphAnalysis, PlannedTask, analyse
from codefleet.analysis.scopefacts import ScopedTask, judge, survey, unscoped_mentions
from codefleet.api.graphfile import GraphTasks
from codefleet.fleet.views.programs import check_warnings
from codefleet.paths import TreeRoot
from codefleet.resources import resource_keys

__all__ = ["NO_INTEGRATION", "check_graph", "task_label", "tree_for", "unchecked_landing"]


def tree_for(workdir: Path, db: Path, run_dir: Path) -> TreeRoot:
    """The tree as the server sees it: its database and run directory are protected."""
    return TreeRoot(workdir, protected=[db, run_dir])


def task_label(spec: dict[str, object], n: int) -> str:
    """A task's id, or `#n` (its position) for a task the server would name."""
    return str(spec.get("id") or f"#{n}")


def check_graph(
    graph: GraphTasks, tree: TreeRoot, runners: int = 3, succeeded: frozenset[str] = frozenset()
) -> GraphAnalysis:
    """Scope facts from the tree, then the pure analysis (see the module docstring); the
    tasks in `succeeded` (done on the tree's server) hold no scope any more."""
    labels = [task_label(spec, n) for n, spec in enumerate(graph, start=1)]
    scoped = [
        ScopedTask(label, tuple(spec.get("file_scope") or ()), str(spec.get("description") or ""))
        for label, spec in zip(labels, graph, strict=True)
    ]
    facts = survey(tree, (raw for task in scoped for raw in task.file_scope))
    scopes, findings = judge(scoped, facts)
    deps = {
        label: tuple(spec.get("depends_on") or ())
        for label, spec in zip(labels, graph, strict=True)
    }
    live = [task for task in scoped if task.id not in succeeded]
    findings += unscoped_mentions(live, scopes, deps)
    planned = [
        PlannedTask(
            id=label,
            priority=int(spec.get("priority") or 3),
            file_scope=()
            if label in succeeded
            else (*scopes[label], *sorted(resource_keys(spec.get("resources") or ()))),
            depends_on=tuple(spec.get("depends_on") or ()),
            estimate_min=spec.get("estimate_min"),
        )
        for label, spec in zip(labels, graph, strict=True)
    ]
    programs = [
        Finding("warning", "missing_program", line)
        for line in check_warnings(graph.checks, tree.root)
    ]
    analysis = analyse(planned, runners, [*findings, *programs, *unchecked_landing(graph)])
    return replace(analysis, succeeded=tuple(t for t in labels if t in succeeded))


def unchecked_landing(graph: GraphTasks) -> list[Finding]:
    """One line when several tasks land with nothing checking them together, and one when
    tasks leased by part land with no `integration:` (a `verify` sees no other part)."""
    if len(graph) < 2 or graph.integration:
        return []
    found = []
    if not any(spec.get("verify") for spec in graph):
        found.append(Finding("warning", "no_integration", NO_INTEGRATION))
    if sum(spec.get("lease_granularity") == "part" for spec in graph) >= 2:
        found.append(Finding("warning", "parts_unchecked", PARTS_UNCHECKED))
    return found


PARTS_UNCHECKED = (
    "tasks lease by part (`lease_granularity: part`) with no `integration:` check: two of them "
    "may change different functions of one file at once, and no check runs on both changes "
    'together before the run says PASS; add `integration: NAME` (docs/landing.md, "Landing")'
)
NO_INTEGRATION = (
    "no task is checked as it lands (no `integration:` check, no task `verify:`): two tasks "
    "that each work alone may break the tree together and the run still says PASS; add "
    '`integration: NAME` naming one of `checks:` (docs/landing.md, "Landing")'
)
