"""A person's own Claude Code session in the lock: `join`, `leave`, `hook`, `release`.

`join` merges CodeFleet's command hooks into the tree's
`.claude/settings.local.json` (see `join_settings`), so every Claude Code
session started in the tree asks the server for a lease before it writes;
`leave` removes exactly them. `hook` is the command those settings run (the
`codefleet` executable sends it to the stdlib fast path in `launch` before
this module is even imported; it is here for `--help` and for completeness).
`release` lets the operator free a person's session's leases. `hold NAME`
lets a person take a named resource (a person migrating the database by
hand holds `db`: no fleet task that names it runs meanwhile) as a person's
session `hold-<user>`; `release NAME` gives it back.
"""

from __future__ import annotations

import asyncio
import getpass
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from codefleet.api.client import (
    ServerUnavailable,
)
from codefleet.cli.common import (
    JsonOpt,
    ServerOpt,
    TokenOpt,
    app,
    call_server,
    fail,
    make_client,
    print_json,
    settings_from,
    unauthorized_message,
)
from codefleet.cli.operate.quick import RELEASE_FORMS
from codefleet.cli.output import console, err_console
from codefleet.errors import Unauthorized
from codefleet.hook.agentsettings import AGENT_FILES, agent_block, join_agent, leave_agent
from codefleet.hook.command import main as hook_main
from codefleet.hook.settings import JoinError, Written, codefleet_command, exclude_from_git
from codefleet.statedir import TreeClaim, tree_id_here, tree_mismatch

if TYPE_CHECKING:
    from codefleet.config import Settings

__all__ = ["hold", "hook", "join", "leave", "release"]

ALONGSIDE = "Work alongside the fleet"
# Each CLI runs a project's hooks only where the person trusted it; `join` never trusts for them.
TRUST_NOTES = {
    "codex": "Codex runs a project hook only once you trust it: open Codex here and review "
    "CodeFleet's hooks with /hooks (and trust the project).",
    "gemini": "Gemini CLI runs a project's hooks only in a trusted folder: trust this one "
    "when Gemini CLI asks (or with /permissions).",
    "copilot": "Copilot CLI runs a repository's hooks only in a trusted folder: trust this "
    "one when Copilot CLI asks.",
}

TreeOpt = Annotated[
    Path | None,
    typer.Option(
        "--workdir", help="The working tree whose Claude Code sessions join (default: here)."
    ),
]
AgentNameOpt = Annotated[
    str,
    typer.Option(
        "--agent",
        help="Whose sessions join: claude (Claude Code), codex (Codex CLI), gemini (Gemini CLI) "
        "or copilot (GitHub Copilot CLI); each gets its CLI's own project hook file.",
    ),
]
PrintOpt = Annotated[
    bool, typer.Option("--print", help="Show the settings JSON instead of writing it.")
]


@app.command(rich_help_panel=ALONGSIDE)
def join(
    workdir: TreeOpt = None,
    server: ServerOpt = None,
    token: TokenOpt = None,
    fail_open: Annotated[
        bool,
        typer.Option(
            "--fail-open",
            help="When the server cannot be reached, let the person's writes through "
            "(default: refuse them, saying how to continue).",
        ),
    ] = False,
    show: PrintOpt = False,
    agent: AgentNameOpt = "claude",
) -> None:
    """Make every Claude Code session started in this tree take and respect leases.

    Merges CodeFleet's PreToolUse, PostToolUse and SessionEnd command hooks into the tree's
    .claude/settings.local.json (other keys and hooks kept, the old file kept as .bak,
    idempotent) and lists both files in the repository's .git/info/exclude.
    codefleet leave removes exactly the hooks, and a .bak that holds one.
    """
    tree = _tree(workdir)
    _known(agent)
    settings = settings_from(server_url=server, token=token)
    block = agent_block(
        agent, codefleet_command(), settings.url, tree, fail_open, tree_id_here(tree)
    )
    if not show:
        _check_server(settings, tree, fail_open)
    try:
        written = join_agent(tree, agent, block, dry_run=show)
    except (JoinError, OSError) as err:
        raise fail(str(err)) from None
    if show:
        print_json(written.settings)
        return
    _say(written, "joined" if written.changed else "already joined")
    excluded = exclude_from_git(tree, written.path)
    if excluded is not None:
        console.print(f"both files are listed in {excluded}: git does not show them", markup=False)
    console.print(
        f"{AGENT_NAMES[agent]} sessions started in this tree now ask CodeFleet before every "
        f"write; `codefleet leave --agent {agent}` undoes it."
    )
    if agent in TRUST_NOTES:
        console.print(TRUST_NOTES[agent], markup=False)


@app.command(rich_help_panel=ALONGSIDE)
def leave(workdir: TreeOpt = None, show: PrintOpt = False, agent: AgentNameOpt = "claude") -> None:
    """Remove exactly the hooks codefleet join (--agent) added to this tree.

    A .bak of the hook file holding one of them goes too: no hook command is left behind.
    """
    tree = _tree(workdir)
    _known(agent)
    try:
        written = leave_agent(tree, agent, dry_run=show)
    except (JoinError, OSError) as err:
        raise fail(str(err)) from None
    if show:
        print_json(written.settings or {})
        return
    _say(written, "left" if written.changed else "not joined: nothing to remove")
    if written.changed:
        console.print(
            "New Claude Code sessions here no longer ask CodeFleet; a session already running "
            "keeps the hooks it started with until it ends."
        )


@app.command(
    rich_help_panel=ALONGSIDE,
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
def hook(
    ctx: typer.Context,
    event: Annotated[str, typer.Argument(help="pre-tool-use, post-tool-use or session-end.")],
) -> None:
    """The Claude Code command hook codefleet join installs: hook JSON on stdin, decision on stdout.

    Options: --server URL --tree PATH [--fail-open]. Always exits 0; a refusal is the
    PreToolUse deny JSON. Token: CODEFLEET_TOKEN in the session's environment.
    """
    raise typer.Exit(hook_main([event, *ctx.args]))


@app.command(rich_help_panel=ALONGSIDE)
def hold(
    names: Annotated[list[str], typer.Argument(help="Resource names, e.g. db.")],
    user: Annotated[
        str | None, typer.Option("--user", help="Who holds it (default: your login name).")
    ] = None,
    server: ServerOpt = None,
    token: TokenOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Hold named resources as a person: no fleet task naming one runs until you release it."""
    person = user or _login()
    settings = settings_from(server_url=server, token=token)
    answer = call_server(settings, lambda c: c.hold(f"hold-{person}", person, list(names)))
    if json_out:
        print_json(answer)
    if answer["decision"] != "allow":
        for denied in answer["denied"]:
            console.print(f"refused: {denied['message']}")
        raise typer.Exit(1)
    if not json_out:
        console.print(
            f"{answer['holder']['name']} holds {', '.join(names)}; "
            f"`codefleet release {' '.join(names)}` gives it back"
        )


def _login() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no login name in this environment
        return "you"


@app.command(rich_help_panel=ALONGSIDE)
def release(
    names: Annotated[
        list[str] | None, typer.Argument(help="Resource names a person holds (codefleet hold).")
    ] = None,
    session: Annotated[
        str | None, typer.Option("--session", help="The Claude Code session id (or its prefix).")
    ] = None,
    every_person: Annotated[
        bool, typer.Option("--all-interactive", help="Release every person's session.")
    ] = False,
    server: ServerOpt = None,
    token: TokenOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Give back what a person holds: named resources, or a Claude Code session's file leases.

    Two forms. codefleet release NAME... gives back resources a person took with
    codefleet hold NAME (while held, no fleet task that names one runs). codefleet release
    --session ID (the session's id, a prefix of it or its name, alice@0aeef531) or
    --all-interactive frees the file leases of a person's Claude Code
    session that joined the lock (codefleet join); that session may write again later.
    """
    if not names and (session is None) == (not every_person):
        raise fail(RELEASE_FORMS, code=2)
    settings = settings_from(server_url=server, token=token)
    if names:
        _release_resources(settings, names, json_out)
        return

    async def go(client: Any) -> dict[str, Any]:
        session_id = await _resolve_session(client, session) if session else None
        result: dict[str, Any] = await client.release_person(session_id, every_person)
        return result

    answer = call_server(settings, go)
    if json_out:
        print_json(answer)
        return
    if not answer["released"]:
        console.print("no interactive session held anything")
    for item in answer["released"]:
        paths = ", ".join(item["paths"]) or "no files"
        console.print(f"released {item['name']} ({item['session_id']}): {paths}")


def _release_resources(settings: Settings, names: list[str], json_out: bool) -> None:
    answer = call_server(settings, lambda c: c.unhold(list(names)))
    if json_out:
        print_json(answer)
    else:
        for name in answer["released"]:
            console.print(f"released {name}")
        for name, why in answer["refused"].items():
            console.print(f"not released: {name} ({why})")
    if answer["refused"]:
        raise typer.Exit(1)


async def _resolve_session(client: Any, given: str) -> str:
    """A full session id from an id, a prefix, or the session's name (`alice@0aeef531`)."""
    sessions = [a for a in await client.agents() if a.get("kind") == "interactive"]
    exact = [a for a in sessions if given in (a["session_id"], a["name"])]
    found = exact or [a for a in sessions if a["session_id"].startswith(given)]
    if len(found) == 1:
        return str(found[0]["session_id"])
    if not found:
        raise fail(f"no interactive session matches {given!r}")
    names = ", ".join(a["name"] for a in found)
    raise fail(f"{given!r} matches several sessions ({names}); give more of the id")


AGENT_NAMES = {
    "claude": "Claude Code",
    "codex": "Codex CLI",
    "gemini": "Gemini CLI",
    "copilot": "GitHub Copilot CLI",
}


def _known(agent: str) -> None:
    if agent not in AGENT_FILES:
        raise fail(f"unknown agent {agent!r}: one of {', '.join(AGENT_FILES)}")


def _tree(workdir: Path | None) -> Path:
    tree = Path(os.path.realpath(workdir or Path.cwd()))
    if not tree.is_dir():
        raise fail(f"{tree} is not a directory")
    return tree


def _say(written: Written, what: str) -> None:
    backup = f" (previous version: {written.backup})" if written.backup else ""
    console.print(f"{what}: {written.path}{backup}")


def _check_server(settings: Settings, tree: Path, fail_open: bool) -> None:
    """Refuse a server that serves another tree; warn when none answers yet."""

    async def health() -> dict[str, Any]:
        async with make_client(settings) as client:
            result: dict[str, Any] = await client.health()
            return result

    try:
        answer = asyncio.run(health())
    except ServerUnavailable:
        then = "allowed (--fail-open)" if fail_open else "refused"
        err_console.print(
            f"warning: no CodeFleet server answers at {settings.url} yet; until one does, writes "
            f"in this tree are {then}. Start it with `codefleet serve --workdir {tree}`."
        )
        return
    except Unauthorized:
        raise fail(unauthorized_message(settings)) from None
    except Exception as err:  # a courtesy check: only a wrong tree fails the join
        err_console.print(f"warning: could not ask {settings.url} for its tree: {err}")
        return
    served = answer.get("workdir")
    if not served:
        return
    here = TreeClaim(str(tree), tree_id_here(tree))
    problem = tree_mismatch(here, TreeClaim(str(served), answer.get("tree_id")))
    if problem is not None:
        raise fail(
            f"the server at {settings.url} coordinates {served}, not {tree}: its leases say "
            f"nothing about this tree ({problem}). Run join in the tree the server serves, or "
            "point --server at the right one. Nothing was written."
        )
