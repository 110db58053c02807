"""Every setting's flag, declared once: its help, and the `typer.Option` built from it.

A field of `config.Settings` (its type, default and bounds) has one row in
`FLAGS` (its help), and the rest is derived from the field's name: the
environment variable `CODEFLEET_<NAME>`, named at the end of the help; the
flag `--<name-with-dashes>` (a boolean gets `--<name>/--no-<name>`), from the
command parameter of the same name, unless the row spells it. A command's
parameter named like a setting *is* that setting (`cli.common.settings_of`
gathers them), so `--help` and `CODEFLEET_*` cannot drift apart. Kept free of
pydantic: `codefleet --help` builds every option without loading the settings.
`tests/unit/test_settings_docs.py` holds `FLAGS`, `Settings`, `.env.example`
and the commands in step (docs/decisions/0128-a-setting-is-declared-once.md, "A setting is declared once").
A row marked `transport` (HTTP timeouts, connection caps, TLS files, shell limits, the
retry backoff) is a hidden option: it works as flag and variable alike, and its command's
help names it after the options (`cli.helptext`; decision 0169).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import typer

__all__ = ["FLAGS", "Flag", "env_var", "option"]


@dataclass(frozen=True, slots=True)
class Flag:
    """A setting's help (the env variable is appended) and, when not derived, its spelling."""

    help: str
    decls: tuple[str, ...] = ()  # empty: Typer derives the flag from the parameter's name
    names_env: bool = True  # False: the help already says where the value comes from
    min: int | None = None
    transport: bool = False  # a transport knob: works, but left out of the option list


FLAGS: dict[str, Flag] = {
    "host": Flag("Address to bind"),
    "port": Flag("Port to bind"),
    "server_url": Flag(
        "Server URL (default: CODEFLEET_SERVER_URL or CODEFLEET_HOST/PORT when set, else "
        "the tree's own server, found in .codefleet/server.json, else http://127.0.0.1:8099).",
        ("--server",),
        names_env=False,
    ),
    "db": Flag("SQLite database file"),
    "workdir": Flag("The shared working tree the agents edit"),
    "runners": Flag("How many runners", ("--runners", "-n")),
    "model": Flag("Claude model for real sessions"),
    "task_timeout": Flag("Wall clock per task attempt, seconds"),
    "task_budget_usd": Flag("Spend cap per session, USD"),
    "max_turns": Flag("Turn cap per session"),
    "heartbeat_interval": Flag("Seconds between runner heartbeats"),
    "stale_after": Flag("Seconds without a heartbeat before a runner is stale"),
    "poll_interval": Flag("Long-poll wait for an assignment, seconds"),
    "tick_interval": Flag("Reconciliation tick, seconds"),
    "max_attempts": Flag("Default attempts per task"),
    "backoff_base": Flag("Retry backoff: seconds per attempt so far", transport=True),
    "backoff_cap": Flag("Retry backoff ceiling, seconds", transport=True),
    "run_dir": Flag("Where runs keep logs and workspaces"),
    "keep_failed_edits": Flag(
        "Leave a failed attempt's edits in the tree instead of restoring the files",
        ("--keep-failed-edits/--rollback-failed-edits",),
    ),
    "preimage_max_bytes": Flag("Largest file a task may lease while rollback is on"),
    "check_timeout": Flag("Time limit of one check run, seconds"),
    "resource_wait": Flag("How long a check waits for the resources it names, seconds"),
    "check_dir": Flag(
        "Where checks' throwaway copies of the tree are made (default: the system temp dir)"
    ),
    "uv_lock_cache": Flag(
        "Keep the lock a uv run check's resolution made, by the content of pyproject.toml, "
        "uv.lock, .python-version and uv.toml: later checks on that content run frozen on it "
        "instead of resolving again"
    ),
    "shell": Flag(
        "Give every task the run_command tool (a command in a throwaway layer whose changes "
        "land only through the leases), unless its shell: key says otherwise"
    ),
    "shell_network": Flag("Let commands use the network (off by default)"),
    "shell_unsandboxed": Flag(
        "Without bubblewrap, run commands anyway, NOT sandboxed (the layer still keeps their "
        "writes out of the tree)"
    ),
    "shell_max_files": Flag(
        "Most files one command may change; over it nothing is applied", transport=True
    ),
    "shell_max_bytes": Flag(
        "Most bytes one command may apply; over it nothing is applied", transport=True
    ),
    "reconcile_rounds": Flag(
        "Reconcile turns an attempt with stale reads gets before the last resort", min=0
    ),
    "repair_turns": Flag(
        "Repair turns a task whose verify or landing check failed gets in the same session "
        "before its change is rolled back and redone; 0: redo at once",
        min=0,
    ),
    "question_timeout": Flag(
        "Seconds an agent's question (ask_operator) waits for an answer; 0: agents cannot ask"
    ),
    "interactive_idle": Flag(
        "Release a person's session's leases after this many seconds without a write"
    ),
    "max_cost": Flag(
        "The fleet's budget, USD: once recorded cost reaches it, no new task is assigned"
    ),
    "max_cost_hard": Flag(
        "When the fleet's budget is spent, also stop running attempts (rolled back, not "
        "charged) instead of letting them finish",
        ("--max-cost-hard/--max-cost-soft",),
    ),
    "lease_wait": Flag(
        "Seconds a fleet task's write may wait for a file another fleet task holds, instead "
        "of the veto; 0 = the veto at once"
    ),
    "lease_granularity": Flag(
        "What a fleet task's write leases: 'auto' (the default: 'part' where an integration "
        "check runs both changes together, else 'file'), 'part' (the top-level definitions of "
        "a Python, TypeScript/JavaScript, Go, Rust or Java file it changes; two tasks may write "
        "different parts of one file) or 'file' (always the whole file)"
    ),
    "landing_batch": Flag(
        "How many tasks waiting to land one landing check takes at most (a failing batch is "
        "bisected to the task that breaks it)"
    ),
    "landing_parallel": Flag(
        "How many landing steps may run at once, one per free landing worker (a prefix "
        "ahead of the running one, or several prefixes of a failing batch); 1: one at a time"
    ),
    "integration": Flag(
        "A check (by name) every task must pass on the landed tree before it lands; "
        "overrides the graph's integration: key"
    ),
    "verify_before_landing": Flag(
        "Run a task's verify at the end of its session even when it is the integration check, "
        "which its landing runs on the landed tree anyway (default: left to the landing)",
        ("--verify-before-landing/--verify-at-landing",),
    ),
    "landing_stack": Flag(
        "Let the next task that writes a file held by a task waiting to land take it at once, "
        "on top of that change (undone with it if it does not land); off: it waits until the "
        "holder has landed",
        ("--landing-stack/--no-landing-stack",),
    ),
    "allow_reset": Flag("Allow POST /reset"),
    "token": Flag("Bearer token for the server"),
    "tls_cert": Flag(
        "Serve https with this certificate (PEM, its chain after it); needs --tls-key",
        transport=True,
    ),
    "tls_key": Flag("The private key of --tls-cert (PEM)", transport=True),
    "line_remote": Flag(
        "A git remote (URL or path) the server pushes its landed line to as tasks land (branch "
        "landed), for runners (runner --clone DIR --line URL) and people to fetch it "
        "there; git's own credentials for it apply"
    ),
    "allowed_hosts": Flag(
        "Without a token: the Host names (besides loopback addresses) requests may use, "
        "comma-separated"
    ),
    "read_timeout": Flag(
        "Seconds a client has to send a whole request once it connects or after its previous "
        "answer, else it is closed",
        transport=True,
    ),
    "keep_alive_timeout": Flag("Seconds an idle keep-alive connection stays open", transport=True),
    "max_connections": Flag(
        "Open connections at most; past it the one idle longest is closed", transport=True
    ),
    "max_streams": Flag(
        "Event streams open at once; past it a new one is refused 503", transport=True
    ),
    "protected_paths": Flag(
        "Comma-separated names no agent may write, at any depth, compared case-insensitively; "
        ".git is always protected"
    ),
}


def env_var(name: str) -> str:
    """The environment variable of setting `name`."""
    return f"CODEFLEET_{name.upper()}"


def option(name: str, *decls: str, help: str | None = None) -> Any:
    """The `typer.Option` of setting `name`; `decls` or `help` replace its row's for one command."""
    flag = FLAGS[name]
    text = flag.help if help is None else help
    if flag.names_env:
        text = f"{text} [{env_var(name)}]."
    return typer.Option(*(decls or flag.decls), help=text, min=flag.min, hidden=flag.transport)
