"""The landing queue's handling of a round: what each step's verdicts do to the tasks.

Same harness as `test_engine.py` (a real SQLite file, a scratch tree, an injected
clock, no event loop). Tasks finish through the engine, so they wait to land in the
order they finished; a worker is played by calling `claim` and `result` directly with
the verdicts a real worker reports (`fleet.landingworker`). Each rule here has its own
test, so breaking one fails a test named after it.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import test_engine
from test_engine import Fleet

from codefleet.api.landingrecords import CheckRun, LandingStep
from codefleet.errors import NotOwner
from codefleet.models import CheckVerdict, EventType, TaskStatus

make_fleet = test_engine.make_fleet  # the engine harness's fixtures
fleet = test_engine.fleet

CHECK = "test"


def waiting(fleet: Fleet, *ids: str) -> None:
    """`ids` finish well, in this order, with `test` as the integration check: they wait."""
    fleet.engine.operator.define_checks({CHECK: "run the suite"})
    fleet.engine.landing_queue.set_integration(CHECK)
    for n, task_id in enumerate(ids):
        fleet.add(task_id)
        fleet.register(f"runner-{n}")
        fleet.run(task_id)
    assert fleet.engine.landing_queue.state()["queue"] == list(ids)


def claim(fleet: Fleet, worker: str = "w", timeout_s: float = 30.0) -> LandingStep:
    step = fleet.engine.landing_queue.claim(worker, timeout_s)
    assert step is not None, "no step to claim"
    return step


def report(fleet: Fleet, step: LandingStep, verdict: str, output: str = "") -> None:
    """The step's one check ended with `verdict` (a worker's word) and `output`."""
    [check] = [c.name for c in step.checks]
    fleet.engine.landing_queue.result(
        step.step, [CheckRun(check, CheckVerdict(verdict), output=output)]
    )


def play(fleet: Fleet, *verdicts: str, output: str = "") -> list[tuple[str, list[str]]]:
    """Claim and report steps with `verdicts` in turn; the (purpose, batch) of each."""
    steps = []
    for verdict in verdicts:
        step = claim(fleet)
        steps.append((step.purpose, list(step.batch)))
        report(fleet, step, verdict, output)
    return steps


def landed(fleet: Fleet) -> list[tuple[str, int]]:
    return [(e["task_id"], e["payload"]["order"]) for e in fleet.events(EventType.LANDED)]


def status(fleet: Fleet, task_id: str) -> str:
    return str(fleet.task(task_id)["status"])


# -- a passing batch --------------------------------------------------------------------------


def test_a_passing_batch_lands_whole_in_the_order_its_tasks_finished(fleet: Fleet) -> None:
    waiting(fleet, "T3", "T1", "T2")  # finished in this order, not in id order

    assert play(fleet, "passed") == [("batch", ["T3", "T1", "T2"])]
    assert landed(fleet) == [("T3", 1), ("T1", 2), ("T2", 3)]
    succeeded = [e["task_id"] for e in fleet.events(EventType.TASK_SUCCEEDED)]
    assert succeeded == ["T3", "T1", "T2"]
    assert fleet.engine.landing_queue.state()["queue"] == []


# -- failures ---------------------------------------------------------------------------------


def test_a_check_that_timed_out_is_a_failure_not_a_pass(fleet: Fleet) -> None:
    waiting(fleet, "T")

    steps = play(fleet, "timed_out", "passed", "timed_out", output="(timed out after 1s)")

    assert steps == [("batch", ["T"]), ("base", []), ("confirm", ["T"])]
    assert landed(fleet) == [] and status(fleet, "T") == TaskStatus.PENDING
    [broke] = fleet.events(EventType.INTEGRATION_FAILED)
    assert broke["task_id"] == "T" and "timed out after 1s" in fleet.task("T")["error"]


def test_a_blamed_task_is_requeued_told_the_check_its_output_and_who_landed_before_it(
    fleet: Fleet,
) -> None:
    waiting(fleet, "A", "B")

    steps = play(fleet, "failed", "passed", "passed", "failed", output="AssertionError: 1 != 2")

    assert steps == [
        ("batch", ["A", "B"]),
        ("base", []),
        ("bisect", ["A"]),
        ("confirm", ["B"]),  # A landed as soon as it passed: B is confirmed on top of it
    ]
    assert landed(fleet) == [("A", 1)] and status(fleet, "B") == TaskStatus.PENDING
    error = str(fleet.task("B")["error"])
    assert error.startswith("Integration failed: check `test` failed on the landed tree")
    assert 'Landed since your attempt started:\n- A "A" changed:' in error
    assert error.endswith("Output of `test` (tail):\nAssertionError: 1 != 2")
    [requeued] = [e for e in fleet.events(EventType.TASK_REQUEUED) if e["task_id"] == "B"]
    assert requeued["payload"]["error_kind"] == "integration_failed"
    [broke] = fleet.events(EventType.INTEGRATION_FAILED)
    assert broke["payload"]["conflicts_with"] == ["A"] and broke["payload"]["blamed"] == ["B"]


def test_a_base_that_fails_alone_halts_landing_blames_nobody_and_keeps_the_work_waiting(
    fleet: Fleet,
) -> None:
    waiting(fleet, "T")

    assert play(fleet, "failed", "failed") == [("batch", ["T"]), ("base", [])]

    halted = fleet.engine.landing_queue.state()["halted"]
    assert halted["why"] == "fails on the landed tree alone" and halted["check"] == CHECK
    assert fleet.events(EventType.INTEGRATION_FAILED) == []
    assert status(fleet, "T") == TaskStatus.LANDING
    assert fleet.engine.landing_queue.claim("w", 30.0) is None  # halted: nothing is handed out
    fleet.engine.landing_queue.resume()
    assert play(fleet, "passed") == [("batch", ["T"])] and landed(fleet) == [("T", 1)]


def test_a_step_that_could_not_run_is_handed_out_again_and_three_times_halts(
    fleet: Fleet,
) -> None:
    waiting(fleet, "T")
    first = claim(fleet)
    report(fleet, first, "did_not_run", "the view could not be built")
    again = claim(fleet)

    assert again.step != first.step and again.batch == ("T",)
    with pytest.raises(NotOwner):
        report(fleet, first, "passed")  # the old step's late answer lands nothing
    assert landed(fleet) == [] and fleet.engine.landing_queue.state()["halted"] is None
    report(fleet, again, "did_not_run")
    report(fleet, claim(fleet), "did_not_run")
    halted = fleet.engine.landing_queue.state()["halted"]
    assert halted["why"] == "could not run" and status(fleet, "T") == TaskStatus.LANDING


# -- a blame is confirmed; a check that cannot start --------------------------------------------


def test_a_failure_that_passes_when_run_again_halts_as_a_flaky_check_and_blames_nobody(
    fleet: Fleet,
) -> None:
    waiting(fleet, "A", "B")

    steps = play(fleet, "failed", "passed", "passed", "passed", output="flaky")

    assert steps[-1] == ("confirm", ["B"])  # on top of A, which landed when it passed
    assert landed(fleet) == [("A", 1)]  # the prefix that passed lands
    halted = fleet.engine.landing_queue.state()["halted"]
    assert halted["why"].startswith("flaky") and "flaky" in halted["output_tail"]
    assert fleet.events(EventType.INTEGRATION_FAILED) == []
    assert status(fleet, "B") == TaskStatus.LANDING and fleet.task("B")["attempts"] == 1


def test_a_check_that_cannot_start_with_the_candidate_but_starts_without_it_blames_it(
    fleet: Fleet,
) -> None:
    waiting(fleet, "T")

    steps = play(fleet, "unrunnable", "passed", "unrunnable", output="./check.sh: not found")

    assert steps == [("batch", ["T"]), ("base", []), ("confirm", ["T"])]
    assert fleet.engine.landing_queue.state()["halted"] is None
    assert status(fleet, "T") == TaskStatus.PENDING
    assert "./check.sh: not found" in fleet.task("T")["error"]


def test_a_check_that_cannot_start_on_the_landed_tree_alone_halts_landing(fleet: Fleet) -> None:
    waiting(fleet, "T")

    assert play(fleet, "unrunnable", "unrunnable") == [("batch", ["T"]), ("base", [])]

    assert fleet.engine.landing_queue.state()["halted"]["why"] == "could not start"
    assert status(fleet, "T") == TaskStatus.LANDING


# -- a claim lapses with its worker ---------------------------------------------------------------


def test_a_claim_whose_worker_falls_silent_is_handed_out_again_within_stale_after(
    make_fleet: Callable[..., Fleet],
) -> None:
    fleet = make_fleet(stale_after=20.0)
    waiting(fleet, "T")
    first = claim(fleet, "w-dead")
    fleet.clock.advance(19.0)
    assert fleet.engine.landing_queue.claim("w-new", 30.0) is None  # still within stale_after

    fleet.clock.advance(2.0)
    state = fleet.engine.landing_queue.state()
    again = claim(fleet, "w-new")

    assert state["step"]["worker"] is None  # `codefleet landing` no longer names the dead one
    assert again.step != first.step and again.batch == ("T",)
    with pytest.raises(NotOwner):
        report(fleet, first, "passed")
    report(fleet, again, "passed")
    assert landed(fleet) == [("T", 1)]


def test_a_worker_that_beats_keeps_its_claim_past_stale_after_and_a_late_beat_is_refused(
    make_fleet: Callable[..., Fleet],
) -> None:
    fleet = make_fleet(stale_after=20.0)
    waiting(fleet, "T")
    first = claim(fleet, "w-alive", timeout_s=300.0)
    assert first.beat_s == 5.0  # four beats per stale_after
    for _ in range(12):  # a minute of a check that may take five, beating
        fleet.clock.advance(first.beat_s)
        fleet.engine.landing_queue.beat(first.step)
        assert fleet.engine.landing_queue.claim("w-other", 30.0) is None

    assert fleet.engine.landing_queue.state()["step"]["worker"] == "w-alive"
    fleet.clock.advance(21.0)
    assert claim(fleet, "w-other").step != first.step
    with pytest.raises(NotOwner):
        fleet.engine.landing_queue.beat(first.step)


# -- steps in parallel (decision 0160) --------------------------------------------------------


def test_a_second_worker_checks_the_next_batch_ahead_and_both_steps_are_shown(
    make_fleet: Callable[..., Fleet],
) -> None:
    fleet = make_fleet(landing_batch=2, landing_parallel=4)
    waiting(fleet, "A", "B", "C", "D")

    first, second = claim(fleet, "w1"), claim(fleet, "w2")

    assert (first.purpose, first.batch) == ("batch", ("A", "B"))
    assert (second.purpose, second.batch) == ("ahead", ("A", "B", "C", "D"))
    assert first.step != second.step
    assert fleet.engine.landing_queue.claim("w3", 30.0) is None  # nothing more to check
    state = fleet.engine.landing_queue.state()
    assert [(s["step"], s["worker"]) for s in state["steps"]] == [
        (first.step, "w1"),
        (second.step, "w2"),
    ]
    assert state["step"] == state["steps"][0]


def test_the_batch_lands_when_it_passes_and_the_step_ahead_lands_the_rest_on_top_of_it(
    make_fleet: Callable[..., Fleet],
) -> None:
    fleet = make_fleet(landing_batch=2, landing_parallel=4)
    waiting(fleet, "A", "B", "C", "D")
    first, second = claim(fleet, "w1"), claim(fleet, "w2")

    report(fleet, first, "passed")
    assert landed(fleet) == [("A", 1), ("B", 2)]
    report(fleet, second, "passed")  # checked on the base + A..D: what is landed now + C, D

    assert landed(fleet) == [("A", 1), ("B", 2), ("C", 3), ("D", 4)]
    [c] = [e for e in fleet.events(EventType.LANDED) if e["task_id"] == "C"]
    assert (c["payload"]["base"], c["payload"]["batch"]) == (2, ["C", "D"])


def test_a_failing_batch_makes_the_step_ahead_moot_and_its_late_result_lands_nothing(
    make_fleet: Callable[..., Fleet],
) -> None:
    fleet = make_fleet(landing_batch=2, landing_parallel=4)
    waiting(fleet, "A", "B", "C", "D")
    first, second = claim(fleet, "w1"), claim(fleet, "w2")
    fleet.engine.landing_queue.started(second.step, CHECK)

    report(fleet, first, "failed")
    with pytest.raises(NotOwner):
        fleet.engine.landing_queue.beat(second.step)  # its worker stops the check
    with pytest.raises(NotOwner):
        report(fleet, second, "passed")

    assert landed(fleet) == []
    [stopped] = [
        e for e in fleet.events(EventType.LANDING_CHECK_FINISHED)
        if e["payload"]["step"] == second.step
    ]  # fmt: skip
    assert stopped["payload"]["verdict"] == "stopped"  # the log shows it no longer running
    purposes = sorted(claim(fleet, w).purpose for w in ("w1", "w2"))
    assert purposes == ["base", "bisect"]  # the failing batch is searched by both at once


def test_one_step_at_a_time_when_landing_parallel_is_one(
    make_fleet: Callable[..., Fleet],
) -> None:
    fleet = make_fleet(landing_batch=2, landing_parallel=1)
    waiting(fleet, "A", "B", "C", "D")

    assert claim(fleet, "w1").batch == ("A", "B")
    assert fleet.engine.landing_queue.claim("w2", 30.0) is None
