"""Collision analytics and `stats --suggest` from a literal event log (pure, no server)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from codefleet.api.graphfile import parse_graph
from codefleet.cli.output import console
from codefleet.cli.results.statscmds import print_stats
from codefleet.review.collisionstats import FileStats, ResourceStats, fleet_stats
from codefleet.review.facts import run_facts
from codefleet.review.report.contentionsections import stats_section
from codefleet.review.report.reportrender import render_markdown
from codefleet.review.report.runreport import build_report
from codefleet.review.runrecord import RunRecord
from codefleet.review.statsjson import stats_json
from codefleet.review.suggest import Change, render_graph, suggest


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


def task(task_id: str, **fields: Any) -> dict[str, Any]:
    return {
        "id": task_id,
        "title": task_id,
        "status": "succeeded",
        "attempts": 1,
        "max_attempts": 3,
        "cost_usd": 0.01,
        "depends_on": [],
        **fields,
    }


# T3 holds api.py; T4 is refused it at 2 s and succeeds on attempt 2 (4-6 s), after T3
# succeeded at 3 s. T1's first attempt fails its verify and is rolled back (4-5 s); T2
# waits for T1. Two runners.
EVENTS = (
    ev(1, "fleet_started", at=0.0, runners=2),
    ev(2, "task_assigned", "T3", 1.0, agent_name="runner-1", attempt=1),
    ev(3, "task_assigned", "T4", 1.0, agent_name="runner-2", attempt=1),
    ev(4, "lease_acquired", "T3", 1.5, path="api.py"),
    ev(
        5,
        "lease_denied",
        "T4",
        2.0,
        path="api.py",
        requester_name="runner-2",
        holder_task_id="T3",
        holder_agent_name="runner-1",
    ),
    ev(6, "task_requeued", "T4", 2.0, error_kind="veto", attempt=1),
    ev(7, "task_succeeded", "T3", 3.0, attempt=1),
    ev(8, "task_assigned", "T4", 4.0, agent_name="runner-2", attempt=2),
    ev(9, "task_assigned", "T1", 4.0, agent_name="runner-1", attempt=1),
    ev(10, "file_restored", "T1", 5.0, path="models.py", existed=True),
    ev(11, "file_restored", "T1", 5.0, path="tests/new.py", existed=False),
    ev(12, "task_requeued", "T1", 5.0, error_kind="verify_failed", attempt=1),
    ev(13, "task_succeeded", "T4", 6.0, attempt=2),
    ev(14, "task_assigned", "T1", 6.0, agent_name="runner-1", attempt=2),
    ev(15, "task_succeeded", "T1", 7.5, attempt=2),
    ev(16, "task_unblocked", "T2", 7.5, by="T1"),
    ev(17, "task_assigned", "T2", 7.5, agent_name="runner-2", attempt=1),
    ev(18, "task_succeeded", "T2", 8.5, attempt=1),
)
TASKS = (
    task("T3", cost_usd=0.25),
    task("T4", attempts=2, cost_usd=0.5),
    task("T1", attempts=2, uncharged_attempts=1),
    task("T2", depends_on=["T1"]),
)


def facts(events: tuple[dict[str, Any], ...] = EVENTS) -> Any:
    return run_facts(RunRecord(tasks=TASKS, events=events, workdir="/tree"))


def test_per_file_the_vetoes_the_tasks_involved_and_the_attempt_time_they_cost():
    stats = fleet_stats(facts())

    assert stats.files == (
        FileStats(
            "api.py",
            vetoes=1,
            tasks=("T3", "T4"),
            veto_lost_s=1.0,
            rollback_lost_s=0.0,
            rollbacks=0,
        ),
        FileStats("models.py", 0, (), 0.0, 1.0, 1),
        FileStats("tests/new.py", 0, (), 0.0, 1.0, 1),
    )
    assert (stats.veto_lost_s, stats.rollback_lost_s) == (1.0, 1.0)  # T1's attempt, once


# T5 holds the resource db; T6 is refused it at 2 s (its attempt ran 1-2 s) and succeeds later.
RESOURCE_EVENTS = (
    ev(1, "fleet_started", at=0.0, runners=2),
    ev(2, "task_assigned", "T5", 1.0, agent_name="runner-1", attempt=1),
    ev(3, "task_assigned", "T6", 1.0, agent_name="runner-2", attempt=1),
    ev(4, "lease_acquired", "T5", 1.0, path="/resource:db"),
    ev(
        5,
        "lease_denied",
        "T6",
        2.0,
        path="/resource:db",
        requester_name="runner-2",
        holder_task_id="T5",
        holder_agent_name="runner-1",
    ),
    ev(6, "task_requeued", "T6", 2.0, error_kind="veto", attempt=1),
    ev(7, "task_succeeded", "T5", 3.0, attempt=1),
    ev(8, "task_assigned", "T6", 3.0, agent_name="runner-2", attempt=2),
    ev(9, "task_succeeded", "T6", 4.0, attempt=2),
)


def test_a_veto_on_a_resource_is_counted_per_resource_not_as_a_file():
    record = RunRecord(
        tasks=(task("T5"), task("T6", attempts=2)), events=RESOURCE_EVENTS, workdir="/tree"
    )

    stats = fleet_stats(run_facts(record))

    assert stats.files == ()
    assert stats.resources == (ResourceStats("db", vetoes=1, tasks=("T5", "T6"), veto_lost_s=1.0),)
    assert stats_json(stats)["resources"] == [
        {"name": "db", "vetoes": 1, "tasks": ["T5", "T6"], "veto_lost_s": 1.0}
    ]
    assert stats_json(fleet_stats(facts()))["resources"] == []  # files only: an empty list


def test_the_report_and_the_stats_command_show_the_resource_by_name_apart_from_files():
    record = RunRecord(
        tasks=(task("T5"), task("T6", attempts=2)), events=RESOURCE_EVENTS, workdir="/tree"
    )
    found = fleet_stats(run_facts(record))

    page = render_markdown(build_report(record, [stats_section]))
    with console.capture() as shown:
        print_stats(found)

    assert "| db | 1 | T5, T6 |" in page
    assert "/resource:db" not in page + shown.get()
    assert "Resources: tasks refused a resource another task held" in shown.get()
    assert "No write was refused" in shown.get()  # no file was


def test_per_task_attempts_waiting_running_and_cost():
    by_id = {t.id: t for t in fleet_stats(facts()).tasks}

    assert [(t.attempts, t.vetoed, t.waiting_s, t.running_s, t.cost_usd) for t in by_id.values()] == [
        (1, 0, 1.0, 2.0, 0.25),  # T3: ready at the start, ran 1-3 s
        (2, 1, 3.0, 3.0, 0.5),  # T4: ran 1-2 and 4-6 s of its six
        (2, 0, 5.0, 2.5, 0.01),  # T1
        (1, 0, 0.0, 1.0, 0.01),  # T2: ready when T1 succeeded, assigned at once
    ]  # fmt: skip
    assert by_id["T1"].uncharged == 1


def test_the_fleet_achieved_parallelism_and_makespan_against_the_critical_path():
    stats = fleet_stats(facts())

    assert (stats.runners, stats.attempt_s, stats.makespan_s) == (2, 8.5, 7.5)
    assert stats.busy_mean == pytest.approx(8.5 / 7.5)
    assert stats.parallelism == pytest.approx(8.5 / 7.5 / 2)
    assert (stats.critical_path, stats.critical_s, stats.stretch) == (("T1", "T2"), 2.5, 3.0)
    assert stats_json(stats)["fleet"]["stretch"] == 3.0


def test_pauses_are_counted_with_the_time_they_held_the_fleet():
    paused = (
        *EVENTS,
        ev(19, "fleet_paused", "T2", 8.6, change="started", until="x", reason="429"),
        ev(20, "fleet_paused", "T1", 8.7, change="extended", until="y", reason="429"),
        ev(21, "fleet_resumed", at=9.0, reason="elapsed", paused_s=0.4),
    )

    stats = fleet_stats(facts(paused))

    assert (stats.pauses, stats.paused_s) == (1, 0.4)


def test_an_empty_log_gives_zeros_not_errors():
    stats = fleet_stats(run_facts(RunRecord(tasks=(), events=(), workdir="/tree")))

    assert (stats.busy_mean, stats.stretch, stats.files, stats.tasks) == (0.0, None, (), ())


# -- suggest -------------------------------------------------------------------------------

GRAPH = """\
# The demo graph (a header comment that is kept).

tasks:
  - id: T1
    title: models
    description: "Tag rules."
    file_scope: [models.py]
  - id: T2
    title: search
    description: |
      Search by tag.
      Two lines.
    depends_on: [T1]
  - id: T3
    title: api
    description: Routes.
    file_scope: [api.py]
  - id: T4
    title: middleware
    description: Request ids.
    file_scope: [./middleware.py]
checks:
  test: python -m unittest -q
"""


def test_suggest_adds_the_vetoed_file_to_scope_and_the_holder_as_a_dependency():
    raw = yaml.safe_load(GRAPH)

    tasks, changes = suggest(raw["tasks"], facts())

    assert changes == [
        Change(
            "T4", "file_scope", "api.py", "vetoed on api.py at +2.0 s while T3 (runner-1) held it"
        ),
        Change("T4", "depends_on", "T3", "T4's retry only succeeded after T3 finished with api.py"),
    ]
    t4 = next(t for t in tasks if t["id"] == "T4")
    assert (t4["file_scope"], t4["depends_on"]) == (["./middleware.py", "api.py"], ["T3"])
    assert "depends_on" not in raw["tasks"][3]  # the input is not changed


def test_the_written_graph_keeps_the_header_marks_each_change_and_loads():
    raw = yaml.safe_load(GRAPH)
    tasks, changes = suggest(raw["tasks"], facts())

    text = render_graph(GRAPH, raw, tasks, changes, "the run on http://x")

    assert text.startswith("# The demo graph (a header comment that is kept).\n")
    assert "      - api.py  # codefleet stats: vetoed on api.py at +2.0 s while T3" in text
    assert "      - T3  # codefleet stats: T4's retry only succeeded after T3" in text
    assert "2 change(s)" in text
    loaded = parse_graph(yaml.safe_load(text))
    assert [t["id"] for t in loaded] == ["T1", "T2", "T3", "T4"]
    assert loaded[1]["description"] == "Search by tag.\nTwo lines.\n"
    assert loaded.checks == {"test": "python -m unittest -q"}


def test_the_written_graph_keeps_every_graph_wide_key_where_it_stood():
    graph = "lease_granularity: part\nintegration: test\n" + GRAPH.split("\n", 1)[1]
    raw = yaml.safe_load(graph)
    tasks, changes = suggest(raw["tasks"], facts())

    text = render_graph(graph, raw, tasks, changes, "the run on http://x")

    assert text.index("lease_granularity: part") < text.index("tasks:") < text.index("checks:")
    loaded = parse_graph(yaml.safe_load(text))
    assert loaded.integration == "test" and loaded.checks == {"test": "python -m unittest -q"}
    assert {t.get("lease_granularity") for t in loaded} == {"part"}


def test_no_dependency_is_added_where_a_path_links_the_two_tasks_already():
    raw = yaml.safe_load(GRAPH)
    raw["tasks"][2]["depends_on"] = ["T4"]  # T3 waits for T4: T4 -> T3 would close a cycle

    tasks, changes = suggest(raw["tasks"], facts())

    assert [c.key for c in changes] == ["file_scope"]
    assert "depends_on" not in next(t for t in tasks if t["id"] == "T4")


def test_a_veto_on_a_file_already_in_scope_changes_nothing_about_scope():
    raw = yaml.safe_load(GRAPH)
    raw["tasks"][3]["file_scope"] = ["middleware.py", "./api.py"]

    _, changes = suggest(raw["tasks"], facts())

    assert [c.key for c in changes] == ["depends_on"]


def test_attempts_vetoes_and_time_are_counted_per_agent_kind_of_the_runner() -> None:
    agents = ({"name": "runner-1", "agent": "claude"}, {"name": "runner-2", "agent": "codex"})
    record = RunRecord(tasks=TASKS, events=EVENTS, workdir="/tree", agents=agents)
    kinds = {k.agent: k for k in fleet_stats(run_facts(record)).kinds}
    assert (kinds["claude"].attempts, kinds["claude"].vetoed) == (3, 0)  # T3, T1 twice
    assert (kinds["codex"].attempts, kinds["codex"].vetoed) == (3, 1)  # T4 twice, T2
    assert kinds["codex"].attempt_s == pytest.approx(1.0 + 2.0 + 1.0)
    assert stats_json(fleet_stats(run_facts(record)))["agents"][1]["agent"] == "codex"


def test_per_file_the_writes_that_waited_how_they_ended_and_the_work_they_kept() -> None:
    # T5 (assigned at 1 s) parks on api.py at 2.5 s, is handed it at 3 s; T6 parks at 2 s
    # and times out at 2.5 s (a veto); T7 is refused at once for a deadlock.
    waits = (
        ev(19, "task_assigned", "T5", 1.0, agent_name="runner-3", attempt=1),
        ev(
            20,
            "lease_waited",
            "T5",
            3.0,
            path="api.py",
            waited_s=0.5,
            outcome="granted",
            holder_task_id="T3",
        ),
        ev(
            21,
            "lease_waited",
            "T6",
            2.5,
            path="api.py",
            waited_s=0.5,
            outcome="timed_out",
            holder_task_id="T3",
        ),
        ev(
            22,
            "lease_waited",
            "T7",
            2.5,
            path="db.py",
            waited_s=0.0,
            outcome="deadlock",
            holder_task_id="T3",
        ),
    )
    stats = fleet_stats(facts(EVENTS + waits))
    api, db = stats.lease_waits
    assert (api.path, api.waits, api.outcomes) == ("api.py", 2, (("granted", 1), ("timed_out", 1)))
    assert (api.waited_s, api.kept_s) == (1.0, 1.5)  # T5 had run 1.5 s when it parked
    assert (db.path, db.waits, db.waited_s, db.kept_s) == ("db.py", 1, 0.0, 0.0)
    assert stats_json(stats)["lease_waits"][0] == {
        "path": "api.py",
        "waits": 2,
        "outcomes": {"granted": 1, "timed_out": 1},
        "waited_s": 1.0,
        "kept_s": 1.5,
        "kept_usd": 0.0,  # T5 is still under way: no cost yet
        "parts": [],  # api.py was leased whole
    }


def test_suggest_adds_a_vetoed_resource_to_resources_not_to_file_scope():
    graph = (
        "tasks:\n  - {id: T5, title: migrate, description: m}\n"
        "  - {id: T6, title: seed, description: s}\n"
    )
    raw = yaml.safe_load(graph)
    record = RunRecord(
        tasks=(task("T5"), task("T6", attempts=2)), events=RESOURCE_EVENTS, workdir="/tree"
    )

    tasks, changes = suggest(raw["tasks"], run_facts(record))
    text = render_graph(graph, yaml.safe_load(graph), tasks, changes, "the run on http://x")

    assert changes[0] == Change(
        "T6", "resources", "db", "vetoed on resource db at +2.0 s while T5 (runner-1) held it"
    )
    t6 = next(t for t in tasks if t["id"] == "T6")
    assert (t6["resources"], t6.get("file_scope")) == (["db"], None)
    assert "  - db  # codefleet stats: vetoed on resource db" in text
    assert parse_graph(yaml.safe_load(text))[1]["resources"] == ["db"]


def waits_that_kept_work() -> Any:
    # T5 (1-5 s, $0.40 by its end event) parks at 2.5 s: 1.5 s of 4 s, $0.15 kept.
    # T6 (1-3 s, ended without a cost: its task's $0.30 over its one attempt) parks at
    # 2 s: 1 s of 2 s, $0.15 kept. T7's wait timed out: it kept nothing.
    waits = (
        ev(19, "task_assigned", "T5", 1.0, agent_name="runner-3", attempt=1),
        ev(20, "task_assigned", "T6", 1.0, agent_name="runner-4", attempt=1),
        ev(21, "task_assigned", "T7", 1.0, agent_name="runner-5", attempt=1),
        ev(
            22,
            "lease_waited",
            "T6",
            3.0,
            path="api.py",
            waited_s=1.0,
            outcome="changed",
            holder_task_id="T3",
        ),
        ev(
            23,
            "lease_waited",
            "T5",
            3.0,
            path="api.py",
            waited_s=0.5,
            outcome="granted",
            holder_task_id="T3",
        ),
        ev(
            24,
            "lease_waited",
            "T7",
            3.0,
            path="api.py",
            waited_s=0.5,
            outcome="timed_out",
            holder_task_id="T3",
        ),
        ev(25, "task_requeued", "T6", 3.0, error_kind="verify_failed", attempt=1),
        ev(26, "task_requeued", "T7", 3.0, error_kind="veto", attempt=1),
        ev(27, "task_succeeded", "T5", 5.0, attempt=1, cost_usd=0.4),
    )
    tasks = (*TASKS, task("T5", cost_usd=0.4), task("T6", cost_usd=0.3), task("T7"))
    return fleet_stats(run_facts(RunRecord(tasks=tasks, events=EVENTS + waits, workdir="/t")))


def test_per_file_the_cost_a_wait_kept_is_the_attempts_cost_pro_rata_at_the_wait() -> None:
    stats = waits_that_kept_work()
    (api,) = stats.lease_waits
    assert (api.kept_s, api.kept_usd) == (pytest.approx(2.5), pytest.approx(0.3))
    assert stats_json(stats)["lease_waits"][0]["kept_usd"] == pytest.approx(0.3)


def test_the_stats_table_of_waits_shows_the_estimated_cost_kept() -> None:
    from codefleet.cli.output import console
    from codefleet.cli.results.statscmds import print_stats

    with console.capture() as shown:
        print_stats(waits_that_kept_work())
    assert "cost kept" in shown.get()
    assert "~$0.3000" in shown.get()
