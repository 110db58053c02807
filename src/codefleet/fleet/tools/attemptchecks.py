"""Named checks for one attempt: the runner's side of isolated checks.

An agent (through the `run_check` tool) or the runner (to verify a finished
session) asks for a check by NAME; the command comes from the server's list,
never from the agent. One run is:

1. `check_started` is recorded (the server checks the caller still owns the
   attempt; a fenced runner learns it here and runs nothing);
2. the command runs in an isolated view (`fleet.views.runinview.run_in_view`) masked
   by the pre-images of the files OTHER in-flight tasks hold: an overlay
   layer on the tree's own path where one can be mounted, else a copy
   (time limit, output cap, whole process group killed; the view deleted);
3. `check_finished` is recorded with the verdict, timings, which view it
   was, what it reset and output tail.

No check runs twice on the same content: each run that passed is kept with
its view's content identity (`fleet.views.identity`, taken before and after it
ran, and kept only when both agree and no file was newly masked during the
run), and a later run of the same check and command on a view of that same
identity is that result, said with `check_reused` instead of run (an agent's
`run_check` that passed on exactly what its verify sees is the verify). A
check its operator declared `reuse: false` always runs. So that the log alone
proves each reuse (`testing.invariants_reuse`), a `check_finished` carries its
command and identity, and only a recorded run is reused: its `check_reused`
names it (`reused_event`) with the same command and identity. A fleet's
runners share their passes with its landing workers (`passes`: (command,
identity) -> the `check_finished`, kept once the server recorded it): a landing
check on that same content is that run (`fleet.landingworker`, decision 0177).

An unknown name is refused locally with the list of known names (nothing
runs, no event). A check that could not run (server unreachable, view
failure) is `refused` with `infra=True`; so is, with its exit code and output,
one whose shell could not start a program (exit 126/127, `programs.NOT_RUNNABLE`),
with the programs the lookup names (`programs.missing_programs`, in the view).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Collection, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from codefleet.api.client import ServerUnavailable
from codefleet.errors import DomainError, NotOwner, StaleEpoch
from codefleet.fleet.gate.prewrite import WriteGate
from codefleet.fleet.tools.resourcecalls import (
    DEFAULT_RESOURCE_WAIT_S,
    ResourceTools,
    wait_for_resources,
)
from codefleet.fleet.views.programs import NOT_RUNNABLE, not_started_text
from codefleet.fleet.views.runinview import (
    Mask,
    ViewFailed,
    ViewKind,
    decode_preimages,
    foreign_mask,
    masked_identity,
    run_in_view,
)
from codefleet.fleet.views.uvlock import LockCache, Resolution
from codefleet.models import CheckPurpose

__all__ = [
    "CHECK_TOOL",
    "CheckLimits",
    "CheckResult",
    "Checker",
    "decode_preimages",  # defined in `fleet.views.runinview`; kept here for its importers
]

log = logging.getLogger(__name__)

CHECK_TOOL: Final = "run_check"
DEFAULT_CHECK_TIMEOUT_S: Final = 300.0
OUTPUT_CHARS: Final = 20_000
EVENT_TAIL_CHARS: Final = 2_000
EVENT_PATHS_MAX: Final = 200


@dataclass(frozen=True, slots=True)
class CheckLimits:
    timeout: float = DEFAULT_CHECK_TIMEOUT_S
    output_chars: int = OUTPUT_CHARS
    exclude: tuple[Path, ...] = ()  # protected paths (database, run dir) if inside the tree
    view_dir: Path | None = None  # where views are made; None: the system temp dir
    view: ViewKind | None = None  # None: a layer where one can be mounted, else a copy
    resource_wait: float = DEFAULT_RESOURCE_WAIT_S  # for the resources a check names
    locks: LockCache | None = None  # a `uv run` check resolves once per content; None: always


@dataclass(frozen=True, slots=True)
class CheckResult:
    name: str
    purpose: CheckPurpose
    command: str = ""
    exit_code: int | None = None
    output: str = ""
    output_bytes: int = 0
    timed_out: bool = False
    timeout_s: float = 0.0
    duration_s: float = 0.0
    view: ViewKind | None = None  # the view it ran in (None: it did not run)
    view_ms: float = 0.0
    view_files: int = 0
    isolated: tuple[str, ...] = ()  # files another task is editing, reset in the view
    unrestorable: tuple[str, ...] = ()  # held by another task, no pre-image (rollback off)
    disturbed: tuple[str, ...] = ()  # leased by another task during a layer run: ran again
    refused: str | None = None  # why it did not run
    infra: bool = False  # ... through no fault of the agent
    unstartable: tuple[tuple[str, str], ...] = ()  # (program, why) on exit 126/127, if found
    identity: str | None = None  # the view's content identity, where it held still for the run
    reused: CheckPurpose | None = None  # not run: the result of this earlier run on the content
    event_id: int | None = None  # its `check_finished` (a reuse names it: `reused_event`)
    resolution: Resolution | None = None  # a `uv run` check: uv resolved, or the kept lock

    @property
    def passed(self) -> bool:
        return self.refused is None and not self.timed_out and self.exit_code == 0

    @property
    def not_runnable(self) -> bool:
        """The shell could not start a program of the command: no fault of the agent."""
        return self.infra and self.exit_code in NOT_RUNNABLE

    @property
    def verdict(self) -> str:
        if self.refused is not None:
            return "did not run"
        if self.not_runnable:
            why = NOT_RUNNABLE[self.exit_code or 0]
            return f"could not start (exit code {self.exit_code}: a program it names {why})"
        if self.timed_out:
            return f"TIMED OUT after {self.timeout_s:g}s"
        return "passed" if self.passed else f"FAILED (exit code {self.exit_code})"

    def render(self) -> str:
        """What the agent is told: the verdict, what the view held, the output (tail)."""
        if self.refused is not None:
            return self.refused
        lines = [f"Check `{self.name}` {self.verdict} in {self.duration_s:.1f}s: {self.command}"]
        if self.reused is not None:
            lines.append(
                "It was not run again: it passed before on exactly this content "
                f"({'your run_check' if self.reused is CheckPurpose.TOOL else 'a verify'})."
            )
        lines.append(self._view_text())
        if self.unrestorable:
            lines.append(
                "Note: these files are being edited by other agents and could not be reset "
                f"(rollback is off): {', '.join(self.unrestorable[:20])}"
            )
        if self.not_runnable:
            lines.append("This is not a fault of your code: do not try to fix it; report it.")
        lines.append("Output:" if self.output else "(no output)")
        return "\n".join(lines) + ("\n" + self.output if self.output else "")

    def _view_text(self) -> str:
        where = "an overlay of the tree" if self.view is ViewKind.LAYER else "a copy of the tree"
        view = f"It ran in a private view ({where}) with your edits and all finished work"
        if self.isolated:
            view += f"; {len(self.isolated)} file(s) other agents are still editing were reset"
        if self.disturbed:
            view += (
                f"; it ran a second time because other agents began editing "
                f"{len(self.disturbed)} file(s) during the first run"
            )
        return view + ". Nothing it wrote reached the shared tree."

    def failure_text(self, task_id: str) -> str:
        """The `error` of an attempt this check failed to verify (the next prompt shows it)."""
        if self.refused is not None:
            return f"Verification with check `{self.name}` did not run: {self.refused}"
        if self.not_runnable:
            return self._unrunnable_text(task_id)
        return (
            f"Verification failed: check `{self.name}` {self.verdict} after the session "
            f"ended ({self.command}). Output:\n{self.output or '(no output)'}"
        )

    def _unrunnable_text(self, task_id: str) -> str:
        """What failed a task at once: the program and what to do first, then the output."""
        what, programs = not_started_text(self.unstartable, self.exit_code or 0)
        return (
            f"check `{self.name}` could not start: {what} where checks run. Install {programs} "
            f"where checks run, or fix the check's command ({self.command}), then `codefleet "
            f"retry {task_id}`. Not the agent's fault, so not retried (exit code "
            f"{self.exit_code}). Output:\n{self.output or '(no output)'}"
        )

    def finished_event(self, attempt: int) -> dict[str, Any]:
        return {
            "attempt": attempt,
            "name": self.name,
            "phase": "finished",
            "purpose": self.purpose,
            "exit_code": self.exit_code,
            "passed": self.passed,
            "timed_out": self.timed_out,
            "error": self.refused[:EVENT_TAIL_CHARS] if self.refused else None,
            "duration_ms": int(self.duration_s * 1000),
            "view": self.view,
            "view_ms": int(self.view_ms),
            "view_files": self.view_files,
            "resolution": self.resolution,
            "isolated": list(self.isolated[:EVENT_PATHS_MAX]),
            "disturbed": list(self.disturbed[:EVENT_PATHS_MAX]),
            "output_bytes": self.output_bytes,
            "output_tail": self.output[-EVENT_TAIL_CHARS:],
            "command": self.command or None,
            "identity": self.identity,
        }

    def reused_event(self, attempt: int, purpose: CheckPurpose) -> dict[str, Any]:
        """The `check_reused` that says this passing run stands for one not run: the command,
        the content identity and the `check_finished` it is (`reused_event`)."""
        return {
            "attempt": attempt,
            "name": self.name,
            "phase": "reused",
            "purpose": purpose,
            "reused_from": self.purpose,
            "reused_event": self.event_id,
            "command": self.command,
            "identity": self.identity,
        }


class Checker:
    """The named checks one attempt may run; see the module docstring."""

    def __init__(
        self,
        gate: WriteGate,
        commands: Mapping[str, str],
        attempt: int,
        limits: CheckLimits,
        resources: Mapping[str, list[str]] | None = None,
        fresh: Collection[str] = (),
        passes: dict[tuple[str, str], int] | None = None,
    ) -> None:
        self.gate = gate
        self.commands = dict(commands)
        self.resources = dict(resources or {})  # check name -> the resources it must hold
        self.fresh = frozenset(fresh)  # checks declared `reuse: false`: always run
        self.attempt = attempt
        self.limits = limits
        self.results: list[CheckResult] = []
        self.passes = passes  # the fleet's recorded passes, for its landing checks to reuse

    @property
    def names(self) -> list[str]:
        return sorted(self.commands)

    async def identity(self, name: str) -> str | None:
        """The content identity of the view check `name` would see now (None: none is said)."""
        return (await self._before(name))[1]

    def unknown(self, name: str) -> str:
        return (
            f"There is no check named {name!r}. The available checks are: "
            f"{', '.join(self.names) or '(none)'}. Call {CHECK_TOOL} with one of these names; "
            "you cannot run any other command."
        )

    async def run(
        self, name: str, purpose: CheckPurpose = CheckPurpose.TOOL, timeout: float | None = None
    ) -> CheckResult:
        """Run the named check in a fresh isolated view; never raises for the check's failure."""
        command = self.commands.get(name)
        if command is None:
            return CheckResult(name, purpose, refused=self.unknown(name))
        limit = min(self.limits.timeout, timeout) if timeout else self.limits.timeout
        if self.resources.get(name):  # taken for the attempt, like a file; or busy, not run
            busy = await wait_for_resources(
                ResourceTools(self.gate), self.resources[name], self.limits.resource_wait
            )
            if busy is not None:
                result = CheckResult(name, purpose, command, refused=busy)
                self.results.append(result)
                return result
        result = await self._run(name, command, purpose, limit)
        self._keep_pass(result)
        self.results.append(result)
        return result

    async def _run(
        self, name: str, command: str, purpose: CheckPurpose, timeout: float
    ) -> CheckResult:
        """The earlier pass on this content, else `check_started` and the run. The mask is
        fetched once for the identity before and the view (decision 0173)."""
        started = {"attempt": self.attempt, "name": name, "phase": "started", "purpose": purpose}
        if self._may_reuse(name, command):
            mask, before = await self._before(name)
            earlier = self._passed_on(name, command, before)
            if earlier is not None:
                return await self._reuse(earlier, purpose, before)
            problem = await self._post(started)
        else:  # no earlier pass to reuse: the start is recorded while the content is read
            (mask, before), problem = await asyncio.gather(self._before(name), self._post(started))
        if problem is not None:
            return CheckResult(name, purpose, command, refused=problem, infra=True)
        result, after = await self._execute(name, command, purpose, timeout, mask, before)
        return await self._finish(result, before, after)

    async def _reuse(
        self, earlier: CheckResult, purpose: CheckPurpose, identity: str | None
    ) -> CheckResult:
        """`earlier` standing for this run, said with `check_reused`."""
        problem = await self._post(earlier.reused_event(self.attempt, purpose))
        if problem is not None:
            return CheckResult(earlier.name, purpose, earlier.command, refused=problem, infra=True)
        return replace(earlier, purpose=purpose, reused=earlier.purpose, identity=identity)

    def _keep_pass(self, result: CheckResult) -> None:
        """Share a run the server recorded passing on a content that held still (never a
        `reuse: false` check's), so a landing check on that content names it."""
        if self.passes is None or result.name in self.fresh or result.reused is not None:
            return
        if result.passed and result.identity and result.event_id is not None:
            self.passes.setdefault((result.command, result.identity), result.event_id)

    async def _finish(
        self, result: CheckResult, before: str | None, after: str | None
    ) -> CheckResult:
        """Record the run's `check_finished`, with its content identity where the content
        held still for the run (`after`: the view's once it ran); only a recorded run with
        one may be reused."""
        held = before is not None and not result.disturbed and after == before
        result = replace(result, identity=before if held else None)
        event_id = await self._recorded(result.finished_event(self.attempt))
        if event_id is None:  # not in the log: nothing could name it
            return replace(result, identity=None)
        return replace(result, event_id=event_id)

    async def _recorded(self, report: dict[str, Any]) -> int | None:
        """Record a check event; its id, or None when it was not recorded."""
        gate = self.gate
        answer: dict[str, Any] = {}

        async def send() -> None:
            answer.update(
                await gate.client.check_event(gate.task_id, gate.agent_id, gate.epoch, report)
            )

        await post_event(gate, send(), "check")
        event_id = answer.get("event_id")
        return event_id if isinstance(event_id, int) else None

    def _passed_on(self, name: str, command: str, identity: str | None) -> CheckResult | None:
        """An earlier run of this check and command that passed on a view of `identity`."""
        if identity is None:
            return None
        for earlier in reversed(self.results):
            if (earlier.name, earlier.command, earlier.identity) == (name, command, identity):
                return earlier if earlier.passed and earlier.reused is None else None
        return None

    def _may_reuse(self, name: str, command: str) -> bool:
        """Whether an earlier run could stand for this one (`_passed_on`, whatever the content)."""
        return any(
            (r.name, r.command) == (name, command) and r.identity is not None for r in self.results
        )

    async def _before(self, name: str) -> tuple[Mask | None, str | None]:
        """The mask this run's view shows (None: the view fetches it) and that view's content
        identity now (None: not reusable)."""
        gate = self.gate
        try:
            if name in self.fresh:
                return Mask.from_answer(await gate.client.foreign_preimages(gate.task_id)), None
            images = foreign_mask(gate.client, gate.task_id)
            return await masked_identity(gate.tree.root, images, self.limits.exclude)
        except (ServerUnavailable, DomainError):
            return None, None

    async def _post(self, report: dict[str, Any]) -> str | None:
        """Record a check event; a reason to stop when the server refuses or is unreachable."""
        gate = self.gate
        send = gate.client.check_event(gate.task_id, gate.agent_id, gate.epoch, report)
        return await post_event(gate, send, "check")

    async def _execute(
        self,
        name: str,
        command: str,
        purpose: CheckPurpose,
        timeout: float,
        mask: Mask | None,
        before: str | None,
    ) -> tuple[CheckResult, str | None]:
        """The run in its view and, where there is an identity before, the view's after."""
        gate, limits = self.gate, self.limits
        try:
            run = await run_in_view(
                gate.tree.root,
                foreign_mask(gate.client, gate.task_id),
                command,
                timeout=timeout,
                cap=limits.output_chars,
                exclude=limits.exclude,
                view_dir=limits.view_dir,
                view=limits.view,
                locks=limits.locks,
                mask=mask,
                identify=before is not None,
            )
        except ViewFailed as err:
            why = f"Check {name} did not run: {err}."
            return CheckResult(name, purpose, command, refused=why, infra=True), None
        ran = run.ran
        result = CheckResult(
            name,
            purpose,
            command,
            exit_code=ran.exit_code,
            output=ran.output,
            output_bytes=ran.output_bytes,
            timed_out=ran.timed_out,
            timeout_s=timeout,
            duration_s=ran.duration_s,
            view=run.view,
            view_ms=run.ms,
            view_files=run.files,
            isolated=run.isolated,
            unrestorable=run.unrestorable,
            disturbed=run.disturbed,
            infra=ran.exit_code in NOT_RUNNABLE,
            unstartable=run.unstartable,
            resolution=run.resolution,
        )
        return result, run.identity


async def post_event(gate: WriteGate, send: Awaitable[Any], what: str) -> str | None:
    """Await one check or command event's report; a reason to stop when it is refused."""
    try:
        await send
    except StaleEpoch:
        gate.fenced = True
        return "This runner was fenced by the coordination server; stop now."
    except NotOwner:
        return "This attempt is over (the server took the task back); stop now."
    except (ServerUnavailable, DomainError) as err:
        log.warning("could not record a %s event for %s: %s", what, gate.task_id, err)
        return f"The coordination server could not record the {what} ({err}); it did not run."
    return None
