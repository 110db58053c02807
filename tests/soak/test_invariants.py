"""The invariant checker catches what it claims to: one broken history per rule.

A clean two-task run (B depends on A, both write `x.txt`) is checked first; then
each test breaks it in one way and expects exactly that rule to fire. The tree
checks use real `git apply` on real files.
"""

from __future__ import annotations

import copy
import hashlib
from pathlib import Path
from typing import Any

import pytest

from codefleet.rollback import PreImage, make_patch
from codefleet.testing.invariants import Evidence, check, compare_trees, replay_patches
from codefleet.testing.invariants_content import check_contents, expected_contents


def history() -> list[tuple[str, str | None, dict[str, Any]]]:
    """(type, task, payload) of a clean run: A then B, each holding x.txt while it writes."""
    return [
        ("task_created", "A", {}),
        ("task_created", "B", {"depends_on": ["A"]}),
        ("agent_registered", None, {"name": "runner-1"}),
        ("task_assigned", "A", {"attempt": 1}),
        ("task_started", "A", {"attempt": 1}),
        ("lease_acquired", "A", {"path": "x.txt", "tool": "Write"}),
        ("file_changed", "A", {"path": "x.txt", "tool": "Write"}),
        ("lease_released", "A", {"path": "x.txt", "reason": "task_ended"}),
        ("task_succeeded", "A", {"attempt": 1}),
        ("task_unblocked", "B", {"by": "A"}),
        ("task_assigned", "B", {"attempt": 1}),
        ("task_started", "B", {"attempt": 1}),
        ("lease_acquired", "B", {"path": "x.txt", "tool": "Edit"}),
        ("file_changed", "B", {"path": "x.txt", "tool": "Edit"}),
        ("lease_released", "B", {"path": "x.txt", "reason": "task_ended"}),
        ("task_succeeded", "B", {"attempt": 1}),
    ]


def events_of(steps: list[tuple[str, str | None, dict[str, Any]]]) -> list[dict[str, Any]]:
    return [
        {
            "id": n,
            "at": f"2026-01-01T00:00:{n:02d}.000Z",
            "type": kind,
            "task_id": task,
            "agent_id": "a1",
            "payload": payload,
        }
        for n, (kind, task, payload) in enumerate(steps, start=1)
    ]


def evidence(steps: list[tuple[str, str | None, dict[str, Any]]] | None = None) -> Evidence:
    return Evidence(
        events=events_of(steps if steps is not None else history()),
        tasks={
            "A": {"id": "A", "status": "succeeded", "attempts": 1, "depends_on": []},
            "B": {"id": "B", "status": "succeeded", "attempts": 1, "depends_on": ["A"]},
        },
        ledger={
            "A": [{"path": "x.txt", "tool": "Write"}],
            "B": [{"path": "x.txt", "tool": "Edit"}],
        },
        agents=[{"name": "runner-1", "tasks_succeeded": 2}],
        leases=[],
    )


def rules(found: list[Any]) -> set[str]:
    return {v.rule for v in found}


def test_a_clean_history_proves_every_invariant() -> None:
    found = check(evidence(), observed=evidence().events)

    assert found == []


def test_a_retry_goes_on_from_the_attempt_it_kept_and_a_renumbered_one_is_caught() -> None:
    steps = history()
    failed = [
        ("task_assigned", "A", {"attempt": 1}),
        ("task_started", "A", {"attempt": 1}),
        ("task_failed", "A", {"attempt": 1, "error_kind": "agent_error"}),
        ("task_retried", "A", {"attempt": 1, "set_aside": 1, "reason": "retry"}),
    ]
    steps = [  # A's attempt after the retry is its second
        (kind, task, {**body, "attempt": 2} if task == "A" and "attempt" in body else body)
        for kind, task, body in steps
    ]
    steps[3:3] = failed
    kept = evidence(steps)
    kept.tasks["A"]["attempts"] = 2
    renumbered = copy.deepcopy(kept)
    renumbered.events[len(failed) + 2]["payload"] = {"attempt": 0, "reason": "retry"}

    assert check(kept, observed=kept.events) == []
    assert "transition" in rules(check(renumbered, observed=renumbered.events))


def test_a_grant_of_a_path_someone_holds_is_two_holders() -> None:
    steps = history()
    steps.insert(7, ("lease_acquired", "B", {"path": "x.txt"}))  # B while A still holds x.txt

    assert "two_holders" in rules(check(evidence(steps)))


def test_a_release_by_a_task_that_does_not_hold_the_path_is_two_holders() -> None:
    steps = history()
    steps[7] = ("lease_released", "B", {"path": "x.txt"})

    assert "two_holders" in rules(check(evidence(steps)))


def test_a_denial_naming_the_wrong_holder_is_caught() -> None:
    steps = history()
    steps.insert(6, ("lease_denied", "B", {"path": "x.txt", "holder_task_id": "C"}))

    assert rules(check(evidence(steps))) == {"two_holders"}


def test_a_ledger_row_written_without_the_lease_is_caught() -> None:
    steps = history()
    steps.insert(9, ("file_changed", "A", {"path": "x.txt", "tool": "Write"}))  # after release
    proof = evidence(steps)
    proof.ledger["A"].append({"path": "x.txt", "tool": "Write"})

    assert rules(check(proof)) == {"ledger"}


def test_ledger_rows_that_differ_from_the_events_are_caught() -> None:
    proof = evidence()
    proof.ledger["B"] = []

    assert rules(check(proof)) == {"ledger"}


def test_a_lease_kept_past_the_end_of_its_attempt_is_caught() -> None:
    steps = history()
    del steps[7]  # A never releases x.txt before it succeeds

    assert "lease_outside_attempt" in rules(check(evidence(steps)))


def test_a_missing_event_id_is_caught() -> None:
    proof = evidence()
    for event in proof.events[5:]:
        event["id"] += 1

    found = check(proof)

    assert [v.rule for v in found] == ["event_ids"]
    assert "6..6 are missing" in found[0].message


def test_a_reused_event_id_is_caught() -> None:
    proof = evidence()
    proof.events[6]["id"] = proof.events[5]["id"]

    assert "event_ids" in rules(check(proof))


def test_a_streamed_event_that_changed_or_vanished_from_the_log_is_caught() -> None:
    proof = evidence()
    observed = copy.deepcopy(proof.events)
    observed[3]["payload"] = {"attempt": 9}  # the id was re-used for something else
    observed.append({**observed[-1], "id": 99})  # the stream saw an event the log lost

    found = check(proof, observed=observed)

    assert rules(found) == {"stream"}
    assert len(found) == 3  # changed, skipped 17..98, lost


def test_an_attempt_that_ends_twice_is_a_completion_applied_twice() -> None:
    steps = history()
    steps.insert(9, ("task_succeeded", "A", {"attempt": 1}))

    found = rules(check(evidence(steps)))

    assert {"completion_applied_twice", "succeeded_twice"} <= found


def test_agents_counting_more_successes_than_events_is_a_double_completion() -> None:
    proof = evidence()
    proof.agents[0]["tasks_succeeded"] = 3

    assert rules(check(proof)) == {"completion_applied_twice"}


def test_a_task_assigned_before_its_dependency_succeeded_is_caught() -> None:
    steps = history()
    steps[10:12] = [("task_started", "B", {"attempt": 1})]  # B's assignment moves up...
    steps.insert(4, ("task_assigned", "B", {"attempt": 1}))  # ...before A has even started

    assert rules(check(evidence(steps))) == {"dependency"}


def test_a_task_left_pending_fails_the_terminal_check_unless_not_required() -> None:
    steps = [s for s in history() if s[1] != "B" or s[0] == "task_created"]
    proof = evidence(steps)
    proof.tasks["B"].update(status="pending", attempts=0)
    proof.ledger["B"] = []
    proof.agents[0]["tasks_succeeded"] = 1

    assert rules(check(proof)) == {"not_terminal"}
    assert check(proof, require_terminal=False) == []


def test_a_row_that_disagrees_with_its_events_is_caught() -> None:
    proof = evidence()
    proof.tasks["A"]["attempts"] = 2

    assert rules(check(proof)) == {"row_mismatch"}


def test_a_lease_row_the_replay_does_not_explain_is_caught() -> None:
    proof = evidence()
    proof.leases = [{"path": "x.txt", "task_id": "B"}]

    assert rules(check(proof)) == {"two_holders"}


# -- the tree ---------------------------------------------------------------------------------


def patch(path: str, before: str | None, after: str) -> str:
    old = PreImage(path, before is not None, (before or "").encode(), 0o644 if before else None)
    made = make_patch(old, PreImage(path, True, after.encode(), 0o644))
    assert made is not None
    return made.diff


@pytest.fixture
def trees(tmp_path: Path) -> tuple[Path, Path, Evidence]:
    original, final = tmp_path / "original", tmp_path / "final"
    original.mkdir()
    (original / "x.txt").write_text("1\n")
    final.mkdir()
    (final / "x.txt").write_text("1\nA\nB\n")
    (final / "new").mkdir()
    (final / "new" / "b.txt").write_text("made by B\n")
    proof = evidence()
    proof.patches = {
        "A": patch("x.txt", "1\n", "1\nA\n"),
        "B": patch("x.txt", "1\nA\n", "1\nA\nB\n") + patch("new/b.txt", None, "made by B\n"),
    }
    return original, final, proof


def test_the_patches_replayed_in_completion_order_rebuild_the_final_tree(
    trees: tuple[Path, Path, Evidence], tmp_path: Path
) -> None:
    original, final, proof = trees

    assert replay_patches(original, proof, tmp_path / "rebuilt") == []
    assert compare_trees(tmp_path / "rebuilt", final) == []


def test_codefleets_own_state_directory_in_the_tree_is_not_a_stray_write(
    trees: tuple[Path, Path, Evidence], tmp_path: Path
) -> None:
    original, final, proof = trees
    (final / ".codefleet").mkdir()  # the server's: the tree's identity and its .gitignore
    (final / ".codefleet" / "tree-id").write_text("tree_" + "0" * 32 + "\n")
    (final / ".codefleet" / ".gitignore").write_text("*\n")

    replay_patches(original, proof, tmp_path / "rebuilt")

    assert compare_trees(tmp_path / "rebuilt", final) == []


def test_patches_replayed_out_of_order_do_not_apply(
    trees: tuple[Path, Path, Evidence], tmp_path: Path
) -> None:
    original, _, proof = trees
    proof.events = [e for e in proof.events if e["task_id"] != "A" or e["type"] != "task_succeeded"]
    proof.events.append({**evidence().events[8], "id": 99})  # A now completes after B

    found = replay_patches(original, proof, tmp_path / "rebuilt")

    assert [v.rule for v in found] == ["tree"] and "patch of B does not apply" in found[0].message


def test_a_write_no_patch_explains_is_caught(
    trees: tuple[Path, Path, Evidence], tmp_path: Path
) -> None:
    original, final, proof = trees
    (final / "x.txt").write_text("1\nA\nB\nstray\n")
    (final / "stray.txt").write_text("?")

    replay_patches(original, proof, tmp_path / "rebuilt")
    found = compare_trees(tmp_path / "rebuilt", final)

    assert sorted(v.message for v in found) == [
        "stray.txt is in the final tree but no patch made it",
        "x.txt differs from its patches replayed in order",
    ]


# -- restores: an ended attempt's leases are held until its files are back --------------------


def failed_then_restored() -> list[tuple[str, str | None, dict[str, Any]]]:
    """A fails its first attempt; its file is put back after the requeue, then it succeeds."""
    steps = history()[:7]  # ... A holds x.txt and wrote it
    return [
        *steps,
        ("restore_requested", "A", {"paths": ["x.txt"], "reason": "task_ended"}),
        ("task_requeued", "A", {"attempt": 1}),
        ("file_restored", "A", {"path": "x.txt", "existed": True}),
        ("lease_released", "A", {"path": "x.txt", "reason": "task_ended"}),
        ("task_assigned", "A", {"attempt": 2}),
        ("task_succeeded", "A", {"attempt": 2}),
    ]


def restore_evidence(steps: list[tuple[str, str | None, dict[str, Any]]]) -> Evidence:
    proof = evidence(steps)
    proof.tasks = {"A": {"id": "A", "status": "succeeded", "attempts": 2, "depends_on": []}}
    proof.ledger = {"A": [{"path": "x.txt", "tool": "Write"}]}
    proof.agents[0]["tasks_succeeded"] = 1
    return proof


def test_an_attempt_may_end_while_its_files_are_being_restored() -> None:
    steps = [s for s in failed_then_restored() if s[1] != "B"]

    assert check(restore_evidence(steps), require_terminal=False) == []


def test_a_write_recorded_after_the_attempt_ended_is_caught() -> None:
    steps = [s for s in failed_then_restored() if s[1] != "B"]
    steps.insert(8, ("file_changed", "A", {"path": "x.txt", "tool": "Write"}))  # after requeue
    assert steps[7][0] == "task_requeued"
    proof = restore_evidence(steps)
    proof.ledger["A"].append({"path": "x.txt", "tool": "Write"})

    assert rules(check(proof, require_terminal=False)) == {"ledger"}


def test_a_task_assigned_again_before_its_files_are_restored_is_caught() -> None:
    steps = [s for s in failed_then_restored() if s[1] != "B"]
    moved = steps.pop(10)  # the second assignment moves before the restore finished
    steps.insert(8, moved)

    assert "lease_outside_attempt" in rules(check(restore_evidence(steps), require_terminal=False))


def test_a_restore_without_a_restore_request_is_caught() -> None:
    steps = [s for s in failed_then_restored() if s[1] != "B" and s[0] != "restore_requested"]

    assert "two_holders" in rules(check(restore_evidence(steps), require_terminal=False))


# -- the content oracle ------------------------------------------------------------------------


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def hashed_history(a_wrote: str, b_wrote: str) -> list[dict[str, Any]]:
    """The clean run, each ledger event carrying the hash of what its writer left."""
    events = evidence().events
    for event in events:
        if event["type"] == "file_changed":
            wrote = a_wrote if event["task_id"] == "A" else b_wrote
            event["payload"] = {**event["payload"], "sha256": digest(wrote)}
    return events


def test_the_tree_holding_each_paths_last_successful_write_satisfies_the_content_oracle(
    tmp_path: Path,
) -> None:
    (tmp_path / "x.txt").write_text("1\nA\nB\n")
    expected = expected_contents(hashed_history("1\nA\n", "1\nA\nB\n"))

    assert check_contents(expected, tmp_path) == []
    assert expected["x.txt"].task_id == "B"


def test_a_succeeded_tasks_edit_missing_from_the_tree_is_caught_by_the_content_oracle(
    tmp_path: Path,
) -> None:
    # B succeeded having written "1\nA\nB\n", but its file was put back to A's content
    # afterwards (the take-back crash): the patch replay cannot see it, the oracle does.
    (tmp_path / "x.txt").write_text("1\nA\n")

    found = check_contents(expected_contents(hashed_history("1\nA\n", "1\nA\nB\n")), tmp_path)

    assert [(v.rule, v.task_id) for v in found] == [("content", "B")]
    assert "x.txt" in found[0].message


def test_the_writes_of_a_failed_attempt_are_not_expected_in_the_tree(tmp_path: Path) -> None:
    events = events_of([s for s in failed_then_restored() if s[1] != "B"])
    for event in events:
        if event["type"] == "file_changed":
            event["payload"] = {**event["payload"], "sha256": digest("rolled back\n")}
    (tmp_path / "x.txt").write_text("1\n")

    assert expected_contents(events) == {}
    assert check_contents(expected_contents(events), tmp_path) == []


# -- resources and sequences ---------------------------------------------------------------------


def test_a_resource_granted_to_a_second_task_while_held_is_two_holders() -> None:
    steps = history()
    steps.insert(5, ("lease_acquired", "A", {"path": "/resource:db", "tool": "assign"}))
    steps.insert(9, ("lease_released", "A", {"path": "/resource:db", "reason": "task_ended"}))
    clean = check(evidence(steps))
    steps.insert(8, ("lease_acquired", "B", {"path": "/resource:db", "tool": "assign"}))

    assert clean == []
    assert "two_holders" in rules(check(evidence(steps)))


def test_a_number_handed_out_twice_is_caught_and_one_to_a_finished_task_too() -> None:
    steps = history()
    steps.insert(6, ("number_allocated", "A", {"sequence": "migrations", "value": 3}))
    steps.insert(13, ("number_allocated", "B", {"sequence": "migrations", "value": 4}))
    clean = check(evidence(steps))
    twice = copy.deepcopy(steps)
    twice[13] = ("number_allocated", "B", {"sequence": "migrations", "value": 3})
    late = copy.deepcopy(steps)
    late.append(("number_allocated", "A", {"sequence": "migrations", "value": 9}))

    assert clean == []
    assert rules(check(evidence(twice))) == {"number_twice"}
    assert rules(check(evidence(late))) == {"number_outside_attempt"}


def parts_history(second: str = "api.py::route") -> list[tuple[str, str | None, dict[str, Any]]]:
    """A and B (no dependency) hold parts of api.py at once; B fails and puts its part back."""
    return [
        ("task_created", "A", {}),
        ("task_created", "B", {}),
        ("agent_registered", None, {"name": "runner-1"}),
        ("task_assigned", "A", {"attempt": 1}),
        ("task_assigned", "B", {"attempt": 1}),
        ("task_started", "A", {"attempt": 1}),
        ("task_started", "B", {"attempt": 1}),
        ("lease_acquired", "A", {"path": "api.py::handle", "tool": "Edit"}),
        ("file_changed", "A", {"path": "api.py", "tool": "Edit"}),
        ("lease_acquired", "B", {"path": second, "tool": "Edit"}),
        ("file_changed", "B", {"path": "api.py", "tool": "Edit"}),
        ("restore_requested", "B", {"paths": ["api.py"], "reason": "task_ended"}),
        ("task_requeued", "B", {"attempt": 1}),
        ("file_restored", "B", {"path": "api.py"}),
        ("lease_released", "B", {"path": second, "reason": "task_ended"}),
        ("lease_released", "A", {"path": "api.py::handle", "reason": "task_ended"}),
        ("task_succeeded", "A", {"attempt": 1}),
        ("task_assigned", "B", {"attempt": 2}),
        ("task_started", "B", {"attempt": 2}),
        ("lease_acquired", "B", {"path": "api.py", "tool": "Edit"}),
        ("file_changed", "B", {"path": "api.py", "tool": "Edit"}),
        ("lease_released", "B", {"path": "api.py", "reason": "task_ended"}),
        ("task_succeeded", "B", {"attempt": 2}),
    ]


def parts_evidence(second: str = "api.py::route") -> Evidence:
    return Evidence(
        events=events_of(parts_history(second)),
        tasks={
            "A": {"id": "A", "status": "succeeded", "attempts": 1, "depends_on": []},
            "B": {"id": "B", "status": "succeeded", "attempts": 2, "depends_on": []},
        },
        ledger={
            "A": [{"path": "api.py", "tool": "Edit"}],
            "B": [{"path": "api.py", "tool": "Edit"}, {"path": "api.py", "tool": "Edit"}],
        },
        agents=[{"name": "runner-1", "tasks_succeeded": 2}],
        leases=[],
    )


def test_two_holders_of_different_parts_of_one_file_prove_every_invariant() -> None:
    assert check(parts_evidence()) == []


@pytest.mark.parametrize("second", ["api.py", "api.py::handle"])
def test_the_file_or_the_same_part_granted_while_a_part_is_held_is_two_holders(
    second: str,
) -> None:
    found = check(parts_evidence(second))
    assert "two_holders" in rules(found)
    assert any("api.py::handle" in v.message and v.task_id == "B" for v in found)


def test_a_write_of_a_file_by_a_task_holding_no_part_of_it_is_caught() -> None:
    steps = parts_history()
    steps.insert(8, ("file_changed", "B", {"path": "api.py", "tool": "Edit"}))  # before its lease
    ev = parts_evidence()
    found = check(Evidence(events_of(steps), ev.tasks, ev.ledger, ev.agents, ev.leases))
    assert "file_changed of api.py by B while A holds it" in [v.message for v in found]


def test_the_content_oracle_expects_a_parted_file_only_from_a_last_write_that_succeeded() -> None:
    steps = parts_history()
    for n, (kind, task, payload) in enumerate(steps):
        if kind == "file_changed":
            steps[n] = (kind, task, {**payload, "sha256": f"{task}{n}"})
    last_write = max(n for n, s in enumerate(steps) if s[0] == "file_changed")

    assert expected_contents(events_of(steps))["api.py"].sha256 == f"B{last_write}"
    # without B's second attempt, B's restore of its part is the file's last change: A's
    # hash is not the file's content any more, and the oracle does not guess one
    cut = steps[: steps.index(("task_assigned", "B", {"attempt": 2}))]
    assert expected_contents(events_of(cut))["api.py"].sha256 is None
