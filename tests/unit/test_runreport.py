"""The run report from a literal event log: attempts, vetoes, rollbacks, the critical path, rendering."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from markdown_it import MarkdownIt

from codefleet.models import to_iso
from codefleet.review.facts import attempts_of, critical_path, run_facts
from codefleet.review.report.outcomesections import summary_section
from codefleet.review.report.reportblocks import Para, Section, Table, seconds
from codefleet.review.report.reportrender import render_html, render_markdown
from codefleet.review.report.runreport import build_report, report_json
from codefleet.review.runrecord import RunRecord

T0 = datetime(2026, 7, 31, 18, 0, tzinfo=UTC)


def ev(
    n: int, kind: str, task_id: str | None = None, at: float = 0.0, **payload: Any
) -> dict[str, Any]:
    return {
        "id": n,
        "type": kind,
        "task_id": task_id,
        "agent_id": None,
        "at": to_iso(T0 + timedelta(seconds=at)),
        "payload": payload,
    }


def task(task_id: str, status: str = "succeeded", **fields: Any) -> dict[str, Any]:
    return {
        "id": task_id,
        "title": f"Title {task_id}",
        "status": status,
        "attempts": 1,
        "max_attempts": 3,
        "cost_usd": 0.01,
        "depends_on": [],
        **fields,
    }


# T3 holds api.py; T4 is refused it at 2.0 s, waits, and succeeds on attempt 2 at 6.0 s.
# T1 fails its verify on attempt 1 (rolled back), T2 depends on T1.
EVENTS = [
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
    ev(8, "lease_released", "T3", 3.0, path="api.py"),
    ev(9, "task_assigned", "T4", 4.0, agent_name="runner-2", attempt=2),
    ev(10, "task_assigned", "T1", 4.0, agent_name="runner-1", attempt=1),
    ev(
        11,
        "check_finished",
        "T1",
        5.0,
        name="test",
        purpose="verify",
        passed=False,
        exit_code=1,
        attempt=1,
        output_tail="line 1\nAssertionError: | <b>\n",
    ),
    ev(12, "file_restored", "T1", 5.0, path="models.py", existed=True),
    ev(13, "file_restored", "T1", 5.0, path="tests/new.py", existed=False),
    ev(14, "task_requeued", "T1", 5.0, error_kind="verify_failed", attempt=1),
    ev(15, "task_succeeded", "T4", 6.0, attempt=2),
    ev(16, "task_assigned", "T1", 6.0, agent_name="runner-1", attempt=2),
    ev(17, "task_succeeded", "T1", 7.5, attempt=2),
    ev(18, "task_assigned", "T2", 7.5, agent_name="runner-2", attempt=1),
    ev(19, "task_succeeded", "T2", 8.5, attempt=1),
    ev(20, "task_committed", "T3", 8.5, branch="codefleet/x", commit="a" * 40),
    ev(21, "run_finished", at=9.0, ok=True),
]
TASKS = (
    task("T3"),
    task("T4", attempts=2),
    task("T1", attempts=2),
    task("T2", depends_on=["T1"], title="Pipes | and <script>alert(1)</script>"),
)


def record() -> RunRecord:
    patch = {"files": [{"path": "api.py"}]}
    return RunRecord(
        tasks=TASKS, events=tuple(EVENTS), workdir="/tree", patches={t["id"]: patch for t in TASKS}
    )


def test_attempts_are_rebuilt_with_runner_span_outcome_and_restored_files() -> None:
    attempts = attempts_of(EVENTS)

    assert [(a.task_id, a.number, a.runner, a.seconds, a.outcome) for a in attempts] == [
        ("T3", 1, "runner-1", 2.0, "succeeded"),
        ("T4", 1, "runner-2", 1.0, "veto"),
        ("T4", 2, "runner-2", 2.0, "succeeded"),
        ("T1", 1, "runner-1", 1.0, "verify_failed"),
        ("T1", 2, "runner-1", 1.5, "succeeded"),
        ("T2", 1, "runner-2", 1.0, "succeeded"),
    ]
    assert attempts[3].restored == ["models.py", "tests/new.py"]


def test_the_critical_path_is_the_longest_weighted_chain() -> None:
    tasks = [task("A"), task("B", depends_on=["A"]), task("C"), task("D", depends_on=["B", "C"])]

    chain, total = critical_path(tasks, {"A": 1.0, "B": 2.0, "C": 4.0, "D": 0.5})

    assert (chain, total) == (["C", "D"], 4.5)


def test_a_veto_knows_how_long_the_holder_held_and_the_refused_task_waited() -> None:
    facts = run_facts(record())

    [veto] = facts.vetoes
    assert (
        veto.path,
        veto.task_id,
        veto.holder_task_id,
        veto.held_s,
        veto.waited_s,
        veto.resolved,
    ) == (
        "api.py",
        "T4",
        "T3",
        0.5,
        2.0,
        True,
    )
    [rollback] = facts.rollbacks
    assert (rollback.task_id, rollback.reason, rollback.restored) == (
        "T1",
        "verify_failed",
        (("models.py", True), ("tests/new.py", False)),
    )
    assert (facts.wall_s, facts.makespan_s, facts.ok) == (9.0, 7.5, True)
    assert (facts.critical_path, facts.critical_s) == (("T1", "T2"), 2.5)


def test_wall_time_and_makespan_count_each_run_on_one_database_not_the_time_between_them() -> None:
    later = [
        ev(22, "agent_offline", at=30.0, reason="agent_stale"),  # after the run: not part of it
        ev(23, "fleet_started", at=600.0, runners=1),  # the next `codefleet run`, ten minutes on
        ev(24, "task_assigned", "T5", at=600.5, agent_name="runner-1", attempt=1),
        ev(25, "task_succeeded", "T5", at=601.5),
        ev(26, "run_finished", at=602.0, ok=True),
        ev(27, "fleet_started", at=900.0, runners=1),  # a run that died: it ends at its last event
        ev(28, "task_assigned", "T6", at=901.0, agent_name="runner-1", attempt=1),
    ]

    facts = run_facts(replace(record(), events=(*EVENTS, *later)))

    assert facts.wall_s == 9.0 + 2.0 + 1.0
    assert facts.makespan_s == 7.5 + 1.0  # each run's first assignment to its last end


def test_the_json_report_has_every_sections_data_under_its_key() -> None:
    data = json.loads(json.dumps(report_json(build_report(record())), default=str))

    assert data["verdict"] == "PASS"
    assert list(data["sections"]) == [
        "summary",
        "tasks",
        "repairs",  # its failed verify was reworked (none repaired: a run before repair turns)
        "graph",
        "vetoes",
        "rollbacks",
        "verify",
        "cost",
        "history",
        "stats",
    ]
    assert data["sections"]["summary"]["critical_path"] == ["T1", "T2"]
    assert (data["sections"]["repairs"]["repairs"], data["sections"]["repairs"]["reworks"]) == (
        0,
        1,
    )
    assert data["sections"]["stats"]["files"][0]["path"] == "api.py"  # the contention section
    assert [t["id"] for t in data["sections"]["tasks"]] == ["T3", "T4", "T1", "T2"]  # success order
    assert data["sections"]["history"] == [
        {"branch": "codefleet/x", "task_id": "T3", "commit": "a" * 40}
    ]


def test_the_graph_section_measures_the_loaded_graph_with_graph_checks_analysis() -> None:
    created = [
        ev(0, "task_created", "T3", file_scope=["api.py"], depends_on=[], priority=3),
        ev(0, "task_created", "T4", file_scope=["api.py", "middleware.py"], depends_on=[]),
        ev(0, "task_created", "T1", file_scope=["models.py"], depends_on=[], priority=3),
        ev(0, "task_created", "T2", file_scope=["store.py"], depends_on=["T1"], priority=3),
    ]
    loaded = RunRecord(tasks=TASKS, events=(*created, *EVENTS), workdir="/tree")

    graph = report_json(build_report(loaded))["sections"]["graph"]

    assert graph["overlaps"] == [{"tasks": ["T3", "T4"], "paths": ["api.py"]}]
    assert graph["max_width"] == 3 and graph["hotspots"] == []
    # Two runners (fleet_started), each task at its last attempt: T1 1.5 s and T3 2 s start;
    # T2 follows T1; T4 waits for T3's api.py: done at 4 s, where the run took 7.5 s.
    assert (graph["ideal_makespan_s"], graph["makespan_s"]) == (4.0, 7.5)
    assert graph["parallelism"]["runners"] == 2 and graph["parallelism"]["peak"] == 2


def test_markdown_escapes_table_pipes_and_folds_the_output_tail() -> None:
    text = render_markdown(build_report(record()))

    assert "| T2 | Pipes \\| and \\<script\\>alert(1)\\</script\\> |" in text
    assert (
        "<details><summary>the failing lines, then the last lines of output</summary>\n\n"
        "```text\nline 1\nAssertionError: | <b>\n```" in text
    )
    assert "### Timeline" not in text  # no Markdown form


def test_html_escapes_everything_from_the_run_and_needs_nothing_from_the_network() -> None:
    page = render_html(build_report(record()))

    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "AssertionError: | &lt;b&gt;" in page
    assert "http://" not in page and "https://" not in page and "src=" not in page


def test_a_section_builder_added_to_the_list_appears_where_it_is_put() -> None:
    def contention(_: Any) -> Section:
        return Section(
            "contention", "Contention", (Para("api.py was contested once"),), {"api.py": 1}
        )

    made = build_report(record(), [summary_section, contention])

    assert [s.key for s in made.sections] == ["summary", "contention"]
    assert "### Contention\n\napi.py was contested once" in render_markdown(made)


def test_durations_read_as_people_say_them() -> None:
    assert [seconds(v) for v in (None, 0.4218, 12.34, 185.0)] == [
        "—",
        "0.42 s",
        "12.3 s",
        "3 min 05 s",
    ]


def test_the_report_lists_each_command_with_what_it_applied_or_the_veto() -> None:
    events = (
        ev(1, "fleet_started", at=0.0, runners=1),
        ev(
            2,
            "command_finished",
            "T1",
            1.0,
            command="python gen.py",
            exit_code=0,
            applied=["gen.txt"],
            refused=[".git/index"],
            kept_out=[],
        ),
        ev(
            3,
            "command_finished",
            "T2",
            2.0,
            command="make fmt",
            exit_code=0,
            applied=[],
            denied_on="api.py",
        ),
    )
    report = build_report(RunRecord(tasks=(), events=events, workdir="/tree"))
    [section] = [s for s in report.sections if s.key == "commands"]
    [table] = section.blocks
    assert table.rows == (  # type: ignore[union-attr]
        ("+1.00 s", "T1", "python gen.py", "exit 0", "gen.txt", ".git/index"),
        ("+2.00 s", "T2", "make fmt", "exit 0", "VETO on api.py: nothing", "-"),
    )
    assert "make fmt" in render_markdown(report)


NASTY = "````\n# Owned <img src=x onerror=alert(1)> *bold* [link](javascript:x) &amp; `a|b` ~~no~~"


def rendered(markdown: str) -> str:
    """The HTML a CommonMark renderer with tables (as a pull request page) makes of `markdown`."""
    return MarkdownIt("commonmark").enable("table").render(markdown)


def test_markdown_renders_titles_and_output_from_the_run_as_the_text_they_are() -> None:
    tasks = (*TASKS[:3], task("T2", depends_on=["T1"], title=NASTY))
    events = [
        *EVENTS[:10],
        ev(
            11,
            "check_finished",
            "T1",
            5.0,
            name="test",
            purpose="verify",
            passed=False,
            exit_code=1,
            attempt=1,
            output_tail="a ```` fence\n````\n# not a heading\n",
        ),
        *EVENTS[11:],
    ]
    made = build_report(
        RunRecord(
            tasks=tasks,
            events=tuple(events),
            workdir="/tree",
            patches={t["id"]: {"files": []} for t in tasks},
        )
    )

    page = rendered(render_markdown(made))

    assert "<img" not in page and "<em>" not in page and "<a " not in page and "<del>" not in page
    assert "<h1>" not in page
    assert "&lt;img src=x onerror=alert(1)&gt; *bold* [link](javascript:x) &amp;amp;" in page
    assert "<code>a|b</code>" in page
    assert "a ```` fence\n````\n# not a heading\n</code></pre>" in page


def test_the_report_shows_the_operators_messages_and_the_agents_questions_in_order() -> None:
    said = [
        ev(
            30,
            "operator_message",
            "T1",
            4.5,
            seq=1,
            attempt=1,
            text="use httpx",
            delivered="running",
        ),
        ev(31, "operator_message_delivered", "T1", 4.6, seq=1, attempt=1),
        ev(32, "question_asked", "T2", 8.0, attempt=1, question_id="T2-q1", text="which tests?"),
        ev(
            33,
            "question_answered",
            "T2",
            8.2,
            attempt=1,
            question_id="T2-q1",
            text="tests/unit",
            by="operator",
        ),
    ]
    made = build_report(RunRecord(tasks=TASKS, events=(*EVENTS, *said), workdir="/tree"))
    data = report_json(made)["sections"]["operator"]
    assert [(r["task"], r["who"], r["text"], r["outcome"]) for r in data] == [
        ("T1", "operator says", "use httpx", "running, received"),
        ("T2", "agent asks", "which tests?", "operator: tests/unit"),
    ]
    assert "operator" not in report_json(build_report(record()))["sections"]


def test_the_cost_section_says_where_each_runner_worked_the_tree_or_its_own_clone() -> None:
    agents = (
        {"name": "runner-1", "workspace": "tree", "host": "laptop", "tasks_succeeded": 2},
        {"name": "pod-7", "workspace": "clone", "host": "pod-7", "tasks_succeeded": 1},
        {"name": "old", "tasks_succeeded": 0},  # an older server's row: the tree
    )
    report = build_report(replace(record(), agents=agents))
    [section] = [s for s in report.sections if s.key == "cost"]
    [table] = [b for b in section.blocks if isinstance(b, Table)]
    assert table.columns[:2] == ("runner", "works in")
    assert [row[:2] for row in table.rows] == [
        ("old", "tree"),
        ("pod-7", "clone on pod-7"),
        ("runner-1", "tree on laptop"),
    ]
