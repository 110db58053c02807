"""`codefleet doctor`: the checks that otherwise fail a run minutes in.

Each check returns a `Check` (name, ok, detail, hint). Nothing here changes
anything: it reads the Python version, loads the part mappers' grammars, tries to bind the server port (or asks
a running server for its health; `doctor.run_checks` adds what a runner here
needs of it, from `doctor_server`), looks at the working tree, parses the task
graph and looks up its checks' programs where checks run, and looks for the
Claude Code CLI the SDK bundles and for a key. A check that is not `required`
and not ok is a warning: shown, but doctor still exits 0.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from rich.console import Console
from rich.text import Text

from codefleet.api.client import FleetClient, UntrustedServer
from codefleet.api.graphfile import DEFAULT_GRAPH, GraphError, check_scopes, load_graph
from codefleet.config import Settings
from codefleet.fleet.views.layer import shell_support
from codefleet.fleet.views.programs import check_warnings
from codefleet.fleet.views.runinview import layer_problem
from codefleet.parts.grammars import GRAMMARS, problems
from codefleet.paths import TreeRoot
from codefleet.planning.check import NO_INTEGRATION, unchecked_landing
from codefleet.session.credentials import credentials_problem
from codefleet.statedir import tree_root

__all__ = ["Check", "print_checks"]


@dataclass(frozen=True, slots=True)
class Check:
    """One finding; a check that is not `ok` but not `required` is a warning, not a failure."""

    name: str
    ok: bool
    detail: str
    hint: str = ""
    required: bool = True

    @property
    def passes(self) -> bool:
        return self.ok or not self.required

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def check_python() -> Check:
    ok = sys.version_info >= (3, 11)
    return Check("python", ok, sys.version.split()[0], "" if ok else "CodeFleet needs Python 3.11+")


def check_grammars() -> Check:
    """The grammar packages of the languages with parts (`parts.grammars`) all load."""
    broken = problems()
    if broken:
        return Check("grammars", False, "; ".join(broken), "reinstall CodeFleet (`uv sync`)")
    languages = ", ".join(sorted({g.language for g in GRAMMARS.values()}))
    return Check("grammars", True, f"parts of {languages} files: every grammar loads")


def check_port(settings: Settings) -> Check:
    """A server answering at the URL; else, for a URL named with --server (a runner's
    host), a failure saying why; else whether the local port is free for `serve`."""
    try:
        health = asyncio.run(_health(settings))
        return Check(
            "server", True, f"a CodeFleet server answers at {settings.url} (v{health['version']})"
        )
    except UntrustedServer as err:
        return Check("server", False, str(err), "trust its certificate, or fix the URL")
    except Exception as err:  # nothing answers: see whether the port is free for `serve`
        if settings.server_url:
            return Check(
                "server",
                False,
                f"no CodeFleet server answers at {settings.url} ({err})",
                "start `codefleet serve` there, or fix --server / CODEFLEET_SERVER_URL",
            )
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((settings.host, settings.port))
        except OSError as err:
            return Check(
                "port",
                False,
                f"{settings.host}:{settings.port} is taken ({err.strerror})",
                "another program uses the port; set CODEFLEET_PORT",
            )
    return Check("port", True, f"{settings.host}:{settings.port} is free for `codefleet serve`")


async def _health(settings: Settings) -> dict[str, object]:
    async with FleetClient(settings.url, token=settings.token, timeout=1.0) as client:
        return await client.health()


def check_workdir(settings: Settings) -> Check:
    tree = settings.workdir
    if not tree.is_dir():
        return Check(
            "workdir", False, f"{tree} does not exist", "set CODEFLEET_WORKDIR to your repository"
        )
    try:
        with tempfile.NamedTemporaryFile(dir=tree, prefix=".codefleet-doctor-"):
            pass
    except OSError as err:
        return Check("workdir", False, f"{tree} is not writable ({err.strerror})")
    return Check("workdir", True, f"{tree.resolve()} exists and is writable{_why_tree(tree)}")


def _why_tree(tree: Path) -> str:
    """Why `tree` is the tree when the current directory is another one inside it."""
    here = Path.cwd().resolve()
    root, why = tree_root(here)
    if tree.resolve() == here or root != tree.resolve():
        return ""
    return f" (the tree: {why}; you are in {here})"


def check_programs(path: Path | None, settings: Settings) -> Check:
    """Each check's programs, looked up where checks run (a warning: the graph may be fixed)."""
    try:
        checks = load_graph(path).checks if path is not None else {}
    except GraphError:
        checks = {}  # the graph check says why
    if not checks or not settings.workdir.is_dir():
        return Check("checks", True, "no checks to look up", required=False)
    missing = check_warnings(checks, settings.workdir)
    if missing:
        return Check("checks", False, "; ".join(missing), required=False)
    return Check(
        "checks",
        True,
        f"every program of {len(checks)} check(s) is found where checks run",
        required=False,
    )


def check_graph(path: Path | None, settings: Settings) -> Check:
    """The graph through the loader's own validation, scopes through the server's path rule."""
    if path is None:
        return Check(
            "graph", True, f"no --graph given and no {DEFAULT_GRAPH} here; skipped", required=False
        )
    try:
        tasks = load_graph(path)
        if settings.workdir.is_dir():
            check_scopes(
                tasks, TreeRoot(settings.workdir, [settings.db, settings.run_dir]), str(path)
            )
    except GraphError as err:
        return Check("graph", False, str(err))
    unchecked = " · " + NO_INTEGRATION if unchecked_landing(tasks) else ""
    return Check(
        "graph",
        True,
        f"{path}: {len(tasks)} task(s), no cycle, every dependency known, "
        f"every scope inside the tree{unchecked}",
    )


def bundled_cli() -> Path | None:
    """The Claude Code CLI the SDK ships, found without importing the SDK."""
    spec = importlib.util.find_spec("claude_agent_sdk")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "_bundled" / "claude"


def check_cli() -> Check:
    bundled = bundled_cli()
    if bundled is None:
        return Check("claude-cli", False, "claude-agent-sdk is not installed", "run `uv sync`")
    if not bundled.exists():
        return Check("claude-cli", False, f"no bundled CLI at {bundled}")
    try:
        out = subprocess.run(
            [str(bundled), "--version"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return Check("claude-cli", False, f"{bundled} does not run: {err}")
    version = out.stdout.strip() or out.stderr.strip()
    sdk = importlib.metadata.version("claude-agent-sdk")
    return Check("claude-cli", out.returncode == 0, f"{version} (SDK {sdk}) at {bundled}")


def check_key() -> Check:
    """A key or a Claude login: what real sessions authenticate with (optional: keyless paths)."""
    if os.environ.get("ANTHROPIC_API_KEY"):
        return Check("api-key", True, "ANTHROPIC_API_KEY is set", required=False)
    if credentials_problem() is None:
        return Check("api-key", True, "a Claude login (or token) is present", required=False)
    return Check(
        "api-key",
        False,
        "no ANTHROPIC_API_KEY and no Claude login: only the keyless paths will work "
        "(`run --dry-run --script F`, `run --offline --model-script F`, `demo --offline`)",
        f"export ANTHROPIC_API_KEY, or log in: `{bundled_cli() or 'claude'} auth login`",
        required=False,
    )


def check_shell(settings: Settings) -> Check:
    """How `run_command` would run here: sandboxed, not sandboxed, or not at all (optional)."""
    support = shell_support()
    ok = support.problem is None and (support.bwrap is not None or settings.shell_unsandboxed)
    hint = ""
    if support.problem is None and support.bwrap is None:
        hint = (
            "install bubblewrap 0.8 or later to sandbox commands; `run --shell` refuses without it "
            "unless --shell-unsandboxed"
        )
    elif support.problem is not None:
        hint = "commands need user namespaces and overlayfs (Linux); checks still work"
    return Check("shell", ok, support.describe, hint, required=settings.shell)


def check_views(settings: Settings) -> Check:
    """Where checks run here: overlay layers over the tree, or copies of it (optional)."""
    tree = settings.workdir
    if not tree.is_dir():
        return Check("check-views", False, f"{tree} does not exist", required=False)
    problem = layer_problem(tree, settings.check_dir)
    if problem is None:
        detail = (
            "checks run in overlay layers on the tree's path (cost: the files other tasks hold)"
        )
        return Check("check-views", True, detail, required=False)
    return Check(
        "check-views",
        False,
        f"checks run in copies of the tree (cost: every file): {problem}",
        "checks still work; a view costs only the held files with user namespaces and "
        "overlayfs (Linux) and views made outside the tree (CODEFLEET_CHECK_DIR)",
        required=False,
    )


def _mark(check: Check) -> Text:
    if check.ok:
        return Text("  ok  ", style="bold green")
    if not check.required:
        return Text(" warn ", style="bold yellow")
    return Text(" FAIL ", style="bold white on red")


def print_checks(console: Console, checks: list[Check]) -> None:
    for check in checks:
        mark = _mark(check)
        line = mark + Text(f" {check.name:<11} {check.detail}")
        console.print(line)
        if check.hint and (not check.ok or not check.required):
            console.print(Text(f"        → {check.hint}", style="dim"))
