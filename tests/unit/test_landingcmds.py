"""`codefleet landing`'s text: what a person reads about the queue (pure: `landing_lines`)."""

from __future__ import annotations

from codefleet.cli.operate.landingcmds import landing_lines, resume_line


def test_no_integration_check_yet_says_where_one_comes_from_not_just_none() -> None:
    shown = landing_lines({"integration": None, "landed": 0, "queue": [], "batch": 4})

    assert shown[0].startswith("integration check: none on this server yet")
    assert "`codefleet run` or `load` reads it" in shown[0]


def test_the_queue_and_the_check_under_way_are_named() -> None:
    state = {
        "integration": "test",
        "landed": 2,
        "queue": ["T3", "T4"],
        "batch": 4,
        "step": {"batch": ["T3"], "purpose": "batch", "checks": ["test"], "worker": "w1"},
    }

    shown = landing_lines(state)

    assert shown[:3] == [
        "integration check: test",
        "landed: 2 · waiting: 2 · batch up to 4",
        "queue: T3 → T4",
    ]
    assert shown[3] == "checking T3 (batch: test) by w1"


def test_every_step_in_flight_is_named_with_its_worker() -> None:
    first = {"batch": ["T3"], "purpose": "batch", "checks": ["test"], "worker": "w1"}
    ahead = {"batch": ["T3", "T4"], "purpose": "ahead", "checks": ["test"], "worker": None}
    state = {
        "integration": "test",
        "landed": 2,
        "queue": ["T3", "T4"],
        "batch": 1,
        "parallel": 4,
        "step": first,
        "steps": [first, ahead],
    }

    shown = landing_lines(state)

    assert shown[1] == "landed: 2 · waiting: 2 · batch up to 1 · up to 4 steps at once"
    assert shown[3:] == [
        "checking T3 (batch: test) by w1",
        "checking T3, T4 (ahead: test) (waiting for a worker)",
    ]


def test_resume_says_a_run_is_needed_for_the_queue_to_land() -> None:
    said = resume_line({"resumed": True, "was": {"check": "test"}})

    assert said.startswith("landing resumed: the next round checks the landed tree again first")
    assert "lands while a `codefleet run`" in said
    assert resume_line({"resumed": False, "was": None}) == (
        "landing was not halted; nothing to resume"
    )
