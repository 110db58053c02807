"""`codefleet demo`: a fresh workspace, its own server, a fleet, the event log, a verdict.

The demo copies the shipped demo repository into a new workspace under the
run directory (your checkout is never touched), starts a server on a free
loopback port with its own database in that workspace, loads the five-task
demo graph with its named check `test` (the repository's suite, run with the
interpreter running CodeFleet), runs three runners over it, prints the live
event log (the veto in red, each check's and command's verdict), then runs the demo
repository's own test suite in the workspace. Exit 0 only when every task
succeeded and the tests passed. Leased by part, the tasks that held different
parts of one file at once are named on a SIDE BY SIDE line (`sidebyside`).

The workspace's tree is a git repository with one commit (the demo
repository as shipped). With `commit` (the default) each task is committed
on a new branch the moment it succeeds (`livecommit`), and the demo ends by
printing that branch and its `git log --oneline`.

Tasks with `shell: true` (T1) run their commands in bubblewrap when it is
installed; without it, unsandboxed for the scripted model only (`demo_shell`).

`--dry-run` plays `demo-script.yaml` through the scripted executor: same
server, scheduler, leases and veto, no model, deterministic.

`--example typescript` runs another shipped example (`EXAMPLES`) the same way: two
tasks add a handler each to one TypeScript file side by side.

`--offline --mixed` makes the last runner a Codex runner (`codex-N`, the real Codex
CLI against the same scripted model, its writes played as patches) and pins the
staged collision across agents: T4 needs Codex, T1 and T3 Claude Code, so T4's
patch of api.py (a patch leases the whole file) is refused on the parts T3, a Claude
Code session, holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import subprocess
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Final

from rich.console import Console
from rich.markup import escape

from codefleet.api.client import FleetClient
from codefleet.api.graphfile import GraphTasks, load_graph
from codefleet.config import Settings
from codefleet.fleet.executor import Executor
from codefleet.fleet.local import FleetOptions, FleetResult, python_command, run_fleet
from codefleet.fleet.runner import RunnerOptions
from codefleet.fleet.scripted import ScriptedExecutor, load_script
from codefleet.fleet.tools.commandtool import ShellConfig, host_shell
from codefleet.fleet.views.layer import shell_support
from codefleet.fleet.views.layerapply import ShellLimits
from codefleet.fleet.views.runinview import layer_problem
from codefleet.review.commit import Author
from codefleet.review.commitview import print_history
from codefleet.review.git import GitError, Repo
from codefleet.review.live import LiveCommitter, open_committer
from codefleet.review.report.sidebyside import side_by_side
from codefleet.server.thread import ServerThread
from codefleet.statedir import prepare_dirs
from codefleet.ui.dashboard import follow_compact
from codefleet.ui.outofscope import ScopeWatch
from codefleet.ui.report import print_result

__all__ = ["EXAMPLES", "DemoExample", "examples_dir", "make_workspace", "run_demo"]

DEMO_VERIFY = "-m unittest discover -s tests -q"
# How often the dry run's scripted waits ask the server at first: every 25 ms, not the
# executor's 10 ms. The demo's server, runners and landing workers share one process and
# its interpreter lock, and a poll every 10 ms slowed the checks it waited for.
DEMO_WAIT_POLL_S: Final = 0.025


@dataclass(frozen=True, slots=True)
class DemoExample:
    """A shipped example the demo runs: files under `examples_dir()`, and its `test` check."""

    repo: str  # the repository, copied into the workspace
    tasks: str  # the graph
    script: str  # the dry run's script
    verify: str  # the `test` check's arguments to the interpreter running CodeFleet
    model: str | None = None  # the offline model's script; None: no `--offline`

    def checks(self) -> dict[str, str]:
        """The graph file says `python ...` (readable, and right wherever `python` is the
        interpreter you want); the demo pins the one running CodeFleet instead of trusting PATH."""
        return {"test": python_command(self.verify)}


EXAMPLES: Final = {
    "python": DemoExample(
        "demo-repo", "demo-tasks.yaml", "demo-script.yaml", DEMO_VERIFY, "demo-model.yaml"
    ),
    "typescript": DemoExample(
        "ts-demo", "ts-demo-tasks.yaml", "ts-demo-script.yaml", "tests/check_router.py"
    ),
}
DEMO_AUTHOR = Author("CodeFleet demo", "demo@codefleet.invalid")  # when git knows nobody
DEMO_IDENTITY = {
    f"GIT_{role}_{part.upper()}": getattr(DEMO_AUTHOR, part)
    for role in ("AUTHOR", "COMMITTER")
    for part in ("name", "email")
}


def examples_dir() -> Path:
    """The shipped examples: inside the wheel, or at the root of a source checkout."""
    packaged = Path(str(resources.files("codefleet").joinpath("_examples")))
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[4] / "examples"


def make_workspace(run_dir: Path, repo: str = "demo-repo") -> Path:
    """A fresh copy of an example repository under `run_dir`, as a git repository if git exists."""
    prepare_dirs(run_dir)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    workspace = (run_dir / f"demo-{stamp}-{secrets.token_hex(2)}").resolve()
    shutil.copytree(examples_dir() / repo, workspace / "tree")
    if shutil.which("git") is not None:
        init_repository(workspace / "tree")
    return workspace


def init_repository(tree: Path) -> None:
    """`git init` the tree and commit it as it is: the commit the fleet's branch starts from."""
    env = {**os.environ, **DEMO_IDENTITY, "GIT_CEILING_DIRECTORIES": str(tree.parent)}
    for args in (
        ["init", "--quiet", "--initial-branch=main"],
        ["add", "--all"],
        [
            "commit",
            "--quiet",
            "--no-verify",
            "--no-gpg-sign",
            "-m",
            "The demo repository, as shipped",
        ],
    ):
        subprocess.run(["git", *args], cwd=tree, env=env, check=True, capture_output=True)


def demo_executor(mode: str, examples: Path, example: DemoExample = EXAMPLES["python"]) -> Executor:
    """The agents of one demo runner: scripted, real CLI + fake model, or real Claude."""
    if mode == "dry-run":
        return ScriptedExecutor(load_script(examples / example.script), wait_poll=DEMO_WAIT_POLL_S)
    from codefleet.session.sdk import (
        SessionExecutor,  # on use: only the chosen agent's executor (and its SDK) loads
    )

    limits = Settings()  # model, turn and budget limits from CODEFLEET_* / .env
    if mode == "offline":
        from codefleet.session.offline import (  # on use: only the chosen agent's executor (and its SDK) loads
            model_file_executor,
            shared_model,
        )

        # A fresh fake model per demo: a second demo in one process must not see the
        # first one's requests (its `wait_for` holds would be met by them at once).
        shared_model.cache_clear()

        if example.model is None:
            raise NotImplementedError("this example has no scripted model: use --dry-run")
        return model_file_executor(
            examples / example.model,
            max_turns=limits.max_turns,
            max_budget_usd=limits.task_budget_usd,
        )
    return SessionExecutor(  # `demo` refused earlier without a key or a login
        model=limits.model, max_turns=limits.max_turns, max_budget_usd=limits.task_budget_usd
    )


def demo_shell(mode: str) -> ShellConfig | None:
    """How the demo's `shell: true` tasks run commands: in bubblewrap when it is there;
    without it only for the scripted model (our own workload), never for a real one."""
    return host_shell(ShellLimits(), unsandboxed=mode != "live")


MIXED_AGENTS: Final = {"T1": "claude", "T3": "claude", "T4": "codex"}


def mixed_graph(graph: GraphTasks) -> GraphTasks:
    """The demo graph with `MIXED_AGENTS` pinned: the staged veto crosses agents."""
    tasks = [
        {**spec, "agent": MIXED_AGENTS[spec["id"]]} if spec["id"] in MIXED_AGENTS else spec
        for spec in graph
    ]
    return graph.with_tasks(tasks)  # its checks, sequences and integration kept


def mixed_executor(examples: Path) -> Executor:
    """The Codex runner of the mixed offline demo, on the Claude runners' fake model."""
    from codefleet.session.codexagents import (
        model_file_codex_executor,  # on use: only the chosen agent's executor (and its SDK) loads
    )

    return model_file_codex_executor(examples / "demo-model.yaml")


def demo_committer(tree: Path, console: Console) -> LiveCommitter | None:
    """The live committer of the demo; None (with a note) when git is missing."""
    try:
        author = None if Repo.open(tree).has_identity() else DEMO_AUTHOR
        return open_committer(tree, None, author)
    except GitError as err:
        console.print(f"[yellow]not committing the demo's work:[/] {escape(str(err))}", markup=True)
        return None


def probe_views(tree: Path) -> None:
    """Probe once, ahead of the fleet, how commands (`shell_support`) and checks
    (`layer_problem`) run over `tree`: both are kept, so the first command and the first
    check do not wait for a probe's processes."""
    shell_support()
    layer_problem(tree)


async def _demo(
    settings: Settings,
    mode: str,
    runners: int,
    console: Console,
    commit: bool,
    mixed: bool = False,
    example: DemoExample = EXAMPLES["python"],
) -> bool:
    # The committer's git calls and the probes of how commands and checks run here wait on
    # processes in worker threads while this one builds the server's app.
    loop = asyncio.get_running_loop()
    opening = (
        loop.run_in_executor(None, demo_committer, settings.workdir, console) if commit else None
    )
    probing = loop.run_in_executor(None, probe_views, settings.workdir)
    server = ServerThread(settings)
    server.launch()  # it opens its database and landed line while the graph and agents load
    with contextlib.ExitStack() as running:
        running.callback(server.stop)  # as leaving `with ServerThread(...)` does
        graph = load_graph(examples_dir() / example.tasks)
        graph = mixed_graph(graph) if mixed else graph
        agents = demo_agents(mode, runners, example, mixed)
        server.start()  # it serves from here on
        committer = await opening if opening is not None else None
        await _load_and_announce(server, settings, graph, example, console, committer)
        await probing
        stop = asyncio.Event()
        follower = asyncio.create_task(follow_compact(server.url, settings.token, console, stop))
        try:
            result = await _demo_fleet(server, settings, mode, runners, agents)
            history = await committer.finish(server.url, settings.token) if committer else None
        finally:
            stop.set()
            await follower  # it prints up to the server's last event, then returns
        scopes = ScopeWatch()  # a fresh server: its log starts with every task_created
        async with FleetClient(server.url, token=settings.token) as client:
            conflicts = await client.conflicts()
            events = await client.all_events()
        for event in events:
            scopes.take(event)
        server.request_stop()  # it winds down while the verdict prints; leaving `with` joins it
        for pair in side_by_side(events):  # leases by part: two tasks in one file at once
            console.print(f"[bold cyan]SIDE BY SIDE[/]  {escape(pair.describe())}", markup=True)
        print_result(
            console, result, conflicts, simulated_cost=mode != "live", outside=scopes.outside
        )
        if committer is not None and history is not None:
            print_history(console, history, committer.log(history), land_hint=False)
            console.print(
                f"[dim]in {escape(str(settings.workdir))}: git log --stat "
                f"{escape(history.branch)}[/]",
                markup=True,
            )
    return result.ok and (history is None or history.ok)


async def _load_and_announce(
    server: ServerThread,
    settings: Settings,
    graph: GraphTasks,
    example: DemoExample,
    console: Console,
    committer: LiveCommitter | None,
) -> None:
    """Load the demo's tasks and checks, say where the server, dashboard and branch are."""
    async with FleetClient(server.url, token=settings.token) as client:
        await client.create_tasks(graph, {**graph.checks, **example.checks()})
    tree = escape(str(settings.workdir))
    console.print(f"[bold]server[/] {server.url}  ·  tree {tree}", markup=True)
    console.print(
        f"[bold]dashboard[/] {server.url}/?token={settings.token}  (while the demo runs)",
        markup=True,
    )
    if committer is not None:
        console.print(
            f"[bold]branch[/] {escape(committer.branch)}  (each task committed as it succeeds)",
            markup=True,
        )
        committer.start(server.url, settings.token, since=0)


@dataclass(frozen=True, slots=True)
class DemoAgents:
    """The demo's agents: one executor every runner shares (as `run` shares one), a Codex one
    for the last runner of a mixed demo, and the example's verify."""

    executor: Executor
    codex: Executor | None
    runners: int
    verify: str

    def kind(self, n: int) -> str:
        return "codex" if self.codex is not None and n == self.runners else "claude"

    def for_runner(self, n: int) -> Executor:
        return self.codex if self.codex is not None and self.kind(n) == "codex" else self.executor


def demo_agents(mode: str, runners: int, example: DemoExample, mixed: bool) -> DemoAgents:
    """The executors of the demo's runners; with `mixed` the last is a Codex runner."""
    examples = examples_dir()
    executor = demo_executor(mode, examples, example)
    codex = mixed_executor(examples) if mixed else None
    return DemoAgents(executor, codex, runners, example.verify)


async def _demo_fleet(
    server: ServerThread, settings: Settings, mode: str, runners: int, agents: DemoAgents
) -> FleetResult:
    """The demo's runners until the graph drains."""
    runner = RunnerOptions(
        "runner",
        settings.workdir,
        settings.run_dir,
        protected=(settings.db, settings.run_dir / "runners"),
        shell_config=demo_shell(mode),
    )
    options = FleetOptions(
        runner,
        runners=runners,
        verify=python_command(agents.verify),
        simulated=mode != "live",
        agent_for=agents.kind,
    )
    return await run_fleet(server.url, agents.for_runner, options, token=settings.token)


def run_demo(
    mode: str,
    run_dir: Path,
    runners: int = 3,
    console: Console | None = None,
    commit: bool = True,
    mixed: bool = False,
    example: str = "python",
) -> bool:
    """Run the demo on a fresh copy of `example` (a key of `EXAMPLES`); True when it passed."""
    console = console or Console()
    chosen = EXAMPLES[example]
    workspace = make_workspace(run_dir, chosen.repo)
    settings = Settings(
        host="127.0.0.1",
        port=0,
        db=workspace / "codefleet.db",
        workdir=workspace / "tree",
        run_dir=workspace,
        runners=runners,
        token=secrets.token_urlsafe(
            24
        ),  # a per-run token: nothing else on the machine can drive it
        # T1's verify is the integration check: the demo runs it at the session's end too, to
        # show a verify failing and the retry it starts (a fleet leaves it to the landing)
        verify_before_landing=True,
    )
    label = f"{mode}, mixed: Claude Code + Codex" if mixed else mode
    label += "" if example == "python" else f", the {example} example"
    console.print(f"[bold]CodeFleet demo[/] ({label}) in {escape(str(workspace))}", markup=True)
    return asyncio.run(_demo(settings, mode, runners, console, commit, mixed, chosen))
