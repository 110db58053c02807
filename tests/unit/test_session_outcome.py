"""The pure parts of the SDK executor: outcome mapping, hook timing, the prompt, `deny`.

No CLI runs here; these pin the rules the real-CLI tests rely on, one rule per test.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from claude_agent_sdk import CLIConnectionError, CLINotFoundError, ProcessError

from codefleet.attempt import AssignedTask
from codefleet.models import ErrorKind
from codefleet.offlinemodels.anthropicapi import marker
from codefleet.session.attempthooks import deny
from codefleet.session.clistream import classify_crash
from codefleet.session.outcome import (
    Crash,
    HookRecord,
    SessionResult,
    session_outcome,
    timing_summary,
    usage_totals,
)
from codefleet.session.taskprompt import build_prompt

USAGE = {
    "claude-a": {
        "inputTokens": 100,
        "cacheReadInputTokens": 20,
        "cacheCreationInputTokens": 3,
        "outputTokens": 7,
    },
    "claude-b": {"inputTokens": 1000, "outputTokens": 50, "costUSD": 0.1},
}
HELD = "api.py is held by runner-1 for task T3. Do not retry this file or edit around it."


def result(**fields: Any) -> SessionResult:
    base: dict[str, Any] = {
        "subtype": "success",
        "is_error": False,
        "text": "Done.",
        "total_cost_usd": 0.25,
        "model_usage": USAGE,
        "session_id": "s1",
    }
    return SessionResult(**{**base, **fields})


def test_tokens_sum_every_model_and_input_counts_cache_reads_and_writes() -> None:
    assert usage_totals(USAGE) == (1123, 57)


def test_a_clean_result_is_success_with_tokens_cost_and_the_written_files() -> None:
    outcome = session_outcome(result(), None, HookRecord(written=("a.py",)), attempt=3)

    assert (outcome.ok, outcome.summary, outcome.cost_usd) == (True, "Done.", 0.25)
    assert (outcome.input_tokens, outcome.output_tokens, outcome.session_id) == (1123, 57, "s1")
    assert (outcome.files_written, outcome.attempt) == (("a.py",), 3)


@pytest.mark.parametrize("subtype", ["success", "error_max_turns"])
def test_a_held_path_makes_a_veto_even_when_the_model_claims_success(subtype: str) -> None:
    hooks = HookRecord(blocked_on="api.py", refusals=(HELD,))

    outcome = session_outcome(result(subtype=subtype), None, hooks, attempt=1)

    assert (outcome.ok, outcome.error_kind, outcome.blocked_on_path) == (
        False,
        ErrorKind.VETO,
        "api.py",
    )
    assert outcome.error == f"vetoed: {HELD}"
    assert outcome.cost_usd == 0.25


@pytest.mark.parametrize("subtype", ["error_max_turns", "error_max_budget_usd"])
def test_a_turn_or_budget_stop_is_budget(subtype: str) -> None:
    outcome = session_outcome(result(subtype=subtype, is_error=True), None, HookRecord(), attempt=1)

    assert (outcome.ok, outcome.error_kind) == (False, ErrorKind.BUDGET)


@pytest.mark.parametrize(
    ("status", "reason", "kind"),
    [
        (500, "api_error", ErrorKind.INFRA),
        (529, None, ErrorKind.RATE_LIMITED),
        (None, "api_error", ErrorKind.INFRA),
        (429, "api_error", ErrorKind.RATE_LIMITED),
    ],
)
def test_an_api_error_is_infra_and_a_429_or_529_is_rate_limited(
    status: int | None, reason: str | None, kind: ErrorKind
) -> None:
    failed = result(is_error=True, api_error_status=status, terminal_reason=reason)

    assert session_outcome(failed, None, HookRecord(), attempt=1).error_kind is kind


def test_a_limit_carries_the_retry_time_the_session_learnt_and_other_errors_none() -> None:
    limited = result(is_error=True, api_error_status=429, retry_after_s=17.5)
    broken = result(is_error=True, api_error_status=500, retry_after_s=17.5)

    assert session_outcome(limited, None, HookRecord(), attempt=1).retry_after_s == 17.5
    assert session_outcome(broken, None, HookRecord(), attempt=1).retry_after_s is None


def test_any_other_error_result_is_an_agent_error_with_its_errors() -> None:
    failed = result(subtype="error_during_execution", is_error=True, errors=("boom",))

    outcome = session_outcome(failed, None, HookRecord(), attempt=1)

    assert (outcome.error_kind, outcome.error) == (
        ErrorKind.AGENT_ERROR,
        "session ended with error_during_execution: boom",
    )


def test_a_session_without_a_result_takes_the_crash_kind() -> None:
    crash = Crash(ErrorKind.INFRA, "the Claude Code CLI failed")

    assert session_outcome(None, crash, HookRecord(), attempt=1).error_kind is ErrorKind.INFRA
    assert session_outcome(None, None, HookRecord(), attempt=1).error_kind is ErrorKind.AGENT_ERROR


@pytest.mark.parametrize(
    "hooks_and_denials",
    [(HookRecord(refusals=("x.py is outside the shared working tree",)), 1), (HookRecord(), 1)],
)
def test_a_refused_write_that_is_not_a_veto_fails_the_attempt(hooks_and_denials: Any) -> None:
    hooks, denials = hooks_and_denials

    outcome = session_outcome(result(permission_denials=denials), None, hooks, attempt=1)

    assert (outcome.ok, outcome.error_kind, outcome.blocked_on_path) == (
        False,
        ErrorKind.AGENT_ERROR,
        None,
    )


@pytest.mark.parametrize(
    "error", [CLINotFoundError("no cli"), CLIConnectionError("pipe"), ProcessError("exit", 1)]
)
def test_a_cli_that_fails_without_a_result_is_infra(error: Exception) -> None:
    crash = classify_crash(error)

    assert crash.kind is ErrorKind.INFRA and type(error).__name__ in crash.message


def test_hook_timings_report_nearest_rank_p50_and_p99() -> None:
    samples = [float(n) for n in range(1, 101)]

    assert timing_summary(samples) == {
        "count": 100,
        "p50_ms": 50.0,
        "p99_ms": 99.0,
        "max_ms": 100.0,
    }
    assert timing_summary([]) == {"count": 0}


def test_deny_is_exactly_the_shape_the_cli_obeys() -> None:
    assert deny("stop") == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": "stop",
        }
    }


TASK = AssignedTask(
    id="T4",
    title="Add middleware",
    description="Edit api.py first.",
    file_scope=("middleware.py",),
    attempts=1,
    deadline=datetime.now(UTC),
)


def test_the_prompt_states_the_shared_tree_rules_before_the_task() -> None:
    prompt = build_prompt(TASK)

    rules, task = prompt.index("shared working tree"), prompt.index("# Task T4: Add middleware")
    assert rules < task
    assert (
        "only a hint" in prompt
        and "refusal is final" in prompt
        and "which file blocked you" in prompt
    )
    assert "Expected files (a hint): middleware.py" in prompt and "Edit api.py first." in prompt
    assert "[[fakemodel:" not in prompt and "previous attempt" not in prompt


def test_a_retry_prompt_carries_the_previous_error_and_the_marker_only_when_given() -> None:
    retry = replace(TASK, attempts=2, error="vetoed: api.py is held", blocked_on_path="api.py")

    prompt = build_prompt(retry, marker("T4-a2"))

    assert "attempt 2" in prompt and "vetoed: api.py is held" in prompt
    assert "blocked on api.py" in prompt
    assert prompt.rstrip().endswith(marker("T4-a2"))
