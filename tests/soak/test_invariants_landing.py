"""The landing invariants catch what they claim to: one broken landing history per rule.

The clean history is the shape the real server emits (tests/integration/test_landing.py,
the rename pair): A lands first on base 0; B's landing check fails on base 1, B is blamed,
rolled back and reworked, and lands second; C lands in one batch with B. Each test breaks
it in one way and expects that rule, and only that rule, to fire.
"""

from __future__ import annotations

from typing import Any

from codefleet.testing.invariants import Evidence, check
from codefleet.testing.invariants_landing import check_landing

Step = tuple[str, str | None, dict[str, Any]]


def finished(batch: list[str], base: int, verdict: str = "passed", purpose: str = "batch") -> Step:
    body = {"check": "test", "batch": batch, "purpose": purpose, "base": base}
    return ("landing_check_finished", None, {**body, "verdict": verdict})


def landed(task: str, order: int, batch: list[str], base: int) -> list[Step]:
    return [
        ("landed", task, {"order": order, "checks": ["test"], "batch": batch, "base": base}),
        ("task_succeeded", task, {"attempt": 2 if task == "B" else 1, "order": order}),
    ]


def write(task: str, path: str) -> list[Step]:
    return [
        ("lease_acquired", task, {"path": path, "tool": "Write"}),
        ("file_changed", task, {"path": path, "tool": "Write"}),
    ]


def release(task: str, path: str) -> Step:
    return ("lease_released", task, {"path": path, "reason": "task_ended"})


def history() -> list[Step]:
    """A lands; B breaks the tree on base 1, is reworked, and lands in one batch with C."""
    return [
        *[("task_created", t, {}) for t in "ABC"],
        ("task_assigned", "A", {"attempt": 1}),
        ("task_assigned", "B", {"attempt": 1}),
        ("task_started", "A", {"attempt": 1}),
        ("task_started", "B", {"attempt": 1}),
        *write("A", "lib.py"),
        *write("B", "caller.py"),
        ("landing_queued", "A", {"attempt": 1, "checks": ["test"], "position": 1}),
        finished(["A"], 0),
        release("A", "lib.py"),
        *landed("A", 1, ["A"], 0),
        ("landing_queued", "B", {"attempt": 1, "checks": ["test"], "position": 1}),
        finished(["B"], 1, "failed"),
        finished([], 1, purpose="base"),
        ("integration_failed", "B", {"attempt": 1, "check": "test", "blamed": ["B"]}),
        ("restore_requested", "B", {"paths": ["caller.py"], "reason": "task_ended"}),
        ("task_requeued", "B", {"attempt": 1, "error_kind": "integration_failed"}),
        ("file_restored", "B", {"path": "caller.py", "existed": False}),
        release("B", "caller.py"),
        ("task_assigned", "B", {"attempt": 2}),
        ("task_assigned", "C", {"attempt": 1}),
        ("task_started", "B", {"attempt": 2}),
        ("task_started", "C", {"attempt": 1}),
        *write("B", "caller.py"),
        *write("C", "c.py"),
        ("landing_queued", "B", {"attempt": 2, "checks": ["test"], "position": 1}),
        ("landing_queued", "C", {"attempt": 1, "checks": ["test"], "position": 2}),
        finished(["B", "C"], 1),
        release("B", "caller.py"),
        *landed("B", 2, ["B", "C"], 1),
        release("C", "c.py"),
        *landed("C", 3, ["B", "C"], 1),
    ]


def events_of(steps: list[Step]) -> list[dict[str, Any]]:
    return [
        {"id": n, "type": kind, "task_id": task, "agent_id": "a1", "payload": payload}
        for n, (kind, task, payload) in enumerate(steps, start=1)
    ]


def rules(steps: list[Step], integration: str | None = "test") -> set[str]:
    return {v.rule for v in check_landing(events_of(steps), integration)}


def at(steps: list[Step], kind: str, task: str | None, nth: int = 0) -> int:
    return [i for i, s in enumerate(steps) if s[0] == kind and s[1] == task][nth]


def test_a_clean_landing_history_proves_every_landing_invariant_and_the_state_machine() -> None:
    tasks = {
        "A": {"status": "succeeded", "attempts": 1},
        "B": {"status": "succeeded", "attempts": 2},
        "C": {"status": "succeeded", "attempts": 1},
    }
    ledger = {
        "A": [{"path": "lib.py", "tool": "Write"}],
        "B": [{"path": "caller.py", "tool": "Write"}] * 2,
        "C": [{"path": "c.py", "tool": "Write"}],
    }

    assert check_landing(events_of(history()), "test") == []
    assert check(Evidence(events=events_of(history()), tasks=tasks, ledger=ledger)) == []


def test_a_task_that_lands_twice_or_a_gap_in_the_order_numbers_is_caught() -> None:
    twice = history()
    end = len(twice)
    twice += [release("A", "x"), *landed("A", 4, ["A"], 3)]
    gap = history()
    i = at(gap, "landed", "C")
    gap[i] = ("landed", "C", {**gap[i][2], "order": 4})
    gap[i + 1] = ("task_succeeded", "C", {"attempt": 1, "order": 4})

    assert "landed_twice" in rules(twice)
    first = next(v for v in check_landing(events_of(twice), "test") if v.rule == "landed_twice")
    assert first.event_id == end + 2
    assert rules(gap) == {"landed_twice"}


def test_a_success_without_its_landing_right_before_it_is_caught() -> None:
    unlanded = [s for s in history() if not (s[0] == "landed" and s[1] == "A")]
    apart = history()
    apart.insert(at(apart, "task_succeeded", "A"), ("task_created", "D", {}))

    assert "succeeded_unlanded" in rules(unlanded)
    assert rules(apart) == {"succeeded_unlanded"}


def test_a_landing_with_no_passed_check_on_its_base_or_on_a_moved_base_is_caught() -> None:
    unchecked = [s for s in history() if s != finished(["B", "C"], 1)]
    moved = history()
    moved[at(moved, "landing_check_finished", None, 3)] = finished(["B", "C"], 0)  # old base
    wrong_base = history()
    i = at(wrong_base, "landed", "C")
    wrong_base[i] = ("landed", "C", {**wrong_base[i][2], "base": 2})
    no_integration = history()
    i = at(no_integration, "landed", "A")
    no_integration[i] = ("landed", "A", {**no_integration[i][2], "checks": []})

    assert rules(unchecked) == {"landed_unchecked"}
    assert rules(moved) == {"landed_unchecked"}
    assert rules(wrong_base) == {"landed_unchecked"}
    assert rules(no_integration) == {"landed_unchecked"}
    assert rules(no_integration, integration=None) == set()


def test_a_lease_released_while_its_task_waits_to_land_is_caught() -> None:
    steps = history()
    steps.remove(release("A", "lib.py"))
    steps.insert(at(steps, "landing_queued", "A") + 1, release("A", "lib.py"))

    assert rules(steps) == {"landing_lease"}


def test_a_blamed_task_that_is_not_reworked_or_not_rolled_back_is_caught() -> None:
    landed_anyway = history()
    i = at(landed_anyway, "task_requeued", "B")
    del landed_anyway[i - 1 : i + 3]  # its restore, requeue, put-back and release
    unrestored = [s for s in history() if s[0] != "file_restored"]
    other_reason = history()
    i = at(other_reason, "task_requeued", "B")
    other_reason[i] = ("task_requeued", "B", {"attempt": 1, "error_kind": "agent_lost"})

    assert "integration_rollback" in rules(landed_anyway)
    assert rules(unrestored) == {"integration_rollback"}
    assert rules(other_reason) == {"integration_rollback"}


def stacked_history() -> list[Step]:
    """A waits to land on lib.py; C takes lib.py over (a stack) and lands after A."""
    steps = history()
    i = at(steps, "landing_queued", "A")
    stack = [
        ("task_assigned", "C", {"attempt": 1}),
        ("lease_released", "A", {"path": "lib.py", "reason": "stacked", "to_task_id": "C"}),
        ("lease_acquired", "C", {"path": "lib.py", "tool": "Edit", "stacked_on": "A"}),
    ]
    return [*steps[: i + 1], *stack, *steps[i + 1 :]]


def test_a_task_that_stacked_lands_only_after_the_task_it_built_on() -> None:
    clean = stacked_history()
    early = stacked_history()
    early[at(early, "lease_acquired", "C")] = (
        "lease_acquired",
        "C",
        {"path": "lib.py", "tool": "Edit", "stacked_on": "B"},  # B lands after C here
    )
    b2 = at(early, "landed", "B")
    early[b2 : b2 + 2], c3 = [], at(early, "landed", "C")
    early[c3 : c3 + 2] = [*landed("C", 2, ["C"], 1)]
    early += [*landed("B", 3, ["B"], 2)]

    assert "stack_order" not in rules(clean)
    assert "landing_lease" not in rules(clean)  # passing lib.py on is not giving it up
    assert "stack_order" in rules(early)


def test_an_unwound_task_is_requeued_for_that_and_nothing_else() -> None:
    unwound = [
        ("task_assigned", "C", {"attempt": 1}),
        ("stack_unwound", "C", {"attempt": 1, "under_task_id": "A"}),
        ("task_requeued", "C", {"attempt": 1, "error_kind": "stack_unwound"}),
    ]
    failed = [*unwound[:2], ("task_failed", "C", {"attempt": 1, "error_kind": "agent_error"})]

    assert "stack_order" not in rules(unwound)
    assert "stack_order" in rules(failed)


def parallel_history(ahead: list[str], ahead_base: int = 1) -> list[Step]:
    """The clean history with two steps at once (decision 0160): B's batch and, ahead of it,
    `ahead` on base `ahead_base`; B lands when its check passes, C when the one ahead does."""
    steps = history()
    i = at(steps, "landing_check_finished", None, 3)
    return [
        *steps[:i],
        finished(["B"], 1),
        release("B", "caller.py"),
        *landed("B", 2, ["B"], 1),
        finished(ahead, ahead_base, purpose="ahead"),
        release("C", "c.py"),
        *landed("C", 3, ["C"], 2),
    ]


def test_a_task_landed_by_a_check_that_ran_ahead_on_the_older_base_is_clean() -> None:
    """B + C checked on base 1 is the very tree C's landing on base 2 (after B) makes."""
    assert rules(parallel_history(["B", "C"])) == set()


def test_a_check_ahead_that_left_out_a_task_under_it_or_went_past_the_landing_is_caught() -> None:
    assert rules(parallel_history(["C"])) == {"landed_unchecked"}  # without B under it
    assert rules(parallel_history(["B", "C", "D"])) == {"landed_unchecked"}  # D never landed
    assert rules(parallel_history(["A", "B", "C"], 0)) == set()  # the same tree, older base
    assert rules(parallel_history(["B", "C"], 0)) == {"landed_unchecked"}  # without A
