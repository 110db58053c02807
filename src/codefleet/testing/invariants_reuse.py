"""The reuse invariant: a check not run stands for a recorded pass on the same content.

`check_reuse` replays the event log (in id order) and reports each `check_reused`
that the log does not prove (rule `check_reuse`; issue 53: reuse is by content,
never by "nothing changed, probably"; decision 0158). Each must name
(`reused_event`) an earlier `check_finished` of the same task and attempt, the
same check and command, that passed, with the same content identity; never for
a check declared `reuse: false` (`fresh`, from the checks list: `GET /checks`);
and never after the task's own write changed a file it had written before that
pass (its `file_changed` hashes: an oracle the runner's identity takes no part in).

A landing step's reuse (`view: reused`) is checked with the landing contract
(`invariants_landing.check_landing`, the same rule): it names a passed landing
check of exactly the same tree and content.

The other way round (rule `repair_kept`, decision 0175): a repair turn that keeps
its failed verify instead of running it again (`repair_finished` with
`kept_event`) names that verify's failed `check_finished` of the same task and
attempt, with its identity, and the task wrote nothing anew since that run.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, Final

from codefleet.models import EventType
from codefleet.testing.invariants import Violation

__all__ = ["KEPT_RULE", "RULE", "check_reuse"]

Row = dict[str, Any]
RULE: Final = "check_reuse"
KEPT_RULE: Final = "repair_kept"


def check_reuse(events: Sequence[Row], fresh: Collection[str] = ()) -> list[Violation]:
    """Every `check_reused` the log does not prove (`fresh`: the `reuse: false` checks)."""
    found: list[Violation] = []
    finished: dict[int, Row] = {}  # check_finished by id, so far
    writes: dict[str, dict[str, str]] = {}  # task -> path -> its attempt's last write's hash
    written_then: dict[int, dict[str, str]] = {}  # check_finished id -> its task's `writes`
    for event in sorted(events, key=lambda e: int(e["id"])):
        kind, task_id, body = event["type"], str(event.get("task_id")), event["payload"]
        if kind == EventType.TASK_ASSIGNED:
            writes[task_id] = {}
        elif kind == EventType.FILE_CHANGED and body.get("sha256"):
            writes.setdefault(task_id, {})[str(body.get("path"))] = str(body["sha256"])
        elif kind == EventType.CHECK_FINISHED:
            finished[int(event["id"])] = event
            written_then[int(event["id"])] = dict(writes.get(task_id, {}))
        elif kind == EventType.CHECK_REUSED:
            earlier = finished.get(_int(body.get("reused_event")))
            why = _unproven(event, earlier, fresh)
            if why is None and earlier is not None:
                why = _rewritten(written_then[int(earlier["id"])], writes.get(task_id, {}))
            if why is not None:
                found.append(Violation(RULE, f"{task_id}: {why}", event.get("id"), task_id))
        elif kind == EventType.REPAIR_FINISHED and body.get("kept_event") is not None:
            earlier = finished.get(_int(body.get("kept_event")))
            why = _unkept(event, earlier)
            if why is None and earlier is not None:
                why = _written_since(written_then[int(earlier["id"])], writes.get(task_id, {}))
            if why is not None:
                found.append(Violation(KEPT_RULE, f"{task_id}: {why}", event.get("id"), task_id))
    return found


def _unkept(kept: Row, earlier: Row | None) -> str | None:
    """Why `earlier` (the failed run a repair turn kept) does not prove the keep."""
    body = kept["payload"]
    if earlier is None:
        return f"a repair turn kept no recorded check_finished ({body.get('kept_event')})"
    was = earlier["payload"]
    same = earlier.get("task_id") == kept.get("task_id") and was.get("attempt") == body.get(
        "attempt"
    )
    if not same or was.get("name") != body.get("name") or was.get("purpose") != "verify":
        return f"a repair turn kept a run that is not its verify (event {earlier['id']})"
    if was.get("passed") is not False:
        return f"a repair turn kept a run that did not fail (event {earlier['id']})"
    if not body.get("identity") or was.get("identity") != body.get("identity"):
        return f"a repair turn kept a run on other content (event {earlier['id']})"
    return None


def _written_since(then: Mapping[str, str], now: Mapping[str, str]) -> str | None:
    """The files the task wrote anew since a run (changed, or new), if any."""
    changed = sorted(path for path in then.keys() | now.keys() if now.get(path) != then.get(path))
    return f"kept a failed verify after writing {changed} since it ran" if changed else None


def _unproven(reused: Row, earlier: Row | None, fresh: Collection[str]) -> str | None:
    """Why `earlier` (the `check_finished` the reuse names) does not prove it; None: it does."""
    body = reused["payload"]
    name = body.get("name")
    if name in fresh:
        return f"check {name} is declared reuse: false, yet it was reused"
    if earlier is None:
        return f"check {name} reused, naming no earlier check_finished ({body.get('reused_event')})"
    was = earlier["payload"]
    if earlier.get("task_id") != reused.get("task_id") or was.get("attempt") != body.get("attempt"):
        return f"check {name} reused from another task or attempt (event {earlier['id']})"
    if was.get("name") != name:
        return f"check {name} reused from a run of {was.get('name')} (event {earlier['id']})"
    if was.get("passed") is not True:
        return f"check {name} reused from a run that did not pass (event {earlier['id']})"
    if not body.get("command") or was.get("command") != body.get("command"):
        return f"check {name} reused from a run of another command (event {earlier['id']})"
    if not body.get("identity") or was.get("identity") != body.get("identity"):
        return f"check {name} reused from a run on other content (event {earlier['id']})"
    return None


def _rewritten(then: Mapping[str, str], now: Mapping[str, str]) -> str | None:
    """The files the task wrote before the pass and has changed since, if any."""
    changed = sorted(path for path, sha in then.items() if now.get(path) != sha)
    return f"reused after writing {changed} anew since the pass" if changed else None


def _int(value: object) -> int:
    return value if isinstance(value, int) else -1
