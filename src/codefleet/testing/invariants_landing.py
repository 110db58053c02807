"""The landing invariants: nothing lands twice, nothing succeeds unchecked, leases kept.

`check_landing` replays the event log (in id order) against the landing
contract (issue 39) and reports every `Violation`:

- `landed_twice`: order numbers are 1, 2, 3, … with no gap or repeat, and a
  task lands at most once per success (a second `landed` with no `task_retried`
  between);
- `succeeded_unlanded`: every `task_succeeded` comes right after its own
  `landed` (the event before it, same order number), and every `landed` is
  followed by its `task_succeeded`;
- `landed_unchecked`: a `landed` sits on the base every earlier landing built
  (`base` is the number of tasks landed before its batch's first landing:
  order - 1 - its position in `batch`), and each check it lists had a
  `landing_check_finished` with verdict passed, since the task was queued, on
  exactly the tree its landing makes: the check's base (landed tasks, in
  landing order) plus its batch is the landing's base plus its whole batch (a
  step checked while a shorter prefix under it was landing names the older
  base and the longer batch: the same tasks in the same order, decision 0160);
  with `integration` given, every landing lists it;
- `landing_lease`: a task waiting to land keeps its leases: no
  `lease_released` between its `landing_queued` and its end, except the
  releases of the landing transaction itself (right before its `landed`, a
  freed path's hand-over to a parked write in between);
- `stack_order`: a task that took a file over from a task waiting to land
  (`lease_acquired` with `stacked_on`) lands only after that task landed, and a
  `stack_unwound` attempt ends next as `task_requeued` (error kind
  `stack_unwound`), uncharged; a waiting task's lease passed on that way
  (`lease_released`, reason `stacked`) is not a lease given up;
- `integration_rollback`: an `integration_failed` is for a task waiting to
  land, is followed by its `task_requeued` (error kind integration_failed) or
  `task_failed` before anything else happens to it, and each file its attempt
  wrote is put back (`file_restored` / `restore_failed`) before its lease is released,
  like any failed attempt (the lease replay in `invariants` does the rest);
- `check_reuse`: a landing check not run (`view: reused`) names the step whose
  passed run it is (`reused_step`): the same check and command, the same content
  identity, on exactly the same tree (its base plus batch); never for a check
  declared `reuse: false` (`fresh`); or it names (`reused_event`) an earlier
  `check_finished` of a task that passed, of the same check, command and content
  identity (decision 0177). An attempt's `check_reused` is checked by
  `invariants_reuse.check_reuse`.

A blamed task whose session repairs its change (`repair_started`, cause
`integration`, decision 0161) is not blamed yet: it stops waiting to land, its
leases kept, and its repair attempt's success queues it again.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from codefleet.models import ErrorKind, EventType, RepairCause
from codefleet.testing.invariants import Violation

__all__ = ["check_landing"]

Row = dict[str, Any]
PASSED: Final = "passed"
REUSED: Final = "reused"  # a landing check's `view` when it was not run (`fleet.landingworker`)
STACKED: Final = "stacked"  # `ReleaseReason.STACKED`: passed on to the next writer
RELEASING: Final = frozenset({EventType.LEASE_RELEASED, EventType.RESTORE_REQUESTED})
WAIT_ENDS: Final = frozenset({EventType.LANDED, EventType.TASK_CANCELLED})
# A freed path handed to a parked write, in the transaction that freed it (`leases.drop`).
HANDED_OVER: Final = frozenset({EventType.LEASE_ACQUIRED, EventType.LEASE_WAITED})


@dataclass(slots=True)
class _State:
    integration: str | None
    landed: int = 0
    order: list[str] = field(default_factory=list)  # the landed tasks, in landing order
    queued: dict[str, int] = field(default_factory=dict)  # waiting task -> its landing_queued id
    landed_tasks: set[str] = field(default_factory=set)  # landed since its last retry
    passed: list[Row] = field(default_factory=list)  # landing_check_finished, verdict passed
    task_runs: dict[int, Row] = field(default_factory=dict)  # check_finished by id, so far
    blamed: set[str] = field(default_factory=set)  # integration_failed, rework not yet seen
    rolling_back: dict[str, set[str]] = field(default_factory=dict)  # task -> paths not put back
    written: dict[str, set[str]] = field(default_factory=dict)  # task -> its attempt's writes
    stacked_on: dict[str, set[str]] = field(default_factory=dict)  # task -> what it built on
    unwound: set[str] = field(default_factory=set)  # stack_unwound, its requeue not yet seen
    fresh: frozenset[str] = frozenset()  # the checks declared `reuse: false`
    found: list[Violation] = field(default_factory=list)

    def flag(self, rule: str, message: str, event: Row) -> None:
        self.found.append(Violation(rule, message, event.get("id"), event.get("task_id")))


def check_landing(
    events: Sequence[Row], integration: str | None = None, fresh: Collection[str] = ()
) -> list[Violation]:
    """Every landing-contract violation the event log shows (`integration`: the run's check;
    `fresh`: the checks declared `reuse: false`)."""
    ordered = sorted(events, key=lambda e: int(e["id"]))
    state = _State(integration, fresh=frozenset(fresh))
    for n, event in enumerate(ordered):
        handler = _HANDLERS.get(event["type"])
        if handler is not None and (event.get("task_id") or event["type"] in _TASKLESS):
            handler(state, ordered, n)
    for task_id in sorted(state.blamed):
        state.found.append(
            Violation("integration_rollback", f"{task_id} was blamed and never reworked",
                      task_id=task_id)
        )  # fmt: skip
    return state.found


def _assigned(state: _State, ordered: Sequence[Row], n: int) -> None:
    state.written[ordered[n]["task_id"]] = set()


def _changed(state: _State, ordered: Sequence[Row], n: int) -> None:
    event = ordered[n]
    state.written.setdefault(event["task_id"], set()).add(str(event["payload"].get("path")))


def _put_back(state: _State, ordered: Sequence[Row], n: int) -> None:
    event = ordered[n]
    state.rolling_back.get(event["task_id"], set()).discard(str(event["payload"].get("path")))


def _finished(state: _State, ordered: Sequence[Row], n: int) -> None:
    event = ordered[n]
    if event["payload"].get("view") == REUSED:
        _reused(state, event)
    if event["payload"].get("verdict") == PASSED:
        state.passed.append(event)


def _task_run(state: _State, ordered: Sequence[Row], n: int) -> None:
    state.task_runs[int(ordered[n]["id"])] = ordered[n]


def _reused_task_run(state: _State, event: Row) -> None:
    """A landing check not run that names a task's `check_finished` stands for it: an
    earlier run that passed, of the same check and command, on the same content."""
    body = event["payload"]
    name, named = body.get("check"), body.get("reused_event")
    earlier = state.task_runs.get(named) if isinstance(named, int) else None
    was = earlier["payload"] if earlier is not None else {}
    if name in state.fresh:
        why = "is declared reuse: false"
    elif earlier is None:
        why = f"names no earlier check_finished ({named})"
    elif body.get("reused_step") is not None:
        why = f"names both step {body.get('reused_step')} and event {named}"
    elif was.get("passed") is not True:
        why = f"stands for a run that did not pass (event {named})"
    elif was.get("name") != name:
        why = f"stands for a run of {was.get('name')} (event {named})"
    elif not body.get("command") or was.get("command") != body.get("command"):
        why = f"stands for a run of another command (event {named})"
    elif not body.get("identity") or was.get("identity") != body.get("identity"):
        why = f"stands for a run on other content (event {named})"
    else:
        return
    state.flag("check_reuse", f"landing check {name} reused in step {body.get('step')}: {why}",
               event)  # fmt: skip


def _reused(state: _State, event: Row) -> None:
    """A landing check not run stands for the passed run of the step it names: the same
    check, command and content, on exactly the same tree."""
    body = event["payload"]
    if body.get("reused_event") is not None:
        _reused_task_run(state, event)
        return
    name, step = body.get("check"), body.get("reused_step")
    earlier = next(
        (p["payload"] for p in state.passed
         if (p["payload"].get("step"), p["payload"].get("check")) == (step, name)
         and p["payload"].get("view") != REUSED),
        None,
    )  # fmt: skip
    if name in state.fresh:
        why = "is declared reuse: false"
    elif earlier is None:
        why = f"names no passed run of it in step {step}"
    elif not body.get("identity") or earlier.get("identity") != body.get("identity"):
        why = f"stands for step {step}'s run on other content"
    elif earlier.get("command") != body.get("command"):
        why = f"stands for step {step}'s run of another command"
    elif (tree := _tree(body, state.order)) is None or _tree(earlier, state.order) != tree:
        why = f"stands for step {step}'s run on another tree"
    else:
        return
    state.flag("check_reuse", f"landing check {name} reused in step {body.get('step')}: {why}",
               event)  # fmt: skip


def _tree(body: Row, order: list[str]) -> list[str] | None:
    """What a landing check ran on: the landed tasks under its base, in order, then its batch
    (None: a base beyond what has landed)."""
    base = int(body.get("base", -1))
    if not 0 <= base <= len(order):
        return None
    return order[:base] + list(body.get("batch") or ())


def _queued(state: _State, ordered: Sequence[Row], n: int) -> None:
    state.queued[ordered[n]["task_id"]] = int(ordered[n]["id"])


def _retried(state: _State, ordered: Sequence[Row], n: int) -> None:
    state.landed_tasks.discard(ordered[n]["task_id"])


def _released(state: _State, ordered: Sequence[Row], n: int) -> None:
    """A waiting task's leases go only in the transaction that lands it (then `landed`)."""
    event = ordered[n]
    task_id, path = event["task_id"], str(event["payload"].get("path"))
    unrestored = state.rolling_back.get(task_id, set())
    if path in unrestored:
        unrestored.discard(path)
        state.flag(
            "integration_rollback", f"{task_id} released {path} before putting it back", event
        )
    if task_id not in state.queued or event["payload"].get("reason") == STACKED:
        return
    after = next(
        (e for e in ordered[n + 1 :]
         if not (e["type"] in RELEASING and e.get("task_id") == task_id)
         and e["type"] not in HANDED_OVER),
        None,
    )  # fmt: skip
    if after is None or after["type"] not in WAIT_ENDS or after.get("task_id") != task_id:
        state.flag("landing_lease", f"{task_id} released {path} while waiting to land", event)


def _landed(state: _State, ordered: Sequence[Row], n: int) -> None:
    event = ordered[n]
    task_id, body = event["task_id"], event["payload"]
    order, base = int(body.get("order", -1)), int(body.get("base", -1))
    batch, checks = list(body.get("batch") or ()), list(body.get("checks") or ())
    if order != state.landed + 1:
        state.flag("landed_twice", f"{task_id} landed {order}, after {state.landed}", event)
    _on_its_base(state, event, base, batch)
    tree = state.order[: max(0, base)] + batch  # what is landed once its batch has landed
    state.landed += 1
    state.order.append(task_id)
    if task_id in state.landed_tasks:
        state.flag("landed_twice", f"{task_id} landed a second time", event)
    state.landed_tasks.add(task_id)
    early = sorted(state.stacked_on.pop(task_id, set()) - state.landed_tasks)
    if early:
        state.flag("stack_order", f"{task_id} landed before {early}, which it built on", event)
    queued = state.queued.pop(task_id, None)
    if task_id in state.blamed:
        state.flag("integration_rollback", f"{task_id} landed after it was blamed", event)
    if queued is None:
        state.flag("succeeded_unlanded", f"{task_id} landed without waiting to land", event)
    after = ordered[n + 1] if n + 1 < len(ordered) else None
    if (
        after is None
        or after["type"] != EventType.TASK_SUCCEEDED
        or after.get("task_id") != task_id
    ):
        state.flag("succeeded_unlanded", f"{task_id} landed but did not succeed at once", event)
    if state.integration and state.integration not in checks:
        state.flag(
            "landed_unchecked", f"{task_id} landed without the check {state.integration}", event
        )
    for name in checks:
        if not any(_passes(p, name, tree, state.order, queued or 0) for p in state.passed):
            state.flag(
                "landed_unchecked",
                f"{task_id} landed with no passed {name} for batch {batch} on base {base}",
                event,
            )


def _on_its_base(state: _State, event: Row, base: int, batch: list[str]) -> None:
    """`base` is the count of landings before the batch's first (this one not yet counted)."""
    task_id = event["task_id"]
    if task_id not in batch:
        state.flag("landed_unchecked", f"{task_id} landed outside its batch {batch}", event)
        return
    want = state.landed - batch.index(task_id)
    if base != want:
        state.flag(
            "landed_unchecked",
            f"{task_id} landed on base {base}; {want} had landed before its batch",
            event,
        )


def _passes(finished: Row, name: str, tree: list[str], order: list[str], since: int) -> bool:
    """Whether `finished` passed `name`, after `since`, on exactly `tree` (the landed tasks
    under its base, in order, then its batch)."""
    body = finished["payload"]
    return int(finished["id"]) > since and body.get("check") == name and _tree(body, order) == tree


def _succeeded(state: _State, ordered: Sequence[Row], n: int) -> None:
    event = ordered[n]
    task_id = event["task_id"]
    before = ordered[n - 1] if n else None
    if before is None or before["type"] != EventType.LANDED or before.get("task_id") != task_id:
        state.flag("succeeded_unlanded", f"{task_id} succeeded without landing first", event)
    elif event["payload"].get("order") != before["payload"].get("order"):
        state.flag("succeeded_unlanded", f"{task_id} succeeded with another order number", event)


def _integration_failed(state: _State, ordered: Sequence[Row], n: int) -> None:
    event = ordered[n]
    task_id = event["task_id"]
    if state.queued.pop(task_id, None) is None:
        state.flag("integration_rollback", f"{task_id} blamed while not waiting to land", event)
    state.blamed.add(task_id)
    state.rolling_back[task_id] = set(state.written.get(task_id, ()))


def _acquired(state: _State, ordered: Sequence[Row], n: int) -> None:
    event = ordered[n]
    under = event["payload"].get("stacked_on")
    if under is not None:
        state.stacked_on.setdefault(str(event["task_id"]), set()).add(str(under))


def _unwound(state: _State, ordered: Sequence[Row], n: int) -> None:
    """An unwound task leaves the landing queue (if it was in it) and its attempt ends."""
    task_id = str(ordered[n]["task_id"])
    state.unwound.add(task_id)
    state.queued.pop(task_id, None)


def _repair(state: _State, ordered: Sequence[Row], n: int) -> None:
    """A landing repair: the task stops waiting to land, nothing rolled back."""
    event = ordered[n]
    if event["payload"].get("cause") != RepairCause.INTEGRATION:
        return
    if state.queued.pop(event["task_id"], None) is None:
        state.flag(
            "integration_rollback", f"{event['task_id']} repaired while not waiting to land", event
        )


def _attempt_ended(state: _State, ordered: Sequence[Row], n: int) -> None:
    """The end of a blamed task's attempt must be its rework (requeue or failure); an
    unwound one's, a requeue for that reason, uncharged."""
    event = ordered[n]
    task_id, kind = str(event["task_id"]), event["type"]
    state.queued.pop(task_id, None)
    state.stacked_on.pop(task_id, None)
    if task_id in state.unwound:
        state.unwound.discard(task_id)
        body = event["payload"]
        if kind != EventType.TASK_REQUEUED or body.get("error_kind") != ErrorKind.STACK_UNWOUND:
            state.flag("stack_order", f"{task_id} unwound, then ended by {kind}", event)
    if task_id not in state.blamed:
        return
    state.blamed.discard(task_id)
    if kind == EventType.TASK_REQUEUED and (
        event["payload"].get("error_kind") != ErrorKind.INTEGRATION_FAILED
    ):
        state.flag("integration_rollback", f"{task_id} requeued for another reason", event)
    elif kind == EventType.TASK_CANCELLED:
        state.flag("integration_rollback", f"{task_id} cancelled instead of reworked", event)


Handler = Callable[[_State, Sequence[Row], int], None]
_HANDLERS: Final[dict[str, Handler]] = {
    EventType.TASK_ASSIGNED: _assigned,
    EventType.LEASE_ACQUIRED: _acquired,
    EventType.STACK_UNWOUND: _unwound,
    EventType.FILE_CHANGED: _changed,
    EventType.LEASE_RELEASED: _released,
    EventType.FILE_RESTORED: _put_back,
    EventType.RESTORE_FAILED: _put_back,
    EventType.LANDING_CHECK_FINISHED: _finished,
    EventType.CHECK_FINISHED: _task_run,
    EventType.LANDING_QUEUED: _queued,
    EventType.LANDED: _landed,
    EventType.TASK_SUCCEEDED: _succeeded,
    EventType.INTEGRATION_FAILED: _integration_failed,
    EventType.REPAIR_STARTED: _repair,
    EventType.TASK_RETRIED: _retried,
    EventType.TASK_REQUEUED: _attempt_ended,
    EventType.TASK_FAILED: _attempt_ended,
    EventType.TASK_CANCELLED: _attempt_ended,
}
_TASKLESS: Final = frozenset({EventType.LANDING_CHECK_FINISHED})
