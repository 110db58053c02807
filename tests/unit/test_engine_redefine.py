"""A load that redefines stored tasks that have not started (`commit_tasks(..., redefine)`).

The engine over a real SQLite file: the redefined task keeps its place in the
record and takes the new fields and edges in the rows and the live index alike;
one that has started (even once, even retried since) refuses the whole batch.
"""

from __future__ import annotations

import pytest
import test_engine
from test_engine import Fleet, assigned

from codefleet.coord.tables.liveindex import LiveIndex
from codefleet.coord.tables.validation import NewTask
from codefleet.errors import InvalidGraph
from codefleet.models import ErrorKind, EventType, TaskStatus

make_fleet, fleet = test_engine.make_fleet, test_engine.fleet  # the engine harness's fixtures


def redefine(fleet: Fleet, *specs: NewTask) -> list[str]:
    batch = fleet.engine.operator.prepare_tasks(list(specs))
    return fleet.engine.operator.commit_tasks(batch, frozenset(s.id for s in specs if s.id))


def same_index(fleet: Fleet) -> None:
    """The live index equals one rebuilt from the rows (what a restart would read)."""
    built = fleet.engine.tasks.index
    fleet.engine.tasks.load()
    again: LiveIndex = fleet.engine.tasks.index
    assert {k: sorted(v) for k, v in built.parents.items() if v} == {
        k: sorted(v) for k, v in again.parents.items() if v
    }
    assert {k: sorted(v) for k, v in built.children.items() if v} == {
        k: sorted(v) for k, v in again.children.items() if v
    }
    assert built.status == again.status
    assert {t: (x.priority, x.chain, x.unmet) for t, x in built.live.items()} == {
        t: (x.priority, x.chain, x.unmet) for t, x in again.live.items()
    }


def test_a_task_not_started_takes_its_new_fields_and_edges_and_keeps_its_dependents(
    fleet: Fleet,
) -> None:
    fleet.add("a")
    fleet.add("b")
    fleet.add("c", deps=("a",))
    fleet.add("d", deps=("c",))
    seq = fleet.task("c")["seq"]

    created = redefine(
        fleet,
        NewTask("c, edited", id="c", description="new", priority=5, depends_on=("b",)),
        NewTask("e", id="e", depends_on=("c",)),
    )

    assert created == ["e"]
    row = fleet.task("c")
    assert (row["title"], row["description"], row["priority"], row["seq"]) == (
        "c, edited",
        "new",
        5,
        seq,
    )
    assert fleet.engine.tasks.index.parents["c"] == ["b"]
    assert sorted(fleet.engine.tasks.index.children["c"]) == ["d", "e"]
    assert [e["task_id"] for e in fleet.events(EventType.TASK_REDEFINED)] == ["c"]
    same_index(fleet)


def test_a_task_redefined_below_a_failed_task_is_blocked_with_its_dependents(
    fleet: Fleet,
) -> None:
    fleet.add("dead", max_attempts=1)
    fleet.register("runner-1")
    fleet.run("dead", ok=False, error_kind=ErrorKind.AGENT_ERROR)
    fleet.tick()
    assert fleet.task("dead")["status"] == TaskStatus.FAILED
    fleet.add("c")
    fleet.add("d", deps=("c",))

    redefine(fleet, NewTask("c", id="c", depends_on=("dead",)))

    assert fleet.task("c")["status"] == TaskStatus.BLOCKED_UPSTREAM
    assert fleet.task("d")["status"] == TaskStatus.BLOCKED_UPSTREAM
    same_index(fleet)


def test_a_redefinition_that_closes_a_cycle_through_stored_tasks_is_refused(
    fleet: Fleet,
) -> None:
    fleet.add("a")
    fleet.add("b", deps=("a",))

    with pytest.raises(InvalidGraph, match="cycle: a -> b -> a"):
        redefine(fleet, NewTask("a", id="a", depends_on=("b",)))

    assert fleet.engine.tasks.index.parents.get("a", []) == []


def test_a_task_that_was_ever_assigned_is_not_redefined_even_after_a_retry(
    fleet: Fleet,
) -> None:
    fleet.add("a", max_attempts=1)
    agent = fleet.register("runner-1")
    fleet.run("a", ok=False, error_kind=ErrorKind.AGENT_ERROR)
    fleet.tick()
    fleet.engine.operator.retry("a")  # pending again, none charged: but it has a history

    with pytest.raises(InvalidGraph, match=r"task a has started \(pending\)"):
        redefine(fleet, NewTask("a, edited", id="a"), NewTask("n", id="n"))

    assert fleet.task("a")["title"] == "a"
    assert "n" not in fleet.engine.tasks.index.status  # the batch lands whole or not at all
    assert assigned(fleet.tick()) == [("a", agent)]


def test_a_stored_id_the_load_does_not_name_for_redefinition_is_still_refused(
    fleet: Fleet,
) -> None:
    fleet.add("a")

    with pytest.raises(InvalidGraph, match="task a is already loaded"):
        fleet.engine.operator.create_tasks([NewTask("a, edited", id="a")])
