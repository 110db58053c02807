"""The dashboard's pure half on literal data: event wording, the view model, the frame."""

from __future__ import annotations

import io
import re
from datetime import UTC, datetime
from typing import Any

from rich.console import Console

from codefleet.ui.dashboardrender import render
from codefleet.ui.viewmodel import (
    VETO_STYLE,
    AgentRow,
    LeaseRow,
    LogLine,
    TaskRow,
    ViewModel,
    build_view,
    describe,
)

NOW = datetime(2026, 7, 31, 18, 4, 30, tzinfo=UTC)
NAMES = {"a_1": "runner-1", "a_2": "runner-2"}


def event(
    id_: int, type_: str, task_id: str | None = None, agent_id: str | None = None, **payload: Any
) -> dict[str, Any]:
    return {
        "id": id_,
        "at": "2026-07-31T18:04:22.117Z",
        "type": type_,
        "task_id": task_id,
        "agent_id": agent_id,
        "payload": payload,
    }


def frame(view: ViewModel, height: int = 40, width: int = 120) -> str:
    console = Console(record=True, width=width, height=height, file=io.StringIO())
    console.print(render(view))
    return console.export_text()


def literal_view(**overrides: Any) -> ViewModel:
    fields: dict[str, Any] = {
        "server": "http://127.0.0.1:8099",
        "connection": "live",
        "tasks": (
            TaskRow("T3", "api routes", "succeeded", 1, 3, 0.0123, "added routes"),
            TaskRow("T4", "request ids", "pending", 1, 3, 0.0, "last attempt: blocked on api.py"),
        ),
        "agents": (
            AgentRow("runner-1", "busy", "T2", 1.0, False, 1, 0, 0.0123),
            AgentRow("runner-2", "idle", None, 31.0, True, 0, 1, 0.0),
        ),
        "leases": (LeaseRow("api.py", "runner-1", "T2", 4.0),),
        "log": (
            LogLine(
                7,
                "18:04:22",
                "VETO runner-2 (T4) refused api.py: held by runner-1 (T3)",
                VETO_STYLE,
                veto=True,
            ),
            LogLine(8, "18:04:22", "T4 requeued (veto) blocked on api.py", "yellow"),
        ),
        "counts": (("pending", 1), ("succeeded", 1)),
        "cost_usd": 0.0123,
        "input_tokens": 1500,
        "output_tokens": 20,
        "vetoes": 1,
        "last_event_id": 8,
    }
    fields.update(overrides)
    return ViewModel(**fields)


# -- describe ---------------------------------------------------------------------------


def test_a_veto_names_the_refused_runner_the_path_and_the_holder_in_bold_red() -> None:
    denied = event(
        7,
        "lease_denied",
        "T4",
        "a_2",
        path="api.py",
        holder_agent_id="a_1",
        holder_agent_name="runner-1",
        holder_task_id="T3",
        requester_name="runner-2",
        reason="held",
    )
    line = describe(denied, NAMES)
    assert line.event_id == 7
    assert line.text == "T4 · runner-2: VETO api.py: held by runner-1 (T3)"
    assert line.style == VETO_STYLE and line.veto


def test_a_denial_that_is_not_a_held_lease_gives_its_reason_instead_of_a_holder() -> None:
    denied = event(3, "lease_denied", "T1", "a_1", path="../etc", reason="outside_workdir")
    assert describe(denied, NAMES).text == "T1 · runner-1: VETO ../etc: outside_workdir"


def test_requeues_are_yellow_and_successes_green_with_the_runner_name() -> None:
    requeued = event(
        8,
        "task_requeued",
        "T4",
        error_kind="veto",
        blocked_on_path="api.py",
        reason="api.py is held",
    )
    succeeded = event(9, "task_succeeded", "T3", "a_1", attempt=1)
    assert (describe(requeued, NAMES).text, describe(requeued, NAMES).style) == (
        "T4: requeued (veto): api.py is held · scope + api.py",
        "yellow",
    )
    assert (describe(succeeded, NAMES).text, describe(succeeded, NAMES).style) == (
        "T3 · runner-1: ✓ succeeded · $0.0000",
        "green",
    )


def test_an_unknown_runner_is_shown_by_id_and_an_unworded_event_by_its_type() -> None:
    assert describe(event(1, "task_started", "T1", "a_9", attempt=2), NAMES).text == (
        "T1 · a_9: attempt 2 started"
    )
    assert describe(event(2, "fleet_renamed"), NAMES).text == "fleet renamed"


# -- build_view -------------------------------------------------------------------------


def state(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "tasks": [
            {
                "id": "T1",
                "title": "one",
                "status": "succeeded",
                "attempts": 1,
                "max_attempts": 3,
                "cost_usd": 0.5,
                "result_summary": "done",
                "error": "old",
            },
            {
                "id": "T2",
                "title": "two",
                "status": "running",
                "attempts": 2,
                "max_attempts": 3,
                "cost_usd": 0.0,
                "error": "blocked on a.py",
            },
            {
                "id": "T3",
                "title": "three",
                "status": "failed",
                "attempts": 3,
                "max_attempts": 3,
                "cost_usd": 0.0,
                "error": "boom",
            },
        ],
        "agents": [
            {
                "id": "a_1",
                "name": "runner-1",
                "status": "busy",
                "current_task_id": "T2",
                "last_heartbeat_at": "2026-07-31T18:04:25.000Z",
                "stale": False,
                "tasks_succeeded": 1,
                "tasks_failed": 0,
                "cost_usd": 0.5,
            },
        ],
        "leases": [
            {
                "path": "a.py",
                "agent_id": "a_1",
                "task_id": "T2",
                "holder_agent_name": "runner-1",
                "acquired_at": "2026-07-31T18:04:00.000Z",
                "age_s": 1.0,
            },
        ],
        "counters": {
            "tasks": {"running": 1, "succeeded": 1, "failed": 1},
            "input_tokens": 10,
            "output_tokens": 5,
            "cost_usd": 0.5,
        },
        "last_event_id": 20,
    }
    base.update(overrides)
    return base


def view_of(raw: dict[str, Any] | None, **kwargs: Any) -> ViewModel:
    return build_view(
        raw, (), server="s", connection="live", vetoes=0, last_event_id=20, now=NOW, **kwargs
    )


def test_the_view_takes_statuses_notes_and_counters_from_the_state_in_status_order() -> None:
    view = view_of(state())
    assert [(t.id, t.status, t.note) for t in view.tasks] == [
        ("T1", "succeeded", "done"),
        ("T2", "running", "last attempt: blocked on a.py"),
        ("T3", "failed", "boom"),
    ]
    assert view.counts == (("running", 1), ("succeeded", 1), ("failed", 1))
    assert (view.cost_usd, view.input_tokens, view.output_tokens) == (0.5, 10, 5)


def test_free_attempts_and_those_before_a_retry_read_apart_in_the_task_table() -> None:
    stopped = {"id": "T4", "title": "four", "status": "pending", "attempts": 3,
               "uncharged_attempts": 3, "max_attempts": 3, "error": "interrupted"}  # fmt: skip
    retried = {**stopped, "id": "T5", "attempts": 4, "retried_attempts": 3, "status": "running"}
    raw = state(tasks=[stopped, {**retried, "uncharged_attempts": 3}])

    text = frame(view_of(raw))

    assert re.search(r"T4 .* pending +0/3 \+3 free ", text)  # three Ctrl-Cs: none charged
    assert re.search(r"T5 .* running +1/3 \+3 before retry ", text)


def test_the_agents_are_this_run_s_and_runners_of_earlier_runs_fold_into_one_line() -> None:
    old = {"id": "a_0", "name": "runner-1.old", "status": "offline", "earlier": True,
           "last_heartbeat_at": "2026-07-31T17:00:00.000Z"}  # fmt: skip
    lost = {**old, "id": "a_9", "name": "runner-3", "earlier": False}  # lost in this run: shown
    agents = [*state()["agents"], old, {**old, "id": "a_8", "name": "runner-2.old"}, lost]

    view = view_of(state(agents=agents))
    text = frame(view)

    assert [a.name for a in view.agents] == ["runner-1", "runner-3"]
    assert view.earlier_runners == 2
    assert "+ 2 earlier runners (offline, from runs before this one)" in text
    assert "runner-1.old" not in text


def test_ages_are_measured_from_the_server_timestamps_to_now() -> None:
    view = view_of(state())
    assert view.agents[0].heartbeat_age_s == 5.0
    assert view.leases[0] == LeaseRow("a.py", "runner-1", "T2", 30.0)


def test_a_cut_task_table_keeps_the_tasks_in_flight_and_failed_and_counts_the_rest() -> None:
    view = view_of(state(), max_task_rows=2)
    assert [t.id for t in view.tasks] == ["T2", "T3"]
    assert view.hidden_tasks == 1


def test_before_the_first_state_the_view_has_only_the_connection_and_the_log() -> None:
    log = (LogLine(1, "18:04:22", "x"),)
    view = build_view(
        None, log, server="s", connection="connecting…", vetoes=0, last_event_id=1, now=NOW
    )
    assert view == ViewModel(server="s", connection="connecting…", log=log, last_event_id=1)


# -- render -----------------------------------------------------------------------------


def test_the_frame_shows_the_summary_tasks_agents_leases_and_the_veto_line() -> None:
    text = frame(literal_view())
    lines = text.splitlines()
    assert lines[0] == (
        "● live │ pending 1 · succeeded 1 │ $0.0123 · 1.5k/20 tok · vetoes 1 · event #8"
        " │ http://127.0.0.1:8099"
    )
    assert "T3     api routes" in text and "succeeded    1/3   0.0123   added routes" in text
    assert "pending      1/3   0.0000   last attempt: blocked on api.py" in text
    assert "runner-2     idle      -       31s    STALE    0/1       0.0000" in text
    assert "api.py                         runner-1   T2     4s" in text
    veto = "#7     18:04:22 VETO runner-2 (T4) refused api.py: held by runner-1 (T3)"
    assert text.count(veto) == 2, "pinned above the log, and in it"
    assert "Vetoes (1 in all, newest 1)" in text


def test_the_veto_line_is_bold_red_and_a_lost_connection_yellow() -> None:
    console = Console(force_terminal=True, color_system="standard", width=120, file=io.StringIO())
    console.print(render(literal_view(connection="reconnecting… (server unreachable)")))
    out = console.file.getvalue()  # type: ignore[attr-defined]
    assert "\x1b[1;37;41mVETO\x1b[0m\x1b[1;31m runner-2 (T4) refused api.py" in out
    assert "\x1b[1;33m● reconnecting… (server unreachable)" in out


def test_the_log_shows_the_newest_lines_that_fit_the_height() -> None:
    log = tuple(LogLine(i, "18:04:22", f"event {i}") for i in range(1, 101))
    text = frame(literal_view(log=log), height=30)
    assert len(text.splitlines()) <= 30
    assert "event 100" in text
    assert "event 1 " not in text and "event 50" not in text


def test_a_veto_the_log_has_scrolled_past_stays_pinned_above_it() -> None:
    first = literal_view().log
    later = tuple(LogLine(i, "18:04:23", f"event {i}") for i in range(9, 109))
    text = frame(literal_view(log=first + later), height=30)
    assert "event 108" in text and "event 9 " not in text
    assert "VETO runner-2 (T4) refused api.py: held by runner-1 (T3)" in text


def test_an_empty_view_renders_without_tables_to_fill() -> None:
    text = frame(ViewModel(server="s", connection="connecting…"))
    assert text.startswith("● connecting… │ no tasks │ $0.0000 · 0/0 tok · vetoes 0 · event #0")
    assert "no file is leased" in text


# -- a person's own Claude Code session (`codefleet join`) ----------------------------------


def test_a_persons_session_and_its_leases_carry_their_kind_into_the_view() -> None:
    person = {
        "id": "a_9",
        "name": "ada@0aeef531",
        "kind": "interactive",
        "status": "busy",
        "current_task_id": "i-0aeef531",
        "last_heartbeat_at": "2026-07-31T18:04:25.000Z",
    }
    lease = {
        "path": "b.py",
        "agent_id": "a_9",
        "task_id": "i-0aeef531",
        "kind": "interactive",
        "holder_agent_name": "ada@0aeef531",
        "acquired_at": "2026-07-31T18:04:00.000Z",
    }
    raw = state()
    view = view_of(state(agents=[*raw["agents"], person], leases=[*raw["leases"], lease]))
    assert [(a.name, a.kind) for a in view.agents] == [
        ("runner-1", "runner"),
        ("ada@0aeef531", "interactive"),
    ]
    assert view.leases[1] == LeaseRow("b.py", "ada@0aeef531", "i-0aeef531", 30.0, "interactive")


def test_the_frame_marks_a_persons_session_and_its_files() -> None:
    view = literal_view(
        agents=(
            AgentRow("ada@0aeef531", "busy", "i-0aeef531", 2.0, False, 0, 0, 0.0, "interactive"),
        ),
        leases=(LeaseRow("b.py", "ada@0aeef531", "i-0aeef531", 2.0, "interactive"),),
    )
    text = frame(view, width=160)
    assert "ada@0aeef531 person       busy       i-0aeef531" in text
    assert "ada@0aeef531 person   i-0aeef531   2s" in text


def test_a_persons_session_joining_and_releasing_is_worded_for_people() -> None:
    joined = event(3, "agent_registered", None, "a_9", name="ada@0aeef531", kind="interactive")
    released = event(
        4,
        "agent_offline",
        None,
        "a_9",
        name="ada@0aeef531",
        kind="interactive",
        reason="interactive_idle",
        paths=["b.py"],
    )
    assert describe(joined, NAMES).text == "ada@0aeef531: a person's session joined the lock"
    assert describe(released, NAMES).text == "ada@0aeef531 released b.py (interactive_idle)"


# -- the usage-limit pause ----------------------------------------------------------------

PAUSE = {
    "since": "2026-07-31T18:04:00.000Z",
    "until": "2026-07-31T18:05:00.000Z",
    "reason": "runner-2: session ended with success (HTTP 429): limit",
    "task_id": "T2",
    "remaining_s": 99.0,
}


def test_a_paused_fleet_shows_a_countdown_measured_to_now_not_the_servers_remaining() -> None:
    view = view_of(state(pause=PAUSE, paused_until=PAUSE["until"]))

    assert view.pause is not None
    assert view.pause.remaining_s == 30.0 and "HTTP 429" in view.pause.reason
    text = frame(view)
    assert "FLEET PAUSED · resumes in 30s" in text and "codefleet resume" in text
    assert "FLEET PAUSED" not in frame(view_of(state()))


def test_pausing_and_resuming_are_worded_with_the_resume_time_and_the_reason() -> None:
    paused = describe(
        event(
            1,
            "fleet_paused",
            "T2",
            until=PAUSE["until"],
            change="started",
            reason="runner-2: HTTP 429",
        ),
        NAMES,
    )
    resumed = describe(event(2, "fleet_resumed", reason="elapsed", paused_s=60.0), NAMES)

    assert paused.text.startswith("T2: fleet paused until ") and paused.text.endswith(
        "runner-2: HTTP 429"
    )
    assert paused.style == "bold yellow"
    assert (resumed.text, resumed.style) == ("fleet resumed (elapsed) after 60 s", "green")


def test_a_spent_budget_shows_in_the_summary_and_a_banner_and_an_unspent_one_only_its_cap() -> None:
    spent = {"max_cost_usd": 1.0, "hard": False, "spent_usd": 1.02, "exhausted": True}
    view = view_of(state(budget=spent))

    text = frame(view, width=200)
    assert "$0.5000 of $1.00" in text
    assert "FLEET BUDGET EXHAUSTED · $1.0200 spent of $1.0000" in text
    assert "codefleet budget USD" in text
    calm = frame(view_of(state(budget={**spent, "spent_usd": 0.2, "exhausted": False})), width=200)
    assert "of $1.00" in calm and "EXHAUSTED" not in calm
    assert "of $" not in frame(view_of(state(budget={**spent, "max_cost_usd": None})), width=200)


def test_a_simulated_cost_reads_as_simulated_in_the_summary_and_the_budget_banner() -> None:
    spent = {
        "max_cost_usd": 1.0,
        "hard": False,
        "spent_usd": 1.02,
        "exhausted": True,
        "simulated": True,
    }
    text = frame(view_of(state(budget=spent)), width=200)

    assert "$0.5000 simulated, nothing spent of $1.00" in text
    assert "FLEET BUDGET EXHAUSTED · $1.0200 simulated, nothing spent of $1.0000" in text
    plain = frame(view_of(state(budget={**spent, "max_cost_usd": None})), width=200)
    assert "$0.5000 simulated, nothing spent" in plain


def test_a_budget_running_out_is_worded_with_what_happens_to_running_tasks() -> None:
    line = describe(
        event(1, "fleet_budget_exhausted", max_cost_usd=1.0, spent_usd=1.02, hard=True), NAMES
    )

    assert line.text.startswith("fleet budget exhausted: $1.0200 of $1.0000")
    assert "running tasks stopped" in line.text and line.style == "bold red"


def test_the_lease_map_shows_a_named_resource_beside_the_files() -> None:
    view = literal_view(
        leases=(
            LeaseRow("a.py", "runner-1", "T1", 2.0, "task"),
            LeaseRow("/resource:db", "runner-2", "T2", 5.0, "task"),
        ),
    )
    text = frame(view, width=160)
    assert "a.py" in text
    assert "resource db" in text and "runner-2" in text


def test_part_leases_are_listed_by_their_key_beneath_their_file_and_a_whole_file_stays_one_row() -> (
    None
):
    def lease(path: str, task_id: str) -> dict[str, Any]:
        return {
            "path": path,
            "agent_id": "a_1",
            "task_id": task_id,
            "holder_agent_name": f"runner-{task_id}",
            "acquired_at": "2026-07-31T18:04:00.000Z",
        }

    held = ("api.py::route", "T2"), ("models.py", "T1"), ("api.py::handle", "T1")
    view = view_of(state(leases=[lease(path, task) for path, task in held]))
    text = frame(view, width=160)

    assert [lease.path for lease in view.leases] == ["api.py::handle", "api.py::route", "models.py"]
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if "by part" in line)
    shown = [line.split("0.5000")[-1].split() for line in lines[at : at + 4]]
    assert shown == [
        ["api.py", "by", "part"],  # the file, once, then each part it has leased beneath it
        ["::handle", "runner-T1", "T1", "30s"],
        ["::route", "runner-T2", "T2", "30s"],
        ["models.py", "runner-T1", "T1", "30s"],  # leased whole: one row, as before
    ]
    assert "api.py::" not in text


# -- a runner in its own clone of the landed line (`runner --clone`) ---------------------------


def test_a_runner_in_a_clone_shows_its_workspace_and_landed_head_in_the_agents_table() -> None:
    head = "3f2a9c1d" + "0" * 32
    raw = state()
    pod = {**raw["agents"][0], "id": "a_7", "name": "pod-7", "workspace": "clone", "head": head}
    view = view_of(state(agents=[*raw["agents"], pod]))
    assert [(a.name, a.workspace, a.head) for a in view.agents] == [
        ("runner-1", "tree", None),
        ("pod-7", "clone", head),
    ]
    text = frame(view, width=160)
    assert "pod-7 clone@3f2a9c1d" in text
    assert "runner-1 clone" not in text
