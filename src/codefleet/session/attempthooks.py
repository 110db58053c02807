"""The hooks that hold one Claude Code session to the lock, and what they collect.

PreToolUse on `Write|Edit|MultiEdit|NotebookEdit` (`on_failure="block"`) asks
the attempt's `WriteGate` and answers `{}` (no objection: never
`permissionDecision: "allow"`, which would override `dontAsk`) or `deny(reason)`.
Anything unexpected in the hook is a denial; a raised exception, `None`, a
malformed answer or a timeout is blocked by the CLI itself because of
`on_failure="block"`. The hook times itself (entry to decision) so the
coordination overhead can be reported. PreToolUse on Read, Glob and Grep refuses
reads outside the tree (`fleet.gate.readguard`). PostToolUse records the ledger row in
the background (bounded, never vetoes; `settle` waits for it) and each file read
in the attempt's read set (`fleet.gate.readset`, in process). `AttemptLog` is what one
attempt's hooks and its message drain (`session.clistream`) collect.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, cast

from claude_agent_sdk import HookCallback, HookContext, HookInput, HookJSONOutput, HookMatcher
from claude_agent_sdk._internal.transport.subprocess_cli import SubprocessCLITransport

from codefleet.fleet.gate.prewrite import WriteGate
from codefleet.fleet.gate.readguard import READ_TOOLS, read_refusal
from codefleet.fleet.gate.readset import READ_RECORDED_TOOLS
from codefleet.models import WRITE_TOOLS
from codefleet.session.outcome import HookRecord, SessionResult, Spent
from codefleet.toolcalls.writepaths import deny_output, extract_paths

__all__ = [
    "HOOK_TIMEOUT_S",
    "READ_MATCHER",
    "UNCHECKED",
    "WRITE_MATCHER",
    "AttemptLog",
    "deny",
    "hook_matchers",
    "make_post_tool_use",
    "make_pre_tool_use",
    "make_read_guard",
    "make_read_recorder",
    "settle",
    "write_hook_timeout",
]

log = logging.getLogger(__name__)

WRITE_MATCHER: Final = "Write|Edit|MultiEdit|NotebookEdit"
READ_MATCHER: Final = "|".join(READ_TOOLS)
READ_RECORD_MATCHER: Final = "|".join(sorted(READ_RECORDED_TOOLS))
HOOK_TIMEOUT_S: Final = 8.0  # the CLI blocks the write if the hook takes longer
RECORD_TIMEOUT_S: Final = 2.0
UNCHECKED = (
    "The write could not be checked against the other agents' leases, so it was refused. "
    "Do not retry it. Stop now and report that the write was refused."
)


def deny(reason: str) -> HookJSONOutput:
    """THE PreToolUse denial (DESIGN §7); every refusal the hook makes goes through here."""
    return cast(HookJSONOutput, deny_output(reason))


@dataclass
class AttemptLog:
    """What one attempt's hooks and message drain collect; read after the session."""

    gate: WriteGate
    check_timeout: float
    hook_ms: list[float] = field(default_factory=list)
    refusals: list[dict[str, Any]] = field(default_factory=list)
    read_refusals: list[dict[str, Any]] = field(default_factory=list)  # answers, not failures
    rereads: list[dict[str, Any]] = field(
        default_factory=list
    )  # changed while waiting: not failures
    pending: set[asyncio.Task[None]] = field(default_factory=set)
    init: dict[str, Any] | None = None
    write_calls: dict[str, str] = field(default_factory=dict)  # tool_use_id -> tool name
    transport: SubprocessCLITransport | None = None
    cli_pid: int | None = None
    limit_resets_at: float | None = None  # Unix seconds: a rejected RateLimitEvent said so
    record_read: Callable[[str, Any], None] | None = None  # the attempt's read set
    result: SessionResult | None = None  # the last turn's
    spent: Spent = (0, 0, 0.0)  # tokens in, out and cost of the turns so far
    followups: list[str] = field(default_factory=list)  # the messages after the first

    def hook_record(self) -> HookRecord:
        return HookRecord(
            blocked_on=self.gate.blocked_on,
            refusals=tuple(str(r["reason"]) for r in self.refusals),
            written=tuple(self.gate.written),
            rereads=len(self.rereads),
        )


def write_hook_timeout(hook_timeout: float, gate: WriteGate) -> float:
    """The `PreToolUse` hook's bound: a parked write may wait the gate's `lease_wait_s` on top."""
    return hook_timeout + gate.lease_wait_s


def hook_matchers(attempt_log: AttemptLog, hook_timeout: float) -> dict[Any, list[HookMatcher]]:
    """The attempt's hooks: the write gate (`hook_timeout` plus the lease wait) and the read
    guard (`hook_timeout`) before a call, blocking on failure; the ledger and read set after."""
    pre = HookMatcher(
        matcher=WRITE_MATCHER,
        hooks=[make_pre_tool_use(attempt_log)],
        timeout=write_hook_timeout(hook_timeout, attempt_log.gate),
        on_failure="block",
    )
    reads = HookMatcher(
        matcher=READ_MATCHER,
        hooks=[make_read_guard(attempt_log)],
        timeout=hook_timeout,
        on_failure="block",
    )
    post = HookMatcher(
        matcher=WRITE_MATCHER,
        hooks=[make_post_tool_use(attempt_log)],
        timeout=RECORD_TIMEOUT_S * 2,
    )
    read = HookMatcher(
        matcher=READ_RECORD_MATCHER,
        hooks=[make_read_recorder(attempt_log)],
        timeout=RECORD_TIMEOUT_S * 2,
    )
    return {"PreToolUse": [pre, reads], "PostToolUse": [post, read]}


def make_pre_tool_use(attempt_log: AttemptLog) -> HookCallback:
    """The PreToolUse callback: ask the gate, answer `{}` or `deny(...)`, time itself."""

    async def pre_tool_use(
        input_data: HookInput, tool_use_id: str | None, context: HookContext
    ) -> HookJSONOutput:
        started = time.perf_counter()
        try:
            answer = await _decide(attempt_log, dict(input_data))
        except Exception:  # the hook fails closed: anything unexpected is a denial
            log.exception("PreToolUse hook failed; denying the write")
            answer = _refuse(attempt_log, "?", [], UNCHECKED)
        attempt_log.hook_ms.append((time.perf_counter() - started) * 1000.0)
        return answer

    return pre_tool_use


async def _decide(attempt_log: AttemptLog, data: dict[str, Any]) -> HookJSONOutput:
    tool, tool_input = str(data.get("tool_name") or ""), data.get("tool_input")
    blocked_on = attempt_log.gate.blocked_on
    if tool not in WRITE_TOOLS:  # the matcher only sends write tools; anything else is suspect
        return _refuse(attempt_log, tool, [], f"{tool or 'A tool'} is not a write tool; refused.")
    if blocked_on is not None:  # after a veto the attempt is over: enforce the stop
        return _refuse(attempt_log, tool, extract_paths(tool_input), _after_veto(blocked_on))
    try:
        async with asyncio.timeout(attempt_log.check_timeout):  # in this task: no extra hop
            verdict = await attempt_log.gate.check(tool, tool_input)
    except TimeoutError:
        return _refuse(attempt_log, tool, extract_paths(tool_input), UNCHECKED)
    if verdict.allowed:
        return {}
    if verdict.reread:  # the file changed while the write waited: an answer, not a failure
        attempt_log.rereads.append(
            {"tool": tool, "paths": list(verdict.paths), "reason": verdict.reason}
        )
        return deny(verdict.reason)
    return _refuse(attempt_log, tool, list(verdict.paths), verdict.reason)


def _after_veto(path: str) -> str:
    return (
        f"You were already refused {path}, so this attempt is over and every further write is "
        f"refused. Stop now and report that you are blocked on {path}."
    )


def _refuse(attempt_log: AttemptLog, tool: str, paths: list[str], reason: str) -> HookJSONOutput:
    attempt_log.refusals.append({"tool": tool, "paths": paths, "reason": reason, "by": "hook"})
    return deny(reason)


def make_read_guard(attempt_log: AttemptLog) -> HookCallback:
    """The PreToolUse callback for Read, Glob and Grep: refuse, locally, reads outside the tree.

    `readguard.read_refusal` decides (the same check as `codefleet plan`'s sessions). A
    refused read is an answer the model acts on, so it does not fail the attempt.
    """

    async def read_guard(
        input_data: HookInput, tool_use_id: str | None, context: HookContext
    ) -> HookJSONOutput:
        data = dict(input_data)
        tool, tool_input = str(data.get("tool_name") or ""), data.get("tool_input")
        try:
            refusal = read_refusal(str(attempt_log.gate.tree.root), tool, tool_input)
        except Exception:  # the hook fails closed: anything unexpected is a refusal
            log.exception("read guard failed; refusing the read")
            refusal = "The read could not be checked, so it was refused."
        if refusal is None:
            return {}
        attempt_log.read_refusals.append({"tool": tool, "input": tool_input, "reason": refusal})
        return deny(refusal)

    return read_guard


def make_read_recorder(attempt_log: AttemptLog) -> HookCallback:
    """The PostToolUse callback for Read: note the file in the attempt's read set (local)."""

    async def post_read(
        input_data: HookInput, tool_use_id: str | None, context: HookContext
    ) -> HookJSONOutput:
        data = dict(input_data)
        if attempt_log.record_read is not None:
            try:
                attempt_log.record_read(str(data.get("tool_name") or ""), data.get("tool_input"))
            except Exception:  # the read set is a record, never a gate
                log.warning("could not record a read", exc_info=True)
        return {}

    return post_read


def make_post_tool_use(attempt_log: AttemptLog) -> HookCallback:
    """The PostToolUse callback: record the ledger row in the background; never vetoes."""

    async def post_tool_use(
        input_data: HookInput, tool_use_id: str | None, context: HookContext
    ) -> HookJSONOutput:
        data = dict(input_data)
        tool = str(data.get("tool_name") or "")
        for path in extract_paths(data.get("tool_input")):
            task = asyncio.create_task(_record(attempt_log.gate, path, tool))
            attempt_log.pending.add(task)
            task.add_done_callback(attempt_log.pending.discard)
        return {}

    return post_tool_use


async def _record(gate: WriteGate, path: str, tool: str) -> None:
    with contextlib.suppress(TimeoutError):  # the ledger is a record, not a gate
        async with asyncio.timeout(RECORD_TIMEOUT_S):
            await gate.record(path, tool)


async def settle(pending: set[asyncio.Task[None]]) -> None:
    """Wait (bounded) for the background ledger writes of this attempt."""
    if pending:
        await asyncio.wait(set(pending), timeout=RECORD_TIMEOUT_S)
