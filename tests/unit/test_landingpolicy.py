"""The landing policy, played step by step with verdicts from a model of the tree."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from codefleet.coord.policy import landingpolicy as policy


def play(
    rnd: policy.Round, fails: Callable[[Sequence[str]], bool]
) -> tuple[policy.Outcome, list[tuple[str, int]]]:
    """Run a round to its outcome; `fails(prefix)` says whether the base + prefix fails."""
    steps: list[tuple[str, int]] = []
    nxt = policy.first_step(rnd)
    while isinstance(nxt, policy.Step):
        steps.append((nxt.purpose, nxt.prefix))
        failed = fails(rnd.candidates[: nxt.prefix])
        rnd, nxt = policy.advance(rnd, nxt, not failed, nxt.checks if failed else ())
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
    assert len(steps) <= 2 + 3  # batch, base, log2(8)


def test_a_base_that_fails_alone_halts_and_blames_nobody() -> None:
    outcome, steps = play(round_of(4), lambda prefix: True)
    assert outcome == policy.Outcome(halt=True)
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
