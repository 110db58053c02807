"""The run report of a landing run: the landing section and the task table's order column."""

from __future__ import annotations

from pathlib import Path

from landing_log import EVENTS, HALTED, OLD_EVENTS, TASKS, task

from codefleet.review.report.reportrender import render_html, render_markdown
from codefleet.review.report.runreport import build_report, report_json
from codefleet.review.runrecord import RunRecord


def landing_run(events: list[dict[str, object]] = EVENTS, tasks: tuple = TASKS) -> RunRecord:
    return RunRecord(tasks=tasks, events=tuple(events), workdir="/tree")


def test_the_landing_section_lists_the_order_the_break_reworked_and_the_halt() -> None:
    page = render_markdown(build_report(landing_run()))
    section = page[page.index("### Landing") :]

    assert "3 landed in order · 1 integration break(s), 1 reworked · 1 halt(s)" in section
    assert "8 (2.67 per landed task)" in section
    assert "| \\#1 | T1 | Rename greet to salute | 5.50 s | 2.50 s | test |" in section
    assert "| \\#3 | T3 | Add welcome | 15.0 s | 4.50 s | test |" in section
    assert "| T2 | 1 | test | T1 | reworked and landed | E NameError" in section
    assert (
        "Landing halted at 12.0 s: the landed tree alone fails `test` (last landed T2)" in section
    )
    assert "resumed at 14.0 s (operator)" in section


def test_the_task_table_has_the_landing_order_column() -> None:
    report = build_report(landing_run())
    page = render_markdown(report)

    assert "| task | title | outcome | landed | attempts |" in page
    assert "| T2 | Add a caller of greet | succeeded | \\#2 | 2/3 |" in page
    data = report_json(report)["sections"]
    assert [t["order"] for t in data["tasks"]] == [1, 2, 3]
    assert data["landing"]["breaks"] == [
        {"task_id": "T2", "attempt": 1, "check": "test", "conflicts_with": ["T1"], "reworked": True}
    ]
    assert data["landing"]["halts"] == [{"check": "test", "last_landed": "T2", "resumed": True}]


def test_a_halt_in_force_is_said_loudly_and_a_task_waiting_to_land_keeps_the_run_running() -> None:
    tasks = (task("T1"), task("T2", attempts=2), task("T3", "landing"))
    report = build_report(landing_run(EVENTS[:HALTED], tasks))
    page = render_markdown(report)

    assert report.verdict == "RUNNING"
    assert "**Landing halted at 12.0 s" in page
    assert "still halted: `codefleet landing resume` after a fix" in page
    assert "| T3 | Add welcome | landing | — |" in page
    assert report_json(report)["sections"]["landing"]["waiting"] == ["T3"]
    assert '<p class="bad">Landing halted' in render_html(report)


def test_a_run_recorded_before_landing_has_no_landing_section_nor_order_column() -> None:
    report = build_report(landing_run(OLD_EVENTS, TASKS[:1]))
    page = render_markdown(report)

    assert "### Landing" not in page
    assert "| task | title | outcome | attempts |" in page
    assert report_json(report)["sections"]["tasks"][0]["order"] is None


def test_the_report_timeline_colours_an_attempt_waiting_to_land_and_one_that_broke_the_check() -> (
    None
):
    tasks = (task("T1"), task("T2", attempts=2), task("T3", "landing"))
    page = render_html(build_report(landing_run(EVENTS[:HALTED], tasks)))

    assert "T3 attempt 1: landing" in page and "T2 attempt 1: integration_failed" in page
    assert '<i style="background:#bf3989"></i>landing' in page


def test_a_break_shows_the_failing_test_even_when_a_benchmark_table_ends_its_output() -> None:
    output = (Path(__file__).with_name("checkoutputs") / "pytest-benchmark-failed.txt").read_text()
    events = [
        {**e, "payload": {**e["payload"], "output_tail": output[-2_000:]}}  # type: ignore[dict-item]
        if e["type"] == "integration_failed"
        else e
        for e in EVENTS
    ]

    page = render_markdown(build_report(landing_run(events)))
    section = page[page.index("### Landing") :]

    failed = "FAILED test\\_shop.py::test\\_total\\_with\\_tax - assert 36.0 == 36.5"
    assert f"| reworked and landed | {failed} |" in section  # the table's cell
    assert "T2, attempt 1: the failing lines, then the last lines of its output" in section
    assert "FAILED test_shop.py::test_total_with_tax - assert 36.0 == 36.5\n" in section
