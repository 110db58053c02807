"""Contention by part: `stats`, its JSON and the report gather a file's parts under the file.

A literal event log of a run with part leases (`api.py::handle`, `api.py::route`, and one
whole-file refusal of `api.py` while a part of it was held) and one file leased whole.
"""

from __future__ import annotations

from typing import Any

from codefleet.cli.output import console
from codefleet.cli.results.statscmds import print_stats
from codefleet.review.collisionstats import FileStats, fleet_stats, part_row_label
from codefleet.review.facts import run_facts
from codefleet.review.report.contentionsections import stats_section
from codefleet.review.report.reportrender import render_markdown
from codefleet.review.report.runreport import build_report
from codefleet.review.runrecord import RunRecord
from codefleet.review.statsjson import stats_json


def ev(
    n: int, kind: str, task_id: str | None = None, at: float = 0.0, **payload: Any
) -> dict[str, Any]:
    return {
        "id": n,
        "type": kind,
        "task_id": task_id,
        "agent_id": None,
        "at": f"2026-07-31T18:00:{at:06.3f}Z",
        "payload": payload,
    }


def denied(n: int, task_id: str, at: float, path: str, holder: str) -> dict[str, Any]:
    return ev(
        n,
        "lease_denied",
        task_id,
        at,
        path=path,
        requester_name=f"runner-{task_id}",
        holder_task_id=holder,
        holder_agent_name=f"runner-{holder}",
    )


def task(task_id: str) -> dict[str, Any]:
    return {"id": task_id, "title": task_id, "status": "succeeded", "attempts": 2, "cost_usd": 0.0}


# T1 holds api.py::handle: T2 (1-2 s) and T3 (1-2.5 s) are refused it; T3's next attempt
# (3-3.5 s) is refused api.py::route, which T2 holds; T4 (4-5 s) is refused the whole of
# api.py while T1 holds its part; T5 (1-2 s) is refused models.py, leased whole. T6 waits
# once for two parts of api.py at once (one event per key, in one transaction).
EVENTS = (
    ev(1, "fleet_started", at=0.0, runners=3),
    ev(2, "task_assigned", "T1", 1.0, agent_name="runner-T1", attempt=1),
    ev(3, "task_assigned", "T2", 1.0, agent_name="runner-T2", attempt=1),
    ev(4, "task_assigned", "T3", 1.0, agent_name="runner-T3", attempt=1),
    ev(5, "task_assigned", "T5", 1.0, agent_name="runner-T5", attempt=1),
    ev(6, "lease_acquired", "T1", 1.5, path="api.py::handle"),
    ev(7, "lease_acquired", "T1", 1.5, path="models.py"),
    denied(8, "T2", 2.0, "api.py::handle", "T1"),
    ev(9, "task_requeued", "T2", 2.0, error_kind="veto", attempt=1),
    denied(10, "T5", 2.0, "models.py", "T1"),
    ev(11, "task_requeued", "T5", 2.0, error_kind="veto", attempt=1),
    denied(12, "T3", 2.5, "api.py::handle", "T1"),
    ev(13, "task_requeued", "T3", 2.5, error_kind="veto", attempt=1),
    ev(14, "task_assigned", "T2", 3.0, agent_name="runner-T2", attempt=2),
    ev(15, "task_assigned", "T3", 3.0, agent_name="runner-T3", attempt=2),
    ev(16, "lease_acquired", "T2", 3.0, path="api.py::route"),
    denied(17, "T3", 3.5, "api.py::route", "T2"),
    ev(18, "task_requeued", "T3", 3.5, error_kind="veto", attempt=2),
    ev(19, "task_assigned", "T4", 4.0, agent_name="runner-T4", attempt=1),
    denied(20, "T4", 5.0, "api.py", "T1"),
    ev(21, "task_requeued", "T4", 5.0, error_kind="veto", attempt=1),
    ev(22, "task_assigned", "T6", 5.0, agent_name="runner-T6", attempt=1),
    ev(23, "lease_waited", "T6", 7.0, path="api.py::handle", waited_s=1.0, outcome="granted"),
    ev(24, "lease_waited", "T6", 7.0, path="api.py::route", waited_s=1.0, outcome="granted"),
    ev(25, "task_succeeded", "T6", 8.0, attempt=1),
)
TASKS = tuple(task(t) for t in ("T1", "T2", "T3", "T4", "T5", "T6"))


def record() -> RunRecord:
    return RunRecord(tasks=TASKS, events=EVENTS, workdir="/tree")


def test_a_file_leased_by_part_counts_its_parts_and_whole_key_together_with_each_part_beneath():
    stats = fleet_stats(run_facts(record()))

    api, models = stats.files
    assert api == FileStats(
        "api.py",
        vetoes=4,
        tasks=("T1", "T2", "T3", "T4"),
        veto_lost_s=4.0,  # T2's 1 s, T3's 1.5 s and 0.5 s, T4's 1 s: each attempt once
        rollback_lost_s=0.0,
        rollbacks=0,
        parts=(
            FileStats("api.py::handle", 2, ("T1", "T2", "T3"), 2.5, 0.0, 0),
            FileStats("api.py", 1, ("T1", "T4"), 1.0, 0.0, 0),  # the whole file, refused once
            FileStats("api.py::route", 1, ("T2", "T3"), 0.5, 0.0, 0),
        ),
    )
    assert models == FileStats("models.py", 1, ("T1", "T5"), 1.0, 0.0, 0)  # leased whole: as before
    assert [part_row_label(p.path) for p in api.parts] == [
        "  ::handle",
        "  (whole file)",
        "  ::route",
    ]


def test_one_wait_for_two_parts_counts_once_for_the_file_and_once_for_each_part():
    (api,) = fleet_stats(run_facts(record())).lease_waits

    assert (api.path, api.waits, api.waited_s, api.kept_s) == ("api.py", 1, 1.0, 1.0)
    assert [(p.path, p.waits, p.waited_s) for p in api.parts] == [
        ("api.py::handle", 1, 1.0),
        ("api.py::route", 1, 1.0),
    ]


def test_the_json_keeps_each_files_keys_and_adds_its_parts_by_name():
    figures = stats_json(fleet_stats(run_facts(record())))

    api, models = figures["files"]
    assert (api["path"], api["vetoes"], api["veto_lost_s"]) == ("api.py", 4, 4.0)
    assert [(p["part"], p["path"], p["vetoes"]) for p in api["parts"]] == [
        ("handle", "api.py::handle", 2),
        (None, "api.py", 1),
        ("route", "api.py::route", 1),
    ]
    assert models["parts"] == []
    assert [p["part"] for p in figures["lease_waits"][0]["parts"]] == ["handle", "route"]


def test_the_stats_table_shows_the_files_total_then_its_parts_most_contested_first():
    with console.capture() as shown:
        print_stats(fleet_stats(run_facts(record())))
    files = shown.get().split("Files: collisions and rollbacks")[1].split("Waits:")[0]
    rows = [line.split("│")[1:-1] for line in files.splitlines() if line.startswith("│")]
    cells = [(row[0].rstrip(), row[1].strip()) for row in rows]

    assert cells == [
        (" api.py", "4"),
        ("   ::handle", "2"),
        ("   (whole file)", "1"),
        ("   ::route", "1"),
        (" models.py", "1"),
    ]
    assert "api.py::" not in shown.get()  # never as an unrelated key of its own


def test_the_reports_contention_table_groups_the_parts_under_their_file():
    page = render_markdown(build_report(record(), [stats_section]))

    api = page.index("| api.py | 4 | T1, T2, T3, T4 |")
    assert api < page.index("| ::handle | 2 | T1, T2, T3 |") < page.index("| ::route | 1 |")
    assert "| (whole file) | 1 | T1, T4 |" in page
    assert "| models.py | 1 | T1, T5 |" in page and "api.py::" not in page
