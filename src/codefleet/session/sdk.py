"""The SDK executor: one attempt = one real Claude Code session (DESIGN §7).

With `session.readonly`, the only module that imports `claude_agent_sdk`. Each attempt runs the CLI the
SDK bundles with `dontAsk`, the read/write file tools and nothing else (no
Bash, no subagents), no filesystem settings, strict MCP config, cwd = the
shared tree, and the model, turn and budget limits from settings.

The PreToolUse hook (matcher `Write|Edit|MultiEdit|NotebookEdit`,
`on_failure="block"`) calls the attempt's `WriteGate` and answers `{}` (no
objection: never `permissionDecision: "allow"`, which would override
`dontAsk`) or `deny(reason)`. Anything unexpected in the hook is a denial; a
raised exception, `None`, a malformed answer or a timeout is blocked by the
CLI itself because of `on_failure="block"`. PostToolUse records the ledger
row in the background (bounded, never vetoes). The hook times itself (entry
to decision) so the coordination overhead can be reported.

Failures, mapped in `session_outcome` (whose docstring has the full order):
a vetoed write -> VETO; budget or turn stop -> BUDGET; an API error result ->
INFRA (429 or 529 -> RATE_LIMITED); a CLI that cannot start or whose pipe breaks
(`CLIConnectionError`, incl. not found) or that dies without a result frame
(`ProcessError`, JSON garbage) -> INFRA, since the environment failed, not the
agent; a result with `is_error` otherwise -> AGENT_ERROR. A `ResultError`
raised after the `ResultMessage` was yielded is expected: the result decides.

When a limit lifts: the CLI keeps an API's `retry-after` header to itself
(it waits out a short one within its own retries and gives up at once on a
long one, measured with CLI 2.1.332). Under a subscription login it reports
the limit as a `RateLimitEvent` with `status="rejected"` and `resets_at` (Unix
seconds) before the error result; that becomes the outcome's `retry_after_s`
(docs/decisions.md, "What a session knows about a usage limit").

Reads: PostToolUse for `Read` (and `NotebookRead`) records each file read in
the attempt's read set (`fleet.reads`, in process). The session is a
`session.conversation.Conversation`: after its first turn ends well, the
attempt's reads are validated (`fleet.reconcile`) and a reconcile turn is one
more user message in the same conversation; its usage counts to the attempt.

Cancellation (the runner's wall clock, or fencing) kills the CLI process with
SIGKILL before the SDK closes the transport, so nothing outlives the attempt.
The SDK does not expose the child, so we build its `SubprocessCLITransport`
ourselves and read its `_process` (pinned SDK 0.2.189; a CLI test pins it).

In-process tools: every session gets an in-process MCP server `codefleet`
(docs/decisions.md, "The check tool is an in-process MCP server"), built in
one place (`session_mcp_tools`, each tool in `tools` and `allowed_tools`):
`acquire_resource`, `next_number` and `allocate_port` always
(`fleet.resources`; docs/decisions.md, "Every session gets the resource
tools"); `run_check(name)` (`mcp__codefleet__run_check`) when the operator
defined named checks, which calls the attempt's `Checker`; with the shell
(`attempt.commands`), `run_command(command, timeout_s)`
(`mcp__codefleet__run_command`), which calls the attempt's `CommandRunner`:
still no Bash; and `ask_operator(question)` (`mcp__codefleet__ask_operator`)
when the attempt may ask (`Attempt.ask`: the server's question timeout is not
0 and the graph did not say `ask: false`), which waits for the answer through
`fleet.ask` (docs/decisions.md, "A question waits on the heartbeat"). After
the first turn, the operator's messages that arrived meanwhile are one more
turn (`fleet.inbox.hear_operator`).

A read-only conversation for `codefleet plan` is `session.readonly`, built
from the same hardened options and helpers.

Every attempt leaves `run_dir/sessions/<task>-attempt<n>.json` and a stderr
log (`session_record`): the CLI's `init` frame (tools, model, permission mode,
cwd, MCP servers: the proof the session was hermetic), the outcome, the hook
timings and the checks the agent ran.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final, cast

from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    CLIConnectionError,
    HookCallback,
    HookContext,
    HookInput,
    HookJSONOutput,
    HookMatcher,
    McpSdkServerConfig,
    RateLimitEvent,
    ResultMessage,
    SdkMcpTool,
    SystemMessage,
    ToolAnnotations,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
    create_sdk_mcp_server,
    tool,
)
from claude_agent_sdk._internal.transport.subprocess_cli import SubprocessCLITransport

from codefleet.attempt import AttemptReport
from codefleet.fleet.ask import Asker
from codefleet.fleet.checks import CHECK_TOOL, Checker
from codefleet.fleet.commands import (
    COMMAND_TOOL,
    DEFAULT_COMMAND_TIMEOUT_S,
    MAX_COMMAND_TIMEOUT_S,
    CommandRunner,
)
from codefleet.fleet.executor import Attempt
from codefleet.fleet.inbox import hear_operator
from codefleet.fleet.prewrite import WriteGate
from codefleet.fleet.reads import READ_RECORDED_TOOLS
from codefleet.fleet.reconcile import settle_reads
from codefleet.fleet.resources import Answer, ResourceTools
from codefleet.hook.io import deny_output, extract_paths
from codefleet.hook.readguard import READ_TOOLS, read_refusal
from codefleet.models import WRITE_TOOLS, CheckPurpose, ErrorKind, utcnow
from codefleet.session.conversation import Conversation, no_input
from codefleet.session.credentials import CREDENTIAL_VARS, MissingCredentials, credentials_problem
from codefleet.session.outcome import Crash, HookRecord, SessionResult, session_outcome
from codefleet.session.prompt import build_prompt
from codefleet.session.record import StderrFile, record_path, save_record, stderr_path

__all__ = [
    "ASK_TOOL_NAME",
    "CHECK_TOOL_NAME",
    "COMMAND_TOOL_NAME",
    "CREDENTIAL_VARS",
    "SESSION_TOOLS",
    "WRITE_MATCHER",
    "MissingCredentials",
    "SessionExecutor",
    "credentials_problem",
    "deny",
    "make_check_server",
    "make_post_tool_use",
    "make_pre_tool_use",
    "record_path",
]

log = logging.getLogger(__name__)

SESSION_TOOLS: Final = ("Read", "Write", "Edit", "MultiEdit", "NotebookEdit", "Glob", "Grep")
WRITE_MATCHER: Final = "Write|Edit|MultiEdit|NotebookEdit"
READ_MATCHER: Final = "|".join(READ_TOOLS)
READ_RECORD_MATCHER: Final = "|".join(sorted(READ_RECORDED_TOOLS))
CHECK_SERVER: Final = "codefleet"
CHECK_TOOL_NAME: Final = f"mcp__{CHECK_SERVER}__{CHECK_TOOL}"
ASK_TOOL: Final = "ask_operator"
ASK_TOOL_NAME: Final = f"mcp__{CHECK_SERVER}__{ASK_TOOL}"
ASK_MARGIN_S: Final = 60.0  # past the question timeout: the runner's own bound comes first
COMMAND_TOOL_NAME: Final = f"mcp__{CHECK_SERVER}__{COMMAND_TOOL}"
RESOURCE_TOOL_NAMES: Final = [
    f"mcp__{CHECK_SERVER}__{name}" for name in ("acquire_resource", "next_number", "allocate_port")
]
RESOURCE_HELP: Final = (
    "Take a named resource (a database, a build directory: e.g. db) for the rest of this task, "
    "before you use it. If another task holds it you are told to stop: do so."
)
NUMBER_HELP: Final = (
    "The next number of a fleet-wide sequence (e.g. migrations): unique across all agents, "
    "never handed out twice. Use it for a new numbered file instead of counting files yourself."
)
PORT_HELP: Final = "A TCP port free on this host and reserved for this task until it ends."
CHECK_RESULT_CHARS: Final = 50_000  # the CLI keeps a tool result up to this size inline
MCP_TIMEOUT_MARGIN_S: Final = 60.0  # the CLI's own limit on a tool call, past the check's
HOOK_TIMEOUT_S: Final = 8.0  # the CLI blocks the write if the hook takes longer
CHECK_MARGIN_S: Final = 1.0  # our own check gives up first, with a readable reason
RECORD_TIMEOUT_S: Final = 2.0
MAX_BUFFER_SIZE: Final = 16 * 1024 * 1024  # one stream-json line can carry a whole file
REAP_WAIT_S: Final = 5.0
# How CLI 2.1.332 words a tool_result for a write it blocked because the hook failed or was
# too slow (with on_failure="block"); a timeout is NOT listed in `permission_denials`.
CLI_HOOK_BLOCK_PREFIX: Final = "PreToolUse"
UNCHECKED = (
    "The write could not be checked against the other agents' leases, so it was refused. "
    "Do not retry it. Stop now and report that the write was refused."
)

EnvFor = Callable[[Attempt], Mapping[str, str]]
MarkerFor = Callable[[Attempt], str | None]


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
    spent: tuple[int, int, float] = (0, 0, 0.0)  # tokens in, out and cost of the turns so far
    followups: list[str] = field(default_factory=list)  # the messages after the first

    def hook_record(self) -> HookRecord:
        return HookRecord(
            blocked_on=self.gate.blocked_on,
            refusals=tuple(str(r["reason"]) for r in self.refusals),
            written=tuple(self.gate.written),
            rereads=len(self.rereads),
        )


# -- the hooks ----------------------------------------------------------------------


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


# -- the check tool -----------------------------------------------------------------


def make_check_server(checker: Checker) -> McpSdkServerConfig:
    """The in-process MCP server with the one `run_check(name)` tool of this attempt."""
    return create_sdk_mcp_server(CHECK_SERVER, tools=[check_tool(checker)])


def session_mcp_tools(attempt: Attempt) -> tuple[list[SdkMcpTool[Any]], float]:
    """The attempt's in-process tools and the longest a call of one may take, in seconds
    (0: no tool waits past the CLI's default). The resource tools always (a session cannot
    know in advance that it will need a number or a port); `run_check` with checks,
    `run_command` with the shell, `ask_operator` when the attempt may ask."""
    found = resource_tools(attempt.gate)
    limit = 0.0
    if attempt.checks is not None:
        found.append(check_tool(attempt.checks))
        limit = max(limit, attempt.checks.limits.timeout)
    if attempt.commands is not None:
        found.append(command_tool(attempt.commands))
        limit = max(limit, MAX_COMMAND_TIMEOUT_S)
    if attempt.ask is not None:
        found.append(ask_tool(attempt.ask))
        limit = max(limit, attempt.ask.timeout + ASK_MARGIN_S)
    return found, limit


def ask_tool(asker: Asker) -> SdkMcpTool[Any]:
    """`ask_operator(question)`: ask the person who runs the fleet; returns the answer."""
    description = (
        "Ask the person who runs this fleet a question, when the task is unclear and a wrong "
        "guess would be costly. Waits for the answer (which may be 'No answer: use your best "
        "judgment ...'). Ask rarely; decide small things yourself."
    )
    schema = {
        "type": "object",
        "properties": {"question": {"type": "string", "description": "One short question."}},
        "required": ["question"],
    }

    @tool(ASK_TOOL, description, schema)
    async def ask_operator(args: dict[str, Any]) -> dict[str, Any]:
        answer = await asker.ask(str(args.get("question") or "").strip() or "(empty question)")
        return {"content": [{"type": "text", "text": answer}]}

    return ask_operator


def command_tool(commands: CommandRunner) -> SdkMcpTool[Any]:
    """`run_command(command, timeout_s)`: this attempt's command tool (`fleet.commands`)."""
    description = (
        "Run a shell command in a private layer over the shared tree (your edits and all "
        "finished work). The files it changes are applied to the shared tree through the "
        "same file leases as a Write, all or nothing; if another agent holds one of them, "
        "nothing is applied and you must stop. Returns the exit code, wall time, output "
        "(tail) and the applied / kept out / refused files."
    )
    schema = {
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The shell command line."},
            "timeout_s": {
                "type": "number",
                "description": f"Time limit in seconds (default 120, at most {MAX_COMMAND_TIMEOUT_S:g}).",
            },
        },
        "required": ["command"],
    }

    @tool(COMMAND_TOOL, description, schema, ToolAnnotations(maxResultSizeChars=CHECK_RESULT_CHARS))
    async def run_command(args: dict[str, Any]) -> dict[str, Any]:
        timeout = args.get("timeout_s")
        result = await commands.run(
            str(args.get("command") or "true"),
            float(timeout) if isinstance(timeout, int | float) else DEFAULT_COMMAND_TIMEOUT_S,
        )
        failed = result.refused is not None or result.applied.denied is not None
        return {"content": [{"type": "text", "text": result.render()}], "is_error": failed}

    return run_command


def check_tool(checker: Checker) -> SdkMcpTool[Any]:
    """`run_check(name)`: run one of the operator's named checks for this attempt."""
    description = (
        "Run one of the operator's named checks (tests, linters) in a private copy of the "
        "shared tree holding your edits and all finished work, never other agents' unfinished "
        "edits; nothing it writes reaches the tree. Returns the verdict, exit code and output "
        f"(tail). Available checks: {', '.join(checker.names)}."
    )
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string", "description": "The check's name."}},
        "required": ["name"],
    }

    @tool(CHECK_TOOL, description, schema, ToolAnnotations(maxResultSizeChars=CHECK_RESULT_CHARS))
    async def run_check(args: dict[str, Any]) -> dict[str, Any]:
        result = await checker.run(str(args.get("name") or ""), CheckPurpose.TOOL)
        text = {"type": "text", "text": result.render()}
        return {"content": [text], "is_error": result.refused is not None}

    return run_check


def resource_tools(gate: WriteGate) -> list[SdkMcpTool[Any]]:
    """`acquire_resource(name)`, `next_number(sequence)`, `allocate_port()` over `fleet.resources`."""
    tools = ResourceTools(gate)

    def text(answer: Answer) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": answer.text}], "is_error": not answer.ok}

    def named(key: str) -> dict[str, Any]:
        return {"type": "object", "properties": {key: {"type": "string"}}, "required": [key]}

    @tool("acquire_resource", RESOURCE_HELP, named("name"))
    async def acquire_resource(args: dict[str, Any]) -> dict[str, Any]:
        return text(await tools.acquire_resource(str(args.get("name") or "")))

    @tool("next_number", NUMBER_HELP, named("sequence"))
    async def next_number(args: dict[str, Any]) -> dict[str, Any]:
        return text(await tools.next_number(str(args.get("sequence") or "")))

    @tool("allocate_port", PORT_HELP, {"type": "object", "properties": {}})
    async def allocate_port(args: dict[str, Any]) -> dict[str, Any]:
        return text(await tools.allocate_port())

    return [acquire_resource, next_number, allocate_port]


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

    async def run(self, attempt: Attempt) -> AttemptReport:
        attempt_log = AttemptLog(
            attempt.gate,
            max(0.5, self._write_hook_timeout(attempt) - CHECK_MARGIN_S),
            record_read=attempt.record_read,
        )
        started = utcnow()
        outcome: AttemptReport | None = None
        try:
            with StderrFile(stderr_path(attempt), attempt) as stderr:
                options = self.options(attempt, attempt_log, stderr.write)
                outcome = await _reaping(
                    _converse(attempt, self._prompt(attempt), options, attempt_log), attempt_log
                )
            return outcome
        finally:
            self.hook_timings_ms.extend(attempt_log.hook_ms)
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
            hooks=self.hooks(attempt_log),
            system_prompt={"type": "preset", "preset": "claude_code"},
        )

    def _write_hook_timeout(self, attempt: Attempt) -> float:
        """The pre-write hook's bound: a parked write may wait `lease_wait_s` on top."""
        return self.hook_timeout + attempt.gate.lease_wait_s

    def hooks(self, attempt_log: AttemptLog) -> dict[Any, list[HookMatcher]]:
        pre = HookMatcher(
            matcher=WRITE_MATCHER,
            hooks=[make_pre_tool_use(attempt_log)],
            timeout=self.hook_timeout + attempt_log.gate.lease_wait_s,
            on_failure="block",
        )
        reads = HookMatcher(
            matcher=READ_MATCHER,
            hooks=[make_read_guard(attempt_log)],
            timeout=self.hook_timeout,
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

    def _prompt(self, attempt: Attempt) -> str:
        marker = self.prompt_marker(attempt) if self.prompt_marker else None
        checks = attempt.checks.names if attempt.checks else ()
        return build_prompt(
            attempt.task,
            marker,
            checks,
            commands=attempt.commands is not None,
            ask=attempt.ask is not None,
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
        _kill_cli(attempt_log)
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
    async with Conversation(options, transport, lambda m: _watch(m, attempt_log)) as talk:

        async def follow_up(message: str) -> AttemptReport:
            attempt_log.followups.append(message)
            return await _turn(talk, message, attempt, attempt_log)

        first = await _turn(talk, prompt, attempt, attempt_log)
        first = await hear_operator(attempt.inbox, first, None if talk.broken else follow_up)
        return await settle_reads(attempt, first, None if talk.broken else follow_up)


async def _turn(
    talk: Conversation, message: str, attempt: Attempt, attempt_log: AttemptLog
) -> AttemptReport:
    """One user message's turn as a report, with this turn's usage only."""
    result, error = await talk.send(message)
    await _settle(attempt_log.pending)
    crash = classify_crash(error) if error is not None else None
    found = (
        None
        if result is None
        else session_result(result, seconds_until(attempt_log.limit_resets_at))
    )
    attempt_log.result = found or attempt_log.result
    report = session_outcome(found, crash, attempt_log.hook_record(), attempt=attempt.number)
    return _this_turn(report, attempt_log)


def _this_turn(report: AttemptReport, attempt_log: AttemptLog) -> AttemptReport:
    """The CLI's usage figures add up over a session: keep what this turn added."""
    tokens_in, tokens_out, cost = attempt_log.spent
    if report.input_tokens or report.output_tokens or report.cost_usd:
        attempt_log.spent = (report.input_tokens, report.output_tokens, report.cost_usd)
    return replace(
        report,
        input_tokens=max(0, report.input_tokens - tokens_in),
        output_tokens=max(0, report.output_tokens - tokens_out),
        cost_usd=max(0.0, report.cost_usd - cost),
    )


def _watch(message: Any, attempt_log: AttemptLog) -> None:
    """Keep the init frame, the CLI's pid and a rate limit's end; note write calls."""
    attempt_log.cli_pid = attempt_log.cli_pid or (
        _cli_pid(attempt_log.transport) if attempt_log.transport else None
    )
    if isinstance(message, SystemMessage) and message.subtype == "init":
        attempt_log.init = attempt_log.init or dict(message.data)
    elif isinstance(message, RateLimitEvent):
        attempt_log.limit_resets_at = limit_resets_at(message) or attempt_log.limit_resets_at
    elif not isinstance(message, ResultMessage):
        _watch_writes(message, attempt_log)


def limit_resets_at(event: RateLimitEvent) -> float | None:
    """When a limit the CLI says we hit lifts (Unix seconds); None for a mere warning."""
    info = event.rate_limit_info
    if info.status != "rejected" or not isinstance(info.resets_at, int | float):
        return None
    return float(info.resets_at)


def seconds_until(moment: float | None) -> float | None:
    """Seconds from now to a Unix time (never negative); None stays None."""
    return None if moment is None else max(0.0, moment - time.time())


def _watch_writes(message: Any, attempt_log: AttemptLog) -> None:
    """Note write calls, and the ones the CLI itself blocked because the hook failed."""
    if isinstance(message, AssistantMessage):
        for block in message.content:
            if isinstance(block, ToolUseBlock) and block.name in WRITE_TOOLS:
                attempt_log.write_calls[block.id] = block.name
    elif isinstance(message, UserMessage) and isinstance(message.content, list):
        for block in message.content:
            if isinstance(block, ToolResultBlock) and block.is_error:
                tool = attempt_log.write_calls.get(block.tool_use_id)
                text = _result_text(block.content)
                if (
                    tool
                    and text.startswith(CLI_HOOK_BLOCK_PREFIX)
                    and not _reread(text, attempt_log)
                ):
                    attempt_log.refusals.append(
                        {"tool": tool, "paths": [], "reason": text, "by": "cli"}
                    )


def _reread(text: str, attempt_log: AttemptLog) -> bool:
    """Is this blocked call's result our own "changed while you waited" answer?"""
    return any(str(r["reason"]) in text for r in attempt_log.rereads)


def _result_text(content: str | list[dict[str, Any]] | None) -> str:
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return content or ""


def classify_crash(err: BaseException) -> Crash:
    """A session failure without a result frame: the environment's fault -> INFRA."""
    what = (
        "could not start or talk to the Claude Code CLI"
        if isinstance(err, CLIConnectionError)
        else "the Claude Code CLI failed"
    )
    return Crash(ErrorKind.INFRA, f"{what}: {type(err).__name__}: {err}"[:2000])


def session_result(message: ResultMessage, retry_after_s: float | None = None) -> SessionResult:
    return SessionResult(
        retry_after_s=retry_after_s,
        subtype=message.subtype,
        is_error=message.is_error,
        text=message.result,
        session_id=message.session_id,
        total_cost_usd=message.total_cost_usd,
        model_usage={k: dict(v) for k, v in (message.model_usage or {}).items()},
        api_error_status=message.api_error_status,
        terminal_reason=message.terminal_reason,
        errors=tuple(message.errors or ()),
        permission_denials=len(
            [d for d in message.permission_denials or () if _tool_name(d) not in READ_TOOLS]
        ),
    )


def _tool_name(denial: Any) -> str | None:
    """The tool a `permission_denials` entry names (a refused read is not a failed write)."""
    return str(denial.get("tool_name")) if isinstance(denial, dict) else None


def _cli_pid(transport: SubprocessCLITransport) -> int | None:
    process = getattr(transport, "_process", None)
    pid = getattr(process, "pid", None)
    return pid if isinstance(pid, int) else None


def _kill_cli(attempt_log: AttemptLog) -> None:
    """SIGKILL the attempt's CLI process if it is still running."""
    process = getattr(attempt_log.transport, "_process", None)
    if process is None or process.returncode is not None:
        return
    attempt_log.cli_pid = attempt_log.cli_pid or process.pid
    with contextlib.suppress(ProcessLookupError):
        process.kill()


async def _settle(pending: set[asyncio.Task[None]]) -> None:
    """Wait (bounded) for the background ledger writes of this attempt."""
    if pending:
        await asyncio.wait(set(pending), timeout=RECORD_TIMEOUT_S)
