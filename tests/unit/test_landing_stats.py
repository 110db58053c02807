"""`stats` on a landing run: checks per landed task, waits to land, breaks reworked, halts."""

from __future__ import annotations

import pytest
from landing_log import EVENTS, OLD_EVENTS, TASKS

from codefleet.cli.output import console
from codefleet.cli.results.statscmds import print_stats
from codefleet.review.collisionstats import LandingStats, fleet_stats
from codefleet.review.facts import run_facts
from codefleet.review.runrecord import RunRecord
from codefleet.review.statsjson import stats_json


def landing_run() -> RunRecord:
    return RunRecord(tasks=TASKS, events=tuple(EVENTS), workdir="/tree")


def test_landing_checks_per_landed_task_waits_breaks_reworked_and_halts() -> None:
    stats = fleet_stats(run_facts(landing_run()))

    assert stats.landing == LandingStats(
        checks=8,
        landed=3,
        checks_per_landed=pytest.approx(8 / 3),
        waited_s=8.0,  # T1 2.5 s, T2's second wait 1.0 s, T3 4.5 s
        waited_max_s=4.5,
        breaks=1,
        reworked=1,
        halts=1,
    )
    assert stats_json(stats)["landing"]["checks_per_landed"] == pytest.approx(2.667)


def test_time_waiting_to_land_is_apart_from_waiting_to_run_and_each_task_has_its_order() -> None:
    by_id = {t.id: t for t in fleet_stats(run_facts(landing_run())).tasks}

    assert [(t, by_id[t].order) for t in ("T1", "T2", "T3")] == [("T1", 1), ("T2", 2), ("T3", 3)]
    # T2 waited 3.5 s to land on attempt 1 (until its break) and 1.0 s on attempt 2
    assert by_id["T2"].landing_s == pytest.approx(4.5)
    # created at 0 s, landed at 10 s: 4.0 s running, 4.5 s waiting to land, 1.5 s to run
    assert by_id["T2"].waiting_s == pytest.approx(1.5)
    assert by_id["T1"].waiting_s == pytest.approx(1.0)


def test_the_stats_command_says_landing_in_one_line_and_the_task_table_has_the_order() -> None:
    with console.capture() as shown:
        print_stats(fleet_stats(run_facts(landing_run())))
    out = shown.get()

    assert (
        "Landing: 3 landed · 8 landing check(s) (2.67 per landed task) · waited to land "
        "2.67 s on average, 4.50 s at most · 1 integration break(s), 1 reworked and landed · "
        "1 halt(s)"
    ) in " ".join(out.split())
    assert "landed" in out and "#3" in out


def test_a_run_before_landing_has_no_landing_line_and_the_same_columns() -> None:
    old = RunRecord(tasks=TASKS[:1], events=tuple(OLD_EVENTS), workdir="/tree")
    stats = fleet_stats(run_facts(old))
    with console.capture() as shown:
        print_stats(stats)

    assert stats.landing is None and stats_json(stats)["landing"] is None
    assert "Landing" not in shown.get() and "to land" not in shown.get()
