"""The stack bookkeeping (`coord.policy.stacks`): who is under whom on a file, and the rule."""

from __future__ import annotations

from collections.abc import Callable

from codefleet.coord.policy.stacks import Stacks, may_stack


def landing_of(*tasks: str) -> Callable[[str], bool]:
    return lambda task_id: task_id in tasks


def test_only_whole_files_of_tasks_waiting_to_land_may_be_stacked_on() -> None:
    waiting = landing_of("T1")
    assert may_stack([("hub.py", ("a1", "T1"))], waiting)
    assert not may_stack([], waiting)  # nothing refused it: nothing to stack on
    assert not may_stack([("hub.py", ("a2", "T2"))], waiting)  # T2 is still running
    assert not may_stack([("hub.py::route", ("a1", "T1"))], waiting)  # a part
    assert not may_stack([("/resource:db", ("a1", "T1"))], waiting)  # a resource
    assert not may_stack([("hub.py", ("a1", "T1")), ("b.py", ("a2", "T2"))], waiting)


def test_a_stack_hands_its_file_back_down_in_the_order_it_was_built() -> None:
    stacks = Stacks()
    stacks.push("hub.py", "T1", "a1")  # T2 took hub.py from T1
    stacks.push("hub.py", "T2", "a2")  # T3 took it from T2
    assert stacks.files_under("T1") == ["hub.py"]
    assert stacks.above("T1", "hub.py") == "T2"
    assert stacks.above("T2", "hub.py") is None  # the holder is right above it
    assert stacks.pop("hub.py") == ("T2", "a2")  # T3 ended: back to T2
    assert stacks.pop("hub.py") == ("T1", "a1")
    assert stacks.pop("hub.py") is None
    assert stacks.under == {}


def test_a_task_that_lands_leaves_the_bottom_of_its_stacks() -> None:
    stacks = Stacks()
    stacks.push("hub.py", "T1", "a1")
    stacks.push("hub.py", "T2", "a2")
    stacks.push("other.py", "T1", "a1")
    stacks.landed("T1")
    assert stacks.under == {"hub.py": [("T2", "a2")]}


def test_a_rolled_back_task_cuts_everything_above_it_off_its_files() -> None:
    stacks = Stacks()
    stacks.push("hub.py", "T0", "a0")
    stacks.push("hub.py", "T1", "a1")
    stacks.push("hub.py", "T2", "a2")  # the holder, T3, is above T2
    assert stacks.cut("T1", "hub.py") == ("a1", ["T2"])
    assert stacks.under == {"hub.py": [("T0", "a0")]}  # T1 holds it again, over T0


def test_a_task_builds_on_every_task_under_it_and_nothing_above() -> None:
    stacks = Stacks()
    stacks.load([("hub.py", "T1", "a1"), ("hub.py", "T2", "a2"), ("b.py", "T5", "a5")])
    holders = {"hub.py": "T3", "b.py": "T2"}
    assert stacks.bases("T3", holders.get) == {"T1", "T2"}
    assert stacks.bases("T2", holders.get) == {"T1", "T5"}
    assert stacks.bases("T1", holders.get) == set()
