"""CodeFleet's own tools of one attempt, whatever agent runs it: one definition of each.

A tool is its name, description, JSON schema and an async call on the attempt's own
objects, answering text (and whether it is an error). The Claude Code executor serves
these as an in-process SDK MCP server (`session.sdk`); the Codex executor serves the
same table on an attempt-owned Unix socket that its MCP stdio proxy forwards each call
to (`session.codexread`), so both agents run the same code in the runner's process:

- `acquire_resource`, `next_number`, `allocate_port` always (`fleet.tools.resourcecalls`);
- `run_check(name)` when the operator defined checks (the attempt's `Checker`);
- `run_command(command, timeout_s)` when the task has the shell (its `CommandRunner`);
- `ask_operator(question)` when the attempt may ask (its `Asker`);
- for Codex only, which has no read tool without a shell, `read_file(path)` and
  `list_files(path)`: confined to the tree by the pre-write gate's own path function
  (`paths.TreeRoot.canonical`, `.git` refused), and each file read is kept in the
  attempt's read set from the very bytes the model is shown (`fleet.gate.readset.look`), so
  stale reads are found for Codex as for a Claude Code `Read`.

No SDK import: the agents' wire shapes are built by their executors (`mcp_result` is
the plain MCP one, for the Codex proxy).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from codefleet.fleet.executor import Attempt
from codefleet.fleet.gate.prewrite import WriteGate
from codefleet.fleet.gate.readset import ReadLog, look
from codefleet.fleet.tools.ask import Asker
from codefleet.fleet.tools.attemptchecks import CHECK_TOOL, Checker
from codefleet.fleet.tools.commandtool import (
    COMMAND_TOOL,
    DEFAULT_COMMAND_TIMEOUT_S,
    MAX_COMMAND_TIMEOUT_S,
    CommandRunner,
)
from codefleet.fleet.tools.resourcecalls import Answer, ResourceTools
from codefleet.models import CheckPurpose
from codefleet.paths import PathRejected, TreeRoot

__all__ = [
    "ASK_TOOL",
    "READ_FILE_TOOL",
    "SessionTool",
    "ToolAnswer",
    "mcp_result",
    "read_tools",
    "session_tools",
]

log = logging.getLogger(__name__)

ASK_TOOL: Final = "ask_operator"
READ_FILE_TOOL: Final = "read_file"
LIST_FILES_TOOL: Final = "list_files"
ASK_MARGIN_S: Final = 60.0  # past the question timeout: the runner's own bound comes first
RESULT_CHARS: Final = 50_000  # a check's or command's output kept inline
MAX_READ_CHARS: Final = 200_000
MAX_LIST: Final = 2_000
RESOURCE_HELP: Final = (
    "Take a named resource (a database, a build directory: e.g. db) for the rest of this task, "
    "before you use it. If another task holds it you are told to stop: do so."
)
NUMBER_HELP: Final = (
    "The next number of a fleet-wide sequence (e.g. migrations): unique across all agents, "
    "never handed out twice. Use it for a new numbered file instead of counting files yourself."
)
PORT_HELP: Final = "A TCP port free on this host and reserved for this task until it ends."
ASK_HELP: Final = (
    "Ask the person who runs this fleet a question, when the task is unclear and a wrong "
    "guess would be costly. Waits for the answer (which may be 'No answer: use your best "
    "judgment ...'). Ask rarely; decide small things yourself."
)
COMMAND_HELP: Final = (
    "Run a shell command in a private layer over the shared tree (your edits and all "
    "finished work). The files it changes are applied to the shared tree through the "
    "same file leases as a Write, all or nothing; if another agent holds one of them, "
    "nothing is applied and you must stop. Returns the exit code, wall time, output "
    "(tail) and the applied / kept out / refused files."
)
READ_HELP: Final = "Read a text file of the shared working tree (a path relative to it)."
LIST_HELP: Final = "List the files under a directory of the shared working tree (default: all)."


@dataclass(frozen=True, slots=True)
class ToolAnswer:
    text: str
    is_error: bool = False


@dataclass(frozen=True, slots=True)
class SessionTool:
    """One tool: what the model is told, and the call on the attempt's objects."""

    name: str
    description: str
    schema: dict[str, Any]
    call: Callable[[dict[str, Any]], Awaitable[ToolAnswer]]
    result_chars: int | None = None  # a long result the agent should keep inline


def session_tools(attempt: Attempt, *, reads: bool = False) -> tuple[list[SessionTool], float]:
    """The attempt's tools and the longest one call may take, in seconds (0: none waits
    past the agent's default). `reads`: also `read_file` and `list_files` (Codex)."""
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
    if reads:
        found += read_tools(attempt.gate.tree, attempt.reads)
    return found, limit


def _schema(required: Sequence[str] = (), **properties: dict[str, Any]) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    return schema


def _string(description: str | None = None) -> dict[str, Any]:
    return {"type": "string", **({"description": description} if description else {})}


def resource_tools(gate: WriteGate) -> list[SessionTool]:
    """`acquire_resource(name)`, `next_number(sequence)`, `allocate_port()`."""
    tools = ResourceTools(gate)

    def answered(answer: Answer) -> ToolAnswer:
        return ToolAnswer(answer.text, not answer.ok)

    async def acquire_resource(args: dict[str, Any]) -> ToolAnswer:
        return answered(await tools.acquire_resource(str(args.get("name") or "")))

    async def next_number(args: dict[str, Any]) -> ToolAnswer:
        return answered(await tools.next_number(str(args.get("sequence") or "")))

    async def allocate_port(args: dict[str, Any]) -> ToolAnswer:
        return answered(await tools.allocate_port())

    return [
        SessionTool("acquire_resource", RESOURCE_HELP, _schema(["name"], name=_string()),
                    acquire_resource),
        SessionTool("next_number", NUMBER_HELP, _schema(["sequence"], sequence=_string()),
                    next_number),
        SessionTool("allocate_port", PORT_HELP, _schema(), allocate_port),
    ]  # fmt: skip


def check_tool(checker: Checker) -> SessionTool:
    """`run_check(name)`: run one of the operator's named checks for this attempt."""
    description = (
        "Run one of the operator's named checks (tests, linters) in a private view of the "
        "shared tree holding your edits and all finished work, never other agents' unfinished "
        "edits; nothing it writes reaches the tree. Returns the verdict, exit code and output "
        f"(tail). Available checks: {', '.join(checker.names)}."
    )

    async def run_check(args: dict[str, Any]) -> ToolAnswer:
        result = await checker.run(str(args.get("name") or ""), CheckPurpose.TOOL)
        return ToolAnswer(result.render(), result.refused is not None)

    schema = _schema(["name"], name=_string("The check's name."))
    return SessionTool(CHECK_TOOL, description, schema, run_check, RESULT_CHARS)


def command_tool(commands: CommandRunner) -> SessionTool:
    """`run_command(command, timeout_s)`: this attempt's command tool (`fleet.tools.commandtool`)."""

    async def run_command(args: dict[str, Any]) -> ToolAnswer:
        timeout = args.get("timeout_s")
        result = await commands.run(
            str(args.get("command") or "true"),
            float(timeout) if isinstance(timeout, int | float) else DEFAULT_COMMAND_TIMEOUT_S,
        )
        return ToolAnswer(
            result.render(), result.refused is not None or result.applied.denied is not None
        )

    limit = f"Time limit in seconds (default 120, at most {MAX_COMMAND_TIMEOUT_S:g})."
    schema = _schema(
        ["command"],
        command=_string("The shell command line."),
        timeout_s={"type": "number", "description": limit},
    )
    return SessionTool(COMMAND_TOOL, COMMAND_HELP, schema, run_command, RESULT_CHARS)


def ask_tool(asker: Asker) -> SessionTool:
    """`ask_operator(question)`: ask the person who runs the fleet; returns the answer."""

    async def ask_operator(args: dict[str, Any]) -> ToolAnswer:
        return ToolAnswer(
            await asker.ask(str(args.get("question") or "").strip() or "(empty question)")
        )

    schema = _schema(["question"], question=_string("One short question."))
    return SessionTool(ASK_TOOL, ASK_HELP, schema, ask_operator)


def read_tools(tree: TreeRoot, reads: ReadLog) -> list[SessionTool]:
    """`read_file(path)` (each file read kept in `reads`) and `list_files(path)`."""

    async def read_file(args: dict[str, Any]) -> ToolAnswer:
        raw = str(args.get("path") or "")
        key = _key(tree, raw)
        if isinstance(key, ToolAnswer):
            return key
        seen = look(tree.root, key, READ_FILE_TOOL)
        if seen.sha256 is None:
            return ToolAnswer(f"{raw} is not a file of the tree.", True)
        reads.keep(seen)
        try:
            data = seen.content if seen.content is not None else (tree.root / key).read_bytes()
        except OSError as err:
            return ToolAnswer(f"{raw} cannot be read: {err.strerror or err}.", True)
        return ToolAnswer(data.decode("utf-8", errors="replace")[:MAX_READ_CHARS])

    async def list_files(args: dict[str, Any]) -> ToolAnswer:
        raw = str(args.get("path") or ".")
        key = _key(tree, raw) if raw not in (".", "") else ""
        if isinstance(key, ToolAnswer):
            return key
        return _listing(tree, tree.root / key if key else tree.root, raw)

    return [
        SessionTool(READ_FILE_TOOL, READ_HELP, _schema(["path"], path=_string()), read_file),
        SessionTool(LIST_FILES_TOOL, LIST_HELP, _schema(path=_string()), list_files),
    ]


def _key(tree: TreeRoot, raw: str) -> str | ToolAnswer:
    try:
        return tree.canonical(raw)
    except PathRejected as err:
        return ToolAnswer(f"{raw} cannot be read: {err.message}.", True)


def _listing(tree: TreeRoot, target: Path, raw: str) -> ToolAnswer:
    if not target.is_dir():
        return ToolAnswer(f"{raw} is not a directory of the tree.", True)
    found: list[str] = []
    for path in sorted(target.rglob("*")):
        if len(found) >= MAX_LIST:
            break
        relative = path.relative_to(tree.root).as_posix()
        if path.is_file() and ".git" not in relative.split("/"):
            found.append(relative)
    return ToolAnswer("\n".join(found) or "(no files)")


async def mcp_result(tools: Sequence[SessionTool], method: str, params: Any) -> dict[str, Any]:
    """The MCP `result` of `tools/list` or `tools/call` over `tools`; anything else, or an
    unknown tool, is a tool error the model reads."""
    if method == "tools/list":
        listed = [
            {"name": t.name, "description": t.description, "inputSchema": t.schema} for t in tools
        ]
        return {"tools": listed}
    params = params if isinstance(params, dict) else {}
    name, arguments = str(params.get("name") or ""), params.get("arguments")
    chosen = next((t for t in tools if t.name == name), None)
    if method != "tools/call" or chosen is None:
        answer = ToolAnswer(f"CodeFleet has no tool {name or method!r} in this session.", True)
    else:
        try:
            answer = await chosen.call(arguments if isinstance(arguments, dict) else {})
        except Exception as err:  # a tool's failure is an answer the model reads
            log.warning("the %s tool failed", name, exc_info=True)
            answer = ToolAnswer(f"{name} failed: {type(err).__name__}: {err}", True)
    return {"content": [{"type": "text", "text": answer.text}], "isError": answer.is_error}
