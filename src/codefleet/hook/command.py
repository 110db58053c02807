"""`codefleet hook pre-tool-use|post-tool-use|session-end`: a person's session inside the lock.

`codefleet join` installs these as command hooks in the tree's
`.claude/settings.local.json`, so every Claude Code session started there runs
them. Each call reads the hook JSON Claude Code writes on stdin and exits 0:

- `pre-tool-use` canonicalizes every path the write names with the pre-write
  gate's own function (`paths.TreeRoot.canonical`), asks the server for the
  leases for the person's session, and prints nothing (no
  objection) or THE denial (`toolcalls.writepaths.deny_output`) naming the holder and what
  to do. A path the fleet can never lease (outside the tree, protected)
  cannot collide with it: no objection.
- `post-tool-use` records one change-ledger row per path; it never vetoes. For
  a `Read` it records a `read` row with the content's SHA-256 (the read set).
- `session-end` releases every lease the session holds.

The tree: `--tree` is the path on the host that ran `join`. The settings file
is in the tree, so on a shared file system another host's session runs the
same command, where that path is elsewhere or absent; with `--tree-id` (what
`join` writes once the tree has an identity) the hook takes the directory
holding that identity: `--tree` if it does, else the nearest one above the
session's `cwd`. None found is a denial (the session is not in the joined
tree on this host), never a write let through.

Failure policy: an unreachable server is a denial that says how to go on
without the fleet (`codefleet leave`), unless the settings were written with
`--fail-open`; so is a server that has not answered in full by the exchange's
one deadline (connect, send and every read together: `PRE_TIMEOUT_S`, below
the hook timeout `join` writes). Malformed input, a `cwd` that is not an
absolute path among it, is a denial with the reason, never a traceback.

Standard library only, with a short import chain: it runs on every write of a
person's session (p50 budget 60 ms including interpreter start, see
docs/performance-startup.md). It never imports FastAPI, pydantic, Rich, httpx, Typer
or the SDK (a test holds it to that). Its transport is elsewhere: it sends each JSON
POST with `api.blockingclient.post_json` (HTTP/1.1 over a plain socket, the one client
it shares with the fast commands); here is the policy alone: reading the hook input,
deciding, shaping the answer.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, NamedTuple

from codefleet.api.blockingclient import Refused, Unreachable, post_json
from codefleet.hook.agentdialects import AGENTS, CLAUDE, denial_for, normalized
from codefleet.models import GATED_TOOLS, READ_RECORDED_TOOLS, DenyReason
from codefleet.paths import TreeRoot, lease_keys
from codefleet.statedir import tree_id_here
from codefleet.toolcalls.writepaths import deny_output, extract_paths, no_path_reason, tool_paths

__all__ = [
    "EVENTS",
    "HookArgs",
    "UsageError",
    "main",
    "parse_args",
    "person_denial",
    "run",
    "this_tree",
]

PRE_TOOL_USE: Final = "pre-tool-use"
POST_TOOL_USE: Final = "post-tool-use"
SESSION_END: Final = "session-end"
EVENTS: Final = (PRE_TOOL_USE, POST_TOOL_USE, SESSION_END)
# One deadline per exchange with the server (connect, send, the whole answer), below the hook
# timeout `join` writes, so that our reason, not Claude Code's timeout, is the one shown.
PRE_TIMEOUT_S: Final = 5.0
RECORD_TIMEOUT_S: Final = 2.0
# Paths the fleet can never lease: a person's write there cannot collide with an agent's
# (a hard-linked file is one no task may lease either).
NOT_THE_LOCKS_BUSINESS: Final = frozenset(
    {DenyReason.OUTSIDE_WORKDIR, DenyReason.PROTECTED_PATH, DenyReason.HARD_LINK}
)
USAGE: Final = (
    "usage: codefleet hook pre-tool-use|post-tool-use|session-end --server URL --tree PATH "
    "[--tree-id ID] [--fail-open]\n(a Claude Code command hook: `codefleet join` writes it "
    "into the settings)\n"
)


class UsageError(ValueError):
    """The hook command line is incomplete or unknown."""


class HookArgs(NamedTuple):  # not a dataclass: `dataclasses` imports `inspect` (ms per write)
    event: str
    server: str
    tree: str
    fail_open: bool = False
    agent: str = CLAUDE  # whose CLI calls: its input is normalized, its denial shaped (`agents`)
    tree_id: str | None = None  # the joined tree's identity: found on any mount (see above)


Post = Callable[[str, str, dict[str, Any], str | None, float], dict[str, Any]]


def parse_args(argv: Sequence[str]) -> HookArgs:
    """`EVENT --server URL --tree PATH [--tree-id ID] [--fail-open]`, or `UsageError`."""
    if not argv or argv[0] not in EVENTS:
        raise UsageError(f"unknown hook event {argv[0] if argv else ''!r}")
    values: dict[str, str] = {"--agent": CLAUDE}
    fail_open = False
    rest = list(argv[1:])
    while rest:
        flag = rest.pop(0)
        if flag == "--fail-open":
            fail_open = True
        elif flag in ("--server", "--tree", "--agent", "--tree-id") and rest:
            values[flag] = rest.pop(0)
        else:
            raise UsageError(f"unexpected argument {flag!r}")
    if values["--agent"] not in AGENTS:
        raise UsageError(f"unknown agent {values['--agent']!r} (one of {', '.join(AGENTS)})")
    missing = [f for f in ("--server", "--tree") if not values.get(f)]
    if missing:
        raise UsageError(f"missing {' and '.join(missing)}")
    server = values["--server"].rstrip("/")
    return HookArgs(
        argv[0], server, values["--tree"], fail_open, values["--agent"], values.get("--tree-id")
    )


# -- the three events -----------------------------------------------------------------


def run(args: HookArgs, stdin_text: str, env: Mapping[str, str], post: Post | None = None) -> str:
    """What the hook prints for one call: "" (no objection / nothing to say) or a denial,
    in the shape `args.agent`'s CLI reads."""
    out = _run(args, stdin_text, env, post)
    if not out or args.agent == CLAUDE:
        return out
    reason = json.loads(out)["hookSpecificOutput"]["permissionDecisionReason"]
    return json.dumps(denial_for(args.agent, reason))


def _run(args: HookArgs, stdin_text: str, env: Mapping[str, str], post: Post | None) -> str:
    send = post or post_json
    try:
        data = normalized(args.agent, json.loads(stdin_text))
    except ValueError as err:
        return _malformed(args, f"its input is not JSON ({err})")
    problem = _input_problem(data, args.event)
    if problem:
        return _malformed(args, problem)
    if args.event == SESSION_END:
        _quietly(send, args, "/interactive/release", _release_body(data), env)
        return ""
    tree = this_tree(args, data["cwd"])
    if tree is None:
        return _malformed(args, _not_joined(args, data["cwd"]))
    return _on_tool(args._replace(tree=tree), send, data, env)


def _on_tool(args: HookArgs, send: Post, data: dict[str, Any], env: Mapping[str, str]) -> str:
    """A tool call's hook, `args.tree` being this host's path of the tree."""
    tool = data["tool_name"]
    if tool in READ_RECORDED_TOOLS and args.event == POST_TOOL_USE:
        _record_read(args, send, data, env)
        return ""
    if tool not in GATED_TOOLS:
        return ""
    raw = tool_paths(tool, data.get("tool_input"))
    if not raw:
        if args.event == PRE_TOOL_USE:
            why = no_path_reason(tool, data.get("tool_input"))
            return _deny(f"{why}, so CodeFleet could not check it; the write was refused.")
        return ""
    keys, refusal = _lease_keys(args.tree, data["cwd"], raw)
    if args.event == POST_TOOL_USE:
        body = {**_who(data, env), "paths": keys, "tool": tool}
        if keys:
            _quietly(send, args, "/interactive/changes", body, env)
        return ""
    if refusal:
        return _deny(refusal)
    if not keys:
        return ""
    return _ask(args, send, {**_who(data, env), "paths": keys, "tool": tool}, env)


def _not_joined(args: HookArgs, cwd: str) -> str:
    return (
        f"{cwd} is not in the tree joined as {args.tree_id} on this host (it is {args.tree} "
        "where `codefleet join` ran); run `codefleet join` in this host's mount of the tree"
    )


def this_tree(args: HookArgs, cwd: str) -> str | None:
    """The joined tree on this host: `--tree`, or with `--tree-id` the directory holding that
    identity (`--tree` itself, else the nearest above `cwd`); None when there is none."""
    if args.tree_id is None or tree_id_here(Path(args.tree)) == args.tree_id:
        return args.tree
    here = Path(cwd)
    for candidate in (here, *here.parents):
        if tree_id_here(candidate) == args.tree_id:
            return str(candidate)
    return None


def _record_read(args: HookArgs, send: Post, data: dict[str, Any], env: Mapping[str, str]) -> None:
    """A `read` ledger row for the file the person's session read, with its content's hash."""
    raw = extract_paths(data.get("tool_input"))
    keys, _ = _lease_keys(args.tree, str(data.get("cwd") or os.getcwd()), raw)
    if keys:
        body = {**_who(data, env), "paths": keys[:1], "tool": data["tool_name"]}
        digest = _sha256(Path(args.tree) / keys[0])
        if digest is not None:
            body["sha256"] = digest
        _quietly(send, args, "/interactive/changes", body, env)


def _sha256(target: Path) -> str | None:
    import hashlib  # here: only a read needs it

    try:
        return hashlib.sha256(target.read_bytes()).hexdigest() if target.is_file() else None
    except OSError:
        return None


def _input_problem(data: Any, event: str) -> str | None:
    if not isinstance(data, dict):
        return "its input is not a JSON object"
    if not isinstance(data.get("session_id"), str) or not data["session_id"].strip():
        return "its input has no session_id"
    if event == SESSION_END:
        return None
    if not isinstance(data.get("tool_name"), str):
        return "its input has no tool_name"
    if not isinstance(data.get("tool_input"), dict):
        return "its input has no tool_input object"
    cwd = data.get("cwd")
    if not isinstance(cwd, str) or not os.path.isabs(cwd):
        return "its input's cwd is not an absolute path"
    return None


def _lease_keys(tree: str, cwd: str, raw: list[str]) -> tuple[list[str], str | None]:
    """The lease keys of `raw` (the pre-write gate's canonical form), or why the write is refused."""
    # Only `.git` here: which other names are protected is the server's setting, and a path
    # it protects comes back `skipped` (nothing leased, no objection).
    root = TreeRoot(Path(tree), names=())
    found = lease_keys(root, raw, cwd=cwd, skip=NOT_THE_LOCKS_BUSINESS, first_refusal=True)
    if found.rejected:
        path, err = found.rejected[0]
        return found.keys, f"CodeFleet refused the write to {path}: {err.message}."
    return found.keys, None


def _ask(args: HookArgs, send: Post, body: dict[str, Any], env: Mapping[str, str]) -> str:
    try:
        answer = send(
            args.server, "/interactive/acquire", body, env.get("CODEFLEET_TOKEN"), PRE_TIMEOUT_S
        )
    except Unreachable as err:
        if args.fail_open:
            sys.stderr.write(f"codefleet: {err}; allowed (--fail-open)\n")
            return ""
        return _deny(unreachable_reason(args, body["paths"][0], str(err)))
    except Refused as err:
        return _deny(
            f"CodeFleet's server at {args.server} refused the lease request ({err.message}), so the "
            f"write was refused. Fix that, or run `codefleet leave` in {args.tree} to work without "
            "the fleet."
        )
    if answer.get("decision") == "allow":
        return ""
    return _deny(person_denial(answer))


def person_denial(answer: Mapping[str, Any]) -> str:
    """What a person reads when the lock refuses their write: who holds it and what to do."""
    denied = [d for d in answer.get("denied") or [] if isinstance(d, dict)]
    held = [d for d in denied if d.get("reason") == DenyReason.HELD]
    if not held:
        message = answer.get("message") or "the server refused the lease"
        return f"CodeFleet refused the write: {message}."
    first = held[0]
    path, holder = first.get("path"), first.get("holder_agent_name") or "another agent"
    if first.get("holder_kind") == "interactive":
        who = f"{path} is being edited by {holder} in another session"
    else:
        title = first.get("holder_task_title")
        who = f"{path} is being edited by {holder} for task {first.get('holder_task_id')}"
        who += f" ({title})" if title else ""
    more = f" (and {len(held) - 1} more of the files named)" if len(held) > 1 else ""
    return f"{who}{more}; wait for it (codefleet watch) or work on another file."


def unreachable_reason(args: HookArgs, path: str, why: str) -> str:
    return (
        f"CodeFleet's server at {args.server} did not answer ({why}), so the write to {path} was "
        "refused: a fleet agent may be editing it. Start the server (`codefleet serve`), or run "
        f"`codefleet leave` in {args.tree} to work without the fleet."
    )


def _malformed(args: HookArgs, problem: str) -> str:
    if args.event != PRE_TOOL_USE:
        sys.stderr.write(f"codefleet hook {args.event}: {problem}; ignored\n")
        return ""
    return _deny(
        f"CodeFleet could not read this write's hook call: {problem}. The write was refused."
    )


def _deny(reason: str) -> str:
    return json.dumps(deny_output(reason))


def _who(data: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    user = env.get("USER") or env.get("LOGNAME") or "you"
    return {"session_id": data["session_id"], "user": user}


def _release_body(data: Mapping[str, Any]) -> dict[str, Any]:
    return {"session_id": data["session_id"], "reason": "session_end"}


def _quietly(
    send: Post, args: HookArgs, path: str, body: dict[str, Any], env: Mapping[str, str]
) -> None:
    """A record or a release: best effort, a failure is a note on stderr, never a veto."""
    try:
        send(args.server, path, body, env.get("CODEFLEET_TOKEN"), RECORD_TIMEOUT_S)
    except (Unreachable, Refused) as err:
        sys.stderr.write(f"codefleet hook {args.event}: {err}\n")


# -- entry point ----------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Run one hook call: read stdin, print the decision (if any), exit 0."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = parse_args(argv)
    except UsageError as err:
        if argv and argv[0] == PRE_TOOL_USE:  # a broken settings line must still fail closed
            sys.stdout.write(
                _deny(
                    f"CodeFleet's hook is misconfigured ({err}); the write was refused. Run `codefleet join` again."
                )
                + "\n"
            )
            return 0
        sys.stderr.write(f"codefleet hook: {err}\n{USAGE}")
        return 0 if argv and argv[0] in EVENTS else 2
    text = sys.stdin.read()
    try:
        out = run(args, text, os.environ)
    except Exception as err:  # the hook fails closed and never shows the person a traceback
        out = (
            _deny(f"CodeFleet's hook failed ({type(err).__name__}: {err}); the write was refused.")
            if args.event == PRE_TOOL_USE
            else ""
        )
    if out:
        sys.stdout.write(out + "\n")
    return 0
