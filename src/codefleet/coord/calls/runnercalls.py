"""The runner's and its gate's calls that find the caller's attempt and write one part.

`heartbeat`, `assignment` (its long poll, and `handoff` after a report),
`start`, `acquire` (and `versions`, a clone runner's grant), `record_change`,
`record_check`, `foreign_preimages` and `deliver` (a clone runner's files):
each checks the
caller's epoch, reads the live index to find the caller's attempt, and writes
(if at all) through one part (the agent registry, the task table, the lease
table, the checks registry, or a ledger row) inside the engine's
`transition`, which it is handed with `kick`. None ends an attempt: that cuts
across parts and stays in the engine (`register`, `leave`, `complete`). A
refusal is an answer (a lease denial) or a domain error (`StaleEpoch`,
`NotOwner`), never a half-write.
"""

from __future__ import annotations

import asyncio
import os
import posixpath
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, Final

from codefleet.attempt import AssignedTask
from codefleet.coord.calls.callparts import CallParts
from codefleet.coord.policy.answers import Beat, LeaseAnswer
from codefleet.coord.policy.leaserule import FLEET, OURS, REFUSED, decide
from codefleet.coord.policy.stacks import may_stack
from codefleet.coord.tables.agentregistry import AgentState
from codefleet.coord.tables.leases import denial
from codefleet.coord.tables.liveindex import LiveTask
from codefleet.coord.tables.persons import TASK_PREFIX as PERSON_TASK_PREFIX
from codefleet.coord.tables.questions import Question
from codefleet.coord.tables.readevents import emit_read_events
from codefleet.errors import InvalidState, NotOwner
from codefleet.models import (
    MAX_INT,
    CheckPurpose,
    DenyReason,
    ErrorKind,
    EventType,
    Granularity,
    StaleReadPolicy,
    TaskStatus,
    Workspace,
    to_iso,
)
from codefleet.paths import PathRejected
from codefleet.resources import resource_key, resource_name
from codefleet.rollback import PreImage, restore, state_sha256
from codefleet.toolcalls.leasekeys import file_of

__all__ = ["RunnerCalls"]

CLONE: Final = Workspace.CLONE  # read on every acquire: a module name (see leaserule.FLEET)


class RunnerCalls:
    """One engine's thin runner calls; every method runs on the engine's thread."""

    def __init__(
        self,
        parts: CallParts,
        *,
        task_timeout: float,
        pull_tick: Callable[[], None],
        verify_before_landing: bool = False,
        landing_stack: bool = False,
        lease_granularity: Granularity = Granularity.FILE,
    ) -> None:
        self.store = parts.store
        self.tree = parts.tree
        self.clock = parts.clock
        self.agents = parts.agents
        self.tasks = parts.tasks
        self.leases = parts.leases
        self.preimages = parts.preimages
        self.checks = parts.checks
        self.messages = parts.messages
        self.questions = parts.questions
        self.sequences = parts.sequences
        self.transition = parts.transition
        self.kick = parts.kick
        self.task_timeout = task_timeout
        self.pull_tick = pull_tick  # tick now, for a poll that is about to park
        self.verify_before_landing = verify_before_landing
        self.landing_stack = landing_stack
        self.landing_check: Callable[[], str | None] = lambda: None  # the engine's integration
        self.default_granularity = lease_granularity  # a task that names none: the server's

    def heartbeat(
        self,
        agent_id: str,
        epoch: int,
        delivered: tuple[str, int] | None = None,
        head: str | None = None,
    ) -> Beat:
        """Alive; `delivered` (task, seq): its session has the operator's messages to seq;
        `head`: the landed commit its clone is level with (kept in memory, for the views).
        The answer carries the messages its running task has not received yet."""
        agent = self.agents.check_epoch(agent_id, epoch)
        if head is not None:
            agent.head = head
        now = self.clock()
        self.agents.beat(agent, now)
        with self.transition():
            if self.agents.record_beat(agent, now):
                self.kick()
        task = self.tasks.index.in_flight.get(agent.current_task_id or "")
        if task is None or task.agent_id != agent_id:
            return Beat(agent.status, agent.epoch)
        if delivered is not None and delivered[0] == task.id:
            self.messages.arrived(task.id, delivered[1], task.attempts, agent_id)
        self.questions.expire(task.id)
        answers = tuple(
            (q.question_id, q.answer or "") for q in self.questions.answers(task.id, task.attempts)
        )
        return Beat(agent.status, agent.epoch, self.messages.pending(task.id), answers)

    def _verified_at_landing(self, verify: str | None) -> bool:
        """A verify that is the integration check is left to the landing check: it runs the
        same check on the landed tree with the task's change before the task can succeed
        (docs/decisions/0157-a-verify-the-landing-runs-is-left-to-it.md)."""
        return bool(verify) and not self.verify_before_landing and verify == self.landing_check()

    def lease_granularity(self, chosen: str | None = None) -> Granularity:
        """What a write leases for a task that chose `chosen` (None: the server's default):
        `auto` resolved here, where leases are granted, by the integration check (0164)."""
        return Granularity(chosen or self.default_granularity).resolved(self.landing_check())

    def ask(self, agent_id: str, epoch: int, task_id: str, text: str) -> Question:
        """The owner's session asks the operator (`coord.tables.questions`)."""
        self.agents.check_epoch(agent_id, epoch)
        return self.questions.ask(self.tasks.owned(task_id, agent_id), text)

    def assignment(self, agent_id: str, epoch: int) -> AssignedTask | None:
        agent = self.agents.check_epoch(agent_id, epoch)
        self.agents.touch(agent)
        task = self.tasks.index.in_flight.get(agent.current_task_id or "")
        if task is None or task.status is not TaskStatus.ASSIGNED:
            return None
        assert task.assigned_at is not None  # from the live index: what is stored, unread
        deadline = task.assigned_at.timestamp() + self.task_timeout
        kind = task.error_kind
        return AssignedTask(
            id=task.id,
            title=task.title,
            description=task.description,
            priority=task.priority,
            file_scope=tuple(sorted(task.scope)),
            attempts=task.attempts,
            deadline=datetime.fromtimestamp(deadline, task.assigned_at.tzinfo),
            blocked_on_path=task.blocked_on_path,
            error=task.error,
            error_kind=None if kind is None else ErrorKind(kind),
            verify=task.verify,
            verify_at_landing=self._verified_at_landing(task.verify),
            shell_mode=task.shell_mode,
            on_stale_read=StaleReadPolicy(task.on_stale_read or StaleReadPolicy.RECONCILE),
            lease_granularity=self.lease_granularity(task.lease_granularity),
            notes=self.messages.notes(task.id),
            ask=task.ask,
            resources=tuple(sorted(map(resource_name, task.resources))),
            repair_session=task.repair_session,
        )

    async def wait_assignment(self, agent_id: str, epoch: int, wait: float) -> AssignedTask | None:
        """Long-poll: answer as soon as an assignment exists, or None after `wait` s."""
        found = self.assignment(agent_id, epoch)
        if found is not None or wait <= 0:
            return found
        await self.agents.wait_for_wake(agent_id, wait, self.pull_tick)  # a parked poll ticks now
        return self.assignment(agent_id, epoch)

    async def handoff(self, agent_id: str, epoch: int) -> AssignedTask | None:
        """After a report: the caller's next assignment, if the tick it kicked gives one.

        Yields once, so the kicked tick runs behind the requests already queued: one
        tick for all their reports. Never refuses: a caller fenced meanwhile gets None
        here and `stale_epoch` at its next call.
        Docs: docs/decisions/0073-the-next-assignment-rides-on-the-reports-answer.md, "The next assignment rides on the report's answer".
        """
        agent = self.agents.get(agent_id)
        if agent is None or agent.epoch != epoch:
            return None
        await asyncio.sleep(0)  # the tick `complete` kicked was queued before this resumes
        if agent.epoch != epoch:
            return None
        return self.assignment(agent_id, epoch)

    def start(self, task_id: str, agent_id: str, epoch: int) -> dict[str, Any]:
        """The owner's attempt is running (`task_started`); a second call writes nothing."""
        self.agents.check_epoch(agent_id, epoch)
        task = self.tasks.owned(task_id, agent_id)
        if task.status is TaskStatus.RUNNING:
            return {"status": task.status}
        with self.transition():
            self.tasks.start(task, self.clock())
        return {"status": task.status}

    def acquire(
        self, agent_id: str, epoch: int, task_id: str, paths: list[str], tool: str
    ) -> LeaseAnswer:
        """All-or-nothing lease grant for one write; always an answer, never an error."""
        agent = self.agents.check_epoch(agent_id, epoch)
        self.agents.touch(agent)
        task = self.tasks.index.in_flight.get(task_id)
        if task is None or task.agent_id != agent_id:
            refused = [denial(p, DenyReason.NOT_OWNER) for p in paths]
            return LeaseAnswer.deny(refused, f"task {task_id} is not yours")
        keys, rejected = self.leases.canonical_all(paths)
        stack = self._may_stack if self._stacks_for(agent) else None
        request = self.leases.ask(FLEET, task_id, keys, rejected, stack)
        verdict = decide(request)  # the lease rule, the one place it is written
        if verdict is OURS:
            answer = LeaseAnswer(True, granted=tuple(keys))  # a re-acquire writes nothing
        elif verdict in REFUSED:
            return LeaseAnswer.deny([*request.rejected, *request.busy])
        else:
            with self.transition():
                who = (agent_id, agent.name, task_id)
                answer = self.leases.settle(request, verdict, who, keys, tool)
        if answer.allowed:
            self.leases.write_latch.latch(keys, task_id)
        return answer

    def _stacks_for(self, agent: AgentState) -> bool:
        """Whether a write of this runner may stack on a task waiting to land: a runner in the
        tree, where that change is (a clone has only the landed line, decision 0156)."""
        return self.landing_stack and agent.workspace != CLONE

    def _may_stack(self, held: list[tuple[str, tuple[str, str]]]) -> bool:
        live = self.tasks.index.live
        return may_stack(held, lambda t: t in live and live[t].status is TaskStatus.LANDING)

    def versions(self, agent_id: str, answer: LeaseAnswer) -> LeaseAnswer:
        """`answer` with each granted file's version in the server's tree, for a runner in a
        clone: what its clone must hold before the write (`fleet.clone` fetches it from the
        landed line). A runner in the tree sees the tree itself: its answer is unchanged."""
        agent = self.agents.get(agent_id)
        if not answer.allowed or agent is None or agent.workspace != CLONE:
            return answer
        files = dict.fromkeys(file_of(key) for key in answer.granted)
        stamped = tuple((path, state_sha256(self.preimages.file_now(path))) for path in files)
        return replace(answer, versions=stamped)

    def deliver(
        self, task_id: str, agent_id: str, epoch: int, attempt: int, files: Sequence[PreImage]
    ) -> dict[str, Any]:
        """A clone runner's attempt hands over the files it holds, as its clone has them, before
        it reports success: each is written into the server's tree, the tree every patch,
        restore, check view and the landed line read. Only files the attempt holds whole are
        taken (`InvalidState` names the first other one, and nothing is written); an attempt
        that does not succeed after all is rolled back from its pre-images, as in the tree."""
        self._current_attempt(task_id, agent_id, epoch, attempt)
        held = self.leases.paths_of(task_id)
        images = [_delivered(replace(image, path=self._key(image.path))) for image in files]
        for image in images:
            if image.path not in held:
                why = (
                    "it holds a part of it, not the whole file"
                    if any(file_of(k) == image.path for k in held)
                    else "it holds no lease on it"
                )
                raise InvalidState(
                    f"{task_id} cannot deliver {image.path}: {why}",
                    {"task_id": task_id, "path": image.path},
                )
        for image in images:
            if image.symlink and _leaves_tree(image.path, os.fsdecode(image.content)):
                raise InvalidState(
                    f"{task_id} cannot deliver {image.path}: a symbolic link out of the tree",
                    {"task_id": task_id, "path": image.path},
                )
        written = [image.path for image in images if restore(self.tree.root, image)]
        return {"task_id": task_id, "written": written}

    def record_change(
        self,
        agent_id: str,
        epoch: int,
        task_id: str,
        path: str,
        tool: str,
        sha256: str | None = None,
    ) -> None:
        """Ledger row from PostToolUse; never vetoes, never read by the scheduler.

        The row names the owner's current attempt and the content hash the writer
        read after the write: the invariant checker's content oracle.
        """
        self.agents.check_epoch(agent_id, epoch)
        self.tasks.require(task_id)
        try:
            key = self.tree.canonical(path)
        except PathRejected:
            key = path
        task = self.tasks.index.in_flight.get(task_id)
        attempt = task.attempts if task is not None and task.agent_id == agent_id else None
        self.leases.write_latch.unlatch(task_id, key)  # the write of its parts is over
        with self.transition():
            self.store.insert_change(
                task_id, agent_id, key, tool, to_iso(self.clock()), attempt, sha256
            )
            self.store.emit(
                EventType.FILE_CHANGED,
                task_id=task_id,
                agent_id=agent_id,
                path=key,
                tool=tool,
                **({"sha256": sha256} if sha256 else {}),
            )

    def record_reads(
        self,
        task_id: str,
        agent_id: str,
        epoch: int,
        attempt: int,
        reads: Sequence[Mapping[str, Any]],
        watch: Sequence[Mapping[str, Any]],
        stale: Sequence[Mapping[str, Any]] = (),
        reconciled: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """`read` ledger rows of the owner's attempt, and the writes since each watched read.

        The answer names, per watched path, every other task's write at or after the
        read (`person` for a person's session): who to blame for a stale read
        (docs/decisions/0075-what-counts-as-a-read.md, "What counts as a read"). `stale` and `reconciled` are
        what the runner found and did: the `stale_read` and `reconciled` events.
        """
        agent = self.agents.check_epoch(agent_id, epoch)
        self.agents.touch(agent)
        self.tasks.owned(task_id, agent_id)
        rows = [
            (
                task_id,
                agent_id,
                self._key(str(r["path"])),
                str(r["tool"]),
                str(r["at"]),
                attempt,
                r.get("sha256"),
            )
            for r in reads
        ]
        if rows or stale or reconciled:
            with self.transition():
                self.store.insert_reads(rows)
                emit_read_events(self.store, task_id, agent_id, attempt, stale, reconciled)
        changes: dict[str, list[dict[str, Any]]] = {}
        for w in watch:
            key = self._key(str(w["path"]))
            found = self.store.writes_since(key, str(w["at"]), task_id)
            changes[str(w["path"])] = [
                {
                    "task_id": r["task_id"],
                    "at": r["at"],
                    "sha256": r["sha256"],
                    "person": str(r["task_id"]).startswith(PERSON_TASK_PREFIX),
                }
                for r in found
            ]
        return {"changes": changes}

    def _key(self, path: str) -> str:
        try:
            return self.tree.canonical(path)
        except PathRejected:
            return path

    def _current_attempt(self, task_id: str, agent_id: str, epoch: int, attempt: int) -> LiveTask:
        """The owner's task, if `attempt` is still its current one (else `NotOwner`)."""
        agent = self.agents.check_epoch(agent_id, epoch)
        self.agents.touch(agent)
        task = self.tasks.owned(task_id, agent_id)
        if attempt != task.attempts:
            raise NotOwner(
                f"attempt {attempt} of {task_id} is over",
                {"task_id": task_id, "attempt": task.attempts},
            )
        return task

    def record_check(
        self, task_id: str, agent_id: str, epoch: int, report: Mapping[str, Any]
    ) -> dict[str, Any]:
        """One `check_started` or `check_finished` event for the owner's current attempt."""
        task = self._current_attempt(task_id, agent_id, epoch, int(report["attempt"]))
        command = self.checks.command(str(report["name"]))
        with self.transition():
            event_id = self.checks.record(task_id, agent_id, task.attempts, command, report)
        if report["phase"] == "started" and report.get("purpose") == CheckPurpose.VERIFY:
            task.verified_on = self.tasks.landed  # its view: this landed base (`landing`)
        return {"event_id": event_id}

    def record_command(
        self, task_id: str, agent_id: str, epoch: int, report: Mapping[str, Any]
    ) -> dict[str, Any]:
        """One `command_started` or `command_finished` event for the owner's current attempt."""
        self._current_attempt(task_id, agent_id, epoch, int(report["attempt"]))
        started = report["phase"] == "started"
        kind = EventType.COMMAND_STARTED if started else EventType.COMMAND_FINISHED
        body = {k: v for k, v in report.items() if k not in ("agent_id", "phase") and v is not None}
        with self.transition():
            event = self.store.emit(kind, task_id=task_id, agent_id=agent_id, **body)
        return {"event_id": int(event["id"])}

    def acquire_resource(self, agent_id: str, epoch: int, task_id: str, name: str) -> LeaseAnswer:
        """The named resource for the owner's attempt, like one file's lease (no pre-image)."""
        agent = self.agents.check_epoch(agent_id, epoch)
        self.agents.touch(agent)
        key = resource_key(name)
        task = self.tasks.index.in_flight.get(task_id)
        if task is None or task.agent_id != agent_id:
            return LeaseAnswer.deny(
                [denial(key, DenyReason.NOT_OWNER)], f"task {task_id} is not yours"
            )
        if self.leases.all_ours([key], task_id):
            return LeaseAnswer(True, granted=(key,))
        with self.transition():
            return self.leases.acquire(agent_id, agent.name, task_id, [key], "acquire_resource")

    def next_number(self, agent_id: str, epoch: int, task_id: str, sequence: str) -> dict[str, Any]:
        """The sequence's next value for the owner's attempt, committed before it is answered."""
        agent = self.agents.check_epoch(agent_id, epoch)
        self.agents.touch(agent)
        self.tasks.owned(task_id, agent_id)
        if sequence not in self.sequences.known:
            listed = ", ".join(sorted(self.sequences.known)) or "none are defined"
            return self._no_number(f"there is no sequence {sequence!r} (known sequences: {listed})")
        with self.transition():
            value = self.sequences.take(sequence, task_id, agent_id)
        if value is not None:
            return {"value": value, "sequence": sequence}
        if self.sequences.exhausted(sequence):
            return self._no_number(
                f"sequence {sequence!r} is exhausted: it handed out {MAX_INT}, the largest "
                "number it can hold, and never hands a number out twice"
            )
        return self._no_number(f"sequence {sequence!r} is not defined any more")  # rolled back

    def _no_number(self, refused: str) -> dict[str, Any]:
        """`next_number`'s refusal: no value, the known sequences, and why."""
        return {"value": None, "known": sorted(self.sequences.known), "refused": refused}

    def foreign_preimages(self, task_id: str) -> dict[str, Any]:
        """Pre-images of every path leased by another task: what the isolated view restores."""
        self.tasks.require(task_id)
        return self.preimages.foreign_preimages(
            task_id,
            self.leases.holders,
            self.leases.holders_on,
            self.leases.stacked_bases(task_id),
        )


def _delivered(image: PreImage) -> PreImage:
    """A delivered file keeps its permission bits only: no set-id or sticky bit reaches the
    server's host from a clone (a symbolic link keeps its kind)."""
    if image.mode is None or image.symlink:
        return image
    return replace(image, mode=image.mode & 0o777)


def _leaves_tree(path: str, target: str) -> bool:
    """Does a link at `path` with `target` point outside the tree (absolute, or up past it)?"""
    if posixpath.isabs(target):
        return True
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
    return joined == ".." or joined.startswith("../")
