"""The landing policy, played step by step with verdicts from a model of the tree."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import pytest

from codefleet.coord.policy import landingpolicy as policy
from codefleet.models import HaltCause


def play(
    rnd: policy.Round, fails: Callable[[Sequence[str]], bool | str]
) -> tuple[policy.Outcome, list[tuple[str, int]]]:
    """Run a round to its end one step at a time; `fails(prefix)` says whether the base +
    prefix fails (or the verdict word it fails with); a failing step stops at its first
    check, as a worker does. The outcome gathers everything that landed on the way."""
    steps: list[tuple[str, int]] = []
    decided: list[policy.Outcome] = []
    rnd, proposed, now = policy.propose(rnd, 1)
    while True:
        decided += [now] if now else []
        if rnd.over or not proposed:
            break
        [step] = proposed
        steps.append((step.purpose, step.prefix))
        verdicts = verdicts_of(step, fails(rnd.candidates[: step.prefix]))
        rnd, now = policy.record(rnd, step, verdicts)
        decided += [now] if now else []
        rnd, proposed, now = policy.propose(rnd, 1)
    return joined(decided), steps


def joined(decided: Sequence[policy.Outcome]) -> policy.Outcome:
    """What a round decided in all: everything that landed, in order; who was blamed; why
    it halted."""
    land = tuple(t for o in decided for t in o.land)
    blamed = next((o.blamed for o in decided if o.blamed), None)
    return policy.Outcome(land, blamed, next((o.halt for o in decided if o.halt), None))


def verdicts_of(step: policy.Step, failed: bool | str) -> dict[str, str]:
    """A worker's verdicts: the first check fails with `failed`'s word, or every check passes."""
    word = failed if isinstance(failed, str) else "failed"
    return {step.checks[0]: word} if failed else dict.fromkeys(step.checks, "passed")


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
    assert policy.propose(fresh, 1)[1:] == ((), policy.Outcome(land=("T1",)))
    assert policy.propose(moved, 1)[1:] == ((policy.Step(1, "batch", ("unit",)),), None)


def test_without_any_check_a_batch_lands_at_once() -> None:
    rnd, steps, outcome = policy.propose(round_of(3, integration=None), 1)
    assert steps == () and outcome == policy.Outcome(land=("T1", "T2", "T3")) and rnd.over


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


# -- steps in parallel (decision 0160) ---------------------------------------------------------


def play_parallel(
    rnd: policy.Round, fails: Callable[[Sequence[str]], bool | str], workers: int
) -> tuple[policy.Outcome, list[list[tuple[str, int]]]]:
    """Run a round with `workers` workers in lockstep: each wall round, every free worker
    takes a step, then every running step answers, in the order handed out. Returns what
    was decided and the steps of each wall round."""
    rounds: list[list[tuple[str, int]]] = []
    decided: list[policy.Outcome] = []
    running: list[policy.Step] = []
    while not rnd.over:
        rnd, proposed, now = policy.propose(rnd, workers - len(running))
        decided += [now] if now else []
        running += proposed
        if not running:
            break
        rounds.append([(s.purpose, s.prefix) for s in running])
        for step in running:
            verdicts = verdicts_of(step, fails(rnd.candidates[: step.prefix]))
            rnd, now = policy.record(rnd, step, verdicts)
            decided += [now] if now else []
        running = []
    return joined(decided), rounds


def test_a_free_worker_checks_the_next_batch_on_top_of_the_running_one() -> None:
    rnd = replace(round_of(6), batch=3)
    rnd, steps, _ = policy.propose(rnd, 3)
    assert [(s.purpose, s.prefix) for s in steps] == [("batch", 3), ("ahead", 6)]


def test_a_longer_prefix_that_passes_first_lands_it_all_and_the_shorter_stops_mattering() -> None:
    rnd, [batch, ahead], _ = policy.propose(replace(round_of(6), batch=3), 2)
    rnd, outcome = policy.record(rnd, ahead, {"test": "passed"})
    assert outcome == policy.Outcome(land=("T1", "T2", "T3", "T4", "T5", "T6")) and rnd.over
    assert policy.record(rnd, batch, {"test": "failed"}) == (rnd, None)  # moot: ignored


def test_the_shorter_prefix_lands_at_once_while_the_longer_goes_on_on_top_of_it() -> None:
    rnd, [batch, ahead], _ = policy.propose(replace(round_of(6), batch=3), 2)
    rnd, outcome = policy.record(rnd, batch, {"test": "passed"})
    assert outcome == policy.Outcome(land=("T1", "T2", "T3")) and rnd.running == (ahead,)
    assert not rnd.over and rnd.landed == 3
    rnd, outcome = policy.record(rnd, ahead, {"test": "passed"})
    assert outcome == policy.Outcome(land=("T4", "T5", "T6")) and rnd.over


def test_a_failing_batch_drops_the_prefix_ahead_and_searches_with_every_free_worker() -> None:
    rnd, [batch, _ahead], _ = policy.propose(replace(round_of(16), batch=8), 2)
    rnd, outcome = policy.record(rnd, batch, {"test": "failed"})
    assert outcome is None and rnd.running == () and rnd.hi == 8
    rnd, steps, _ = policy.propose(rnd, 4)
    assert [(s.purpose, s.prefix) for s in steps] == [
        ("base", 0),
        ("bisect", 4),
        ("bisect", 2),
        ("bisect", 6),
    ]


def test_queued_tasks_extend_the_round_and_a_free_worker_checks_them_ahead() -> None:
    rnd, [batch], _ = policy.propose(round_of(2), 2)
    rnd = policy.extend(rnd, ("T9",), {"T9": "unit"}, {})
    rnd, [ahead], _ = policy.propose(rnd, 1)
    assert ahead == policy.Step(3, "ahead", ("test", "unit")) and batch.prefix == 2


def test_a_prefix_that_passes_during_the_search_lands_before_the_breaker_is_confirmed() -> None:
    rnd = replace(round_of(4), hi=4, failed=("test",), base_ran=("test",))
    rnd, [step], _ = policy.propose(rnd, 1)
    rnd, outcome = policy.record(rnd, step, {"test": "passed"})
    assert step.prefix == 2 and outcome == policy.Outcome(land=("T1", "T2"))
    assert rnd.landed == 2 and not rnd.over


def drain(
    rnd: policy.Round, fails: Callable[[Sequence[str]], bool | str], workers: int
) -> tuple[policy.Outcome, int]:
    """Rounds one after another until one blames, halts or lands the last candidate, as the
    queue runs them: what was decided in all, and how many wall rounds it took."""
    decided: list[policy.Outcome] = []
    walls = 0
    while rnd.candidates:
        done = tuple(t for o in decided for t in o.land)
        outcome, rounds = play_parallel(rnd, lambda p, done=done: fails(done + tuple(p)), workers)
        decided.append(outcome)
        walls += len(rounds)
        if outcome.blamed or outcome.halt or not outcome.land:
            break
        rnd = replace(
            rnd, candidates=rnd.candidates[len(outcome.land) :], base=rnd.base + len(outcome.land)
        )
    return joined(decided), walls


@pytest.mark.parametrize("workers", [2, 3, 4])
@pytest.mark.parametrize("breaker", [*range(1, 17), None])
def test_parallel_steps_decide_what_one_at_a_time_decides(
    workers: int, breaker: int | None
) -> None:
    """The same queue, one step at a time and with several workers: the same tasks land, the
    same one is blamed, and the parallel one never takes more wall rounds."""

    def fails(prefix: Sequence[str]) -> bool:
        return f"T{breaker}" in prefix

    rnd = replace(round_of(16), batch=8)
    alone, steps = drain(rnd, fails, 1)
    together, rounds = drain(rnd, fails, workers)
    assert together == alone
    assert rounds <= steps


def test_four_workers_find_a_breaker_in_fewer_wall_rounds_than_one() -> None:
    rnd = round_of(16)
    sequential = [drain(rnd, lambda p, b=b: f"T{b}" in p, 1)[1] for b in range(1, 17)]
    parallel = [drain(rnd, lambda p, b=b: f"T{b}" in p, 4)[1] for b in range(1, 17)]
    assert sum(parallel) < sum(sequential)
    assert max(parallel) <= 4 < max(sequential)  # batch, base+3 cuts, 3 cuts, confirm


@pytest.mark.parametrize("workers", [2, 4])
def test_a_flaky_failure_and_a_broken_base_decide_the_same_with_several_workers(
    workers: int,
) -> None:
    runs = iter([True])
    flaky, _ = play_parallel(round_of(8), lambda prefix: next(runs, False), workers)
    assert flaky.blamed is None and flaky.halt is HaltCause.FLAKY
    broken, _ = play_parallel(round_of(8), lambda prefix: True, workers)
    assert broken == policy.Outcome(halt=HaltCause.FAILS_ALONE)


# -- which tasks join a round: landing order, cut once --------------------------------------


def rnd_of(candidates: tuple[str, ...], **fields: Any) -> policy.Round:
    return replace(policy.Round(candidates, 0, "test", {}, {}), **fields)


def test_a_new_round_takes_the_head_of_the_queue_in_the_order_tasks_finished() -> None:
    assert policy.joining(["T3", "T1", "T2"], None, 2) == ("T3", "T1")


def test_a_running_round_takes_those_queued_since_up_to_the_room_left_in_its_window() -> None:
    rnd = rnd_of(("A", "B"), landed=1)  # A landed: one candidate still in the window

    assert policy.joining(["B", "C", "D", "E"], rnd, 3) == ("C", "D")


def test_no_task_joins_a_round_once_a_prefix_failed_or_its_window_is_full() -> None:
    assert policy.joining(["A", "B", "C"], rnd_of(("A", "B"), hi=2), 4) == ()
    assert policy.joining(["A", "B", "C"], rnd_of(("A", "B")), 2) == ()
