"""Repair turns: a change that failed its check is fixed in the same session, not redone.

A task's change can fail a check in two places: its own `verify` at the session's
end, and its landing check on the landed tree. Either way the change is still on
the tree (its leases are held) and the session that made it knows why, so the
cheapest fix is one more turn of that session told the failing output: a *repair
turn*. Only a repair that fails too, or a session that cannot take a turn, falls
back to the rollback and a new attempt (docs/decisions/0161-a-failed-check-is-
repaired-in-the-same-session.md).

- `finish_session` is where every executor ends a session: the reads settled
  (`fleet.reconcile`), then the task's verify (`Attempt.verify`, the runner's),
  and while it fails, at most `Attempt.repair_turns` repair turns, each followed
  by the reads and the verify again.
- `opening` is the first message of a *repair attempt*
  (`AssignedTask.repair_session`): the landing check failed after the session
  ended, so the runner resumes that session and its first turn is the repair.

A verify's repair turn is said to the server (`repair_started`, `repair_finished`,
on the check events' route; a landing repair's are the server's own, it knows
the check and the outcome); its tokens and cost count to the attempt. A repair
turn that left the verify's view as the failed run saw it (the same content
identity) keeps that failure: the verify is not run again, and `repair_finished`
names the kept run (`kept_event`, `identity`; decision 0175).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any, Final

from codefleet.attempt import AttemptReport, merged_report
from codefleet.errors import StaleEpoch
from codefleet.fleet.executor import Attempt
from codefleet.fleet.reconcile import Turn, settle_reads
from codefleet.fleet.tools.attemptchecks import CheckResult
from codefleet.models import CheckPurpose, ErrorKind, RepairCause

__all__ = ["FAILED", "FIXED", "finish_session", "opening", "repair_message"]

log = logging.getLogger(__name__)
# How a repair turn ended (`repair_finished`'s `outcome`).
FIXED: Final = "fixed"  # the verify passed after it
FAILED: Final = "failed"  # the check failed again, or the turn did: rolled back and reworked
# (a landing repair's `repair_finished` is the server's: `landing` or `failed`)

CLOSING: Final = (
    "Your change is still on the tree and your leases are still held: repair it in place so "
    "the check passes. Keep the work of other tasks (adapt yours to it); you may edit other "
    "files too. When you are done, reply with a short summary of what you changed."
)


def repair_message(cause: RepairCause, error: str) -> str:
    """A repair turn's user message: what failed (the check's error text), then what to do."""
    if cause is RepairCause.VERIFY:
        head = "Your change failed its verification at the end of your session."
    else:
        head = "Your change did not land: its landing check failed on the landed tree."
    return f"{head}\n\n{error.strip()}\n\n{CLOSING}\n"


def opening(attempt: Attempt) -> str | None:
    """The first message of a repair attempt (None: a fresh attempt, its usual prompt)."""
    if attempt.task.repair_session is None:
        return None
    return repair_message(RepairCause.INTEGRATION, attempt.task.error or "")


async def finish_session(
    attempt: Attempt, report: AttemptReport, turn: Turn | None
) -> AttemptReport:
    """The report of a session's end: reads settled, verified, repaired while it may be."""
    report = await settle_reads(attempt, report, turn)
    if attempt.verify is None:
        return report
    attempt.repairs.verified = True
    verified = await attempt.verify(report) if report.ok else report
    while _repairable(verified) and turn is not None and _turns_left(attempt):
        report, verified = await _repair(attempt, report, verified, turn)
    return verified


def _repairable(report: AttemptReport) -> bool:
    return not report.ok and report.error_kind is ErrorKind.VERIFY_FAILED


def _turns_left(attempt: Attempt) -> bool:
    return not attempt.gate.fenced and attempt.repairs.turns < attempt.repair_turns


async def _repair(
    attempt: Attempt, report: AttemptReport, failed: AttemptReport, turn: Turn
) -> tuple[AttemptReport, AttemptReport]:
    """One repair turn after a failed verify: (the session's report, the verified one)."""
    attempt.repairs.turns += 1
    await _said(attempt, "repair_started", "", report)
    seen = _failed_run(attempt)
    after = await turn(repair_message(RepairCause.VERIFY, failed.error or ""))
    attempt.repairs.cost_usd += after.cost_usd
    merged = merged_report(report, after)
    if not after.ok or attempt.gate.fenced:  # the session cannot go on: the verify's failure
        await _said(attempt, "repair_finished", FAILED, after)
        return merged, _usage_of(failed, merged)
    merged = await settle_reads(attempt, merged, turn)
    if merged.ok and await _unchanged(attempt, seen):  # the same content: the same failure
        await _said(attempt, "repair_finished", FAILED, after, kept=seen)
        return merged, _usage_of(failed, merged)
    verified = await attempt.verify(merged) if attempt.verify and merged.ok else merged
    await _said(attempt, "repair_finished", FIXED if verified.ok else FAILED, after)
    return merged, verified


def _failed_run(attempt: Attempt) -> CheckResult | None:
    """The failed verify run a repair turn answers, where its view's identity was recorded
    (the verify is the attempt's last check when the turn starts)."""
    results = attempt.checks.results if attempt.checks is not None else []
    run = results[-1] if results else None
    if run is None or run.purpose is not CheckPurpose.VERIFY or run.name != attempt.task.verify:
        return None
    failed = run.refused is None and not run.timed_out and not run.infra and not run.passed
    recorded = run.reused is None and run.identity is not None and run.event_id is not None
    return run if failed and recorded else None


async def _unchanged(attempt: Attempt, seen: CheckResult | None) -> bool:
    """Whether the verify would now see exactly what the failed run `seen` saw: its command
    on a view of the same content identity (none said: it runs again)."""
    checks = attempt.checks
    if seen is None or checks is None or checks.commands.get(seen.name) != seen.command:
        return False
    return await checks.identity(seen.name) == seen.identity


def _usage_of(failed: AttemptReport, spent: AttemptReport) -> AttemptReport:
    """The verify's failure, with everything the session spent (the repair turn included)."""
    return replace(
        failed,
        input_tokens=spent.input_tokens,
        output_tokens=spent.output_tokens,
        cost_usd=spent.cost_usd,
        files_written=spent.files_written,
        session_id=spent.session_id or failed.session_id,
    )


async def _said(
    attempt: Attempt,
    phase: str,
    outcome: str,
    turn: AttemptReport,
    kept: CheckResult | None = None,
) -> None:
    """`repair_started` (`turn`: the session so far) / `repair_finished` (`turn`: the repair
    turn; `kept`: the failed run it left unchanged) for this attempt; a lost one is logged."""
    body: dict[str, Any] = {
        "attempt": attempt.number,
        "name": attempt.task.verify,
        "phase": phase,
        "purpose": CheckPurpose.VERIFY,
        "cause": RepairCause.VERIFY,
        "turn": attempt.repairs.turns,
    }
    if phase == "repair_finished":
        body |= {"outcome": outcome, "cost_usd": turn.cost_usd}
        body |= {"input_tokens": turn.input_tokens, "output_tokens": turn.output_tokens}
        if kept is not None:  # not run again: the log names the failure that stands
            body |= {"kept_event": kept.event_id, "identity": kept.identity}
    else:  # the session so far: what a rework would spend again
        body["spent_usd"] = turn.cost_usd
    gate = attempt.gate
    try:
        await gate.client.check_event(gate.task_id, gate.agent_id, gate.epoch, body)
    except StaleEpoch:
        gate.fenced = True
    except Exception:  # a record: the attempt goes on without it
        log.warning("could not record %s of %s", phase, gate.task_id, exc_info=True)
