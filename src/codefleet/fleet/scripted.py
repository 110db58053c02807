"""The scripted executor: a deterministic agent brain for dry runs and tests.

A script (read by `fleet.scriptfile`) maps a task id to a list of steps, each a
one-key mapping with an optional `attempt: N` (run the step only on that attempt),
an optional `turn: N` (run it only on the session's Nth turn: 2 is the first
follow-up message, e.g. a reconcile turn; without it, the first turn), or
`rework: true` (run it only when the task is reworked after a check failed its
change: in a repair turn, or in the first turn of a session after such a rollback,
once per session), and on a wait, `timeout: S` (`fleet.scriptwaits`):

    write: {path, content}      edit: {path, old, new}     append: {path, text}
    patch: DIFF (a unified diff, `fleet.scriptpatch`)      write_from: {path, from, content}
    sleep: SECONDS              wait_leased: PATH           wait_denied: PATH
    fail: MESSAGE               check: NAME                 expect_check: pass|fail
    expect_error: TEXT          make_dir: PATH              rate_limit: SECONDS|null
    cost: USD                   read: PATH                  wait_succeeded: TASK
    expect_followup: TEXT       wait_message: TEXT          ask: QUESTION
    expect_answer: TEXT         command: CMD | {run: CMD, timeout_s: S}
    wait_parked: PATH           acquire_resource: NAME      allocate_port: null
    next_number: SEQUENCE or {sequence, write: PATH with {number}, content}
    wait_acquired: PATH         wait_landing: TASK

Every file change goes through the attempt's `WriteGate` first, exactly as a
real session's hook does; a denied write ends the attempt as a veto naming the
blocking path. `wait_leased` / `wait_acquired` / `wait_denied` ask the server
(through the client) until another task holds a path, until another task has
been granted it (even if it has let go since), or until some task was denied
it, which is how a collision is staged deterministically, without timing luck;
`wait_parked` until some task's write of the path is parked (`lease_waiting`).
A PATH there is a file or a part (`api.py::handle`); a lease or an event on a key
that excludes it matches (a part of the file, or the whole file of the part).
`check` runs a named check through the attempt's `Checker`, as the real
session's `run_check` tool does; `expect_check` ends the attempt as an agent
error unless the last check passed (or failed), and `expect_error` unless the
assignment's `error` (the previous attempt's, e.g. a failed verification's
output) contains TEXT: how the scripted tier observes what a retry is told.
`make_dir` turns PATH into a directory behind the lock's back, without asking
(what a tool outside CodeFleet might do): it stages a file the server cannot
restore.
`rate_limit` ends the attempt as a real session that hit a usage limit does
(`rate_limited`), saying the limit lifts in SECONDS (null: it did not say).
`cost` adds USD to what the attempt reports it spent, as a real session's
`total_cost_usd` would (how the fleet's budget is tested without a model).
`read` reads a file as the session's `Read` tool does (recorded in the
attempt's read set); `wait_succeeded` waits until another task succeeded,
`wait_landing` until it waits to land (its session over, its landing check not passed);
`expect_followup` ends the turn as an agent error unless the follow-up message
it answers contains TEXT (how the scripted tier observes a reconcile turn);
`wait_message` waits until the runner's heartbeat brought an operator message
containing TEXT for this attempt (`codefleet say`), not yet handed to the turn.
`ask` asks the operator as a session's `ask_operator` tool does (waiting for the
answer); `expect_answer` ends the attempt as an agent error unless that answer
contains TEXT.
After the first turn, the attempt's reads are validated (`fleet.reconcile`); a
follow-up message plays the steps of the next turn.
`command` runs CMD through the attempt's `CommandRunner`, as the real
session's `run_command` tool does (its changes reach the tree only through
the leases); a command refused a held file ends the attempt as a veto.
`acquire_resource`, `next_number` and `allocate_port` call what the session's
tools of the same names call (`fleet.tools.resourcecalls.ResourceTools`): a resource
another task holds ends the attempt as a veto naming it; `next_number` with
`write` writes PATH formatted with the number (`{number:04d}`); the values
handed out are kept in `numbers` and `ports`.
A repair turn is a follow-up turn too (`fleet.repair`): after a failed verify
it is the session's next turn; after a failed landing check the task's next
attempt resumes the session (`AssignedTask.repair_session`) and plays its next
turn, and `expect_followup` reads the repair message. So a step's `attempt: N`
names the task's Nth session: a repair attempt is not a session of its own
(without repairs, the Nth session is attempt N), and `attempt: 2` stays the
rework whether or not a repair came between.
A task with no script succeeds without writing anything.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final, NoReturn

from codefleet.attempt import AssignedTask, AttemptReport
from codefleet.fleet.executor import Attempt
from codefleet.fleet.repair import finish_session, opening
from codefleet.fleet.scriptfile import STEP_KINDS, ScriptError, Step, load_script, parse_script
from codefleet.fleet.scriptpatch import FilePatch, PatchError, apply_hunks
from codefleet.fleet.scriptwaits import DEFAULT_WAIT_S, WAIT_KINDS, WAIT_POLL_S, wait_until
from codefleet.fleet.tools.attemptchecks import CheckResult
from codefleet.fleet.tools.commandtool import DEFAULT_COMMAND_TIMEOUT_S, CommandResult
from codefleet.fleet.tools.inbox import hear_operator
from codefleet.fleet.tools.resourcecalls import ResourceTools
from codefleet.models import CheckPurpose, ErrorKind, EventType

__all__ = ["STEP_KINDS", "ScriptError", "ScriptedExecutor", "Step", "load_script", "parse_script"]

# a later session reworks the task (its `rework: true` steps play) after one of these
REWORK_KINDS: Final = frozenset({ErrorKind.INTEGRATION_FAILED, ErrorKind.VERIFY_FAILED})


class _StepFailed(Exception):
    def __init__(self, report: AttemptReport) -> None:
        self.report = report


@dataclass
class _Played:
    """What one session has done so far (an executor is shared by every runner)."""

    session_id: str
    attempt: int  # the task's Nth session, as a script's `attempt: N` names it
    checks: list[CheckResult] = field(default_factory=list)
    cost_usd: float = 0.0  # spent in the current turn
    turn: int = 1
    followup: str = ""  # the message the current turn answers (none on the first)
    answer: str = ""  # the last `ask`'s answer
    # the task is reworked after a failed check: in the session after a rollback (its first
    # turn), or in a repair turn; `rework: true` steps play then, once per session
    redo: bool = False  # a session after an attempt of the task failed its check
    repairing: bool = False  # the current turn is a repair turn
    repairs_seen: int = 0  # the attempt's repair turns before the current turn
    reworked: bool = False  # its `rework` steps have played

    @property
    def reworks(self) -> bool:
        return not self.reworked and (self.repairing or (self.redo and self.turn == 1))


class ScriptedExecutor:
    def __init__(
        self,
        script: Mapping[str, Sequence[Step]] | None = None,
        wait_timeout: float = DEFAULT_WAIT_S,
        wait_poll: float = WAIT_POLL_S,
    ) -> None:
        self.script = dict(script or {})
        self.wait_timeout = wait_timeout
        self.wait_poll = wait_poll  # how often a young `wait_*` step asks the server (s)
        self.assignments: list[AssignedTask] = []  # every attempt's task, as handed over
        self.check_results: list[tuple[str, int, CheckResult]] = []
        self.command_results: list[tuple[str, int, CommandResult]] = []
        self.rereads: list[tuple[str, str]] = []  # (task, path): a write redone after a change
        self.followups: list[tuple[str, int, str]] = []  # (task, attempt, message) per follow-up
        self.sessions: dict[str, _Played] = {}  # by session id: what a repair attempt resumes
        self.numbers: list[tuple[str, str, int]] = []  # (task, sequence, value) handed out
        self.ports: list[tuple[str, int]] = []  # (task, port) allocated

    async def run(self, attempt: Attempt) -> AttemptReport:
        self.assignments.append(attempt.task)
        played = await self._session(attempt)

        async def follow_up(message: str, repair: bool = False) -> AttemptReport:
            self.followups.append((attempt.task_id, attempt.number, message))
            played.turn, played.followup, played.cost_usd = played.turn + 1, message, 0.0
            played.repairing = repair or attempt.repairs.turns > played.repairs_seen
            played.repairs_seen = attempt.repairs.turns
            return await self._turn(attempt, played)

        repair = opening(attempt)
        if repair is not None:  # a resumed session: its next turn is the repair
            first = await follow_up(repair, repair=True)
        else:
            first = await hear_operator(attempt.inbox, await self._turn(attempt, played), follow_up)
        return await finish_session(attempt, first, follow_up)

    async def _session(self, attempt: Attempt) -> _Played:
        """The session a repair attempt resumes (played by another process: at its first
        turn), else a new one, numbered among the task's sessions (a repair is none)."""
        resumed = attempt.task.repair_session
        if resumed is not None and resumed in self.sessions:
            self.sessions[resumed].checks, self.sessions[resumed].repairs_seen = [], 0
            return self.sessions[resumed]
        started = _started_by(resumed, attempt.number)
        repairs = await self._repairs_before(attempt, started)
        played = _Played(resumed or f"scripted-{attempt.task_id}-{started}", started - repairs)
        played.redo = resumed is None and await self._failed_a_check(attempt)
        self.sessions[played.session_id] = played
        return played

    async def _repairs_before(self, attempt: Attempt, number: int) -> int:
        """The task's repair attempts before its attempt `number` (the server's record)."""
        if number <= 1:
            return 0
        events = await attempt.gate.client.events(type_=EventType.TASK_ASSIGNED)
        return sum(
            1
            for e in events
            if e["task_id"] == attempt.task_id
            and e["payload"].get("repair")
            and int(e["payload"].get("attempt") or 0) < number
        )

    async def _failed_a_check(self, attempt: Attempt) -> bool:
        """Whether an earlier attempt of the task was rolled back because a check failed it
        (its landing check or its verify): this session reworks the task."""
        if attempt.task.error_kind in REWORK_KINDS:
            return True
        if attempt.number <= 1:
            return False
        events = await attempt.gate.client.events(type_=EventType.TASK_REQUEUED)
        return any(
            e["task_id"] == attempt.task_id and e["payload"].get("error_kind") in REWORK_KINDS
            for e in events
        )

    async def _turn(self, attempt: Attempt, played: _Played) -> AttemptReport:
        """Play the steps of the current turn; the turn's report (its own cost)."""
        steps = self.script.get(attempt.task_id, ())
        try:
            reworks = played.reworks
            for step in steps:
                if step.plays(played.attempt, played.turn, reworks):
                    await self._play(step, attempt, played)
            played.reworked = played.reworked or reworks
        except _StepFailed as failed:
            cost = failed.report.cost_usd + played.cost_usd
            return replace(failed.report, cost_usd=cost, session_id=played.session_id)
        written = tuple(attempt.gate.written)
        return AttemptReport(
            attempt=attempt.number,
            ok=True,
            summary=f"scripted: {len(written)} file(s) written",
            files_written=written,
            cost_usd=played.cost_usd,
            session_id=played.session_id,
        )

    async def _play(self, step: Step, attempt: Attempt, played: _Played) -> None:
        match step.kind:
            case "write" | "edit" | "append" | "write_from" | "patch":
                await self._changes(step, attempt)
            case "sleep":
                await asyncio.sleep(float(step.arg))
            case kind if kind in WAIT_KINDS:
                await self._wait(step, attempt)
            case "fail":
                _give_up(attempt, str(step.arg))
            case "rate_limit":
                raise _StepFailed(_rate_limited(step.arg, attempt))
            case "cost":
                played.cost_usd += float(step.arg)
            case "check" | "expect_check" | "expect_error" | "command":
                await self._runs(step, attempt, played)
            case "make_dir":
                _make_dir(attempt.workdir / str(step.arg))
            case "read" | "expect_followup" | "ask" | "expect_answer":
                await self._reading(step, attempt, played)
            case "acquire_resource" | "next_number" | "allocate_port":
                await self._resource(step, attempt)
            case _:
                raise ScriptError(f"unknown step {step.kind}")

    async def _changes(self, step: Step, attempt: Attempt) -> None:
        """A step that changes files: each through the gate, as the session's tool would."""
        if step.kind == "patch":
            for patch in step.arg:
                await self._patch(attempt, patch)
        else:
            tool, apply = _CHANGES[step.kind]
            await self._change(attempt, tool, step.arg, apply)

    async def _change(self, attempt: Attempt, tool: str, arg: dict[str, Any], apply: Any) -> None:
        target = attempt.workdir / str(arg["path"])
        tool_input = {
            "file_path": str(target),
            **{_AS_TOOL.get(k, k): v for k, v in arg.items() if k not in _NOT_TOOL_INPUT},
        }
        verdict = await attempt.gate.check(tool, tool_input)
        if verdict.reread:  # changed while it waited: read it again, redo the edit (no veto)
            self.rereads.append((attempt.task_id, str(arg["path"])))
            attempt.record_read("Read", {"file_path": str(target)})
            verdict = await attempt.gate.check(tool, tool_input)
        if not verdict.allowed:
            raise _StepFailed(
                AttemptReport(
                    attempt=attempt.number,
                    ok=False,
                    error=verdict.reason,
                    error_kind=ErrorKind.VETO if verdict.blocked_on else ErrorKind.AGENT_ERROR,
                    blocked_on_path=verdict.blocked_on,
                    files_written=tuple(attempt.gate.written),
                )
            )
        try:
            apply(target, arg)
        except (OSError, ValueError) as err:
            _give_up(attempt, f"{tool} {arg['path']}: {err}", err)
        await attempt.gate.record(str(target), tool)

    async def _resource(self, step: Step, attempt: Attempt) -> None:
        tools = ResourceTools(attempt.gate)
        if step.kind == "acquire_resource":
            answer = await tools.acquire_resource(str(step.arg))
        elif step.kind == "allocate_port":
            answer = await tools.allocate_port()
            if answer.value is not None:
                self.ports.append((attempt.task_id, answer.value))
        else:
            arg = step.arg if isinstance(step.arg, dict) else {"sequence": step.arg}
            answer = await tools.next_number(str(arg["sequence"]))
            if answer.value is not None:
                self.numbers.append((attempt.task_id, str(arg["sequence"]), answer.value))
                if "write" in arg:
                    path = str(arg["write"]).format(number=answer.value)
                    content = str(arg.get("content", "")).format(number=answer.value)
                    await self._change(attempt, "Write", {"path": path, "content": content}, _write)
        if not answer.ok:
            blocked = attempt.gate.blocked_on
            raise _StepFailed(
                AttemptReport(
                    attempt=attempt.number,
                    ok=False,
                    error=answer.text,
                    error_kind=ErrorKind.VETO if blocked else ErrorKind.AGENT_ERROR,
                    blocked_on_path=blocked,
                    files_written=tuple(attempt.gate.written),
                )
            )

    async def _reading(self, step: Step, attempt: Attempt, played: _Played) -> None:
        """What the session reads: a file, a follow-up message, the operator's answer."""
        if step.kind in ("ask", "expect_answer"):
            await _asking(step, attempt, played)
        elif step.kind == "read":
            attempt.record_read("Read", {"file_path": str(attempt.workdir / str(step.arg))})
        elif str(step.arg) not in played.followup:  # expect_followup
            _give_up(attempt, f"the follow-up message does not mention {step.arg!r}")

    async def _runs(self, step: Step, attempt: Attempt, played: _Played) -> None:
        """A check or a command, or an expectation about what one did."""
        if step.kind == "command":
            await self._command(attempt, step.arg)
        elif step.kind == "check":
            await self._check(attempt, str(step.arg), played)
        elif step.kind == "expect_check":
            last = played.checks[-1] if played.checks else None
            if last is None or last.passed != (step.arg == "pass"):
                _give_up(attempt, f"expected the last check to {step.arg}: {last and last.verdict}")
        elif str(step.arg) not in (attempt.task.error or ""):  # expect_error
            _give_up(attempt, f"the assignment's error does not mention {step.arg!r}")

    async def _check(self, attempt: Attempt, name: str, played: _Played) -> None:
        if attempt.checks is None:
            result = CheckResult(name, CheckPurpose.TOOL, refused="no check is defined")
        else:
            result = await attempt.checks.run(name)
        if attempt.gate.fenced:
            _give_up(attempt, "fenced while running a check")
        played.checks.append(result)
        self.check_results.append((attempt.task_id, attempt.number, result))

    async def _command(self, attempt: Attempt, arg: Any) -> None:
        if attempt.commands is None:
            _give_up(attempt, "this task has no run_command tool (shell is off)")
        spec = arg if isinstance(arg, dict) else {"run": arg}
        timeout = float(spec.get("timeout_s", DEFAULT_COMMAND_TIMEOUT_S))
        result = await attempt.commands.run(str(spec["run"]), timeout)
        self.command_results.append((attempt.task_id, attempt.number, result))
        if attempt.gate.fenced:
            _give_up(attempt, "fenced while running a command")
        if result.applied.denied_on is not None:
            raise _StepFailed(
                AttemptReport(
                    attempt=attempt.number,
                    ok=False,
                    error=result.applied.denied,
                    error_kind=ErrorKind.VETO,
                    blocked_on_path=result.applied.denied_on,
                    files_written=tuple(attempt.gate.written),
                )
            )
        if result.refused is not None:
            _give_up(attempt, result.refused)

    async def _wait(self, step: Step, attempt: Attempt) -> None:
        """A `wait_*` step (`fleet.scriptwaits`); its give-up ends the attempt."""
        limit = self.wait_timeout if step.timeout is None else step.timeout
        gave_up = await wait_until(step.kind, str(step.arg), attempt, limit, self.wait_poll)
        if gave_up is not None:
            _give_up(attempt, gave_up)

    async def _patch(self, attempt: Attempt, patch: FilePatch) -> None:
        """One file of a `patch` step: its hunks applied to the file as it is when written
        (the gate is asked with the result, as for a `write`)."""
        target = attempt.workdir / patch.path
        try:
            proposed = _patched(target, patch)
        except (OSError, ValueError) as err:
            _give_up(attempt, f"patch {patch.path}: {err}", err)
        arg = {"path": patch.path, "content": proposed, "patch": patch}
        await self._change(attempt, "Write", arg, _write_patched)


def _started_by(session_id: str | None, number: int) -> int:
    """The attempt that started a scripted session (`scripted-TASK-N`); none: this one."""
    if session_id is None:
        return number
    tail = session_id.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else number - 1


def _rate_limited(retry_after: Any, attempt: Attempt) -> AttemptReport:
    said = None if retry_after is None else float(retry_after)
    return AttemptReport(
        attempt=attempt.number,
        ok=False,
        error="scripted usage limit (HTTP 429)",
        error_kind=ErrorKind.RATE_LIMITED,
        retry_after_s=said,
        files_written=tuple(attempt.gate.written),
    )


async def _asking(step: Step, attempt: Attempt, played: _Played) -> None:
    if step.kind == "ask":
        if attempt.ask is None:
            _give_up(attempt, "this session cannot ask the operator")
        played.answer = await attempt.ask.ask(str(step.arg))
    elif str(step.arg) not in played.answer:  # expect_answer
        _give_up(attempt, f"the operator's answer does not mention {step.arg!r}: {played.answer}")


def _give_up(attempt: Attempt, message: str, cause: Exception | None = None) -> NoReturn:
    failed = AttemptReport(
        attempt=attempt.number, ok=False, error=message, error_kind=ErrorKind.AGENT_ERROR
    )
    raise _StepFailed(failed) from cause


def _write(target: Path, arg: dict[str, Any]) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(str(arg["content"]))


def _edit(target: Path, arg: dict[str, Any]) -> None:
    text = target.read_text()
    old, new = str(arg["old"]), str(arg["new"])
    if old not in text:
        raise ValueError("the text to replace was not found")
    target.write_text(text.replace(old, new, 1))


def _patched(target: Path, patch: FilePatch) -> str:
    """The file's text with the patch's hunks applied (a created file starts empty)."""
    if patch.created and target.exists():
        raise PatchError(f"the diff creates {patch.path}, which exists")
    text = "" if patch.created else target.read_text(encoding="utf-8")
    return apply_hunks(text, patch.hunks, patch.path)


def _write_patched(target: Path, arg: dict[str, Any]) -> None:
    """The hunks applied to the file as it is now (another task may have changed other
    parts of it since the gate was asked)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(_patched(target, arg["patch"]), encoding="utf-8")


def _make_dir(target: Path) -> None:
    if target.is_file() or target.is_symlink():
        target.unlink()
    target.mkdir(parents=True, exist_ok=True)


def _append(target: Path, arg: dict[str, Any]) -> None:
    with target.open("a") as handle:
        handle.write(str(arg["text"]))


# each file-changing step: the tool a session would use, and how the change is made; an
# `edit`'s keys as the Edit tool names them (the gate reads which parts it changes)
_AS_TOOL: Final = {"old": "old_string", "new": "new_string"}
_CHANGES: Final = {
    "write": ("Write", _write),
    "write_from": ("Write", _write),
    "edit": ("Edit", _edit),
    "append": ("Edit", _append),
}
_NOT_TOOL_INPUT: Final = frozenset({"path", "from", "patch"})  # a step's keys the tool lacks
