"""The terminal dashboard shows landing from the events: status, queue, check, last landing, halt."""

from __future__ import annotations

import io
from typing import Any

from landing_log import CHECKING, EVENTS, HALTED, OLD_EVENTS, T0, ev
from rich.console import Console

from codefleet.review.landinglog import landing_of
from codefleet.ui.dashboard import _Watch
from codefleet.ui.dashboardrender import render
from codefleet.ui.report import STATUS_STYLE
from codefleet.ui.viewmodel import ViewModel, build_view, describe

NOW = T0.replace(second=12)  # twelve seconds into the landing run
NAMES = {"a_1": "runner-1", "a_2": "runner-2"}


def state(statuses: dict[str, str]) -> dict[str, Any]:
    tasks = [
        {"id": t, "title": f"title {t}", "status": s, "attempts": 1, "max_attempts": 3}
        for t, s in statuses.items()
    ]
    counts: dict[str, int] = {}
    for s in statuses.values():
        counts[s] = counts.get(s, 0) + 1
    return {
        "tasks": tasks,
        "agents": [],
        "leases": [],
        "counters": {"tasks": counts, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0},
        "last_event_id": 0,
    }


def view(statuses: dict[str, str], events: list[dict[str, Any]]) -> ViewModel:
    return build_view(
        state(statuses),
        (describe(e, NAMES) for e in events),
        server="s",
        connection="live",
        vetoes=0,
        last_event_id=int(events[-1]["id"]),
        now=NOW,
        landing=landing_of(events),
    )


def frame(shown: ViewModel) -> str:
    console = Console(record=True, width=140, height=60, file=io.StringIO())
    console.print(render(shown))
    return console.export_text()


def test_a_task_waiting_to_land_has_its_own_mark_and_colour_and_counts_as_landing() -> None:
    shown = view({"T1": "landing", "T2": "landing", "T3": "pending"}, EVENTS[:CHECKING])
    text = frame(shown)

    assert STATUS_STYLE["landing"] not in {v for k, v in STATUS_STYLE.items() if k != "landing"}
    assert "⇣ landing" in text
    assert "landing 2" in text.splitlines()[0]
    assert [t.note for t in shown.tasks[:2]] == ["waits to land", "waits to land"]


def test_the_landing_panel_shows_the_queue_in_order_and_the_check_under_way() -> None:
    text = frame(view({"T1": "landing", "T2": "landing", "T3": "pending"}, EVENTS[:CHECKING]))

    assert "Landing (in order)" in text
    assert "queue T1 → T2 · checking test on T1, T2 (batch) over 0 landed" in text
    assert "nothing landed yet" in text


def test_every_check_under_way_shows_when_steps_run_in_parallel() -> None:
    ahead = ev(CHECKING + 1, "landing_check_started", None, 3.6, step=9, check="test",
               batch=["T1", "T2", "T3"], purpose="ahead", base=0)  # fmt: skip
    shown = view({"T1": "landing", "T2": "landing", "T3": "landing"}, [*EVENTS[:CHECKING], ahead])
    text = frame(shown)

    assert shown.landing is not None
    assert shown.landing.checking == "test on T1, T2, T3 (ahead) over 0 landed"
    assert shown.landing.also == ("test on T1, T2 (batch) over 0 landed",)
    assert "; also test on T1, T2 (batch) over 0 landed" in text


def test_the_last_landing_and_the_breaks_show_once_tasks_have_landed() -> None:
    shown = view({"T1": "succeeded", "T2": "landing", "T3": "running"}, EVENTS[:27])
    text = frame(shown)

    assert shown.landing is not None and shown.landing.last_order == 1
    assert shown.tasks[0].note == "landed #1"
    assert "last landed #1 (T1)" in text
    assert "1 integration break(s), 0 reworked" in text


def test_a_halt_is_loud_above_the_tables_until_landing_resumes() -> None:
    halted = frame(view({"T1": "succeeded", "T2": "succeeded", "T3": "landing"}, EVENTS[:HALTED]))

    assert "⛔ LANDING HALTED · the landed tree alone fails test (last landed T2)" in halted
    assert "nothing lands until `codefleet landing resume`" in halted
    assert "ConnectionRefusedError" in halted
    assert halted.index("LANDING HALTED") < halted.index("Tasks")
    resumed = frame(view({"T1": "succeeded", "T2": "succeeded", "T3": "landing"}, EVENTS[:37]))
    assert "⛔ LANDING HALTED" not in resumed


def test_a_task_the_server_says_is_landing_shows_in_the_queue_without_its_queued_event() -> None:
    shown = view({"T1": "landing", "T2": "landing", "T9": "landing"}, EVENTS[:10])

    assert shown.landing is not None
    assert shown.landing.queue == ("T1", "T2", "T9")  # T9 queued before the backlog
    moved_on = view({"T1": "landing", "T2": "pending"}, EVENTS[:10]).landing
    assert moved_on is not None and moved_on.queue == ("T1",)  # the server is ahead of the log


def test_the_dashboard_folds_landing_from_the_events_it_streams() -> None:
    watch = _Watch("s")
    watch.state = state({"T1": "succeeded", "T2": "succeeded", "T3": "landing"})
    for event in EVENTS[:HALTED]:
        watch.on_event(event)
    halted = watch.view(60).landing
    for event in EVENTS[HALTED:]:
        watch.on_event(event)

    assert halted is not None and halted.halt is not None and halted.queue == ("T3",)
    landed = watch.view(60).landing
    assert landed is not None and landed.halt is None and landed.last_order == 3


def test_a_run_before_landing_shows_no_landing_panel_and_its_success_still_reads() -> None:
    shown = view({"T1": "succeeded"}, OLD_EVENTS)

    assert shown.landing is None
    assert "Landing" not in frame(shown)
    assert describe(OLD_EVENTS[2], NAMES).text == "T1: ✓ succeeded · $0.0100"


def test_a_landed_success_reads_with_its_order_and_the_runs_log_prints_breaks_and_halts() -> None:
    from codefleet.ui.dashboard import NOTABLE_EVENTS

    assert describe(EVENTS[15], NAMES).text == "T1: ✓ succeeded · landed #1 · $0.0100"
    printed = [e["type"] for e in EVENTS if e["type"] in NOTABLE_EVENTS and "land" in e["type"]]
    assert printed == ["landing_halted", "landing_resumed"]
    assert "integration_failed" in NOTABLE_EVENTS
