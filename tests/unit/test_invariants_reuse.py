"""The reuse invariant catches what it claims to: one broken reuse per case, by hand.

A clean attempt writes a file, runs its check (`check_finished`, passed, with its
command and content identity) and its verify reuses that run (`check_reused`
naming it); a clean landing passes a batch, lands it, and checks the base alone by
reusing that pass (`view: reused`, naming its step); a task's passing verify stands
for its batch's landing check (naming its `check_finished`). Each test breaks one
thing and expects rule `check_reuse` to fire, and the clean logs to prove every rule.
"""

from __future__ import annotations

from typing import Any

from codefleet.testing.invariants_landing import check_landing
from codefleet.testing.invariants_reuse import check_reuse

SUITE = "pytest -q"
SEEN = "a" * 64  # the content identity the passing run saw
OTHER = "b" * 64
Step = tuple[str, str | None, dict[str, Any]]


def events_of(steps: list[Step]) -> list[dict[str, Any]]:
    return [
        {"id": n, "type": kind, "task_id": task, "agent_id": "a1", "payload": payload}
        for n, (kind, task, payload) in enumerate(steps, start=1)
    ]


def attempt(
    finished: dict[str, Any] | None = None, reused: dict[str, Any] | None = None
) -> list[Step]:
    """T1 writes lib.py, passes its check on SEEN (event 5), and reuses it for its verify."""
    run = {"attempt": 1, "name": "suite", "purpose": "tool", "passed": True, "exit_code": 0}
    run |= {"command": SUITE, "identity": SEEN}
    verify = {"attempt": 1, "name": "suite", "purpose": "verify", "reused_from": "tool"}
    verify |= {"reused_event": 5, "command": SUITE, "identity": SEEN}
    return [
        ("task_assigned", "T1", {"attempt": 1}),
        ("lease_acquired", "T1", {"path": "lib.py"}),
        ("file_changed", "T1", {"path": "lib.py", "sha256": "1" * 64}),
        ("check_started", "T1", {"attempt": 1, "name": "suite", "command": SUITE}),
        ("check_finished", "T1", run | (finished or {})),
        ("check_reused", "T1", verify | (reused or {})),
    ]


def rules(steps: list[Step], fresh: frozenset[str] = frozenset()) -> list[str]:
    return [v.rule for v in check_reuse(events_of(steps), fresh)]


def test_a_verify_that_reuses_its_tasks_recorded_pass_on_the_same_content_is_clean() -> None:
    assert check_reuse(events_of(attempt())) == []


def test_a_reuse_with_no_earlier_pass_is_caught() -> None:
    assert rules(attempt(reused={"reused_event": 99})) == ["check_reuse"]
    assert rules(attempt(reused={"reused_event": None})) == ["check_reuse"]
    later = attempt()
    later[4], later[5] = later[5], later[4]  # the reuse comes before the run it names
    assert rules(later) == ["check_reuse"]


def test_a_reuse_of_a_run_on_another_content_is_caught() -> None:
    assert rules(attempt(reused={"identity": OTHER})) == ["check_reuse"]
    assert rules(attempt(finished={"identity": None}, reused={"identity": None})) == ["check_reuse"]


def test_a_reuse_of_a_run_of_another_command_is_caught() -> None:
    assert rules(attempt(reused={"command": "pytest -q -x"})) == ["check_reuse"]


def test_a_reuse_of_a_failed_run_is_caught() -> None:
    assert rules(attempt(finished={"passed": False, "exit_code": 1})) == ["check_reuse"]


def test_a_reuse_of_a_check_declared_reuse_false_is_caught() -> None:
    assert rules(attempt(), fresh=frozenset({"suite"})) == ["check_reuse"]
    assert rules(attempt(), fresh=frozenset({"lint"})) == []


def test_a_reuse_of_another_attempts_or_another_checks_run_is_caught() -> None:
    assert rules(attempt(reused={"attempt": 2})) == ["check_reuse"]
    assert rules(attempt(reused={"name": "lint"})) == ["check_reuse"]


def test_a_reuse_after_the_task_wrote_a_file_anew_is_caught_whatever_the_identity_says() -> None:
    steps = attempt()
    steps.insert(5, ("file_changed", "T1", {"path": "lib.py", "sha256": "2" * 64}))
    steps[6][2]["reused_event"] = 5
    assert rules(steps) == ["check_reuse"]
    same = attempt()
    same.insert(5, ("file_changed", "T1", {"path": "lib.py", "sha256": "1" * 64}))
    assert rules(same) == []  # the same bytes again: the same content


# -- a landing step's reuse ---------------------------------------------------------------------


def landing(reused: dict[str, Any] | None = None, batch_identity: str = SEEN) -> list[Step]:
    """A's batch passes in step 1 on base 0 and lands; step 2 checks the base alone (base 1,
    no batch), exactly that tree, by reusing step 1's pass."""
    check = {"check": "test", "command": SUITE}
    passed = {**check, "step": 1, "purpose": "batch", "batch": ["A"], "base": 0}
    passed |= {"verdict": "passed", "view": "layer", "identity": batch_identity}
    base = {**check, "step": 2, "purpose": "base", "batch": [], "base": 1, "verdict": "passed"}
    base |= {"view": "reused", "identity": SEEN, "reused_step": 1}
    return [
        ("task_assigned", "A", {"attempt": 1}),
        ("landing_queued", "A", {"attempt": 1, "checks": ["test"], "position": 1}),
        ("landing_check_finished", None, passed),
        ("landed", "A", {"order": 1, "checks": ["test"], "batch": ["A"], "base": 0}),
        ("task_succeeded", "A", {"attempt": 1, "order": 1}),
        ("landing_check_finished", None, base | (reused or {})),
    ]


def landing_rules(steps: list[Step], fresh: frozenset[str] = frozenset()) -> list[str]:
    return [v.rule for v in check_landing(events_of(steps), "test", fresh)]


def test_a_landing_check_reused_on_exactly_the_tree_it_passed_on_is_clean() -> None:
    assert check_landing(events_of(landing()), "test") == []


def test_a_landing_reuse_naming_no_passed_run_or_another_tree_is_caught() -> None:
    assert landing_rules(landing({"reused_step": 7})) == ["check_reuse"]
    assert landing_rules(landing({"base": 0})) == ["check_reuse"]  # the tree before A landed
    assert landing_rules(landing({"batch": ["B"]})) == ["check_reuse"]


def test_a_landing_reuse_on_another_content_or_command_or_of_a_fresh_check_is_caught() -> None:
    assert landing_rules(landing(batch_identity=OTHER)) == ["check_reuse"]
    assert landing_rules(landing({"command": "pytest"})) == ["check_reuse"]
    assert landing_rules(landing(), fresh=frozenset({"test"})) == ["check_reuse"]


def test_a_landing_reuse_of_a_failed_run_is_caught() -> None:
    steps = landing({"purpose": "confirm", "batch": ["A"], "base": 0})
    steps[2][2]["verdict"] = "failed"
    del steps[3:5]  # A's batch failed and did not land; step 2 checks the same tree again
    assert landing_rules(steps) == ["check_reuse"]


# -- a repair turn that changed nothing keeps its failed verify (rule repair_kept, 0175) --------


def kept_repair(
    failed: dict[str, Any] | None = None, kept: dict[str, Any] | None = None, write: bool = False
) -> list[Step]:
    """T1's verify fails on SEEN (event 4); its repair turn writes nothing and keeps it."""
    run = {"attempt": 1, "name": "suite", "purpose": "verify", "passed": False, "exit_code": 1}
    run |= {"command": SUITE, "identity": SEEN}
    repair = {"attempt": 1, "name": "suite", "purpose": "verify", "turn": 1}
    turn: list[Step] = [("repair_started", "T1", repair)]
    if write:
        turn.append(("file_changed", "T1", {"path": "lib.py", "sha256": "2" * 64}))
    ended = repair | {"outcome": "failed", "kept_event": 4, "identity": SEEN}
    return [
        ("task_assigned", "T1", {"attempt": 1}),
        ("file_changed", "T1", {"path": "lib.py", "sha256": "1" * 64}),
        ("check_started", "T1", {"attempt": 1, "name": "suite", "command": SUITE}),
        ("check_finished", "T1", run | (failed or {})),
        *turn,
        ("repair_finished", "T1", ended | (kept or {})),
    ]


def test_a_repair_turn_that_keeps_its_failed_verify_on_the_same_content_is_clean() -> None:
    assert check_reuse(events_of(kept_repair())) == []


def test_a_kept_failure_the_log_does_not_prove_is_caught() -> None:
    assert rules(kept_repair(kept={"kept_event": 99})) == ["repair_kept"]
    assert rules(kept_repair(failed={"passed": True})) == ["repair_kept"]
    assert rules(kept_repair(failed={"purpose": "tool"})) == ["repair_kept"]
    assert rules(kept_repair(kept={"identity": OTHER})) == ["repair_kept"]
    assert rules(kept_repair(write=True)) == ["repair_kept"]


# -- a landing step that stands for a task's own pass (decision 0177) ---------------------------


def task_pass(
    run: dict[str, Any] | None = None, reused: dict[str, Any] | None = None
) -> list[Step]:
    """T1's verify passes on SEEN (event 2); its batch's landing check, on that same content,
    is not run and names that `check_finished`."""
    verify = {"attempt": 1, "name": "test", "purpose": "verify", "passed": True, "exit_code": 0}
    verify |= {"command": SUITE, "identity": SEEN}
    step = {"check": "test", "command": SUITE, "step": 1, "purpose": "batch", "batch": ["T1"]}
    step |= {"base": 0, "verdict": "passed", "view": "reused", "identity": SEEN}
    step |= {"reused_event": 2, "reused_task": "T1", "reused_purpose": "verify"}
    return [
        ("task_assigned", "T1", {"attempt": 1}),
        ("check_finished", "T1", verify | (run or {})),
        ("landing_queued", "T1", {"attempt": 1, "checks": ["test"], "position": 1}),
        ("landing_check_finished", None, step | (reused or {})),
        ("landed", "T1", {"order": 1, "checks": ["test"], "batch": ["T1"], "base": 0}),
        ("task_succeeded", "T1", {"attempt": 1, "order": 1}),
    ]


def test_a_landing_check_standing_for_a_tasks_pass_on_the_same_content_is_clean() -> None:
    assert check_landing(events_of(task_pass()), "test") == []


def test_a_landing_reuse_naming_no_earlier_check_finished_is_caught() -> None:
    assert landing_rules(task_pass(reused={"reused_event": 99})) == ["check_reuse"]
    assert landing_rules(task_pass(reused={"reused_event": 3})) == ["check_reuse"]  # not one
    later = task_pass(reused={"reused_event": 4})
    later.insert(3, later.pop(1))  # the run it names (now event 4) comes after the reuse
    assert landing_rules(later) == ["check_reuse"]
    assert landing_rules(task_pass(reused={"reused_step": 1})) == ["check_reuse"]  # both named


def test_a_landing_reuse_of_a_tasks_failed_run_or_another_checks_is_caught() -> None:
    assert landing_rules(task_pass(run={"passed": False, "exit_code": 1})) == ["check_reuse"]
    assert landing_rules(task_pass(run={"name": "lint"})) == ["check_reuse"]


def test_a_landing_reuse_of_a_tasks_run_of_another_command_or_content_is_caught() -> None:
    assert landing_rules(task_pass(run={"command": "pytest -x"})) == ["check_reuse"]
    assert landing_rules(task_pass(reused={"identity": OTHER})) == ["check_reuse"]
    assert landing_rules(task_pass(run={"identity": None}, reused={"identity": None})) == [
        "check_reuse"
    ]


def test_a_landing_reuse_of_a_tasks_run_of_a_fresh_check_is_caught() -> None:
    assert landing_rules(task_pass(), fresh=frozenset({"test"})) == ["check_reuse"]
    assert landing_rules(task_pass(), fresh=frozenset({"lint"})) == []
