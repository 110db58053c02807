"""The end of a successful session: validate the attempt's reads, apply `on_stale_read`.

`settle_reads` runs inside the executor while its session is still open,
before the report and before `verify`. In a clone of the landed line it first takes
what landed meanwhile into the clone (`fleet.clone`), so a stale read is found as in
the tree. It sends the attempt's read rows with
one `POST /tasks/{id}/reads` (the answer: other tasks' writes since each read)
and computes the stale reads (`fleet.gate.stale`). With none, the report stands.
With some, by the task's policy:

- `reconcile`: the same session takes one more turn (`Turn`: a user message in
  the same conversation) carrying the diffs (`fleet.gate.followup`), then the reads
  are validated again; at most `Attempt.reconcile_rounds` rounds. Still stale
  after them (or no way to take a turn): the last resort is the task's verify
  check if it has one, else `retry`. A turn that fails (the CLI died, the
  budget is spent) ends the attempt as that failure. Its tokens and cost count
  to the attempt.
- `verify`: the report stands; the runner runs the task's verify check.
- `retry`: the attempt fails as `stale_read` (rolled back and requeued like a
  failed verification), the stale files named in the next prompt.
- `ignore`: only recorded.

Every validation that finds stale reads is said to the server at once (one
`stale_read` event), and so is the end of the reconcile turns (`reconciled`),
before the report. A failed session's reads are sent as ledger rows and not
validated.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from enum import StrEnum
from typing import Any, Final

from codefleet.attempt import AttemptReport, Reconciled, StaleRead, merged_report
from codefleet.errors import StaleEpoch
from codefleet.fleet.executor import Attempt
from codefleet.fleet.gate.followup import Seen, followup
from codefleet.fleet.gate.readset import look
from codefleet.fleet.gate.stale import find_stale
from codefleet.models import ErrorKind, StaleReadPolicy

__all__ = ["Outcome", "Turn", "settle_reads", "stale_error", "validate"]

log = logging.getLogger(__name__)
READS_PER_CALL: Final = 5_000
RECONCILE_TOOL: Final = "Reconcile"  # the ledger's name for a file shown whole in a follow-up

# One more user message in the session's conversation; the turn's own report (its usage only).
Turn = Callable[[str], Awaitable[AttemptReport]]


class Outcome(StrEnum):
    CLEAN = "clean"  # validated again: nothing stale
    UNRESOLVED = "unresolved"  # still stale after the last round: the last resort applies
    FAILED = "failed"  # a turn failed: the attempt ends as that failure


async def settle_reads(attempt: Attempt, report: AttemptReport, turn: Turn | None) -> AttemptReport:
    """The report once the attempt's reads are validated and the policy applied."""
    if not report.ok:
        await _send_reads(attempt, watch=False)
        return report
    found = await validate(attempt)
    if not found:
        return report
    await _announce(attempt, stale=found)
    match attempt.task.on_stale_read:
        case StaleReadPolicy.RECONCILE:
            return await _reconcile(attempt, report, found, turn)
        case StaleReadPolicy.RETRY:
            return _retry(report, found)
        case _:  # VERIFY: the runner runs the verify check after this; IGNORE: recorded only
            return report


async def validate(attempt: Attempt) -> tuple[StaleRead, ...]:
    """Send the unsent read rows, ask what changed since each read, find the stale ones."""
    gate = attempt.gate
    if gate.clone is not None and attempt.reads.latest:  # what landed meanwhile, in the clone
        await gate.clone.catch_up(gate.held)  # (a read of it then shows as stale)
    changes = await _send_reads(attempt, watch=True)
    if gate.fenced:
        return ()
    return find_stale(attempt.reads.latest, gate.last_written, changes, attempt.workdir)


async def _reconcile(
    attempt: Attempt, report: AttemptReport, found: tuple[StaleRead, ...], turn: Turn | None
) -> AttemptReport:
    rounds, cost = 0, 0.0
    while found and turn is not None and rounds < attempt.reconcile_rounds:
        rounds += 1
        after = await turn(_message(attempt, found))
        cost += after.cost_usd
        report = merged_report(report, after)
        if not after.ok or attempt.gate.fenced:
            failed = Reconciled(rounds=rounds, outcome=Outcome.FAILED, cost_usd=cost)
            await _announce(attempt, reconciled=failed)
            return report
        found = await validate(attempt)
        if found:
            await _announce(attempt, stale=found)
    if rounds:
        outcome = Outcome.UNRESOLVED if found else Outcome.CLEAN
        await _announce(
            attempt, reconciled=Reconciled(rounds=rounds, outcome=outcome, cost_usd=cost)
        )
    if not found:
        return report
    return report if attempt.task.verify else _retry(report, found)


def _retry(report: AttemptReport, found: Sequence[StaleRead]) -> AttemptReport:
    return replace(report, ok=False, error_kind=ErrorKind.STALE_READ, error=stale_error(found))


def stale_error(found: Sequence[StaleRead]) -> str:
    """The error a `retry` hands the next attempt: the stale files and who changed them."""
    named = "; ".join(
        f"{s.path} ({'deleted' if s.now_sha256 is None else 'changed'} by {', '.join(s.changed_by)})"
        for s in found
    )
    return (
        f"Files this attempt read were changed by other tasks while it worked: {named}. "
        "Its edits were rolled back: read those files again and do the work against what "
        "is there now."
    )


def _message(attempt: Attempt, found: Sequence[StaleRead]) -> str:
    """One round's message; a file it shows whole counts as read again, as shown."""
    skew = attempt.reads.skew_s
    now = {s.path: look(attempt.workdir, s.path, RECONCILE_TOOL, skew) for s in found}
    seen: dict[str, Seen] = {}
    for item in found:
        read = attempt.reads.latest.get(item.path)
        before = _text(read.content if read is not None else None)
        after = _text(now[item.path].content)
        kept = read is not None and (read.sha256 is None or before is not None)
        seen[item.path] = Seen(before, after, kept and after is not None)
    text, shown = followup(found, seen)
    for path in shown:
        attempt.reads.keep(now[path])
    return text


def _text(data: bytes | None) -> str | None:
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


async def _send_reads(attempt: Attempt, *, watch: bool) -> dict[str, Any]:
    """POST the unsent read rows (in chunks) and, with `watch`, the writes since each read."""
    rows = [r.to_wire() for r in attempt.reads.take_unsent()]
    watched = [{"path": r.path, "at": r.at} for r in attempt.reads.latest.values()] if watch else []
    changes: dict[str, Any] = {}
    while rows or watched:
        chunk, rows = rows[:READS_PER_CALL], rows[READS_PER_CALL:]
        asked, watched = (watched, []) if not rows else ([], watched)
        changes.update(await _post_reads(attempt, chunk, asked))
    return changes


async def _announce(
    attempt: Attempt, *, stale: Sequence[StaleRead] = (), reconciled: Reconciled | None = None
) -> None:
    """Tell the server what the validation found (`stale_read`) or how the turns ended."""
    if not attempt.gate.fenced:
        await _post_reads(attempt, [], [], stale=stale, reconciled=reconciled)


async def _post_reads(
    attempt: Attempt,
    rows: list[dict[str, Any]],
    watch: list[dict[str, Any]],
    *,
    stale: Sequence[StaleRead] = (),
    reconciled: Reconciled | None = None,
) -> dict[str, Any]:
    gate = attempt.gate
    done = None if reconciled is None else reconciled.to_wire()
    try:
        return await gate.client.reads(
            gate.task_id,
            gate.agent_id,
            gate.epoch,
            attempt.number,
            rows,
            watch,
            stale=[s.to_wire() for s in stale],
            reconciled=done,
        )
    except StaleEpoch:
        gate.fenced = True
    except Exception:  # the ledger is a record: without its answer, size and mtime still tell
        log.warning("could not send the reads of %s", gate.task_id, exc_info=True)
    return {}
