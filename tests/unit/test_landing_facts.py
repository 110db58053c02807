"""Landing facts from a literal landing run's event log: the queue, checks, landings, breaks, halts."""

from __future__ import annotations

from landing_log import CHECKING, EVENTS, HALTED, OLD_EVENTS, TASKS

from codefleet.models import from_iso
from codefleet.review.facts import attempts_of, run_facts
from codefleet.review.landinglog import landing_of
from codefleet.review.runrecord import RunRecord


def test_an_attempt_ends_when_its_task_waits_to_land_and_takes_the_landings_outcome() -> None:
    attempts = attempts_of(EVENTS)

    assert [(a.task_id, a.number, a.runner, a.seconds, a.outcome) for a in attempts] == [
        ("T1", 1, "runner-1", 2.0, "succeeded"),
        ("T2", 1, "runner-2", 2.5, "integration_failed"),
        ("T2", 2, "runner-1", 1.5, "succeeded"),
        ("T3", 1, "runner-2", 3.0, "succeeded"),
    ]
    assert attempts[1].restored == ["app.py"]


def test_a_task_still_waiting_to_land_has_an_attempt_that_ended_in_landing() -> None:
    outcomes = {(a.task_id, a.number): a.outcome for a in attempts_of(EVENTS[:HALTED])}

    assert outcomes[("T3", 1)] == "landing"


def test_landings_carry_their_order_the_time_they_waited_and_the_checks_that_let_them_land() -> (
    None
):
    landing = landing_of(EVENTS)

    assert [(x.task_id, x.order, x.waited_s) for x in landing.landed] == [
        ("T1", 1, 2.5),
        ("T2", 2, 1.0),
        ("T3", 3, 4.5),
    ]
    assert landing.orders == (("T1", 1), ("T2", 2), ("T3", 3))
    assert landing.last_order == 3
    assert len(landing.checks) == 8
    assert landing.checks_per_landed == 8 / 3
    assert [(c.purpose, c.batch, c.verdict) for c in landing.checks_on("T2")] == [
        ("batch", ("T1", "T2"), "failed"),
        ("bisect", ("T2",), "failed"),
        ("batch", ("T2",), "passed"),
    ]
    assert landing.waiting == () and landing.running is None and landing.halted is None


def test_a_break_names_whom_it_conflicted_with_and_is_reworked_once_the_task_lands() -> None:
    (broke,) = landing_of(EVENTS).breaks

    assert (broke.task_id, broke.attempt, broke.check) == ("T2", 1, "test")
    assert broke.conflicts_with == ("T1",) and broke.blamed == ("T2",)
    assert "NameError" in broke.output_tail
    assert broke.reworked
    assert not landing_of(EVENTS[:23]).breaks[0].reworked


def test_a_halt_is_in_force_until_landing_resumes() -> None:
    halted = landing_of(EVENTS[:HALTED])

    assert halted.halted is not None
    assert (halted.halted.check, halted.halted.last_landed) == ("test", "T2")
    assert halted.waiting == ("T3",)
    (halt,) = landing_of(EVENTS).halts
    assert halt.resumed_at is not None and halt.reason == "operator"
    assert landing_of(EVENTS).halted is None


def test_the_check_under_way_and_the_queue_in_order_while_a_batch_is_checked() -> None:
    checking = landing_of(EVENTS[:CHECKING])

    assert checking.waiting == ("T1", "T2")
    assert checking.running is not None
    assert (checking.running.batch, checking.running.purpose, checking.running.base) == (
        ("T1", "T2"),
        "batch",
        0,
    )


def test_a_run_recorded_before_landing_has_no_landing_facts_and_its_attempts_read_as_before() -> (
    None
):
    facts = run_facts(RunRecord(tasks=TASKS[:1], events=tuple(OLD_EVENTS), workdir="/tree"))

    assert not facts.landing.seen
    assert facts.landing.orders == ()
    assert [a.outcome for a in facts.attempts] == ["succeeded"]


def test_run_facts_derive_landing_once_for_the_report_and_stats() -> None:
    facts = run_facts(RunRecord(tasks=TASKS, events=tuple(EVENTS), workdir="/tree"))

    assert facts.landing == landing_of(EVENTS)
    assert facts.landing.seen


def test_a_check_a_restart_interrupted_and_ran_again_counts_once_and_is_not_left_running() -> None:
    started = EVENTS[CHECKING - 1]
    again = {**started, "id": 100, "at": EVENTS[CHECKING]["at"]}
    events = [*EVENTS[:CHECKING], again, *EVENTS[CHECKING:]]  # no verdict before the rerun

    landing = landing_of(events)

    assert len(landing.checks) == 8 and landing.running is None
    assert landing.checks[0].started_at == from_iso(again["at"])
