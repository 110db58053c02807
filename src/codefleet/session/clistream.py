"""What the Claude Code CLI tells the executor: its messages, its result, its process.

`watch` reads each message of the stream: it keeps the `init` frame (tools,
model, permission mode: the proof the session was hermetic), the CLI's pid, a
rate limit's end and the write calls the CLI itself blocked because the hook
failed. The CLI keeps an API's `retry-after` header to itself (measured with
CLI 2.1.332: it waits out a short one, gives up at once on a long one); under a
subscription login it reports the limit as a `RateLimitEvent` with
`status="rejected"` and `resets_at` (Unix seconds) before the error result, which
becomes the outcome's `retry_after_s` (docs/decisions/0055-what-a-session-knows-about-a-usage-limit.md, "What a session knows
about a usage limit"). `session_result` turns the `ResultMessage` into a
`SessionResult`; `classify_crash` turns a CLI that could not start, broke its
pipe or died without a result frame into an INFRA crash. The SDK does not
expose the child, so `cli_pid` and `kill_cli` read the transport's `_process`
(pinned SDK 0.2.189; a CLI test pins it): that reach is here only.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, Final

from claude_agent_sdk import (
    AssistantMessage,
    CLIConnectionError,
    RateLimitEvent,
    ResultMessage,
    SystemMessage,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
)
from claude_agent_sdk._internal.transport.subprocess_cli import SubprocessCLITransport

from codefleet.fleet.gate.readguard import READ_TOOLS
from codefleet.models import WRITE_TOOLS, ErrorKind
from codefleet.session.attempthooks import AttemptLog
from codefleet.session.outcome import Crash, SessionResult

__all__ = [
    "classify_crash",
    "cli_pid",
    "kill_cli",
    "limit_resets_at",
    "seconds_until",
    "session_result",
    "watch",
]

# How CLI 2.1.332 words a tool_result for a write it blocked because the hook failed or was
# too slow (with on_failure="block"); a timeout is NOT listed in `permission_denials`.
CLI_HOOK_BLOCK_PREFIX: Final = "PreToolUse"


def watch(message: Any, attempt_log: AttemptLog) -> None:
    """Keep the init frame, the CLI's pid and a rate limit's end; note write calls."""
    attempt_log.cli_pid = attempt_log.cli_pid or (
        cli_pid(attempt_log.transport) if attempt_log.transport else None
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


def cli_pid(transport: SubprocessCLITransport) -> int | None:
    """The CLI's process id, read from the transport's `_process` (pinned SDK)."""
    process = getattr(transport, "_process", None)
    pid = getattr(process, "pid", None)
    return pid if isinstance(pid, int) else None


def kill_cli(attempt_log: AttemptLog) -> None:
    """SIGKILL the attempt's CLI process if it is still running."""
    process = getattr(attempt_log.transport, "_process", None)
    if process is None or process.returncode is not None:
        return
    attempt_log.cli_pid = attempt_log.cli_pid or process.pid
    with contextlib.suppress(ProcessLookupError):
        process.kill()
