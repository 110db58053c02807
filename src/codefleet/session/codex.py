"""The Codex executor: one attempt = one Codex session through the official Python SDK.

With the Claude Code session modules, the only modules that import an agent SDK
(here `openai_codex`, pinned with its CLI runtime `openai-codex-cli-bin`, both 0.163.0).
One attempt starts `codex app-server` with a private `CODEX_HOME` (`codexconfig`: a
custom Responses provider, no shell, hooks on `apply_patch`), cwd = the shared tree,
and runs the task's prompt (`CODEX_RULES` before the task) as the thread's first turn.

The write gate: Codex hooks are commands, so the attempt serves its `WriteGate` on a
Unix socket and the hooks run `fleet.gate.codexbridge` to reach it. `PreToolUse` receives
the raw patch (`tool_input.command`); `gate.check("apply_patch", ...)` leases every
target its headers name (`toolcalls.applypatch`), all or nothing, and the answer is `{}` or THE
denial. A malformed patch, a non-patch tool, a check that times out: a denial. After a
veto every further patch is refused (the attempt is over). A patch whose lease wait ended
with the file changed (`Verdict.reread`) is a denial that is not a veto: the model is told
to read the file again with `read_file` and redo its patch, and the attempt goes on
(docs/decisions/0119-waiting-for-a-lease-instead-of-starting-over.md, "Waiting for a lease instead of starting over"). `PostToolUse` records the
ledger row of each target. Before the turn the executor trusts the two hooks through
Codex's own RPCs (`hooks/list`, `config/batchWrite`) and refuses to start the turn
unless Codex then lists both as trusted: an untrusted hook is skipped silently by Codex.

CodeFleet's tools: the attempt also serves its tool table (`session.tools`: `read_file`,
`list_files`, the resource tools, `run_check`, `run_command`, `ask_operator` as the
attempt has them, the same code a Claude Code session runs) on a second socket, which
the session's MCP server, a thin stdio proxy (`session.codexread`), forwards each call
to. So a file read lands in the attempt's read set, and after the first turn, as in the
Claude executor, the operator's new messages are one more turn (`hear_operator`) and the
reads are validated (`finish_session`), a stale one getting its reconcile turn: each a
user message on the same Codex thread. A turn's report counts that turn's tokens only.

The outcome reuses `session_outcome`: the turn becomes a `SessionResult` (the final
agent message, the thread's token totals; Codex reports no cost, so cost is 0); a
failed turn with an HTTP status (429 → RATE_LIMITED, the fleet pause) is an API error;
an SDK or process failure is INFRA. The SDK reaches the app-server through one
internal attribute (`AsyncCodex._client`, pinned 0.163.0) for the two hook RPCs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from openai_codex import ApprovalMode, AsyncCodex, AsyncThread, CodexConfig, Sandbox
from openai_codex.generated.v2_all import (
    ConfigWriteResponse,
    HooksListResponse,
    HookTrustStatus,
    ItemCompletedNotification,
    ThreadTokenUsageUpdatedNotification,
    TurnCompletedNotification,
    TurnStatus,
)
from openai_codex.models import JsonObject

from codefleet.attempt import AttemptReport
from codefleet.fleet.executor import Attempt
from codefleet.fleet.gate.prewrite import WriteGate
from codefleet.fleet.repair import finish_session
from codefleet.fleet.tools.inbox import hear_operator
from codefleet.models import ErrorKind, utcnow
from codefleet.session.codexconfig import (
    CODEX_RULES,
    DEFAULT_CODEX_MODEL,
    CodexProvider,
    config_toml,
)
from codefleet.session.outcome import (
    Crash,
    HookRecord,
    SessionResult,
    Spent,
    session_outcome,
    this_turn,
)
from codefleet.session.sessionfiles import save_record
from codefleet.session.taskprompt import attempt_prompt
from codefleet.session.tools import SessionTool, mcp_result, session_tools
from codefleet.toolcalls.writepaths import PATCH_TOOL, deny_output, no_path_reason, tool_paths

__all__ = ["CodexExecutor", "UntrustedHooks", "codex_home", "hook_answer"]

log = logging.getLogger(__name__)

HOOK_TIMEOUT_S: Final = 30  # Codex's limit on one hook run; the bridge gives up at 20 s
CHECK_TIMEOUT_S: Final = 15.0  # our own gate check gives up first, with a readable reason
# A patch's lease wait ends this much before CHECK_TIMEOUT_S, so a wait that runs out is the
# server's timed-out veto (naming the holder; the task requeued with the path in its scope),
# not an unchecked refusal.
WAIT_MARGIN_S: Final = 2.0
TOOL_MARGIN_S: Final = 60.0  # Codex's bound on one tool call, past the longest one's own
HOOK_EVENTS: Final = ("preToolUse", "postToolUse")
UNCHECKED: Final = (
    "The patch could not be checked against the other agents' leases, so it was refused. "
    "Do not retry it. Stop now and report that the write was refused."
)
REREAD: Final = (
    "Read it with CodeFleet's read_file tool; nothing of this patch was applied, so send "
    "the whole patch again against what the file holds now."
)

EnvFor = Callable[[Attempt], Mapping[str, str]]
MarkerFor = Callable[[Attempt], str | None]


class UntrustedHooks(RuntimeError):
    """Codex does not list CodeFleet's hooks as trusted: a turn would write unchecked."""


@dataclass
class PatchLog:
    """What one attempt's hooks and turns saw; read after the session."""

    gate: WriteGate
    hook_ms: list[float] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)
    rereads: list[str] = field(default_factory=list)  # changed while waiting: not failures
    result: SessionResult | None = None  # the last turn's
    spent: Spent = (0, 0, 0.0)  # the thread's token totals so far
    followups: list[str] = field(default_factory=list)  # the messages after the first

    def hook_record(self) -> HookRecord:
        return HookRecord(
            blocked_on=self.gate.blocked_on,
            refusals=tuple(self.refusals),
            written=tuple(self.gate.written),
            rereads=len(self.rereads),
        )


async def hook_answer(patch_log: PatchLog, payload: Mapping[str, Any]) -> dict[str, Any]:
    """The answer to one Codex hook call: `{}` or THE denial (never raises)."""
    started = time.perf_counter()
    try:
        if payload.get("hook_event_name") == "PostToolUse":
            await _record(patch_log, payload)
            return {}
        answer = await _decide(patch_log, payload)
    except Exception:  # the hook fails closed: anything unexpected is a denial
        log.exception("Codex PreToolUse hook failed; denying the patch")
        answer = _refuse(patch_log, UNCHECKED)
    patch_log.hook_ms.append((time.perf_counter() - started) * 1000.0)
    return answer


async def _decide(patch_log: PatchLog, payload: Mapping[str, Any]) -> dict[str, Any]:
    tool, tool_input = str(payload.get("tool_name") or ""), payload.get("tool_input")
    gate = patch_log.gate
    if tool != PATCH_TOOL:
        return _refuse(patch_log, f"{tool or 'A tool'} is not apply_patch; refused.")
    if gate.blocked_on is not None:
        return _refuse(patch_log, f"You were already refused {gate.blocked_on}. Stop now.")
    if not tool_paths(tool, tool_input):
        return _refuse(patch_log, f"{no_path_reason(tool, tool_input)}; it was refused.")
    try:
        async with asyncio.timeout(CHECK_TIMEOUT_S):
            verdict = await gate.check(tool, tool_input)
    except TimeoutError:
        return _refuse(patch_log, UNCHECKED)
    if verdict.allowed:
        return {}
    if verdict.reread:  # the file changed while the patch waited: an answer, not a failure
        patch_log.rereads.append(verdict.reason)
        return deny_output(f"{verdict.reason} {REREAD}")
    return _refuse(patch_log, verdict.reason)


async def _record(patch_log: PatchLog, payload: Mapping[str, Any]) -> None:
    for path in tool_paths(PATCH_TOOL, payload.get("tool_input")):
        await patch_log.gate.record(path, PATCH_TOOL)


def _refuse(patch_log: PatchLog, reason: str) -> dict[str, Any]:
    patch_log.refusals.append(reason)
    return deny_output(reason)


Handler = Callable[[Any], Awaitable[dict[str, Any]]]


@contextlib.asynccontextmanager
async def attempt_sockets(
    patch_log: PatchLog, tools: Sequence[SessionTool]
) -> AsyncIterator[tuple[str, str]]:
    """Serve the attempt's gate (`hook_answer`, for the patch hooks) and its tools
    (`session.tools`, for the MCP proxy) on two fresh Unix sockets under one short
    temp dir; yields their paths."""
    folder = tempfile.mkdtemp(prefix="cfcx-")
    paths = (os.path.join(folder, "gate.sock"), os.path.join(folder, "tools.sock"))

    async def gate(payload: Any) -> dict[str, Any]:
        if not isinstance(payload, dict):
            return _refuse(patch_log, "The hook input was not JSON; the patch was refused.")
        return await hook_answer(patch_log, payload)

    async def tool(payload: Any) -> dict[str, Any]:
        request = payload if isinstance(payload, dict) else {}
        return await mcp_result(tools, str(request.get("method")), request.get("params"))

    servers = [
        await _serve(path, handler) for path, handler in zip(paths, (gate, tool), strict=True)
    ]
    try:
        yield paths
    finally:
        for server in servers:
            server.close()
        shutil.rmtree(folder, ignore_errors=True)


async def _serve(path: str, handler: Handler) -> asyncio.Server:
    """One JSON request per connection, one JSON answer."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            payload: Any = json.loads(await reader.read())
        except ValueError:
            payload = None
        answer = await handler(payload)
        writer.write(json.dumps(answer).encode())
        with contextlib.suppress(OSError):
            await writer.drain()
            writer.close()

    return await asyncio.start_unix_server(serve, path)


def codex_home(attempt: Attempt) -> Path:
    """A private, fresh CODEX_HOME for one session, under the run directory."""
    home = (
        attempt.run_dir
        / "codex-homes"
        / f"{attempt.task_id}-a{attempt.number}-{attempt.runner_name}"
    )
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    return home


@dataclass(frozen=True, slots=True)
class TurnEnd:
    """What the drained turn said: its status, final text, error and token totals."""

    status: str
    text: str | None = None
    error: str | None = None
    http_status: int | None = None
    tokens_in: int = 0
    tokens_out: int = 0


def session_result(end: TurnEnd, thread_id: str, model: str) -> SessionResult:
    """The turn as the `SessionResult` `session_outcome` decides on (Codex reports no cost)."""
    usage = {model: {"inputTokens": end.tokens_in, "outputTokens": end.tokens_out}}
    failed = end.status != TurnStatus.completed.value
    return SessionResult(
        subtype="error_during_execution" if failed else "success",
        is_error=failed,
        text=end.text,
        session_id=thread_id,
        total_cost_usd=None,
        model_usage=usage,
        api_error_status=end.http_status,
        terminal_reason="api_error" if end.http_status is not None else None,
        errors=(end.error,) if end.error else (),
    )


@dataclass
class CodexExecutor:
    """Runs each attempt as one Codex session (satisfies `fleet.executor.Executor`)."""

    provider: CodexProvider
    model: str = DEFAULT_CODEX_MODEL
    env: EnvFor | None = None
    prompt_marker: MarkerFor | None = None

    async def run(self, attempt: Attempt) -> AttemptReport:
        started = utcnow()
        attempt.gate.lease_wait_s = min(
            attempt.gate.lease_wait_s, max(0.0, CHECK_TIMEOUT_S - WAIT_MARGIN_S)
        )
        patch_log = PatchLog(attempt.gate)
        report: AttemptReport | None = None
        crash: Crash | None = None
        tools, limit = session_tools(attempt, reads=True)
        try:
            async with attempt_sockets(patch_log, tools) as sockets:
                report = await self._session(attempt, sockets, limit, patch_log)
        except UntrustedHooks as err:
            crash = Crash(ErrorKind.INFRA, str(err))
        except Exception as err:  # the CLI or the SDK failed: the environment, not the agent
            log.warning("Codex session failed", exc_info=True)
            crash = Crash(ErrorKind.INFRA, f"the Codex session failed: {type(err).__name__}: {err}")
        if report is None:
            hooks = patch_log.hook_record()
            report = session_outcome(None, crash, hooks, attempt=attempt.number)
        evidence = {
            "agent": "codex",
            "model": self.model,
            "refusals": patch_log.refusals,
            "tools": [t.name for t in tools],
            "followups": patch_log.followups,
        }
        save_record(attempt, evidence, patch_log.hook_ms, patch_log.result, report, started)
        return report

    async def _session(
        self, attempt: Attempt, sockets: tuple[str, str], limit: float, patch_log: PatchLog
    ) -> AttemptReport:
        """Start Codex on the attempt's private config, trust its hooks, run the thread."""
        env = self._prepare(attempt, sockets, limit)
        codex = AsyncCodex(CodexConfig(cwd=str(attempt.workdir), env=env))
        try:
            await codex.__aenter__()
            await trust_hooks(codex, attempt.workdir)
            thread = await codex.thread_start(
                cwd=str(attempt.workdir),
                model=self.model,
                sandbox=Sandbox.full_access,
                approval_mode=ApprovalMode.deny_all,
            )
            return await self._converse(attempt, thread, patch_log)
        finally:
            await codex.close()

    def _prepare(self, attempt: Attempt, sockets: tuple[str, str], limit: float) -> dict[str, str]:
        """Write the session's `config.toml` (hooks to the gate's socket, the tools' proxy
        to the tools' socket) into a fresh CODEX_HOME; the session's environment."""
        home = codex_home(attempt)
        gate_path, tools_path = sockets
        hook = f"{shlex.quote(sys.executable)} -m codefleet.fleet.gate.codexbridge {shlex.quote(gate_path)}"
        proxy = (sys.executable, "-m", "codefleet.session.codexread", tools_path)
        timeout = math.ceil(limit + TOOL_MARGIN_S) if limit else None
        (home / "config.toml").write_text(
            config_toml(self.provider, hook, HOOK_TIMEOUT_S, proxy, timeout)
        )
        return {
            "CODEX_HOME": str(home),
            "HOME": str(home),
            **(self.env(attempt) if self.env else {}),
        }

    async def _converse(
        self, attempt: Attempt, thread: AsyncThread, patch_log: PatchLog
    ) -> AttemptReport:
        """The first turn, the operator's messages (`hear_operator`), then the reconcile
        turns `settle_reads` asks for: each a user message on the same Codex thread."""

        async def turn(message: str) -> AttemptReport:
            end = await drain((await thread.turn(message)).stream())
            patch_log.result = session_result(end, thread.id, self.model)
            hooks = patch_log.hook_record()
            report = session_outcome(patch_log.result, None, hooks, attempt=attempt.number)
            report, patch_log.spent = this_turn(report, patch_log.spent)
            return report

        async def follow_up(message: str) -> AttemptReport:
            patch_log.followups.append(message)
            return await turn(message)

        first = await turn(attempt_prompt(attempt, self.prompt_marker, CODEX_RULES))
        first = await hear_operator(attempt.inbox, first, follow_up)
        return await finish_session(attempt, first, follow_up)


async def trust_hooks(codex: AsyncCodex, workdir: Path) -> None:
    """Trust CodeFleet's hooks through Codex's RPCs; `UntrustedHooks` unless both then are."""
    client = codex._client  # the one reach into the SDK: its typed request (pinned 0.163.0)
    params: JsonObject = {"cwds": [str(workdir)]}
    listed = await client.request("hooks/list", params, response_model=HooksListResponse)
    state: JsonObject = {
        meta.key: {"trusted_hash": meta.current_hash}
        for meta in _hooks(listed)
        if meta.trust_status is not HookTrustStatus.trusted
    }
    if state:
        edit: JsonObject = {"keyPath": "hooks.state", "mergeStrategy": "upsert", "value": state}
        body: JsonObject = {"edits": [edit], "reloadUserConfig": True}
        await client.request("config/batchWrite", body, response_model=ConfigWriteResponse)
    listed = await client.request("hooks/list", params, response_model=HooksListResponse)
    trusted = {
        m.event_name.value for m in _hooks(listed) if m.trust_status is HookTrustStatus.trusted
    }
    if not set(HOOK_EVENTS) <= trusted:
        raise UntrustedHooks(
            f"Codex did not trust CodeFleet's patch hooks (trusted: {sorted(trusted)})"
        )


def _hooks(listed: HooksListResponse) -> list[Any]:
    return [getattr(h, "root", h) for entry in listed.data for h in entry.hooks]


async def drain(stream: AsyncIterator[Any]) -> TurnEnd:
    """Read the turn's notifications to its end: the final text, token totals, the error."""
    tokens_in = tokens_out = 0
    texts: list[str] = []
    async for event in stream:
        payload = event.payload
        if isinstance(payload, ItemCompletedNotification):
            texts += _agent_texts([payload.item])
        elif isinstance(payload, ThreadTokenUsageUpdatedNotification):
            total = payload.token_usage.total
            tokens_in, tokens_out = total.input_tokens, total.output_tokens
        elif isinstance(payload, TurnCompletedNotification):
            turn = payload.turn
            error = turn.error
            return TurnEnd(
                status=turn.status.value,
                text=next(reversed(texts + _agent_texts(turn.items or [])), None),
                error=error.message if error else None,
                http_status=_http_status(error.codex_error_info) if error else None,
                tokens_in=tokens_in,
                tokens_out=tokens_out,
            )
    return TurnEnd(status="failed", error="the turn ended without turn/completed")


def _agent_texts(items: list[Any]) -> list[str]:
    roots = [getattr(item, "root", item) for item in items]
    return [r.text for r in roots if getattr(r, "type", "") == "agentMessage" and r.text]


def _http_status(info: Any) -> int | None:
    """The HTTP status a turn error carries, wherever Codex put it (429 for a usage limit)."""
    if info is None:
        return None
    root = getattr(info, "root", info)
    if getattr(root, "value", None) in {"usageLimitExceeded", "rateLimitExceeded"}:
        return 429
    for detail in vars(root).values() if hasattr(root, "__dict__") else ():
        status = getattr(detail, "http_status_code", None)
        if isinstance(status, int):
            return status
    return None
