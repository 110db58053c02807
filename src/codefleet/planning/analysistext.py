"""The `graph check` analysis for a person: a few aligned lines, then the findings.

Pure rendering of a `GraphAnalysis` onto a rich console; `--json` prints
`GraphAnalysis.to_json()` instead.
"""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from codefleet.analysis.graphanalysis import CriticalPath, GraphAnalysis, Parallelism

__all__ = ["print_analysis"]

LABEL_WIDTH = 20


def print_analysis(
    console: Console, analysis: GraphAnalysis, title: str, leases: str | None = None
) -> None:
    """Print the analysis of the graph named `title` (`leases`: what its writes lease)."""
    console.print(Text(title, style="bold"))
    _row(console, "tasks", str(analysis.tasks))
    if leases is not None:
        _row(console, "leases", leases)
    _critical_paths(console, analysis.critical_path, analysis.critical_path_minutes)
    exact = "" if analysis.width_exact else " (at least: the graph is too big to count exactly)"
    _row(console, "max width", f"{analysis.max_width} task(s) can run at once{exact}")
    _row(console, f"on {analysis.parallelism.runners} runners", _parallelism(analysis.parallelism))
    _row(
        console,
        "overlapping scopes",
        "none"
        if not analysis.overlaps
        else f"{len(analysis.overlaps)} pair(s) the scheduler will never run together",
    )
    for overlap in analysis.overlaps:
        console.print(f"  {' + '.join(overlap.task_ids)}: {', '.join(overlap.paths)}", markup=False)
    if analysis.succeeded:
        done = ", ".join(analysis.succeeded)
        _row(console, "already succeeded", f"{done}: on this tree's server; not counted above")
    _row(
        console,
        "hotspots",
        "none"
        if not analysis.hotspots
        else f"{len(analysis.hotspots)} file(s) in 3 or more scopes",
    )
    for hotspot in analysis.hotspots:
        console.print(f"  {hotspot.path}: {', '.join(hotspot.task_ids)}", markup=False)
    for finding in analysis.findings:
        style = "bold red" if finding.severity == "error" else "yellow"
        line = Text(f"{finding.severity}: ", style=style)
        line.append(finding.message)
        console.print(line)
    verdict = "OK" if analysis.ok else "ERRORS"
    style = "bold green" if analysis.ok else "bold red"
    console.print(
        Text(f"{verdict}: ", style=style).append(
            f"{len(analysis.errors)} error(s), {len(analysis.warnings)} warning(s)", style=""
        )
    )


def _critical_paths(
    console: Console, by_tasks: CriticalPath, by_minutes: CriticalPath | None
) -> None:
    """The longest chain; when the longest by minutes is another chain, both, labelled."""
    if by_minutes is None or by_minutes.task_ids == by_tasks.task_ids:
        _row(console, "critical path", _path(by_tasks))
        return
    _row(console, "critical path", f"{_path(by_tasks)} · the most tasks in a chain")
    _row(console, "", f"{_path(by_minutes)} · the most minutes in a chain")


def _row(console: Console, label: str, value: str) -> None:
    line = Text(f"{label:<{LABEL_WIDTH}}", style="cyan")
    line.append(value)
    console.print(line)


def _path(path: CriticalPath) -> str:
    minutes = f", {path.minutes:g} min" if path.minutes is not None else ""
    return f"{' -> '.join(path.task_ids)} ({path.length} task(s){minutes})"


def _parallelism(p: Parallelism) -> str:
    unit = "min" if p.estimated else "task lengths"
    return (
        f"{p.predicted:.2f} busy on average (peak {p.peak}): "
        f"{p.total_work:g} {unit} of work done in {p.makespan:g} {unit}"
    )
