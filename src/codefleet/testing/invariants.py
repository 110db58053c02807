"""What a finished run must prove: the invariant checker over events, ledger and patches.

It reads everything through the wire API (`collect`, one `FleetClient`), so it
needs no access to the database and works against a server that was killed and
restarted any number of times. `check` is a pure function of that evidence; it
replays the event log in id order and reports every `Violation` it finds:

- event ids are strictly increasing and contiguous (AUTOINCREMENT never reuses
  a committed id; with one writer and no reset, a rolled-back or crashed
  transaction leaves no gap either), and every event a live observer streamed
  is in the final log unchanged (nothing it saw was lost or re-numbered);
- never two holders of one path (a file and any part of it, `path::name`,
  exclude each other; two parts of one file do not): a grant to a held path, a release by a task
  that does not hold it, a lease outliving its attempt (unless a
  `restore_requested` keeps it until its file is back), a ledger row, a
  restore or a denial that disagrees with the replayed holder, a write
  recorded after the attempt ended, a task assigned again before its files
  are back;
- every task follows its state machine: each attempt ends at most once (no
  completion applied twice), from in flight or waiting to land (`landing_queued`;
  a task waiting to land takes no new lease), no task succeeds twice, a task is assigned only
  after every dependency succeeded, and the final rows agree with the replay;
- every task is terminal and consistent with its dependencies (when asked);
- a named resource is a lease key like a path (the rules above hold for it),
  and no sequence value is handed out twice, nor to a task not in flight.

The landing contract (nothing lands twice, nothing succeeds unchecked, a
waiting task keeps its leases, a blamed task is rolled back and reworked) is
`invariants_landing.check_landing`, over the same log; a check not run stands
for a recorded pass on the same content (`invariants_reuse.check_reuse`).

`replay_patches` + `compare_trees` prove the tree: the original tree with the
succeeded tasks' patches applied in completion order (`git apply`) equals the
final tree. The patches are computed from the tree the server saw, so
`invariants_content` adds an oracle that is not: the content hashes the
writers recorded in the change ledger.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any, Final

from codefleet.api.client import FleetClient
from codefleet.models import TERMINAL_STATUSES, EventType, RepairCause, TaskStatus
from codefleet.statedir import STATE_DIR
from codefleet.toolcalls.leasekeys import excludes, file_of

__all__ = [
    "Evidence",
    "Violation",
    "check",
    "collect",
    "compare_trees",
    "replay_patches",
]

Row = dict[str, Any]
IN_FLIGHT: Final = frozenset({TaskStatus.ASSIGNED, TaskStatus.RUNNING})
ENDABLE: Final = frozenset({*IN_FLIGHT, TaskStatus.LANDING})  # an attempt may end from these
ATTEMPT_ENDS: Final = frozenset(
    {EventType.TASK_SUCCEEDED, EventType.TASK_REQUEUED, EventType.TASK_FAILED}
)
COMPARED_FIELDS: Final = ("at", "type", "task_id", "agent_id", "payload")
FETCH_CONCURRENCY: Final = 16


@dataclass(frozen=True, slots=True)
class Violation:
    rule: str
    message: str
    event_id: int | None = None
    task_id: str | None = None

    def __str__(self) -> str:
        at = f" (event {self.event_id})" if self.event_id is not None else ""
        return f"[{self.rule}]{at} {self.message}"


@dataclass(slots=True)
class Evidence:
    """Everything a run left behind, as the wire API shows it."""

    events: list[Row]
    tasks: dict[str, Row]
    ledger: dict[str, list[Row]] = field(default_factory=dict)  # task id -> file_changes rows
    agents: list[Row] = field(default_factory=list)
    leases: list[Row] = field(default_factory=list)
    patches: dict[str, str] = field(default_factory=dict)  # succeeded task id -> diff text

    def completion_order(self) -> list[str]:
        return [e["task_id"] for e in self.events if e["type"] == EventType.TASK_SUCCEEDED]


async def collect(client: FleetClient) -> Evidence:
    """Read the whole run: events, tasks, each task's ledger, agents, leases, patches."""
    events = await client.all_events()
    tasks = {t["id"]: t for t in await client.tasks()}
    gate = asyncio.Semaphore(FETCH_CONCURRENCY)

    async def ledger_of(task_id: str) -> list[Row]:
        async with gate:
            return list((await client.task(task_id))["file_changes"])

    async def patch_of(task_id: str) -> str:
        async with gate:
            return "".join(f["diff"] for f in (await client.patch(task_id))["files"])

    ids = sorted(tasks)
    done = [i for i in ids if tasks[i]["status"] == TaskStatus.SUCCEEDED]
    ledgers = await asyncio.gather(*(ledger_of(i) for i in ids))
    patches = await asyncio.gather(*(patch_of(i) for i in done))
    return Evidence(
        events=events,
        tasks=tasks,
        ledger=dict(zip(ids, ledgers, strict=True)),
        agents=await client.agents(),
        leases=await client.leases(),
        patches=dict(zip(done, patches, strict=True)),
    )


# -- the pure check ----------------------------------------------------------------------


@dataclass(slots=True)
class _Task:
    status: TaskStatus = TaskStatus.PENDING
    attempts: int = 0
    generation: int = 0  # bumped by a retry, which starts attempts over
    successes: int = 0


@dataclass(slots=True)
class _Replay:
    deps: Mapping[str, Sequence[str]]
    tasks: dict[str, _Task] = field(default_factory=dict)
    holders: dict[str, tuple[str, int]] = field(default_factory=dict)  # path -> (task, event)
    # (task, file) of ended attempts whose held files (or parts of them) are in restore
    restoring: set[tuple[str, str]] = field(default_factory=set)
    ended: set[tuple[str, int, int]] = field(default_factory=set)
    numbers: dict[tuple[str, int], int] = field(default_factory=dict)  # (sequence, value) -> event
    found: list[Violation] = field(default_factory=list)

    def flag(self, rule: str, message: str, event: Row) -> None:
        self.found.append(Violation(rule, message, event.get("id"), event.get("task_id")))

    def held_by(self, task_id: str) -> list[str]:
        return sorted(p for p, (holder, _) in self.holders.items() if holder == task_id)

    def holds(self, task_id: str, path: str) -> bool:
        """Does the task hold the key `path`, or (a file) a part of it?"""
        held = self.holders.get(path)
        if held is not None:
            return held[0] == task_id
        return any(h == task_id and file_of(k) == path for k, (h, _) in self.holders.items())

    def holder_of(self, path: str) -> str:
        """Who holds `path` (or parts of it), for a message."""
        found = sorted({h for k, (h, _) in self.holders.items() if file_of(k) == file_of(path)})
        return ", ".join(found) or "nobody"


def check(
    evidence: Evidence,
    observed: Sequence[Row] | None = None,
    *,
    require_terminal: bool = True,
    first_event_id: int | None = 1,
) -> list[Violation]:
    """Every invariant violation the evidence shows (an empty list is the proof)."""
    found = _check_ids(evidence.events, first_event_id)
    if observed is not None:
        found += _check_observed(evidence.events, observed)
    replay = _Replay(
        deps={tid: list(row.get("depends_on") or ()) for tid, row in evidence.tasks.items()}
    )
    for event in sorted(evidence.events, key=lambda e: int(e["id"])):
        _replay_event(replay, event)
    found += replay.found
    found += _check_final(evidence, replay, require_terminal)
    found += _check_ledger(evidence)
    return found


def _check_ids(events: Sequence[Row], first: int | None) -> list[Violation]:
    found: list[Violation] = []
    ids = [int(e["id"]) for e in events]
    if first is not None and ids and ids[0] != first:
        found.append(Violation("event_ids", f"the log starts at id {ids[0]}, not {first}", ids[0]))
    for before, after in pairwise(ids):
        if after <= before:
            found.append(
                Violation("event_ids", f"id {after} follows {before}: reused or reordered", after)
            )
        elif after != before + 1:
            found.append(
                Violation("event_ids", f"ids {before + 1}..{after - 1} are missing", after)
            )
    return found


def _check_observed(events: Sequence[Row], observed: Sequence[Row]) -> list[Violation]:
    """What a live observer streamed must be in the final log, unchanged and in order."""
    found: list[Violation] = []
    by_id = {int(e["id"]): e for e in events}
    last = 0
    for seen in observed:
        number = int(seen["id"])
        if number <= last:
            found.append(
                Violation("stream", f"the stream delivered id {number} after {last}", number)
            )
        elif last and number != last + 1:
            found.append(
                Violation("stream", f"the stream skipped ids {last + 1}..{number - 1}", number)
            )
        last = max(last, number)
        logged = by_id.get(number)
        if logged is None:
            found.append(
                Violation("stream", f"streamed event {number} is not in the log: lost", number)
            )
        elif any(logged.get(k) != seen.get(k) for k in COMPARED_FIELDS):
            found.append(
                Violation(
                    "stream", f"event {number} changed after it was streamed: reused id", number
                )
            )
    return found


def _replay_event(replay: _Replay, event: Row) -> None:
    kind = event["type"]
    if kind in _LEASE_HANDLERS:
        _LEASE_HANDLERS[kind](replay, event)
    elif kind in _TASK_KINDS and event.get("task_id"):
        _replay_task(replay, event)


def _on_acquired(replay: _Replay, event: Row) -> None:
    path, task_id = event["payload"].get("path"), event["task_id"]
    held = replay.holders.get(path)
    if held is not None:
        replay.flag(
            "two_holders",
            f"{path} granted to {task_id} while {held[0]} holds it (since event {held[1]})",
            event,
        )
    for key, (holder, since) in replay.holders.items():  # a file and its parts exclude each other
        if key != path and holder != task_id and excludes(key, path):
            replay.flag(
                "two_holders",
                f"{path} granted to {task_id} while {holder} holds {key} (since event {since})",
                event,
            )
    task = replay.tasks.get(task_id)
    person = event["payload"].get("kind") == "interactive"  # a person's session: no attempt
    if (
        not person
        and not _back_down(task, event)
        and (task is None or task.status not in IN_FLIGHT)
    ):
        replay.flag(
            "lease_outside_attempt", f"{path} granted to {task_id}, which is not in flight", event
        )
    replay.holders[path] = (task_id, int(event["id"]))


def _back_down(task: _Task | None, event: Row) -> bool:
    """A file's lease going back to the task waiting to land under its holder (a stack)."""
    body = event["payload"]
    stacked = body.get("returned_by") is not None or body.get("unwound") is not None
    return stacked and task is not None and task.status is TaskStatus.LANDING


def _on_released(replay: _Replay, event: Row) -> None:
    path, task_id = event["payload"].get("path"), event["task_id"]
    held = replay.holders.get(path)
    if held is None or held[0] != task_id:
        holder = held[0] if held else "nobody"
        replay.flag("two_holders", f"{task_id} released {path}, held by {holder}", event)
    if held is not None and held[0] == task_id:
        del replay.holders[path]
        if not replay.holds(task_id, file_of(path)):  # its last key on the file
            replay.restoring.discard((task_id, file_of(path)))


def _on_held_use(replay: _Replay, event: Row) -> None:
    """A ledger row or a restore: only the holder of the path may touch it."""
    path, task_id = event["payload"].get("path"), event["task_id"]
    restoring = (task_id, path) in replay.restoring
    if not replay.holds(task_id, path):
        holder = replay.holder_of(path)
        rule = "ledger" if event["type"] == EventType.FILE_CHANGED else "two_holders"
        replay.flag(rule, f"{event['type']} of {path} by {task_id} while {holder} holds it", event)
    elif event["type"] == EventType.FILE_CHANGED and restoring:
        replay.flag("ledger", f"{path} written by {task_id} after its attempt ended", event)
    elif event["type"] != EventType.FILE_CHANGED and not restoring:
        replay.flag("two_holders", f"{event['type']} of {path} with no restore asked", event)


def _on_restore_requested(replay: _Replay, event: Row) -> None:
    """The attempt is ending: these held paths stay held until they are put back."""
    task_id = event["task_id"]
    for path in event["payload"].get("paths") or ():
        if not replay.holds(task_id, path):
            replay.flag(
                "two_holders",
                f"{task_id} asked to restore {path}, held by {replay.holder_of(path)}",
                event,
            )
        else:
            replay.restoring.add((task_id, path))


def _on_number(replay: _Replay, event: Row) -> None:
    """A sequence's value goes to one attempt in flight, once."""
    key = (str(event["payload"].get("sequence")), int(event["payload"].get("value")))
    if key in replay.numbers:
        replay.flag(
            "number_twice",
            f"{key[0]} {key[1]} handed out twice (first at event {replay.numbers[key]})",
            event,
        )
    replay.numbers.setdefault(key, int(event["id"]))
    task = replay.tasks.get(event["task_id"])
    if task is None or task.status not in IN_FLIGHT:
        replay.flag(
            "number_outside_attempt", f"{key[0]} {key[1]} went to a task not in flight", event
        )


def _on_denied(replay: _Replay, event: Row) -> None:
    path, named = event["payload"].get("path"), event["payload"].get("holder_task_id")
    held = replay.holders.get(path)
    if held is None or held[0] != named:
        holder = held[0] if held else "nobody"
        replay.flag(
            "two_holders", f"a denial of {path} names {named}, but {holder} holds it", event
        )


_LEASE_HANDLERS: Final = {
    EventType.LEASE_ACQUIRED: _on_acquired,
    EventType.LEASE_RELEASED: _on_released,
    EventType.FILE_CHANGED: _on_held_use,
    EventType.FILE_RESTORED: _on_held_use,
    EventType.RESTORE_FAILED: _on_held_use,
    EventType.RESTORE_REQUESTED: _on_restore_requested,
    EventType.LEASE_DENIED: _on_denied,
    EventType.NUMBER_ALLOCATED: _on_number,
}
_TASK_KINDS: Final = frozenset(
    {
        EventType.TASK_CREATED,
        EventType.TASK_ASSIGNED,
        EventType.TASK_STARTED,
        EventType.LANDING_QUEUED,
        EventType.TASK_SUCCEEDED,
        EventType.TASK_REQUEUED,
        EventType.TASK_FAILED,
        EventType.TASK_BLOCKED_UPSTREAM,
        EventType.TASK_CANCELLED,
        EventType.TASK_RETRIED,
        EventType.TASK_UNBLOCKED,
        EventType.REPAIR_STARTED,
    }
)


_MOVES: Final = {  # the plain transitions: from these statuses, to that one
    EventType.TASK_STARTED: (IN_FLIGHT, TaskStatus.RUNNING),
    EventType.LANDING_QUEUED: (IN_FLIGHT, TaskStatus.LANDING),
    EventType.TASK_BLOCKED_UPSTREAM: (frozenset({TaskStatus.PENDING}), TaskStatus.BLOCKED_UPSTREAM),
}


def _replay_task(replay: _Replay, event: Row) -> None:
    task_id, kind = event["task_id"], EventType(event["type"])
    if kind is EventType.TASK_CREATED:
        if task_id in replay.tasks:
            replay.flag("transition", f"{task_id} created twice", event)
        replay.tasks[task_id] = _Task()
        return
    task = replay.tasks.get(task_id)
    if task is None:
        replay.flag("transition", f"{kind} of {task_id} before it was created", event)
        return
    if kind is EventType.TASK_UNBLOCKED:
        _require_deps(replay, task_id, event, "unblocked")
    elif kind is EventType.REPAIR_STARTED:
        _repair_started(replay, task, event)
    elif kind is EventType.TASK_ASSIGNED:
        _assigned(replay, task, event)
    elif kind in _MOVES:
        _expect(replay, task, event, *_MOVES[kind])
    elif kind in ATTEMPT_ENDS:
        _attempt_end(replay, task, event)
    elif kind is EventType.TASK_CANCELLED:
        _end_holdings(replay, event)
        _expect(replay, task, event, {TaskStatus.PENDING, *ENDABLE}, TaskStatus.CANCELLED)
    elif kind is EventType.TASK_RETRIED:
        dead = {TaskStatus.FAILED, TaskStatus.CANCELLED, TaskStatus.BLOCKED_UPSTREAM}
        if _expect(replay, task, event, dead, TaskStatus.PENDING):
            # the attempt it was at: kept since attempts are never renumbered (0 before)
            task.attempts = int(event["payload"].get("attempt") or 0)
            task.generation += 1


def _repair_started(replay: _Replay, task: _Task, event: Row) -> None:
    """A landing repair: from `landing` back to `pending`, its leases kept (decision 0161)."""
    if event["payload"].get("cause") == RepairCause.INTEGRATION:
        _expect(replay, task, event, {TaskStatus.LANDING}, TaskStatus.PENDING)


def _expect(
    replay: _Replay, task: _Task, event: Row, allowed: Iterable[TaskStatus], to: TaskStatus
) -> bool:
    if task.status not in set(allowed):
        replay.flag(
            "transition", f"{event['type']} of {event['task_id']} while {task.status}", event
        )
        return False
    task.status = to
    return True


def _assigned(replay: _Replay, task: _Task, event: Row) -> None:
    attempt = int(event["payload"].get("attempt", -1))
    if attempt != task.attempts + 1:
        replay.flag(
            "transition",
            f"{event['task_id']} assigned attempt {attempt} after {task.attempts}",
            event,
        )
    _require_deps(replay, event["task_id"], event, "assigned")
    unrestored = replay.held_by(event["task_id"])
    if unrestored and not event["payload"].get("repair"):  # a repair resumes its own change
        replay.flag(
            "lease_outside_attempt",
            f"{event['task_id']} assigned again while {unrestored} are not restored",
            event,
        )
    if _expect(replay, task, event, {TaskStatus.PENDING}, TaskStatus.ASSIGNED):
        task.attempts = attempt


def _attempt_end(replay: _Replay, task: _Task, event: Row) -> None:
    task_id, kind = event["task_id"], EventType(event["type"])
    attempt = int(event["payload"].get("attempt", -1))
    if kind is EventType.TASK_SUCCEEDED:
        task.successes += 1
        if task.successes > 1:
            replay.flag("succeeded_twice", f"{task_id} succeeded {task.successes} times", event)
    if kind is EventType.TASK_FAILED and task.status is TaskStatus.PENDING:
        _expect(replay, task, event, {TaskStatus.PENDING}, TaskStatus.FAILED)  # out of attempts
        return
    key = (task_id, task.generation, attempt)
    if key in replay.ended:
        replay.flag(
            "completion_applied_twice", f"attempt {attempt} of {task_id} ended twice", event
        )
    replay.ended.add(key)
    if attempt != task.attempts:
        replay.flag(
            "transition",
            f"{kind} of {task_id} for attempt {attempt}, current {task.attempts}",
            event,
        )
    _end_holdings(replay, event)
    to = {
        EventType.TASK_SUCCEEDED: TaskStatus.SUCCEEDED,
        EventType.TASK_REQUEUED: TaskStatus.PENDING,
        EventType.TASK_FAILED: TaskStatus.FAILED,
    }[kind]
    _expect(replay, task, event, ENDABLE, to)


def _end_holdings(replay: _Replay, event: Row) -> None:
    """Leases are released (or put in restore) by the transaction that ends the attempt."""
    task_id = event["task_id"]
    kept = [p for p in replay.held_by(task_id) if (task_id, file_of(p)) not in replay.restoring]
    if kept:
        replay.flag(
            "lease_outside_attempt",
            f"{event['task_id']} still holds {kept} at {event['type']}",
            event,
        )


def _require_deps(replay: _Replay, task_id: str, event: Row, what: str) -> None:
    for dep in replay.deps.get(task_id, ()):
        state = replay.tasks.get(dep)
        if state is None or state.status is not TaskStatus.SUCCEEDED:
            status = state.status if state else "unknown"
            replay.flag(
                "dependency", f"{task_id} {what} while its dependency {dep} is {status}", event
            )


def _check_final(evidence: Evidence, replay: _Replay, require_terminal: bool) -> list[Violation]:
    found: list[Violation] = []
    rows = evidence.tasks
    for task_id, row in sorted(rows.items()):
        state = replay.tasks.get(task_id)
        if state is None:
            found.append(
                Violation("row_mismatch", f"{task_id} has no task_created event", task_id=task_id)
            )
            continue
        if (row["status"], row["attempts"]) != (state.status, state.attempts):
            found.append(
                Violation(
                    "row_mismatch",
                    f"{task_id} row is {row['status']}/{row['attempts']}, events say {state.status}/{state.attempts}",
                    task_id=task_id,
                )
            )
        if require_terminal and row["status"] not in TERMINAL_STATUSES:
            found.append(
                Violation(
                    "not_terminal", f"{task_id} ended the run {row['status']}", task_id=task_id
                )
            )
        found += _final_deps(task_id, row, rows)
    found += _final_leases(evidence, replay)
    succeeded = sum(1 for e in evidence.events if e["type"] == EventType.TASK_SUCCEEDED)
    counted = sum(int(a.get("tasks_succeeded", 0)) for a in evidence.agents)
    if evidence.agents and counted != succeeded:
        found.append(
            Violation(
                "completion_applied_twice", f"agents count {counted} successes, events {succeeded}"
            )
        )
    return found


def _final_deps(task_id: str, row: Row, rows: Mapping[str, Row]) -> list[Violation]:
    deps = [rows[d]["status"] if d in rows else "unknown" for d in row.get("depends_on") or ()]
    if row["status"] == TaskStatus.SUCCEEDED and any(s != TaskStatus.SUCCEEDED for s in deps):
        return [
            Violation(
                "dependency",
                f"{task_id} succeeded but a dependency did not: {deps}",
                task_id=task_id,
            )
        ]
    if row["status"] == TaskStatus.BLOCKED_UPSTREAM and all(
        s == TaskStatus.SUCCEEDED for s in deps
    ):
        return [
            Violation(
                "dependency",
                f"{task_id} is blocked but every dependency succeeded",
                task_id=task_id,
            )
        ]
    return []


def _final_leases(evidence: Evidence, replay: _Replay) -> list[Violation]:
    table = {row["path"]: row["task_id"] for row in evidence.leases}
    replayed = {path: holder for path, (holder, _) in replay.holders.items()}
    if table != replayed:
        return [
            Violation("two_holders", f"the lease table {table} differs from the replay {replayed}")
        ]
    return []


def _check_ledger(evidence: Evidence) -> list[Violation]:
    """The ledger rows and the `file_changed` events are one record, written together."""
    events: dict[str, Counter[tuple[str, str]]] = {}
    for e in evidence.events:
        if e["type"] == EventType.FILE_CHANGED and e["payload"].get("kind") != "interactive":
            key = (str(e["payload"].get("path")), str(e["payload"].get("tool")))
            events.setdefault(e["task_id"], Counter())[key] += 1
    found: list[Violation] = []
    for task_id in sorted(set(events) | set(evidence.ledger)):
        rows = Counter((str(r["path"]), str(r["tool"])) for r in evidence.ledger.get(task_id, ()))
        if rows != events.get(task_id, Counter()):
            found.append(
                Violation(
                    "ledger",
                    f"{task_id}: ledger rows differ from file_changed events",
                    task_id=task_id,
                )
            )
    return found


# -- the tree ------------------------------------------------------------------------------


def replay_patches(original: Path, evidence: Evidence, into: Path) -> list[Violation]:
    """Copy `original` to `into` and `git apply` each succeeded task's patch in completion order."""
    shutil.rmtree(into, ignore_errors=True)
    shutil.copytree(original, into, symlinks=True)
    env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(into.parent.resolve())}
    for task_id in evidence.completion_order():
        diff = evidence.patches.get(task_id, "")
        if not diff:
            continue
        done = subprocess.run(
            ["git", "apply", "--whitespace=nowarn", "-"],
            cwd=into,
            input=diff.encode(),
            capture_output=True,
            env=env,
            check=False,
        )
        if done.returncode != 0:
            why = done.stderr.decode(errors="replace").strip()[:500]
            return [
                Violation("tree", f"the patch of {task_id} does not apply: {why}", task_id=task_id)
            ]
    return []


def compare_trees(
    expected: Path, actual: Path, ignore: Iterable[str] = (".git", STATE_DIR)
) -> list[Violation]:
    """Every file that differs between two trees (content only; empty directories ignored).

    `ignore`: top-level names left out: git's, and CodeFleet's own state directory
    (the server's tree identity; agents cannot write there, so no patch holds it).
    """
    skip = set(ignore)
    left, right = _files(expected, skip), _files(actual, skip)
    found = [Violation("tree", f"{p} is missing from the final tree") for p in sorted(left - right)]
    found += [
        Violation("tree", f"{p} is in the final tree but no patch made it")
        for p in sorted(right - left)
    ]
    for rel in sorted(left & right):
        if (expected / rel).read_bytes() != (actual / rel).read_bytes():
            found.append(Violation("tree", f"{rel} differs from its patches replayed in order"))
    return found


def _files(root: Path, skip: set[str]) -> set[str]:
    found: set[str] = set()
    for path in root.rglob("*"):
        rel = path.relative_to(root)
        if rel.parts[0] in skip or not (path.is_file() or path.is_symlink()):
            continue
        found.add(rel.as_posix())
    return found
