"""The pure graph analysis: literal tasks in, an exact `GraphAnalysis` out.

Covers the critical path (tasks and minutes), the maximum width (checked
against brute force on small random graphs), the predicted parallelism
(played through the real scheduler), overlap pairs, hotspots and findings.
"""

from __future__ import annotations

import io
import itertools
import random

import pytest
from rich.console import Console

from codefleet.analysis.graphanalysis import Hotspot, Overlap, PlannedTask, analyse
from codefleet.analysis.simulate import SimTask, simulate
from codefleet.dag import EXACT_WIDTH_LIMIT, find_cycle, max_antichain
from codefleet.planning.analysistext import print_analysis


def t(
    id: str, *scope: str, deps: tuple[str, ...] = (), priority: int = 3, est: int | None = None
) -> PlannedTask:
    return PlannedTask(id, priority, tuple(scope), deps, est)


def test_the_critical_path_is_the_longest_dependency_chain_in_tasks() -> None:
    tasks = [t("A", "a"), t("B", "b", deps=("A",)), t("C", "c", deps=("B",)), t("D", "d")]

    analysis = analyse(tasks)

    assert analysis.critical_path.task_ids == ("A", "B", "C")
    assert analysis.critical_path.length == 3
    assert analysis.critical_path.minutes is None
    assert analysis.critical_path_minutes is None


def test_with_estimates_the_path_has_minutes_and_the_slowest_chain_is_reported_too() -> None:
    tasks = [
        t("A", "a", est=5),
        t("B", "b", deps=("A",), est=5),
        t("C", "c", deps=("B",), est=5),
        t("D", "d", est=40),
        t("E", "e", deps=("D",), est=10),
    ]

    analysis = analyse(tasks)

    assert (analysis.critical_path.task_ids, analysis.critical_path.minutes) == (
        ("A", "B", "C"),
        15.0,
    )
    assert analysis.critical_path_minutes is not None
    assert analysis.critical_path_minutes.task_ids == ("D", "E")
    assert analysis.critical_path_minutes.minutes == 50.0


def rendered(tasks: list[PlannedTask]) -> list[str]:
    out = io.StringIO()
    print_analysis(Console(file=out, width=200), analyse(tasks), "g.yaml")
    return [" ".join(line.split()) for line in out.getvalue().splitlines()]


def test_two_different_critical_paths_are_labelled_by_tasks_and_by_minutes() -> None:
    lines = rendered(
        [
            t("A", "a", est=5),
            t("B", "b", deps=("A",), est=5),
            t("C", "c", deps=("B",), est=5),
            t("D", "d", est=40),
            t("E", "e", deps=("D",), est=10),
        ]
    )

    assert "critical path A -> B -> C (3 task(s), 15 min) · the most tasks in a chain" in lines
    assert "D -> E (2 task(s), 50 min) · the most minutes in a chain" in lines


def test_one_critical_path_is_printed_once_without_a_label() -> None:
    lines = rendered([t("A", "a", est=5), t("B", "b", deps=("A",), est=5), t("C", "c", est=1)])

    assert "critical path A -> B (2 task(s), 10 min)" in lines
    assert not any("in a chain" in line for line in lines)


def test_a_missing_estimate_is_a_warning_and_minutes_are_not_claimed() -> None:
    analysis = analyse([t("A", "a", est=10), t("B", "b", est=30), t("C", "c")])

    assert analysis.critical_path.minutes is None
    [warning] = [w for w in analysis.warnings if w.code == "missing_estimate"]
    assert "1 task(s) carry no estimate_min (C)" in warning.message
    assert "assumes 20 min" in warning.message  # the median of the given estimates
    assert analysis.parallelism.estimated


@pytest.mark.parametrize(
    ("tasks", "width"),
    [
        ([t("A", "a"), t("B", "b", deps=("A",)), t("C", "c", deps=("B",))], 1),
        (
            [
                t("A", "a"),
                t("B", "b", deps=("A",)),
                t("C", "c", deps=("A",)),
                t("D", "d", deps=("B", "C")),
            ],
            2,
        ),
        ([t("R", "r"), *[t(f"L{n}", f"l{n}", deps=("R",)) for n in range(4)]], 4),
        # Not a level count: X runs beside B or C, which sit on different levels.
        (
            [
                t("A", "a"),
                t("B", "b", deps=("A",)),
                t("C", "c", deps=("B",)),
                t("X", "x"),
                t("Y", "y", deps=("X",)),
                t("Z", "z", deps=("Y",)),
            ],
            2,
        ),
    ],
    ids=["chain", "diamond", "fan-out", "two-chains"],
)
def test_the_max_width_counts_tasks_no_dependency_path_connects(
    tasks: list[PlannedTask], width: int
) -> None:
    analysis = analyse(tasks)

    assert (analysis.max_width, analysis.width_exact) == (width, True)


def test_the_max_width_matches_brute_force_on_random_small_graphs() -> None:
    rng = random.Random(18)
    for _ in range(200):
        ids = [f"T{i}" for i in range(rng.randint(1, 8))]
        deps = {x: [ids[j] for j in range(i) if rng.random() < 0.3] for i, x in enumerate(ids)}

        assert max_antichain(deps) == (_brute_width(deps), True), deps


def _brute_width(deps: dict[str, list[str]]) -> int:
    below: dict[str, set[str]] = {x: set(d) for x, d in deps.items()}
    for _ in deps:  # transitive closure, naively
        for x in deps:
            below[x] |= {z for y in below[x] for z in below[y]}
    for size in range(len(deps), 0, -1):
        for group in itertools.combinations(deps, size):
            if all(
                a not in below[b] and b not in below[a] for a, b in itertools.combinations(group, 2)
            ):
                return size
    return 0


def test_past_the_exact_limit_the_width_is_a_lower_bound_and_says_so() -> None:
    n = EXACT_WIDTH_LIMIT + 1
    deps: dict[str, list[str]] = {f"T{i:05d}": [] for i in range(n)}

    assert max_antichain(deps) == (n, False)


def test_overlapping_scopes_without_a_dependency_path_are_a_serialized_pair() -> None:
    tasks = [
        t("A", "models.py", "a.py"),
        t("B", "models.py", "b.py"),
        t("C", "models.py", deps=("A", "B")),  # ordered after both: never beside them anyway
        t("D", "d.py"),
    ]

    analysis = analyse(tasks)

    assert analysis.overlaps == (Overlap(("A", "B"), ("models.py",)),)


def test_scopes_naming_different_parts_of_one_file_do_not_overlap_but_the_whole_file_does() -> None:
    tasks = [
        t("A", "api.py::handle"),
        t("B", "api.py::route"),
        t("C", "api.py::handle", "api.py::<imports>"),
        t("D", "api.py"),
        t("E", "api.py::Router", deps=("D",)),  # after the whole file: no overlap
    ]

    analysis = analyse(tasks)

    assert analysis.overlaps == (
        Overlap(("A", "C"), ("api.py::handle",)),
        Overlap(("A", "D"), ("api.py", "api.py::handle")),
        Overlap(("B", "D"), ("api.py", "api.py::route")),
        Overlap(("C", "D"), ("api.py", "api.py::<imports>", "api.py::handle")),
    )
    assert analysis.parallelism.peak == 3  # after D: A, B and E, three parts of api.py at once


def test_a_file_in_three_scopes_is_a_hotspot_and_one_in_two_is_not() -> None:
    tasks = [
        t("A", "hot.py", "warm.py"),
        t("B", "hot.py", "warm.py"),
        t("C", "hot.py"),
        t("D", "hot.py", "cold.py"),
    ]

    analysis = analyse(tasks)

    assert analysis.hotspots == (Hotspot("hot.py", ("A", "B", "C", "D")),)


def test_disjoint_independent_tasks_fill_the_runners() -> None:
    tasks = [t(x, f"{x}.py") for x in "ABCD"]

    p = analyse(tasks, runners=3).parallelism

    assert (p.runners, p.makespan, p.total_work, p.peak, p.estimated) == (3, 2.0, 4.0, 3, False)
    assert p.predicted == 2.0


def test_one_shared_file_serializes_the_fleet_whatever_the_runners() -> None:
    tasks = [t(x, "shared.py", f"{x}.py") for x in "ABCD"]

    analysis = analyse(tasks, runners=3)

    assert (analysis.parallelism.makespan, analysis.parallelism.peak) == (4.0, 1)
    assert analysis.parallelism.predicted == 1.0
    assert analysis.max_width == 4  # dependencies alone would allow four
    assert len(analysis.overlaps) == 6


def test_the_simulation_assigns_in_the_schedulers_order() -> None:
    tasks = [
        SimTask("low", 1, frozenset({"l"}), (), 1.0),
        SimTask("head", 3, frozenset({"h"}), (), 1.0),  # first link of a chain of two
        SimTask("tail", 3, frozenset({"t"}), ("head",), 1.0),
        SimTask("solo", 3, frozenset({"s"}), (), 1.0),
        SimTask("urgent", 5, frozenset({"u"}), (), 1.0),
    ]

    sim = simulate(tasks, runners=1)

    # priority first, then the longer chain below, then id; a dependent once it is ready
    assert sim.order == ("urgent", "head", "solo", "tail", "low")
    assert (sim.makespan, sim.peak) == (5.0, 1)


def test_estimates_drive_the_simulated_clock() -> None:
    tasks = [t("A", "a", est=30), t("B", "b", est=10), t("C", "c", deps=("B",), est=10)]

    p = analyse(tasks, runners=2).parallelism

    assert (p.makespan, p.total_work, p.estimated) == (30.0, 50.0, True)
    assert p.predicted == pytest.approx(50 / 30)


def test_a_task_without_a_scope_and_a_narrow_graph_are_warnings_not_errors() -> None:
    analysis = analyse([t("A"), t("B", "b", deps=("A",))], runners=3)

    assert analysis.ok
    assert [w.code for w in analysis.warnings] == ["no_scope", "narrow_graph"]
    assert "task A declares no file_scope" in analysis.warnings[0].message


def test_given_findings_come_first_and_errors_make_the_analysis_not_ok() -> None:
    from codefleet.analysis.graphanalysis import Finding

    bad = Finding("error", "outside_workdir", "task A: ../x resolves outside", "A", "../x")

    analysis = analyse([t("A", "a")], runners=1, findings=[bad])

    assert not analysis.ok and analysis.errors == (bad,)
    assert analysis.to_json()["errors"] == [
        {"code": "outside_workdir", "message": bad.message, "task": "A", "path": "../x"}
    ]


@pytest.mark.parametrize(
    ("deps", "cycle"),
    [
        ({"A": ["B"], "B": ["A"]}, ["A", "B", "A"]),
        ({"A": ["A"]}, ["A", "A"]),
        ({"A": ["C"], "B": ["A"], "C": ["B"], "D": []}, ["A", "C", "B", "A"]),
        ({"A": ["B"], "B": [], "C": ["A", "B"]}, None),
    ],
    ids=["two", "self", "three", "none"],
)
def test_a_cycle_is_named_as_a_path(deps: dict[str, list[str]], cycle: list[str] | None) -> None:
    assert find_cycle(deps) == cycle


def test_a_long_chain_is_analysed_without_recursion() -> None:
    n = 5000
    tasks = [t(f"T{i:05d}", f"f{i}", deps=(f"T{i - 1:05d}",) if i else ()) for i in range(n)]

    analysis = analyse(tasks, runners=3)

    assert analysis.critical_path.length == n
    assert analysis.parallelism.makespan == float(n)
