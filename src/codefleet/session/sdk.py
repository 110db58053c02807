"""The SDK executor: one attempt = one real Claude Code session (DESIGN §7).

Each attempt runs the CLI the SDK bundles with `dontAsk`, the read/write file
tools and nothing else (no Bash, no subagents), no filesystem settings, strict
MCP config, cwd = the shared tree, and the model, turn and budget limits from
settings. The hooks that hold the session to the lock (the write gate, the read
guard, the ledger and the read set) are `session.attempthooks`; what the CLI's
stream says (the init frame, a usage limit, the result, a crash) is read by
`session.clistream`. Failures are mapped in `session_outcome` (whose docstring
has the full order): a vetoed write -> VETO; budget or turn stop -> BUDGET; an
API error result -> INFRA (429 or 529 -> RATE_LIMITED); a CLI that cannot start,
breaks its pipe or dies without a result frame -> INFRA, since the environment
failed, not the agent; a result with `is_error` otherwise -> AGENT_ERROR. A
`ResultError` raised after the `ResultMessage` was yielded is expected: the
result decides.

Reads: the session is a `session.conversation.Conversation`: after its first
turn ends well, the attempt's reads are validated (`fleet.reconcile`) and a
reconcile turn is one more user message in the same conversation; its usage
counts to the attempt. So is a repair turn after a failed verify
(`fleet.repair`); a repair attempt after a failed landing resumes the session
that made the change (the SDK's `resume`), its first message the repair.

Cancellation (the runner's wall clock, or fencing) kills the CLI process with
SIGKILL before the SDK closes the transport, so nothing outlives the attempt.
The SDK does not expose the child, so we build its `SubprocessCLITransport`
ourselves and read its `_process` (`session.clistream.kill_cli`).

In-process tools: every session gets an in-process MCP server `codefleet`
(docs/decisions/0028-the-check-tool-is-an-in-process-mcp-server.md, "The check tool is an in-process MCP server"), built in
one place (`session_mcp_tools`, each tool in `tools` and `allowed_tools`) from
the tool table a Codex session gets too (`session.tools`, one definition each):
`acquire_resource`, `next_number` and `allocate_port` always
(`fleet.tools.resourcecalls`; docs/decisions/0109-every-session-gets-the-resource-tools.md, "Every session gets the resource
tools"); `run_check(name)` (`mcp__codefleet__run_check`) when the operator
defined named checks, which calls the attempt's `Checker`; with the shell
(`attempt.commands`), `run_command(command, timeout_s)`
(`mcp__codefleet__run_command`), which calls the attempt's `CommandRunner`:
still no Bash; and `ask_operator(question)` (`mcp__codefleet__ask_operator`)
when the attempt may ask (`Attempt.ask`: the server's question timeout is not
0 and the graph did not say `ask: false`), which waits for the answer through
`fleet.tools.ask` (docs/decisions/0124-a-question-waits-on-the-heartbeat.md, "A question waits on the heartbeat"). After
the first turn, the operator's messages that arrived meanwhile are one more
turn (`fleet.tools.inbox.hear_operator`).

A read-only conversation for `codefleet plan` is `session.readonly`, built
from the same hardened options and helpers.

Every attempt leaves `run_dir/sessions/<task>-attempt<n>.json` and a stderr
log (`session.sessionfiles`): the CLI's `init` frame (tools, model, permission mode,
cwd, MCP servers: the proof the session was hermetic), the outcome, the hook
timings and the checks the agent ran.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, Final

from claude_agent_sdk import (
    ClaudeAgentOptions,
    SdkMcpTool,
    ToolAnnotations,
    create_sdk_mcp_server,
    tool,
)
from claude_agent_sdk._internal.transport.subprocess_cli import SubprocessCLITransport

from codefleet.attempt import AttemptReport
from codefleet.fleet.executor import Attempt
from codefleet.fleet.repair import finish_session, opening
from codefleet.fleet.tools.attemptchecks import CHECK_TOOL
from codefleet.fleet.tools.commandtool import COMMAND_TOOL
from codefleet.fleet.tools.inbox import hear_operator
from codefleet.models import utcnow
from codefleet.session.attempthooks import (
    HOOK_TIMEOUT_S,
    AttemptLog,
    hook_matchers,
    settle,
    write_hook_timeout,
)
from codefleet.session.clistream import (
    classify_crash,
    kill_cli,
    seconds_until,
    session_result,
    watch,
)
from codefleet.session.conversation import Conversation, no_input
from codefleet.session.outcome import Spent, session_outcome, this_turn
from codefleet.session.sessionfiles import StderrFile, save_record, stderr_path
from codefleet.session.taskprompt import attempt_prompt
from codefleet.session.tools import ASK_TOOL, SessionTool, session_tools

__all__ = [
    "ASK_TOOL_NAME",
    "CHECK_TOOL_NAME",
    "COMMAND_TOOL_NAME",
    "MAX_BUFFER_SIZE",
    "RESOURCE_TOOL_NAMES",
    "SESSION_TOOLS",
    "SessionExecutor",
]

SESSION_TOOLS: Final = ("Read", "Write", "Edit", "MultiEdit", "NotebookEdit", "Glob", "Grep")
CHECK_SERVER: Final = "codefleet"
CHECK_TOOL_NAME: Final = f"mcp__{CHECK_SERVER}__{CHECK_TOOL}"
ASK_TOOL_NAME: Final = f"mcp__{CHECK_SERVER}__{ASK_TOOL}"
COMMAND_TOOL_NAME: Final = f"mcp__{CHECK_SERVER}__{COMMAND_TOOL}"
RESOURCE_TOOL_NAMES: Final = [
    f"mcp__{CHECK_SERVER}__{name}" for name in ("acquire_resource", "next_number", "allocate_port")
]
MCP_TIMEOUT_MARGIN_S: Final = 60.0  # the CLI's own limit on a tool call, past the check's
CHECK_MARGIN_S: Final = 1.0  # our own check gives up first, with a readable reason
MAX_BUFFER_SIZE: Final = 16 * 1024 * 1024  # one stream-json line can carry a whole file
REAP_WAIT_S: Final = 5.0

EnvFor = Callable[[Attempt], Mapping[str, str]]
MarkerFor = Callable[[Attempt], str | None]


# -- the tools ----------------------------------------------------------------------


def session_mcp_tools(attempt: Attempt) -> tuple[list[SdkMcpTool[Any]], float]:
    """The attempt's tools (`session.tools`, the same table a Codex session gets) as SDK
    MCP tools, and the longest a call of one may take, in seconds."""
    found, limit = session_tools(attempt)
    return [sdk_tool(t) for t in found], limit


def sdk_tool(found: SessionTool) -> SdkMcpTool[Any]:
    """One of CodeFleet's tools as an in-process SDK MCP tool."""
    size = found.result_chars
    annotations = ToolAnnotations(maxResultSizeChars=size) if size else None

    async def call(args: dict[str, Any]) -> dict[str, Any]:
        answer = await found.call(args)
        return {"content": [{"type": "text", "text": answer.text}], "is_error": answer.is_error}

    return tool(found.name, found.description, found.schema, annotations)(call)


# -- the executor -------------------------------------------------------------------


class SessionExecutor:
    """Runs each attempt as a real Claude Code session; see the module docstring."""

    def __init__(
        self,
        *,
        model: str | None = None,
        max_turns: int = 40,
        max_budget_usd: float = 0.50,
        env: EnvFor | None = None,
        prompt_marker: MarkerFor | None = None,
        hook_timeout: float = HOOK_TIMEOUT_S,
    ) -> None:
        self.model = model
        self.max_turns = max_turns
        self.max_budget_usd = max_budget_usd
        self.env = env
        self.prompt_marker = prompt_marker
        self.hook_timeout = hook_timeout
        self.hook_timings_ms: list[float] = []  # every hook call of every attempt, for reports
        # each session's usage so far, by id: a resumed session's CLI reports its totals
        # since the session began, and a repair attempt counts only its own turns
        self.spent: dict[str, Spent] = {}

    async def run(self, attempt: Attempt) -> AttemptReport:
        attempt_log = AttemptLog(
            attempt.gate,
            max(0.5, write_hook_timeout(self.hook_timeout, attempt.gate) - CHECK_MARGIN_S),
            record_read=attempt.record_read,
        )
        started = utcnow()
        outcome: AttemptReport | None = None
        attempt_log.spent = self.spent.get(attempt.task.repair_session or "", attempt_log.spent)
        try:
            with StderrFile(stderr_path(attempt), attempt) as stderr:
                options = self.options(attempt, attempt_log, stderr.write)
                prompt = opening(attempt) or attempt_prompt(attempt, self.prompt_marker)
                outcome = await _reaping(
                    _converse(attempt, prompt, options, attempt_log), attempt_log
                )
            return outcome
        finally:
            self.hook_timings_ms.extend(attempt_log.hook_ms)
            if outcome is not None and outcome.session_id:
                self.spent[outcome.session_id] = attempt_log.spent
            evidence = {
                "cli_pid": attempt_log.cli_pid,
                "init": attempt_log.init,
                "refusals": attempt_log.refusals,
                "read_refusals": attempt_log.read_refusals,
                "followups": attempt_log.followups,
            }
            save_record(
                attempt, evidence, attempt_log.hook_ms, attempt_log.result, outcome, started
            )

    def options(
        self, attempt: Attempt, attempt_log: AttemptLog, stderr: Callable[[str], None]
    ) -> ClaudeAgentOptions:
        """The session options of DESIGN §7 for this attempt (plus the check tool, if any)."""
        tools, servers = list(SESSION_TOOLS), dict[str, Any]()
        env = dict(self.env(attempt)) if self.env else {}
        mcp_tools, limit = session_mcp_tools(attempt)
        tools.extend(f"mcp__{CHECK_SERVER}__{t.name}" for t in mcp_tools)
        servers[CHECK_SERVER] = create_sdk_mcp_server(CHECK_SERVER, tools=mcp_tools)
        if limit:
            env.setdefault("MCP_TOOL_TIMEOUT", str(int((limit + MCP_TIMEOUT_MARGIN_S) * 1000)))
        return ClaudeAgentOptions(
            tools=tools,
            allowed_tools=list(tools),
            mcp_servers=servers,
            permission_mode="dontAsk",
            setting_sources=[],
            strict_mcp_config=True,
            cwd=str(attempt.workdir),
            model=self.model,
            max_turns=self.max_turns,
            max_budget_usd=self.max_budget_usd,
            max_buffer_size=MAX_BUFFER_SIZE,
            stderr=stderr,
            env=env,
            hooks=hook_matchers(attempt_log, self.hook_timeout),
            system_prompt={"type": "preset", "preset": "claude_code"},
            resume=attempt.task.repair_session,  # a repair: the session that made the change
        )


# -- running and reaping the CLI ------------------------------------------------------


async def _reaping(
    session: Coroutine[Any, Any, AttemptReport], attempt_log: AttemptLog
) -> AttemptReport:
    """Run the session; if we are cancelled, SIGKILL the CLI first, then let the SDK close."""
    drain = asyncio.create_task(session)
    try:
        return await asyncio.shield(drain)
    except asyncio.CancelledError:
        kill_cli(attempt_log)
        drain.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await asyncio.wait_for(drain, REAP_WAIT_S)
        raise


async def _converse(
    attempt: Attempt, prompt: str, options: ClaudeAgentOptions, attempt_log: AttemptLog
) -> AttemptReport:
    """The first turn, the operator's messages (`hear_operator`), then the reconcile turns
    `settle_reads` asks for, in one conversation."""
    transport = SubprocessCLITransport(prompt=no_input(), options=options)
    attempt_log.transport = transport
    async with Conversation(options, transport, lambda m: watch(m, attempt_log)) as talk:

        async def follow_up(message: str) -> AttemptReport:
            attempt_log.followups.append(message)
            return await _turn(talk, message, attempt, attempt_log)

        first = await _turn(talk, prompt, attempt, attempt_log)
        first = await hear_operator(attempt.inbox, first, None if talk.broken else follow_up)
        return await finish_session(attempt, first, None if talk.broken else follow_up)


async def _turn(
    talk: Conversation, message: str, attempt: Attempt, attempt_log: AttemptLog
) -> AttemptReport:
    """One user message's turn as a report, with this turn's usage only."""
    result, error = await talk.send(message)
    await settle(attempt_log.pending)
    crash = classify_crash(error) if error is not None else None
    found = (
        None
        if result is None
        else session_result(result, seconds_until(attempt_log.limit_resets_at))
    )
    attempt_log.result = found or attempt_log.result
    report = session_outcome(found, crash, attempt_log.hook_record(), attempt=attempt.number)
    report, attempt_log.spent = this_turn(report, attempt_log.spent)
    return report
