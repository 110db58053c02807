"""How events read is said once (wording.json) and both renderers read it alike.

The terminal (`codefleet.wording`, Python) and the browser (`server/web/wording.js`)
each interpret the one table; this runs both over one corpus of events and fails
if any line differs, if an event type has no words, or if log.js words events itself.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from tool_support import require_tool

from codefleet.cli.operate.landingcmds import landing_lines
from codefleet.fleet.tools.attemptchecks import CheckResult
from codefleet.models import CheckPurpose, EventType, HaltCause
from codefleet.wording import WORDING_FILE, cost_text, halt_cause, phrase, spent_text, table

WEB = Path(__file__).resolve().parents[2] / "src" / "codefleet" / "server" / "web"

CORPUS: list[tuple[str, dict[str, Any]]] = [
    ("task_created", {"title": "edit a", "depends_on": ["T0", "T1"]}),
    ("task_created", {"title": "edit b", "depends_on": []}),
    ("task_assigned", {"attempt": 2, "agent_name": "runner-1"}),
    ("task_started", {}),
    ("task_succeeded", {"summary": "done", "cost_usd": 0.01234}),
    ("task_succeeded", {"cost_usd": 123.456}),
    ("task_succeeded", {"summary": "done", "cost_usd": 0.01, "order": 3}),
    ("task_requeued", {"error_kind": "veto", "reason": "x" * 200, "blocked_on_path": "a.py"}),
    ("task_failed", {"error_kind": "tool", "error": "ümlaut " * 40}),
    ("task_failed", {"error_kind": "check_unrunnable", "error": "install it " * 40}),
    ("task_unblocked", {"by": "T1"}),
    ("task_blocked_upstream", {"upstream": "T1"}),
    ("task_blocked_upstream", {"upstream": "T1", "upstream_status": "cancelled"}),
    ("task_blocked_upstream", {"upstream": "T1", "upstream_status": "blocked_upstream"}),
    ("task_cancelled", {}),
    ("task_retried", {}),
    ("task_retried", {"attempt": 3, "set_aside": 3}),
    ("task_requeued", {"error_kind": "infra", "reason": "interrupted", "charged": False}),
    ("task_redefined", {"title": "edit a", "depends_on": ["T0"]}),
    ("lease_acquired", {"path": "a.py", "tool": "Edit", "kind": "interactive"}),
    (
        "lease_denied",
        {"path": "a.py", "reason": "held", "holder_agent_name": "r-1", "holder_task_id": "T1"},
    ),
    ("lease_denied", {"path": "../x", "reason": "outside_workdir"}),
    ("lease_released", {"path": "a.py", "reason": "completed"}),
    ("lease_acquired", {"path": "/resource:db", "tool": "acquire_resource"}),
    (
        "lease_denied",
        {
            "path": "/resource:port:41234",
            "reason": "held",
            "holder_agent_name": "r-1",
            "holder_task_id": "T1",
        },
    ),
    ("lease_released", {"path": "/resource:db", "reason": "completed"}),
    ("lease_waiting", {"path": "/resource:db", "holder_task_id": "T3", "queue_position": 2}),
    ("file_changed", {"path": "a.py", "tool": "Write"}),
    ("file_restored", {"path": "a.py", "existed": False}),
    ("file_restored", {"path": "a.py", "existed": True}),
    ("restore_requested", {"paths": ["a.py", "b.py"], "reason": "failed"}),
    ("restore_failed", {"path": "a.py", "error": "disk full"}),
    ("check_defined", {"name": "test", "command": "pytest -q", "replaced": True}),
    ("check_started", {"name": "test", "purpose": "verify"}),
    ("check_deferred", {"name": "test", "purpose": "verify"}),
    ("check_reused", {"name": "test", "purpose": "verify", "reused_from": "tool"}),
    (
        "check_finished",
        {
            "name": "test",
            "purpose": "tool",
            "passed": False,
            "timed_out": True,
            "exit_code": None,
            "duration_ms": 1500,
        },
    ),
    ("check_finished", {"name": "test", "purpose": "tool", "passed": True, "exit_code": 0}),
    ("command_started", {"command": "python gen.py", "attempt": 1}),
    (
        "command_finished",
        {
            "exit_code": 0,
            "wall_s": 0.25,
            "applied": ["gen.txt"],
            "kept_out": [],
            "refused": [".git/x"],
            "denied_on": None,
        },
    ),
    ("command_finished", {"exit_code": None, "timed_out": True, "applied": [], "kept_out": []}),
    ("command_finished", {"exit_code": 0, "applied": [], "denied_on": "a.py"}),
    ("agent_registered", {"name": "runner-1", "epoch": 3}),
    ("agent_registered", {"name": "ada@1", "kind": "interactive"}),
    ("agent_online", {"name": "runner-1"}),
    ("agent_offline", {"name": "ada@1", "kind": "interactive", "paths": [], "reason": "idle"}),
    ("agent_offline", {"name": "ada@1", "kind": "interactive", "paths": ["a.py"], "reason": "end"}),
    ("agent_offline", {"name": "runner-1", "reason": "stale"}),
    ("fleet_started", {"runners": 4}),
    ("fleet_idle", {"counts": {"succeeded": 3, "failed": 1}}),
    ("run_finished", {"ok": False, "verify": {"exit_code": 2}}),
    (
        "run_finished",
        {"ok": False, "verify": {"exit_code": 1, "first_failing": "T7", "order": 4, "landings": 9}},
    ),
    ("run_finished", {"ok": False, "verify": {"exit_code": 1, "before_run_fails": True}}),
    (
        "stale_read",
        {
            "attempt": 1,
            "paths": [
                {"path": "api.py", "changed_by": ["T3"], "read_sha256": "a", "now_sha256": "b"},
                {
                    "path": "gone.py",
                    "changed_by": ["T3", "a person"],
                    "read_sha256": "a",
                    "now_sha256": None,
                },
            ],
        },
    ),
    ("reconciled", {"rounds": 1, "outcome": "clean", "cost_usd": 0.0123}),
    ("reconciled", {"rounds": 2, "outcome": "unresolved", "cost_usd": 0}),
    ("reconciled", {"rounds": 1, "outcome": "failed", "cost_usd": 0.5}),
    ("repair_started", {"name": "test", "cause": "verify", "turn": 1}),
    (
        "repair_started",
        {"name": "test", "cause": "integration", "turn": 1, "conflicts_with": ["T2"]},
    ),
    ("repair_finished", {"turn": 1, "cause": "verify", "outcome": "fixed", "cost_usd": 0.01}),
    ("repair_finished", {"turn": 1, "cause": "integration", "outcome": "landing", "cost_usd": 0}),
    ("repair_finished", {"turn": 1, "cause": "verify", "outcome": "failed", "cost_usd": 0.5}),
    (
        "repair_finished",
        {"turn": 1, "cause": "verify", "outcome": "failed", "cost_usd": 0, "kept_event": 51},
    ),
    ("operator_message", {"seq": 1, "attempt": 2, "delivered": "running", "text": "use httpx"}),
    ("operator_message", {"seq": 2, "attempt": 1, "delivered": "next_attempt", "text": "x"}),
    ("operator_message_delivered", {"seq": 1, "attempt": 2}),
    ("question_asked", {"task_id": "T1", "attempt": 1, "question_id": "T1-q1", "text": "x?"}),
    ("question_answered", {"attempt": 1, "question_id": "T1-q1", "text": "yes", "by": "operator"}),
    ("question_answered", {"attempt": 1, "question_id": "T1-q1", "text": "No", "by": "timeout"}),
    ("run_finished", {"ok": True, "verify": None}),
    ("task_committed", {"commit": "0123456789abcdef", "branch": "main"}),
    ("fleet_paused", {"until": "2026-07-31T12:05:00.000Z", "change": "extended", "reason": "429"}),
    ("fleet_resumed", {"reason": "operator", "paused_s": 60.0}),
    ("fleet_resumed", {"reason": "elapsed", "paused_s": 1.5}),
    ("fleet_budget_set", {"max_cost_usd": None}),
    ("fleet_budget_set", {"max_cost_usd": 2.5, "hard": True}),
    ("fleet_budget_exhausted", {"spent_usd": 1.02, "max_cost_usd": 1.0, "hard": True}),
    ("fleet_budget_exhausted", {"spent_usd": 1.02, "max_cost_usd": 1.0, "simulated": True}),
    ("number_allocated", {"sequence": "migrations", "value": 3}),
    ("sequence_defined", {"sequence": "migrations", "start": 3}),
    ("landing_queued", {"checks": ["test"], "position": 2}),
    ("landing_queued", {"checks": []}),
    (
        "landing_check_started",
        {"check": "test", "batch": ["T1", "T2"], "purpose": "batch", "base": 3},
    ),
    (
        "landing_check_finished",
        {"check": "test", "batch": ["T1"], "purpose": "bisect", "verdict": "failed"},
    ),
    (
        "landing_check_finished",
        {"check": "test", "batch": [], "purpose": "base", "verdict": "passed", "duration_ms": 9},
    ),
    (
        "landing_check_finished",
        {
            "check": "test",
            "batch": ["T1"],
            "purpose": "batch",
            "verdict": "passed",
            "duration_ms": 0,
            "reused_event": 77,
            "reused_task": "T1",
            "reused_purpose": "verify",
        },
    ),
    (
        "landing_check_finished",
        {
            "check": "test",
            "batch": ["T1"],
            "purpose": "batch",
            "verdict": "passed",
            "duration_ms": 0,
            "reused_event": 75,
            "reused_task": "T1",
            "reused_purpose": "tool",
        },
    ),
    ("landed", {"order": 4, "checks": ["test"]}),
    ("landed", {"order": 1, "checks": []}),
    ("lease_released", {"path": "hub.py", "reason": "stacked", "to_task_id": "T2"}),
    ("lease_acquired", {"path": "hub.py", "tool": "Edit", "stacked_on": "T1"}),
    ("lease_acquired", {"path": "hub.py", "tool": "unstack", "returned_by": "T2"}),
    ("stack_unwound", {"under_task_id": "T1", "attempt": 1}),
    (
        "integration_failed",
        {"check": "test", "conflicts_with": ["T1"], "output_tail": "E   NameError"},
    ),
    ("landing_halted", {"check": "test", "last_landed": "T4"}),
    ("landing_halted", {"check": "test", "last_landed": None, "output_tail": "E   refused"}),
    (
        "landing_check_started",
        {"check": "test", "batch": [], "purpose": "base", "base": 2},
    ),
    (
        "landing_check_finished",
        {"check": "test", "batch": ["T2"], "purpose": "recheck", "verdict": "timed_out"},
    ),
    ("landing_check_finished", {"check": "t", "batch": ["T2"], "purpose": "batch", "verdict": "x"}),
    (
        "landing_check_finished",
        {"check": "test", "batch": ["T1", "T2"], "purpose": "ahead", "verdict": "stopped"},
    ),
    ("integration_failed", {"check": "test", "attempt": 1, "conflicts_with": ["T1", "T3"]}),
    ("integration_failed", {"check": "test", "attempt": 2, "conflicts_with": []}),
    ("landing_resumed", {"reason": "operator"}),
    ("lease_waiting", {"path": "api.py", "holder_task_id": "T3", "queue_position": 1}),
    (
        "lease_waited",
        {"path": "api.py", "waited_s": 1.25, "outcome": "granted", "holder_task_id": "T3"},
    ),
    (
        "lease_waited",
        {"path": "api.py", "waited_s": 2, "outcome": "changed", "holder_task_id": "T3"},
    ),
    (
        "lease_waited",
        {"path": "api.py", "waited_s": 0, "outcome": "deadlock", "holder_task_id": "T3"},
    ),
    (
        "lease_waited",
        {"path": "api.py", "waited_s": 30, "outcome": "timed_out", "holder_task_id": "T3"},
    ),
    (
        "lease_waited",
        {"path": "api.py", "waited_s": 1, "outcome": "refused", "holder_task_id": "T3"},
    ),
    ("not_in_the_table", {}),
]

NODE_SCRIPT = """
import { readFileSync } from "node:fs";
const { phrase } = await import(process.argv[1]);
const table = JSON.parse(readFileSync(process.argv[2], "utf8"));
const corpus = JSON.parse(readFileSync(0, "utf8"));
process.stdout.write(JSON.stringify(corpus.map(([kind, payload]) => phrase(table, kind, payload))));
"""


def test_every_event_type_has_words() -> None:
    assert set(table()) == {t.value for t in EventType}


def test_the_corpus_covers_every_event_type() -> None:
    assert {kind for kind, _ in CORPUS} >= {t.value for t in EventType}


def test_the_browser_reads_every_event_exactly_as_the_terminal_does(tmp_path: Path) -> None:
    node = require_tool("node", "runs the page's wording.js", package="nodejs")
    module = tmp_path / "wording.mjs"  # .mjs: node loads it as the ES module the browser does
    module.write_text((WEB / "wording.js").read_text())
    ran = subprocess.run(
        [node, "--input-type=module", "-e", NODE_SCRIPT, module.as_uri(), str(WORDING_FILE)],
        input=json.dumps(CORPUS),
        capture_output=True,
        text=True,
        check=True,
    )
    browser = json.loads(ran.stdout)
    terminal = [phrase(kind, payload) for kind, payload in CORPUS]
    assert [(k, b) for (k, _), b in zip(CORPUS, browser, strict=True)] == [
        (k, t) for (k, _), t in zip(CORPUS, terminal, strict=True)
    ]
    assert terminal[-1] is None and all(terminal[:-1])


def test_the_web_log_words_events_only_through_the_table() -> None:
    log = (WEB / "log.js").read_text()
    assert "phrase(WORDING" in log
    worded_here = re.findall(r'case "(?:task|lease|file|check|agent|fleet|run)_\w+"', log)
    assert worded_here == [], "log.js must not word events itself: wording.json says it once"


def test_an_interrupted_attempt_reads_as_interrupted_by_you_not_as_an_infra_failure() -> None:
    body = {"error_kind": "infra", "reason": "interrupted", "charged": False}

    assert phrase("task_requeued", body) == "interrupted by you: requeued, not charged"
    assert phrase("task_requeued", {**body, "reason": "agent_stale"}) == (
        "requeued (infra): agent_stale"
    )


def test_a_resource_lease_reads_as_the_resource_not_its_lease_key() -> None:
    lines = [phrase(kind, payload) or "" for kind, payload in CORPUS if kind.startswith("lease_")]
    resource_lines = [line for line in lines if "resource " in line]
    assert not [line for line in lines if "/resource:" in line]
    assert "leased resource db (acquire_resource)" in resource_lines
    assert "VETO resource port:41234: held by r-1 (T1)" in resource_lines
    assert "WAIT resource db: held by T3, #2 in line" in resource_lines


def test_a_filter_the_renderer_does_not_know_is_an_error() -> None:
    table()["__probe__"] = ["{x|shout}"]
    try:
        with pytest.raises(ValueError, match="unknown filter"):
            phrase("__probe__", {"x": 1})
    finally:
        del table()["__probe__"]


def test_a_verify_that_cannot_start_its_program_says_what_to_do_whole_in_the_log() -> None:
    check = CheckResult(
        "lint",
        CheckPurpose.VERIFY,
        "flake9-is-not-installed --max-line-length 100 src tests",
        exit_code=127,
        output="sh: 1: flake9-is-not-installed: not found\n" * 5,
        infra=True,
        unstartable=(("flake9-is-not-installed", "was not found"),),
    )
    error = check.failure_text("T12")
    line = phrase("task_failed", {"error_kind": "check_unrunnable", "error": error})
    assert line is not None
    assert line.startswith(
        "FAILED (check_unrunnable): check `lint` could not start: flake9-is-not-installed was "
        "not found where checks run. Install flake9-is-not-installed where checks run, or fix "
        "the check's command (flake9-is-not-installed --max-line-length 100 src tests), then "
        "`codefleet retry T12`."
    ), line


COST_SCRIPT = """
const { costStat } = await import(process.argv[1] + "/panels.js");
const { costText, spentText } = await import(process.argv[1] + "/util.js");
const budgets = JSON.parse(process.argv[2]);
process.stdout.write(JSON.stringify({
  stat: budgets.map((b) => costStat(0.03, b)),
  cost: [costText(0.03, false), costText(0.03, true)],
  spent: [spentText(1.02, false), spentText(1.02, true)],
}));
"""


def test_the_web_dashboard_labels_a_simulated_cost_as_the_terminal_does(tmp_path: Path) -> None:
    node = require_tool("node", "runs the page's panels.js", package="nodejs")
    for script in WEB.glob("*.js"):
        (tmp_path / script.name).write_text(script.read_text())
    (tmp_path / "package.json").write_text('{"type": "module"}')  # ES modules, as the page loads
    budgets = [None, {"simulated": True}, {"simulated": True, "max_cost_usd": 1.0}]
    ran = subprocess.run(
        [node, "--input-type=module", "-e", COST_SCRIPT, str(tmp_path), json.dumps(budgets)],
        capture_output=True,
        text=True,
        check=True,
    )
    page = json.loads(ran.stdout)
    assert page["stat"] == [
        "$0.0300",
        "$0.0300 simulated, nothing spent",
        "$0.0300 simulated, nothing spent of $1.0000",
    ]
    assert page["cost"] == [cost_text(0.03, False), cost_text(0.03, True)]
    assert page["spent"] == [spent_text(1.02, False), spent_text(1.02, True)]


def test_a_spent_budget_reads_as_simulated_in_the_log_when_no_real_model_ran() -> None:
    said = phrase(
        "fleet_budget_exhausted", {"spent_usd": 1.02, "max_cost_usd": 1.0, "simulated": True}
    )
    assert said == (
        "fleet budget exhausted: $1.0200 simulated, nothing spent of $1.0000; no new task is assigned"
    )


@pytest.mark.parametrize("cause", list(HaltCause))
def test_a_halt_reads_as_its_cause_in_the_log_and_in_every_view(cause: HaltCause) -> None:
    halted = {"check": "test", "why": cause.value, "last_landed": "T1", "output_tail": ""}
    said = phrase("landing_halted", halted)
    shown = landing_lines(
        {"integration": "test", "landed": 1, "queue": ["T2"], "batch": 4, "halted": halted}
    )
    clause = halt_cause("test", cause)
    assert said is not None and said.startswith(f"LANDING HALTED: {clause} (last landed T1)")
    assert any(line.startswith(f"HALTED: {clause}, with no candidate") for line in shown)
    alone = cause is HaltCause.FAILS_ALONE
    assert ("the landed tree alone fails test" in clause) is alone, clause


def test_a_flaky_halt_says_flaky_and_a_halt_without_a_cause_reads_as_the_tree_failing() -> None:
    assert halt_cause("test", HaltCause.FLAKY).startswith("test is flaky: it failed, then passed")
    assert (
        halt_cause("test", None)
        == halt_cause("test", "something else")
        == ("the landed tree alone fails test")
    )


def test_a_landing_check_not_run_says_whose_pass_it_stands_for() -> None:
    body = {"check": "test", "batch": ["T1"], "purpose": "batch", "verdict": "passed",
            "duration_ms": 0, "reused_event": 77, "reused_task": "T1"}  # fmt: skip
    said = phrase("landing_check_finished", {**body, "reused_purpose": "verify"})
    assert said == (
        "landing check test: T1 (batch) passed, not run: T1's verify check test passed with "
        "this command on this same content"
    )
    tool = phrase("landing_check_finished", {**body, "reused_purpose": "tool"})
    assert "not run: T1's run_check of test passed" in str(tool)
