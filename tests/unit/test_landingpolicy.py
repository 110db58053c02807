"""The landing policy, played step by step with verdicts from a model of the tree."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from codefleet.coord.policy import landingpolicy as policy
from codefleet.models import HaltCause


def play(
    rnd: policy.Round, fails: Callable[[Sequence[str]], bool | str]
) -> tuple[policy.Outcome, list[tuple[str, int]]]:
    """Run a round to its outcome; `fails(prefix)` says whether the base + prefix fails (or
    the verdict word it fails with); a failing step stops at its first check, as a worker."""
    steps: list[tuple[str, int]] = []
    nxt = policy.first_step(rnd)
    while isinstance(nxt, policy.Step):
        steps.append((nxt.purpose, nxt.prefix))
        failed = fails(rnd.candidates[: nxt.prefix])
        word = failed if isinstance(failed, str) else "failed"
        verdicts = {nxt.checks[0]: word} if failed else dict.fromkeys(nxt.checks, "passed")
        rnd, nxt = policy.advance(rnd, nxt, verdicts)
    return nxt, steps


def round_of(n: int, integration: str | None = "test", **verify: str) -> policy.Round:
    ids = tuple(f"T{i}" for i in range(1, n + 1))
    return policy.Round(ids, base=0, integration=integration, verify=verify, verified_on={})


def test_a_passing_batch_lands_whole_in_one_check() -> None:
    outcome, steps = play(round_of(8), lambda prefix: False)
    assert outcome == policy.Outcome(land=tuple(f"T{i}" for i in range(1, 9)))
    assert steps == [("batch", 8)]


@pytest.mark.parametrize("breaker", range(1, 9))
def test_one_breaker_is_found_in_a_logarithmic_number_of_checks(breaker: int) -> None:
    outcome, steps = play(round_of(8), lambda prefix: f"T{breaker}" in prefix)
    assert outcome.blamed == f"T{breaker}"
    assert outcome.land == tuple(f"T{i}" for i in range(1, breaker))
    assert steps[:2] == [("batch", 8), ("base", 0)]
    assert steps[-1] == ("confirm", breaker)
    assert len(steps) <= 2 + 3 + 1  # batch, base, log2(8), the confirmation


def test_a_base_that_fails_alone_halts_and_blames_nobody() -> None:
    outcome, steps = play(round_of(4), lambda prefix: True)
    assert outcome == policy.Outcome(halt=HaltCause.FAILS_ALONE)
    assert steps == [("batch", 4), ("base", 0)]


def test_two_that_break_only_together_blame_the_later() -> None:
    outcome, _ = play(round_of(5), lambda prefix: {"T2", "T4"} <= set(prefix))
    assert outcome.blamed == "T4" and outcome.land == ("T1", "T2", "T3")


def test_a_prefix_runs_the_integration_check_and_each_candidates_verify_once() -> None:
    rnd = round_of(3, T1="unit", T2="unit", T3="lint")
    assert policy.checks_for(rnd, 3) == ("test", "unit", "lint")
    assert policy.checks_for(rnd, 0) == ("test",)  # the base is held to the integration only


def test_a_lone_verify_that_passed_on_this_base_is_not_run_again() -> None:
    fresh = policy.Round(("T1",), 4, None, {"T1": "unit"}, {"T1": 4})
    moved = policy.Round(("T1",), 5, None, {"T1": "unit"}, {"T1": 4})
    assert policy.first_step(fresh) == policy.Outcome(land=("T1",))
    assert policy.first_step(moved) == policy.Step(1, "batch", ("unit",))


def test_without_any_check_a_batch_lands_at_once() -> None:
    assert policy.first_step(round_of(3, integration=None)) == policy.Outcome(
        land=("T1", "T2", "T3")
    )


def test_a_failing_verify_without_an_integration_check_is_bisected_without_the_base() -> None:
    rnd = round_of(4, integration=None, T1="unit", T2="unit", T3="unit", T4="unit")
    outcome, steps = play(rnd, lambda prefix: "T3" in prefix)
    assert outcome.blamed == "T3" and ("base", 0) not in steps


def test_a_blame_is_confirmed_by_running_the_failing_prefix_once_more() -> None:
    outcome, steps = play(round_of(4), lambda prefix: "T3" in prefix)
    assert outcome.blamed == "T3" and outcome.land == ("T1", "T2")
    assert steps[-1] == ("confirm", 3) and steps.count(("confirm", 3)) == 1


def test_a_prefix_that_passes_when_run_again_is_a_flaky_check_and_blames_nobody() -> None:
    """The batch fails once; every later run passes: bisection ends at the last task, whose
    prefix passes when run again. The seven before it land; nobody is blamed; landing halts."""
    runs = iter([True])
    outcome, steps = play(round_of(8), lambda prefix: next(runs, False))
    assert outcome.blamed is None and outcome.halt is HaltCause.FLAKY
    assert outcome.land == tuple(f"T{i}" for i in range(1, 8))
    assert steps[-1] == ("confirm", 8)


def test_a_check_that_cannot_start_with_a_candidate_but_starts_on_the_base_blames_it() -> None:
    """T3 deleted the program the check runs: exit 127 with it, the base runs the check."""
    outcome, steps = play(round_of(4), lambda prefix: "T3" in prefix and "unrunnable")
    assert outcome == policy.Outcome(land=("T1", "T2"), blamed="T3")
    assert steps[:2] == [("batch", 4), ("base", 0)] and steps[-1] == ("confirm", 3)


def test_a_check_that_cannot_start_on_the_base_either_halts_and_blames_nobody() -> None:
    outcome, steps = play(round_of(4), lambda prefix: "unrunnable")
    assert outcome == policy.Outcome(halt=HaltCause.CANNOT_START)
    assert steps == [("batch", 4), ("base", 0)]


def test_a_verify_that_cannot_start_is_run_on_the_base_to_see_whether_it_starts() -> None:
    """Without an integration check the base is not run for a failing verify, but a verify
    that could not start is, once: it starts there, so the candidate is blamed."""
    rnd = round_of(2, integration=None, T1="unit", T2="lint")
    outcome, steps = play(rnd, lambda prefix: "T2" in prefix and "unrunnable")
    assert outcome.blamed == "T2" and ("base", 0) in steps
    missing = play(rnd, lambda prefix: "T2" in prefix and "failed")
    assert missing[0].blamed == "T2" and ("base", 0) not in missing[1]


def test_a_check_that_cannot_start_after_a_passing_prefix_ran_it_is_not_run_on_the_base() -> None:
    outcome, steps = play(round_of(4), lambda prefix: len(prefix) > 2 and "unrunnable")
    assert outcome.blamed == "T3" and steps.count(("base", 0)) == 1  # the batch's, only
