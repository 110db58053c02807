"""Shared pieces of the `codefleet` command line: panels, options, helpers.

Every setting of `config.Settings` is a `CODEFLEET_*` environment variable and
a flag on the commands it applies to; a flag wins over the environment, which
wins over `.env`. Read commands print JSON with `--json`. The CLI is an HTTP
client of the server (through `client`) except for `serve`, `demo` (which
start a server) and `doctor` (which checks the machine before anything runs).

The app (`cli.app`) imports a command's module only when that command runs, so
`codefleet --help` loads none of them, nor this module; a command module imports
what it uses at its top (`tests/unit/test_cli_imports.py`, decision 0169).
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from pydantic import ValidationError

from codefleet.api.client import (
    ApiError,
    FleetClient,
    ServerUnavailable,
    UntrustedServer,
)
from codefleet.api.graphfile import GraphError, parse_checks
from codefleet.api.treeserver import NotThisTree, tree_server
from codefleet.cli.app import app
from codefleet.cli.output import err_console, print_error
from codefleet.cli.settingopts import FLAGS, option
from codefleet.config import Settings
from codefleet.errors import DomainError, Unauthorized
from codefleet.models import AgentKind, Granularity

if TYPE_CHECKING:
    from collections.abc import Mapping


__all__ = ["app", "settings_from", "settings_of"]


# Help panels: `@app.command(rich_help_panel=RUN)` files a command under one (and its
# row in `cli.app.COMMANDS` names the same panel).
START = "Start here"
RUN = "Run a fleet"
OPERATE = "Inspect and operate"
REVIEW = "Review what the fleet did"


ServerOpt = Annotated[str | None, option("server_url")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
WorkdirOpt = Annotated[Path | None, option("workdir")]
RunDirOpt = Annotated[Path | None, option("run_dir")]
TokenOpt = Annotated[str | None, option("token")]
CheckOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--check",
        help="A named check NAME=COMMAND the agents may run and a task's verify: may name (repeatable).",
    ),
]


def parse_check_options(values: list[str] | None) -> dict[str, str]:
    """`--check NAME=CMD` values as `{name: command}`, validated like the graph's `checks:`."""
    checks: dict[str, str] = {}
    for value in values or ():
        name, sep, command = value.partition("=")
        if not sep:
            raise fail(f"--check {value!r}: expected NAME=COMMAND")
        checks[name.strip()] = command.strip()
    try:
        return parse_checks(checks, "--check")
    except GraphError as err:
        raise fail(str(err)) from None


def settings_from(*, find_server: bool = True, **overrides: Any) -> Settings:
    """Settings from env/.env with the flags the user actually gave on top.

    A setting that does not validate ends the command with one line per problem,
    naming the variable, never a traceback. `find_server`: a command that talks to a
    server reaches its tree's (`found_server`) unless told where.
    """
    given = {k: v for k, v in overrides.items() if v is not None}
    try:
        settings = Settings(**given)
    except ValidationError as err:
        problems = [_problem(e) for e in err.errors()]
        raise fail("; ".join(problems)) from None
    return found_server(settings) if find_server else settings


def settings_of(params: Mapping[str, Any], *, find_server: bool = True, **given: Any) -> Settings:
    """`settings_from` the command's setting parameters (`ctx.params`), and `given`, on top.

    A command parameter named like a setting is that setting's flag
    (`cli.settingopts`); the command's other parameters are not settings.
    """
    chosen = {k: v for k, v in params.items() if k in FLAGS}
    return settings_from(find_server=find_server, **chosen, **given)


def found_server(settings: Settings) -> Settings:
    """`settings` pointed at the live server of the tree they are in, unless the server's
    address was given (`--server`, `--host`/`--port`, `CODEFLEET_*`, `.env`): the record
    in `.codefleet/server.json`, nearest first from the tree up, once it has shown it is this
    tree's CodeFleet server (`api.treeserver.tree_server`; one line and the exit if not).
    Says which server on stderr when it is not the default."""
    if settings.model_fields_set & {"server_url", "host", "port"}:
        return settings
    try:
        record = tree_server(settings.workdir)
    except NotThisTree as err:
        raise fail(str(err)) from None
    if record is None or record.url == settings.url:
        return settings
    err_console.print(
        f"server: {record.url} (the server of the tree {record.workdir}, pid {record.pid})",
        markup=False,
        highlight=False,
    )
    return settings.model_copy(update={"server_url": record.url})


def _problem(error: Any) -> str:
    field = ".".join(str(p) for p in error.get("loc", ())) or "settings"
    message = str(error.get("msg", "invalid")).removeprefix("Value error, ")
    return message if "CODEFLEET_" in message else f"CODEFLEET_{field.upper()}: {message}"


def make_client(settings: Settings) -> FleetClient:
    return FleetClient(settings.url, token=settings.token)


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print `message` as the command's error and return the exit to raise."""
    print_error(message)
    return typer.Exit(code)


def call_server(settings: Settings, action: Any) -> Any:
    """Run one async client action, turning transport and API errors into messages."""

    async def go() -> Any:
        async with make_client(settings) as client:
            return await action(client)

    try:
        return asyncio.run(go())
    except ServerUnavailable:
        raise fail(
            f"no CodeFleet server answers at {settings.url}; start one with `codefleet serve`"
        ) from None
    except Unauthorized:
        raise fail(unauthorized_message(settings)) from None
    except UntrustedServer as err:
        raise fail(str(err)) from None
    except ApiError as err:
        if err.error_code != "http_error":
            raise fail(f"{err.message}") from None
        raise fail(not_codefleet_message(settings, f"HTTP {err.status_code}")) from None
    except DomainError as err:
        raise fail(f"{err.message}") from None
    except (KeyError, TypeError, ValueError) as err:  # an answer of a shape CodeFleet never sends
        raise fail(not_codefleet_message(settings, f"{type(err).__name__}: {err}")) from None


def not_codefleet_message(settings: Settings, what: str) -> str:
    """The one line for an answer that is not a CodeFleet server's (an HTML page, JSON of
    another shape): never its body, never a traceback."""
    return (
        f"the server at {settings.url} answered what no CodeFleet server sends ({what}): "
        "is it CodeFleet? Check --server / CODEFLEET_SERVER_URL"
    )


def unauthorized_message(settings: Settings) -> str:
    given = "the token given was refused" if settings.token else "it needs a token"
    return f"the server at {settings.url} refused the request: {given}; pass --token or set CODEFLEET_TOKEN"


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


# -- options shared by the fleet commands (run, runner, demo) ---------------------

DryRunOpt = Annotated[
    bool,
    typer.Option("--dry-run", help="Scripted agents instead of Claude sessions: no key, no cost."),
]
ScriptOpt = Annotated[
    Path | None,
    typer.Option(
        "--script",
        help="With --dry-run: the steps the scripted agents play, per task id "
        "(the format is below, under Dry-run script).",
    ),
]
# The dry-run script's format, closing the help of the commands that take --script. A
# paragraph starting with \b keeps its lines (`helptext.reflow`); every step of
# `fleet.scripted.STEP_KINDS` is listed (`tests/unit/test_cli_help.py`).
SCRIPT_HELP = """\
Dry-run script (--dry-run --script FILE): a YAML mapping of task id to the steps a scripted
agent plays for it, in order. Every file change asks for the lease first, as a real session's
hook does: a refused write ends the attempt as a veto. A step is a one-key mapping, and may
carry attempt: N to run only on attempt N, and turn: N to run only in the session's Nth
turn (turn 2 is the reconcile turn after a stale read, or the repair turn after a failed verify
or landing check; a landing's repair resumes attempt N's session, so its turn is attempt N's
turn 2, and attempt: N counts sessions: a repair is none). A task with no steps (T2: [])
succeeds without writing; run names the tasks the script lacks and does not start.

Rework: a step with rework: true plays only when the task is reworked because a check failed
its change: in the repair turn that fixes it in place, or, after a rollback, in the next
session after the steps without it (once per session). Which of two tasks lands second, and
so is reworked after a semantic break, depends on how long checks take: give each such task
its rework steps and the script ends green whichever lands first.

Waits follow what they wait for: wait_succeeded and wait_landing wait while the task is
alive (running, waiting to land, landing, or pending with attempts left) and give up at once
when it failed or was cancelled; the lease and event waits give up once no other task is
alive. Each also stops at its limit: the step's timeout: S, else the script's top-level
wait_timeout: S, else 600 s. The give-up names what it waited for and the limit.

\b
  write: {path: P, content: TEXT}  create or overwrite a file (P relative to the tree)
  edit: {path: P, old: A, new: B}  replace the first A with B; the step fails if A is absent
  append: {path: P, text: TEXT}    append TEXT to a file
  patch: DIFF | FILE               apply a unified diff (git diff, diff -u; several files may be
                                   in it): its text, or a .diff file next to the script
  write_from: {path: P, from: F}   write P with the content of file F (next to the script)
  fail: MESSAGE                    end the attempt as a failure
  check: NAME                      run a named check in an isolated view of the tree
  expect_check: pass|fail          fail the attempt unless the last check did that
  expect_error: TEXT               fail unless the previous attempt's error contains TEXT
  sleep: SECONDS                   wait
  wait_leased: PATH                wait until another task holds the lease on PATH
  wait_acquired: PATH              wait until another task has been granted PATH (held or not now)
  wait_denied: PATH                wait until some task was denied the lease on PATH
  wait_parked: PATH                wait until some task's write of PATH is waiting for it
  make_dir: PATH                   make PATH a directory without asking (stages a fault)
  rate_limit: SECONDS|null         end as a session that hit a usage limit
  cost: USD                        add USD to what the attempt reports it spent
  read: PATH                       read a file (recorded in the attempt's read set)
  wait_succeeded: TASK             wait until another task succeeded
  wait_landing: TASK               wait until another task waits to land (its session over)
  expect_followup: TEXT            fail unless the follow-up message (reconcile, repair) says TEXT
  wait_message: TEXT               wait until an operator message (codefleet say) says TEXT
  ask: QUESTION                    ask the operator (ask_operator) and wait for the answer
  expect_answer: TEXT              fail unless the operator's last answer contains TEXT
  command: CMD                     run CMD as run_command does (needs shell; or {run: CMD, timeout_s: S})
  acquire_resource: NAME           take a named resource; held by another task: a veto
  next_number: SEQUENCE            take the sequence's next number; with
                                   {sequence: S, write: "m/{number:04d}_x.py", content: T}
                                   also write the file it names
  allocate_port: null              take a free TCP port for the attempt

Example (codefleet init --scripts writes one for its example tasks). A and B end green in
either landing order: A renames f to g, B adds a caller of f, each passes alone and they break
together, so each says what it does if it is the one reworked:

\b
  T1:
  - write: {path: CONTRIBUTING.md, content: "# Contributing\\n"}
  T2:
  - append: {path: README.md, text: "\\nSee CONTRIBUTING.md.\\n"}
  - check: test
  - expect_check: pass
  A:
  - edit: {path: lib.py, old: "def f(", new: "def g("}
  - rework: true                   # B landed first: keep its caller working
    append: {path: lib.py, text: "\\nf = g\\n"}
  B:
  - append: {path: caller.py, text: "print(f())\\n"}
  - rework: true                   # A landed first: call the new name
    edit: {path: caller.py, old: "f()", new: "g()"}
"""
# The offline model script's format, after SCRIPT_HELP on the commands that take
# --model-script: an installed tool has no examples/ directory to point to. Every turn key
# of `offlinemodels.modelscripts` is listed (`tests/unit/test_cli_help.py`).
MODEL_SCRIPT_HELP = """\
Offline model script (--offline --model-script FILE): a YAML mapping of script id to the turns
CodeFleet's scripted model answers a real Claude Code session with, one turn per model reply,
in order. The id is a task id (every attempt of it) or TASK-aN (only attempt N: T1-a2). The
session is real (the bundled CLI, the hook, the lease), so a tool call is Claude Code's own
tool with its own input: Write {file_path, content}, Edit {file_path, old_string, new_string},
Read {file_path}, and CodeFleet's tools mcp__codefleet__run_check {name},
mcp__codefleet__run_command {command} (with shell), mcp__codefleet__ask_operator {question}.
Paths are relative to the tree. A turn whose content has no tool_use ends the session; a
task's script that runs out also ends it. run names the tasks the file lacks and does not start.

\b
  content: [{text: T}, {tool_use: {name: TOOL, input: {...}}}]   the reply's blocks
  delay_s: SECONDS                 wait before answering
  usage: {input_tokens: N, output_tokens: N}   the tokens reported (priced, simulated)
  error: {status: 429, type: rate_limit_error, message: M, retry_after_s: S}   answer an error
  wait_for: {substring: S, script_id: ID, timeout_s: 15}   hold the reply until some session's
                                   tool result contains S (after timeout_s it is sent anyway)

Example (codefleet init --scripts writes one for its example tasks):

\b
  T1:
  - content:
    - text: Writing CONTRIBUTING.md.
    - tool_use: {name: Write, input: {file_path: CONTRIBUTING.md, content: "# Contributing\\n"}}
  - content: [{text: CONTRIBUTING.md is written.}]
  T2-a1:
  - content:
    - tool_use: {name: Read, input: {file_path: README.md}}
  - content:
    - tool_use: {name: Edit, input: {file_path: README.md, old_string: "# x", new_string: "# y"}}
  - content: [{text: Done.}]
"""
OfflineOpt = Annotated[
    bool,
    typer.Option(
        "--offline",
        help="Real Claude Code sessions against CodeFleet's built-in scripted model: no key, "
        "no cost (needs --model-script).",
    ),
]
ModelScriptOpt = Annotated[
    Path | None,
    typer.Option(
        "--model-script",
        help="With --offline: the scripted model's turns per task id "
        "(the format is below, under Offline model script).",
    ),
]
AgentOpt = Annotated[
    AgentKind,
    typer.Option(
        "--agent",
        help="Which coding agent the runners drive: claude (Claude Code) or codex (Codex CLI, "
        "through its Python SDK).",
        case_sensitive=False,
    ),
]
ModelOpt = Annotated[str | None, option("model")]
MaxTurnsOpt = Annotated[int | None, option("max_turns")]
BudgetOpt = Annotated[float | None, option("task_budget_usd")]
MaxCostOpt = Annotated[float | None, option("max_cost")]
MaxCostHardOpt = Annotated[bool | None, option("max_cost_hard")]
TimeoutOpt = Annotated[float | None, option("task_timeout")]
CheckTimeoutOpt = Annotated[float | None, option("check_timeout")]
ResourceWaitOpt = Annotated[float | None, option("resource_wait")]
ProtectedOpt = Annotated[str | None, option("protected_paths")]
ReconcileRoundsOpt = Annotated[int | None, option("reconcile_rounds")]
RepairTurnsOpt = Annotated[int | None, option("repair_turns")]
LeaseGranularityOpt = Annotated[Granularity | None, option("lease_granularity")]
CheckDirOpt = Annotated[Path | None, option("check_dir")]
UvLockCacheOpt = Annotated[bool | None, option("uv_lock_cache")]
