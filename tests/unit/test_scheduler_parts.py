"""The scheduler over scopes and leases that name parts of a file (`api.py::handle`).

A part excludes its file and itself; two parts of one file do not exclude each
other. Literal `FleetState`s, as in test_scheduler.py.
"""

from __future__ import annotations

from test_scheduler import NOW, agent, state, task

from codefleet.coord.policy.scheduler import Assign, schedule


def assigned(snapshot: object) -> list[str]:
    return [d.task_id for d in schedule(snapshot, NOW) if isinstance(d, Assign)]  # type: ignore[arg-type]


def test_tasks_scoped_to_different_parts_of_one_file_run_side_by_side() -> None:
    snapshot = state(
        agents=(agent("a1"), agent("a2")),
        candidates=(task("T1", "api.py::handle"), task("T2", "api.py::route")),
    )
    assert assigned(snapshot) == ["T1", "T2"]


def test_a_task_scoped_to_the_whole_file_waits_for_one_scoped_to_a_part_of_it() -> None:
    snapshot = state(
        agents=(agent("a1"), agent("a2")),
        candidates=(task("T1", "api.py::handle"), task("T2", "api.py")),
    )
    assert assigned(snapshot) == ["T1"]


def test_a_part_scope_waits_while_its_file_or_the_same_part_is_leased() -> None:
    for held in ("api.py", "api.py::handle"):
        snapshot = state(
            agents=(agent("a1"),),
            leases=((held, "T0"),),
            candidates=(task("T1", "api.py::handle"),),
        )
        assert assigned(snapshot) == [], held


def test_a_part_scope_runs_while_another_part_of_its_file_is_leased() -> None:
    snapshot = state(
        agents=(agent("a1"),),
        leases=(("api.py::route", "T0"),),
        candidates=(task("T1", "api.py::handle"),),
    )
    assert assigned(snapshot) == ["T1"]


def test_a_running_tasks_part_scope_holds_back_the_whole_file() -> None:
    snapshot = state(
        agents=(agent("a2"),),
        in_flight=(task("T1", "api.py::handle", attempts=1, agent="a1"),),
        candidates=(task("T2", "api.py"), task("T3", "api.py::route")),
    )
    assert assigned(snapshot) == ["T3"]
