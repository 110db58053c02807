"""How a finished Claude Code session becomes an `AttemptReport` (pure: no SDK, no I/O).

`session.clistream` turns the SDK's `ResultMessage` into a `SessionResult` and a
failure without one into a `Crash`, and `session.attempthooks` what the hooks
saw into a `HookRecord`; then
`session_outcome` decides, first rule that applies wins:

1. a write was refused because another task holds the file (the gate's
   `blocked_on`) -> VETO with `blocked_on_path`, whatever the model said after;
2. no result frame -> the crash's kind (`clistream.classify_crash`: INFRA, a CLI
   that cannot start, talk or finish is the environment failing, not the agent);
3. `error_max_turns` / `error_max_budget_usd` -> BUDGET;
4. an API error (`api_error_status`, or `terminal_reason == "api_error"`) ->
   INFRA, or RATE_LIMITED for a 429 (rate or usage limit) or a 529
   (overloaded), carrying `retry_after_s` when the session learnt when the
   limit lifts (a subscription login's `rate_limit_event`; see `session.clistream`);
5. any other error result -> AGENT_ERROR;
6. a write refused for another reason (outside the tree, server down, a hook
   failure the CLI turned into a denial) -> AGENT_ERROR: the agent was told a
   refusal is final, so its task is not done; a write refused because its
   file changed while it waited for the lease (`rereads`) is an answer the
   agent acts on (it reads the file again), not a refusal;
7. otherwise success.

Tokens: input = inputTokens + cacheReadInputTokens + cacheCreationInputTokens
summed over every model in `model_usage` (all prompt tokens the model read,
however they were billed; the dollar figure is `total_cost_usd`, which the CLI
prices per kind); output = outputTokens summed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from codefleet.attempt import AttemptReport
from codefleet.models import ErrorKind

__all__ = [
    "BUDGET_SUBTYPES",
    "Crash",
    "HookRecord",
    "SessionResult",
    "Spent",
    "session_outcome",
    "this_turn",
    "timing_summary",
    "usage_totals",
]

BUDGET_SUBTYPES: Final = frozenset({"error_max_turns", "error_max_budget_usd"})
INPUT_KEYS: Final = ("inputTokens", "cacheReadInputTokens", "cacheCreationInputTokens")
LIMIT_STATUSES: Final = frozenset({429, 529})  # rate or usage limit; overloaded
SUMMARY_CHARS: Final = 2000


@dataclass(frozen=True, slots=True)
class SessionResult:
    """The fields of the SDK's `ResultMessage` that decide an outcome."""

    subtype: str
    is_error: bool
    text: str | None = None
    session_id: str | None = None
    total_cost_usd: float | None = None
    model_usage: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    api_error_status: int | None = None
    terminal_reason: str | None = None
    errors: tuple[str, ...] = ()
    permission_denials: int = 0
    retry_after_s: float | None = None  # seconds until a limit the session hit lifts, if known


@dataclass(frozen=True, slots=True)
class Crash:
    """A session that failed without a result frame."""

    kind: ErrorKind
    message: str


@dataclass(frozen=True, slots=True)
class HookRecord:
    """What the write hooks saw during the session."""

    blocked_on: str | None = None
    refusals: tuple[str, ...] = ()
    written: tuple[str, ...] = ()
    rereads: int = 0  # writes refused as "changed while you waited": answers, not failures


def usage_totals(model_usage: Mapping[str, Mapping[str, Any]]) -> tuple[int, int]:
    """`(input, output)` tokens summed over models; input includes cache reads and writes."""
    tokens_in = sum(int(m.get(k) or 0) for m in model_usage.values() for k in INPUT_KEYS)
    tokens_out = sum(int(m.get("outputTokens") or 0) for m in model_usage.values())
    return tokens_in, tokens_out


def session_outcome(
    result: SessionResult | None, crash: Crash | None, hooks: HookRecord, *, attempt: int
) -> AttemptReport:
    """Attempt `attempt`'s report; see the module docstring for the rules and their order."""
    base = {"attempt": attempt, **_accounting(result, hooks)}
    if hooks.blocked_on is not None:
        return AttemptReport(
            ok=False,
            error=_veto_error(hooks),
            error_kind=ErrorKind.VETO,
            blocked_on_path=hooks.blocked_on,
            **base,
        )
    if result is None:
        crash = crash or Crash(ErrorKind.AGENT_ERROR, "the session ended without a result")
        return AttemptReport(ok=False, error=crash.message, error_kind=crash.kind, **base)
    kind = _result_error_kind(result)
    if kind is ErrorKind.RATE_LIMITED:
        return AttemptReport(
            ok=False,
            error=_result_error(result),
            error_kind=kind,
            retry_after_s=result.retry_after_s,
            **base,
        )
    if kind is not None:
        return AttemptReport(ok=False, error=_result_error(result), error_kind=kind, **base)
    if hooks.refusals or result.permission_denials > hooks.rereads:
        return AttemptReport(
            ok=False, error=_refusal_error(result, hooks), error_kind=ErrorKind.AGENT_ERROR, **base
        )
    return AttemptReport(ok=True, summary=(result.text or "done")[:SUMMARY_CHARS], **base)


def _accounting(result: SessionResult | None, hooks: HookRecord) -> dict[str, Any]:
    tokens_in, tokens_out = usage_totals(result.model_usage) if result else (0, 0)
    return {
        "input_tokens": tokens_in,
        "output_tokens": tokens_out,
        "cost_usd": float(result.total_cost_usd or 0.0) if result else 0.0,
        "session_id": result.session_id if result else None,
        "files_written": hooks.written,
    }


def _result_error_kind(result: SessionResult) -> ErrorKind | None:
    if result.subtype in BUDGET_SUBTYPES:
        return ErrorKind.BUDGET
    if result.api_error_status is not None or result.terminal_reason == "api_error":
        if result.api_error_status in LIMIT_STATUSES:
            return ErrorKind.RATE_LIMITED
        return ErrorKind.INFRA
    if result.is_error:
        return ErrorKind.AGENT_ERROR
    return None


def _result_error(result: SessionResult) -> str:
    detail = "; ".join(result.errors) or (result.text or "").strip()
    status = f" (HTTP {result.api_error_status})" if result.api_error_status else ""
    head = f"session ended with {result.subtype}{status}"
    return f"{head}: {detail[:SUMMARY_CHARS]}" if detail else head


def _veto_error(hooks: HookRecord) -> str:
    held = [r for r in hooks.refusals if hooks.blocked_on and hooks.blocked_on in r]
    reason = held[0] if held else f"{hooks.blocked_on} is held by another task"
    return f"vetoed: {reason}"


def _refusal_error(result: SessionResult, hooks: HookRecord) -> str:
    if hooks.refusals:
        return f"a write was refused: {hooks.refusals[0]}"
    return f"the CLI refused {result.permission_denials} tool call(s) (a hook failure blocks the write)"


def timing_summary(samples_ms: Sequence[float]) -> dict[str, float | int]:
    """Count, p50, p99 and max of hook timings in milliseconds (nearest-rank percentiles)."""
    if not samples_ms:
        return {"count": 0}
    ordered = sorted(samples_ms)
    return {
        "count": len(ordered),
        "p50_ms": round(_nearest_rank(ordered, 50), 3),
        "p99_ms": round(_nearest_rank(ordered, 99), 3),
        "max_ms": round(ordered[-1], 3),
    }


def _nearest_rank(ordered: Sequence[float], percent: float) -> float:
    rank = max(1, math.ceil(percent / 100 * len(ordered)))
    return ordered[rank - 1]


Spent = tuple[int, int, float]  # tokens in, out and cost of a session's turns so far


def this_turn(report: AttemptReport, spent: Spent) -> tuple[AttemptReport, Spent]:
    """A turn's report with this turn's usage only, and the new running totals: a
    session's usage figures (the Claude Code CLI's, a Codex thread's) add up over its
    turns; a turn that reports none keeps the totals."""
    tokens_in, tokens_out, cost = spent
    if report.input_tokens or report.output_tokens or report.cost_usd:
        spent = (report.input_tokens, report.output_tokens, report.cost_usd)
    own = replace(
        report,
        input_tokens=max(0, report.input_tokens - tokens_in),
        output_tokens=max(0, report.output_tokens - tokens_out),
        cost_usd=max(0.0, report.cost_usd - cost),
    )
    return own, spent
