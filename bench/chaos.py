"""Chaos run: real processes killed (SIGKILL) or frozen (SIGSTOP) mid-run, then the invariant checker.

    uv run python bench/chaos.py --seed 1 --tasks 500 --runners 8 --duration 300

A seeded workload (`build_workload`): a task graph over a small tree in which
every task writes its own notes file, edits one line of each dependency's
notes (so it can only succeed after them), appends to one or two of a few hot
shared files (declared in its scope only half the time, so vetoes happen),
sleeps a little between steps, and sometimes fails its first attempt on
purpose after writing. With `--hub-modules K`, half the tasks also edit their own
function of one of K shared modules first (Python, TypeScript and Go in turn); with `--lease-granularity part`
they lease only that function, so several tasks write one module at once and a
failed or taken-back one puts back only its part; some of them end their first attempt
with a write the gate cannot map to parts (the whole module: a part -> whole upgrade)
that fails, and a quarter of the tasks add a function to a module that starts empty
(`shared/__init__.py`), whose first writer fails once (issue 51). The scripted executor
plays it through the real `WriteGate`.

The driver starts `codefleet serve` and N `codefleet runner --dry-run` processes
(a fresh per-run token), loads the graph, streams the events like a dashboard
would (reconnecting after every server death), and plays a seeded fault plan:
each fault fires once the graph is that far along (and a minimum gap after the
previous one), so the plan fires at the same points of progress on any machine.
A fault SIGKILLs a random runner (restarted after a short pause, same name) or
the server (restarted on the same database and port), or freezes a runner with
SIGSTOP for longer than the stale window and then lets it go on (SIGCONT): the
server takes its task back and puts its files back while the runner, frozen,
may hold a lease answer in flight. When the graph drains it
stops the runners, kills and restarts the server once more to check the final
state reloads unchanged, and runs `codefleet.testing.invariants` over everything: the
event log and the stream, the ledger, the lease replay, the task rows, the
tree rebuilt from the original by `git apply` of every succeeded task's patch in
completion order, and the content oracle: every path holds the content its last
succeeded writer hashed right after writing it (`invariants_content`), and the landing
contract (`invariants_landing`): every task lands through the integration check `clean`
(no file under out/ says BROKEN), which one task in 20 (`--breakers`) breaks on its first attempt, so
landings are blamed, rolled back and reworked under the same faults; a hot file waiting to
land is taken over by its next writer (a stack), undone with it when it is blamed. A quarter
of the tasks end with `run_check notes` and verify with it (reused where the content held
still; one in four of them appends after the check, so it runs again), one in twenty runs the
`reuse: false` check `stamp` twice; the tree is a git repository so checks have a content
identity, and every reuse must be proved by the log (`invariants_reuse`). `--duration` bounds
the whole run; a graph that has not drained by then is a failure.

With `--clones` every runner works in its own clone of the landed line
(`runner --clone`, a directory of its own under the run's), `--mixed` half of
them (the even-numbered); the tree is then a git repository, one
`runner --landing-only` runs the landing checks in it, a killed clone runner
loses its directory with its process group (a pod lost with its disk: no git it
ran writes on after it) and comes back to a fresh empty one, and the landed line is checked too (`invariants_line`):
its tip is the final tree, its commits the landings in order, each once.

Prints one JSON summary (also `--json FILE`); exits 0 only with zero violations,
every task terminal, and no process dying on its own.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from codefleet.api.client import FleetClient, ServerUnavailable
from codefleet.api.graphfile import GraphTasks
from codefleet.testing.invariants import (
    Evidence,
    Violation,
    check,
    collect,
    compare_trees,
    replay_patches,
)
from codefleet.testing.invariants_content import check_contents, expected_contents
from codefleet.testing.invariants_landing import check_landing
from codefleet.testing.invariants_line import check_line, collect_line
from codefleet.testing.invariants_reuse import check_reuse

HOST = "127.0.0.1"
# Every landing must pass this check: no file under out/ says BROKEN. A few scripted
# tasks write one on their first attempt, so landing blames them and they are reworked.
INTEGRATION = "clean"
MARKER = "BROKEN"
# Some tasks run VERIFY by `run_check` at their end and verify with it: on the same content
# the verify reuses that run; after a later write it runs again. FRESH is `reuse: false`.
VERIFY = "notes"
FRESH = "stamp"
CHECKS = {INTEGRATION: f"! grep -rqs {MARKER} out", VERIFY: "test -f README.md", FRESH: "true"}
REUSE_SHARE = 0.25  # of the tasks (at least one): VERIFY by run_check, then verified with it
REWRITE_EVERY = 4  # one in 4 of those appends to its notes after the check (it runs again)
FRESH_SHARE = 0.05  # of the tasks (at least one): FRESH twice on one content (runs both times)
BREAKERS_PER = 20  # by default one breaker per this many tasks, at least one
STOP_WAIT_S = 15.0
IDENTITY = ("-c", "user.name=chaos", "-c", "user.email=chaos@localhost")


# -- the workload ----------------------------------------------------------------------------


@dataclass
class Workload:
    graph: list[dict[str, Any]]
    script: dict[str, list[dict[str, Any]]]
    files: dict[str, str]
    sequences: dict[str, dict[str, Any]] = field(default_factory=dict)
    breakers: list[str] = field(default_factory=list)


def build_workload(
    seed: int, tasks: int, hot_files: int = 12, fail_rate: float = 0.05,
    breakers: int | None = None, hub_modules: int = 0,
) -> Workload:  # fmt: skip
    """The seeded graph, the script the scripted agents play, and the original tree."""
    rng = random.Random(seed)
    ids = [f"T{n:04d}" for n in range(1, tasks + 1)]
    hot = [f"shared/hot{k:02d}.txt" for k in range(hot_files)]
    weights = [1.0 / (k + 1) for k in range(hot_files)]  # a few files are much hotter
    deps: dict[str, list[str]] = {}
    for n, task_id in enumerate(ids):
        window = ids[max(0, n - 40) : n]
        count = rng.choice((0, 0, 1, 1, 2)) if window else 0
        deps[task_id] = sorted(rng.sample(window, min(count, len(window))))
    children: dict[str, list[str]] = {t: [] for t in ids}
    for task_id, parents in deps.items():
        for parent in parents:
            children[parent].append(task_id)
    graph, script = [], {}
    for task_id in ids:
        appends = sorted(set(rng.choices(hot, weights, k=rng.choice((1, 1, 2)))))
        steps = _steps(rng, task_id, deps[task_id], children[task_id], appends, fail_rate)
        script[task_id] = steps
        graph.append(
            {
                "id": task_id,
                "title": f"chaos task {task_id}",
                "description": "scripted",
                "priority": rng.randint(1, 5),
                "depends_on": deps[task_id],
                "file_scope": appends if rng.random() < 0.5 else [],
                "max_attempts": 50,
            }
        )
    files = {path: f"# {path}\n" for path in hot}
    files |= {"README.md": "chaos tree\n", "out/.keep": ""}
    _add_resources(random.Random(seed + 1), graph, script)
    files |= _add_hubs(random.Random(seed + 3), graph, script, hub_modules)
    count = max(1, tasks // BREAKERS_PER) if breakers is None else breakers
    chosen = _add_breakers(random.Random(seed + 2), ids, script, count)
    _add_reuses(random.Random(seed + 4), graph, script)
    return Workload(graph, script, files, {SEQUENCE: {"start": 1}}, chosen)


def _add_breakers(
    rng: random.Random, ids: list[str], script: dict[str, list[dict[str, Any]]], count: int
) -> list[str]:
    """A few tasks write the marker the integration check refuses, on their first attempt
    only: each such landing fails, the task is blamed, rolled back and lands on its rework."""
    chosen = sorted(rng.sample(ids, min(len(ids), count)))
    for task_id in chosen:
        write = {"path": f"out/{task_id}/broken.txt", "content": f"{MARKER}\n"}
        script[task_id].insert(1, {"write": write, "attempt": 1})
    return chosen


def _add_reuses(
    rng: random.Random, graph: list[dict[str, Any]], script: dict[str, list[dict[str, Any]]]
) -> None:
    """From their own random stream, a fixed share of the tasks each: some end with `check:
    VERIFY` and verify with it (the verify reuses that run when the content held still), one
    in REWRITE_EVERY of them appends to its notes after it (the verify runs again), and some
    run the `reuse: false` FRESH twice (it runs both times)."""
    ids = [spec["id"] for spec in graph]
    chosen = rng.sample(ids, max(1, round(len(ids) * REUSE_SHARE)))
    for n, task_id in enumerate(chosen):
        script[task_id].append({"check": VERIFY})
        if n % REWRITE_EVERY == 0:
            append = {"path": f"out/{task_id}/notes.txt", "text": "checked\n"}
            script[task_id].append({"append": append})
    for spec in graph:
        if spec["id"] in chosen:
            spec["verify"] = VERIFY
    for task_id in rng.sample(ids, max(1, round(len(ids) * FRESH_SHARE))):
        script[task_id] += [{"check": FRESH}, {"check": FRESH}]


SEQUENCE = "migrations"


def _add_hubs(
    rng: random.Random,
    graph: list[dict[str, Any]],
    script: dict[str, list[dict[str, Any]]],
    modules: int,
) -> dict[str, str]:
    """Hub modules (Python, TypeScript and Go in turn: `HUB_KINDS`) with one function per
    task that edits it (half the tasks, from their own random stream): under part leases they share the module, under file leases
    they take turns. The edit comes first, so a task failing later rolls its part back.
    Plus the two ways a part holder's pre-image could erase a landed change (issue 51):
    `_add_upgrades` and `_add_empty_module`."""
    if modules <= 0:
        return {}
    kinds = [HUB_KINDS[k % len(HUB_KINDS)] for k in range(modules)]
    hubs = {f"shared/hub{k:02d}{kind[0]}": kind for k, kind in enumerate(kinds)}
    body: dict[str, list[str]] = {hub: [] for hub in hubs}
    edited: dict[str, str] = {}  # task -> the hub it edits
    for spec in graph:
        if rng.random() < 0.5:
            task_id, hub = spec["id"], rng.choice(list(hubs))
            body[hub].append(hubs[hub][2].format(task=task_id))
            old, new = f'"{task_id}-todo"', f'"{task_id}-done"'
            script[task_id].insert(1, {"edit": {"path": hub, "old": old, "new": new}})
            edited[task_id] = hub
    _add_upgrades(random.Random(rng.random()), script, edited)
    files = {hub: hubs[hub][1] + "".join(lines) for hub, lines in body.items()}
    return files | _add_empty_module(random.Random(rng.random()), graph, script)


# The hubs' languages, in turn: (suffix, the module's head, a task's function in it)
HUB_KINDS: tuple[tuple[str, str, str], ...] = (
    (".py", '"""A hub."""\n\nimport os\n', '\n\ndef f_{task}():\n    return "{task}-todo"\n'),
    (
        ".ts",
        '// A hub.\nimport { join } from "path";\n',
        '\nexport function f_{task}(): string {{\n  return "{task}-todo";\n}}\n',
    ),
    (
        ".go",
        '// Package shared is a hub.\npackage shared\n\nimport "os"\n',
        '\nfunc F_{task}() string {{\n\treturn "{task}-todo"\n}}\n',
    ),
)


UPGRADE_SHARE = 0.3  # of the hub tasks: a first attempt that takes its hub whole, then fails
EMPTY_MODULE = "shared/__init__.py"
EMPTY_MODULE_SHARE = 0.25  # of the tasks: each adds a function to the module that starts empty


def _add_upgrades(
    rng: random.Random, script: dict[str, list[dict[str, Any]]], edited: Mapping[str, str]
) -> None:
    """Some hub tasks end their first attempt with an Edit whose old text is not in the
    hub, after a pause: the gate cannot map it to parts, so the task asks for the whole
    module (vetoed while another holds a part of it, else granted: the part -> whole
    upgrade), and the Edit fails. Meanwhile others' changes to the hub may have landed:
    the rollback must keep them."""
    for task_id, hub in sorted(edited.items()):
        if rng.random() < UPGRADE_SHARE:
            steps = script[task_id]
            steps.append({"sleep": round(rng.uniform(0.1, 0.4), 3), "attempt": 1})
            missing = {"path": hub, "old": f"<{task_id}: not in the file>", "new": "x"}
            steps.append({"edit": missing, "attempt": 1})


def _add_empty_module(
    rng: random.Random, graph: list[dict[str, Any]], script: dict[str, list[dict[str, Any]]]
) -> dict[str, str]:
    """A module that starts empty (an `__init__.py`). The first task (first by priority)
    fills it with `seed()` from nothing (its pre-image has no parts), waits for one of the
    tasks adding a function before `seed()` to succeed, and fails its first attempt: its
    rollback must remove `seed()` and nothing that task added. Its later attempts put
    `seed()` back at the top (the whole module: an empty old text of a non-empty file)."""
    first, rest = graph[0], graph[1:]
    adders = [spec["id"] for spec in rest if rng.random() < EMPTY_MODULE_SHARE]
    if not adders:
        return {}
    first["priority"] = 5  # the highest: it starts before the tasks that build on its seed()
    seed = {"path": EMPTY_MODULE, "old": "", "new": "def seed():\n    return 0\n\n\n"}
    script[first["id"]][1:1] = [
        {"edit": seed},
        {"wait_succeeded": adders[0], "attempt": 1},
        {"fail": f"{first['id']} fails after filling the empty module", "attempt": 1},
    ]
    for task_id in adders:
        new = f"def g_{task_id}():\n    return 1\n\n\ndef seed():"
        script[task_id].insert(
            1, {"edit": {"path": EMPTY_MODULE, "old": "def seed():", "new": new}}
        )
    return {EMPTY_MODULE: ""}


def _add_resources(
    rng: random.Random, graph: list[dict[str, Any]], script: dict[str, list[dict[str, Any]]]
) -> None:
    """Named resources and a sequence, from their own random stream (the rest is unchanged):
    a fifth of the tasks declare `db`, a tenth `cache`; a tenth take `cache` mid-task (a
    veto while another holds it); a quarter take a migration number and write a file it names."""
    for spec in graph:
        task_id, steps = spec["id"], script[spec["id"]]
        declared = [name for name, p in (("db", 0.2), ("cache", 0.1)) if rng.random() < p]
        if declared:
            spec["resources"] = declared
        if rng.random() < 0.1:
            steps.insert(1, {"acquire_resource": "cache"})
        if rng.random() < 0.25:
            path = f"out/{task_id}/m{{number:04d}}.txt"
            steps.insert(1, {"next_number": {"sequence": SEQUENCE, "write": path,
                                             "content": "{number}\n"}})  # fmt: skip


def _steps(
    rng: random.Random,
    task_id: str,
    parents: list[str],
    kids: list[str],
    appends: list[str],
    fail_rate: float,
) -> list[dict[str, Any]]:
    notes = "".join(f"child {kid}: todo\n" for kid in kids)
    steps: list[dict[str, Any]] = [
        {"write": {"path": f"out/{task_id}/notes.txt", "content": f"# {task_id}\n{notes}"}}
    ]
    for parent in parents:
        old = f"child {task_id}: todo"
        steps.append(
            {
                "edit": {
                    "path": f"out/{parent}/notes.txt",
                    "old": old,
                    "new": f"child {task_id}: done",
                }
            }
        )
    for path in appends:
        steps.append({"sleep": round(rng.uniform(0.01, 0.08), 3)})
        steps.append({"append": {"path": path, "text": f"{task_id}\n"}})
    if rng.random() < fail_rate:
        steps.append({"fail": f"{task_id} fails its first attempt on purpose", "attempt": 1})
    return steps


# -- processes ----------------------------------------------------------------------------------


@dataclass
class Proc:
    name: str
    command: list[str]
    log: Path
    env: dict[str, str]
    cwd: Path
    popen: subprocess.Popen[bytes] | None = None
    killed_by_us: bool = False
    clone: Path | None = None  # a clone runner's own directory (`runner --clone`)

    def start(self) -> None:
        self.killed_by_us = False
        with self.log.open("ab") as out:
            out.write(f"\n--- start {time.strftime('%H:%M:%S')}\n".encode())
            self.popen = subprocess.Popen(
                self.command,
                cwd=self.cwd,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=self.clone is not None,  # a pod: the runner and its gits
            )

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def kill(self) -> None:
        if self.popen is not None and self.alive():
            self.killed_by_us = True
            self.popen.send_signal(signal.SIGKILL)
            self.popen.wait()

    def lose_pod(self) -> None:
        """A clone runner's pod lost: SIGKILL its process group (a git it ran dies with it,
        not left writing into the directory), then its directory: it restarts empty."""
        assert self.clone is not None
        if self.popen is not None and self.alive():
            self.killed_by_us = True
            os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait()
            _wait_group_gone(self.popen.pid)
        shutil.rmtree(self.clone, ignore_errors=True)

    def stop(self, timeout: float = STOP_WAIT_S) -> int | None:
        """SIGTERM (a runner leaves gracefully), SIGKILL if it does not exit in time."""
        if self.popen is None or not self.alive():
            return None if self.popen is None else self.popen.returncode
        self.killed_by_us = True
        self.popen.send_signal(signal.SIGTERM)
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            return self.popen.wait()


def _wait_group_gone(pgid: int, timeout: float = 5.0) -> None:
    """Until no live (non-zombie) process is left in group `pgid`, or `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        live = False
        for stat in Path("/proc").glob("[0-9]*/stat"):
            with contextlib.suppress(OSError, IndexError, ValueError):
                fields = stat.read_text().rsplit(")", 1)[1].split()
                live = live or (fields[0] != "Z" and int(fields[2]) == pgid)
        if not live:
            return
        time.sleep(0.02)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


# -- the run --------------------------------------------------------------------------------


@dataclass
class Fault:
    kind: str  # "runner" or "server" (SIGKILL), "pause" (SIGSTOP, SIGCONT), "rogue"
    at_progress: float
    target: int = 0
    down_s: float = 0.0
    fired_at_s: float | None = None


@dataclass
class Summary:
    seed: int
    tasks: int
    runners: int
    clone_runners: int = 0  # of `runners`, those in clones of their own (`--clones`, `--mixed`)
    duration_s: float = 0.0
    phases_s: dict[str, float] = field(default_factory=dict)
    drained: bool = False
    faults_planned: dict[str, int] = field(default_factory=dict)
    faults_injected: dict[str, int] = field(default_factory=dict)
    fault_log: list[str] = field(default_factory=list)
    unexpected_exits: list[str] = field(default_factory=list)
    statuses: dict[str, int] = field(default_factory=dict)
    events: int = 0
    observed_events: int = 0
    vetoes: int = 0
    waits: dict[str, int] = field(default_factory=dict)  # lease_waited outcomes
    fail_closed: int = 0  # writes refused because the server could not be asked
    restores: int = 0
    unrestorable: int = 0
    contents_checked: int = 0  # paths whose final content the oracle compared
    resource_grants: int = 0  # named resources taken (at assignment or mid-task)
    part_grants: int = 0  # leases on parts of a file (`path::name`, `--lease-granularity part`)
    part_grants_by_suffix: dict[str, int] = field(default_factory=dict)  # `.py`, `.ts`, `.go`
    part_vetoes: int = 0
    part_upgrades: int = 0  # a whole file granted to a task holding parts of it
    resource_vetoes: int = 0  # a resource refused because another task held it
    numbers_allocated: int = 0  # sequence values handed out (the checker: none twice)
    numbers_distinct: bool = True
    requeues: dict[str, int] = field(default_factory=dict)
    landed: int = 0
    landing_checks: int = 0  # landing_check_finished events (batches, bisections, bases)
    integration_failed: int = 0
    stacks: int = 0  # files taken over from tasks waiting to land (`lease_acquired` stacked_on)
    stacks_undone: int = 0  # attempts undone with a task that did not land (`stack_unwound`)
    repairs: int = 0  # failed checks handed back to the session that made the change
    checks_reused: int = 0  # checks not run: they passed on the same content (`check_reused`)
    landing_reused: int = 0  # landing checks not run, for the same reason (`view: reused`)
    final_restart_identical: bool = False
    line_commits: int = 0  # landed tasks on the landed line (0: the tree has no line)
    levels: int = 0  # clone grants of a file landed anew since the attempt began (`_levels`)
    violations: list[str] = field(default_factory=list)
    workdir: str = ""

    @property
    def ok(self) -> bool:
        all_terminal = sum(self.statuses.values()) == self.tasks and self.drained
        return all_terminal and not self.violations and not self.unexpected_exits


def plan_faults(
    rng: random.Random,
    runners: int,
    server_kills: int,
    runner_kills: int,
    rogue_writes: int = 0,
    pauses: int = 0,
    stale_after: float = 10.0,
) -> list[Fault]:
    faults = [
        Fault("rogue", rng.uniform(0.1, 0.9), rng.randrange(1000)) for _ in range(rogue_writes)
    ]
    faults += [  # frozen past the stale window: its task is taken back while it sleeps
        Fault(
            "pause",
            rng.uniform(0.05, 0.85),
            rng.randrange(runners),
            stale_after + rng.uniform(1, 4),
        )
        for _ in range(pauses)
    ]
    faults += [
        Fault("server", rng.uniform(0.05, 0.85), down_s=rng.uniform(0.2, 1.5))
        for _ in range(server_kills)
    ]
    faults += [
        Fault("runner", rng.uniform(0.02, 0.9), rng.randrange(runners), rng.uniform(0.0, 1.5))
        for _ in range(runner_kills)
    ]
    return sorted(faults, key=lambda f: f.at_progress)


class Chaos:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.rng = random.Random(args.seed)
        self.base = Path(tempfile.mkdtemp(prefix=f"codefleet-chaos-{args.seed}-"))
        self.tree, self.original = self.base / "tree", self.base / "original"
        self.port = free_port()
        self.url = f"http://{HOST}:{self.port}"
        self.token = secrets.token_urlsafe(16)
        self.in_clones = clone_runners(args.runners, args.clones, args.mixed)
        self.summary = Summary(
            args.seed, args.tasks, args.runners, len(self.in_clones), workdir=str(self.base)
        )
        self.observed: list[dict[str, Any]] = []
        self.pauses: list[asyncio.Task[None]] = []
        self.started = self._lap = time.monotonic()
        env = {k: v for k, v in os.environ.items() if not k.startswith("CODEFLEET_")}
        env |= {
            "CODEFLEET_BACKOFF_BASE": "0.2",
            "CODEFLEET_BACKOFF_CAP": "2",
            "CODEFLEET_TOKEN": self.token,
            "CODEFLEET_LEASE_WAIT": str(args.lease_wait),
            "CODEFLEET_LEASE_GRANULARITY": args.lease_granularity,
        }
        self.env = env
        self.exe = str(Path(sys.executable).parent / "codefleet")
        self.server = self._server_proc()
        self.runners = [self._runner_proc(n) for n in range(1, args.runners + 1)]
        # clone runners run no landing worker: one runs the landing checks in the tree
        self.landing = self._landing_proc() if self.in_clones else None

    @property
    def procs(self) -> list[Proc]:
        """Every process but the server's: the runners, and the landing worker if any."""
        return [*self.runners, *([self.landing] if self.landing else [])]

    def lap(self, phase: str) -> None:
        """Seconds since the previous lap, recorded under `phase`."""
        now = time.monotonic()
        self.summary.phases_s[phase] = round(now - self._lap, 1)
        self._lap = now

    # -- set-up -------------------------------------------------------------------------

    def prepare(self, workload: Workload) -> None:
        for rel, text in workload.files.items():
            target = self.tree / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        shutil.copytree(self.tree, self.original)
        (self.base / "script.yaml").write_text(yaml.safe_dump(workload.script, sort_keys=False))
        (self.base / "logs").mkdir()
        _git_init(self.tree)  # a check's content identity (and the clones' landed line) needs one

    def _server_proc(self) -> Proc:
        cmd = [self.exe, "serve", "--port", str(self.port), "--db", str(self.base / "chaos.db")]
        cmd += ["--workdir", str(self.tree), "--run-dir", str(self.base / "runs")]
        cmd += ["--stale-after", str(self.args.stale_after), "--heartbeat-interval", "1"]
        cmd += ["--tick-interval", "0.1"]
        cmd += ["--poll-interval", "1", "--task-timeout", "60"]  # the token: in the environment
        return Proc("server", cmd, self.base / "logs" / "server.log", self.env, self.base)

    def _runner_proc(self, n: int) -> Proc:
        name = f"runner-{n}"
        script = str(self.base / "script.yaml")
        # --replace: a restarted runner takes its name back from the process we killed.
        cmd = [self.exe, "runner", "--name", name, "--replace", "--dry-run", "--script", script]
        cmd += ["--server", self.url, "--task-timeout", "60"]
        log = self.base / "logs" / f"{name}.log"
        if n in self.in_clones:  # its own directory, cloned when absent or empty
            clone = self.base / "clones" / name
            return Proc(name, [*cmd, "--clone", str(clone)], log, self.env, self.base, clone=clone)
        cmd += ["--workdir", str(self.tree), "--run-dir", str(self.base / "runs")]
        return Proc(name, cmd, log, self.env, self.base)

    def _landing_proc(self) -> Proc:
        cmd = [self.exe, "runner", "--name", "landing", "--replace", "--landing-only"]
        cmd += ["--server", self.url, "--workdir", str(self.tree)]
        cmd += ["--run-dir", str(self.base / "runs")]
        return Proc("landing", cmd, self.base / "logs" / "landing.log", self.env, self.base)

    async def wait_up(self, client: FleetClient, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            with contextlib.suppress(ServerUnavailable):
                await client.health()
                return
            if not self.server.alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the server did not come up; see {self.server.log}")
            await asyncio.sleep(0.05)

    # -- the observer ---------------------------------------------------------------------

    async def observe(self) -> None:
        """Stream every event like a dashboard, resuming from the last id after each outage."""
        async with FleetClient(self.url, token=self.token) as client:
            while True:
                since = self.observed[-1]["id"] if self.observed else 0
                try:
                    async for event in client.stream(since):
                        self.observed.append(event)
                except ServerUnavailable:
                    await asyncio.sleep(0.1)

    # -- faults ------------------------------------------------------------------------------

    async def inject(self, fault: Fault, client: FleetClient) -> None:
        fault.fired_at_s = round(time.monotonic() - self.started, 2)
        if fault.kind == "rogue":  # the control: a write that bypasses the lock must be caught
            hot = sorted((self.tree / "shared").iterdir())
            target = hot[fault.target % len(hot)]
            with target.open("a") as handle:
                handle.write("rogue line, written around the lock\n")
            self.summary.faults_injected["rogue"] = self.summary.faults_injected.get("rogue", 0) + 1
            self.summary.fault_log.append(f"{fault.fired_at_s}s: rogue append to {target.name}")
            return
        if fault.kind == "pause":  # in the background: other faults may fire meanwhile
            self.pauses.append(asyncio.create_task(self._pause(self.runners[fault.target], fault)))
            return
        if fault.kind == "server":
            self.server.kill()
            await asyncio.sleep(fault.down_s)
            self.server.start()
            await self.wait_up(client)
        else:
            proc = self.runners[fault.target]
            if proc.clone is None:
                proc.kill()
            else:
                proc.lose_pod()
            await asyncio.sleep(fault.down_s)
            proc.start()
        self.summary.faults_injected[fault.kind] = (
            self.summary.faults_injected.get(fault.kind, 0) + 1
        )
        who = "server" if fault.kind == "server" else self.runners[fault.target].name
        lost = (
            " and its clone" if fault.kind == "runner" and self.runners[fault.target].clone else ""
        )
        self.summary.fault_log.append(
            f"{fault.fired_at_s}s @{fault.at_progress:.0%}: SIGKILL {who}{lost}, back after {fault.down_s:.1f}s"
        )

    async def _pause(self, proc: Proc, fault: Fault) -> None:
        """SIGSTOP past the stale window, then SIGCONT: the runner resumes where it froze."""
        popen = proc.popen  # a kill meanwhile replaces it; the SIGCONT is for this process
        if popen is None or popen.poll() is not None:
            return
        popen.send_signal(signal.SIGSTOP)
        self.summary.faults_injected["pause"] = self.summary.faults_injected.get("pause", 0) + 1
        self.summary.fault_log.append(
            f"{fault.fired_at_s}s @{fault.at_progress:.0%}: SIGSTOP {proc.name} for {fault.down_s:.1f}s"
        )
        try:
            await asyncio.sleep(fault.down_s)
        finally:
            if popen.poll() is None:
                popen.send_signal(signal.SIGCONT)

    def reap_unexpected(self) -> None:
        """A process that died without our SIGKILL is a finding: note it, restart it."""
        for proc in [self.server, *self.procs]:
            if proc.popen is not None and not proc.alive() and not proc.killed_by_us:
                self.summary.unexpected_exits.append(f"{proc.name} exited {proc.popen.returncode}")
                proc.start()

    async def drive(self, client: FleetClient, faults: list[Fault]) -> None:
        deadline = self.started + self.args.duration
        last_fault = 0.0
        pending = list(faults)
        while time.monotonic() < deadline:
            self.reap_unexpected()
            try:
                health = await client.health()
            except ServerUnavailable:
                await asyncio.sleep(0.1)
                continue
            live = int(health["live_tasks"])
            if live == 0:
                self.summary.drained = True
                return
            progress = 1 - live / self.args.tasks
            now = time.monotonic()
            if (
                pending
                and progress >= pending[0].at_progress
                and now - last_fault >= self.args.min_gap
            ):
                await self.inject(pending.pop(0), client)
                last_fault = time.monotonic()
            await asyncio.sleep(0.1)

    # -- the end ---------------------------------------------------------------------------

    async def finish(self, client: FleetClient) -> None:
        for paused in self.pauses:  # every frozen runner is let go before the runners stop
            paused.cancel()
        await asyncio.gather(*self.pauses, return_exceptions=True)
        for proc in self.procs:
            proc.stop()
        await self._catch_up(client)
        before = await _state(client)
        self.server.kill()  # one last crash: the final state must reload unchanged
        self.server.start()
        await self.wait_up(client)
        self.summary.final_restart_identical = before == await _state(client)
        evidence = await collect(client)
        _, _, fresh = await client.check_options()  # the checks declared `reuse: false`
        violations = check(evidence, self.observed)
        violations += check_landing(evidence.events, INTEGRATION, fresh)
        violations += check_reuse(evidence.events, fresh)
        violations += self._tree(evidence)
        if self.in_clones:
            violations += await self._line(client, evidence)
        if not self.summary.final_restart_identical:
            violations.append(Violation("restart", "the state read back after a restart differs"))
        self._figures(evidence, violations)

    async def _catch_up(self, client: FleetClient, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            last = int((await client.health())["last_event_id"])
            if self.observed and self.observed[-1]["id"] >= last:
                return
            await asyncio.sleep(0.05)

    def _tree(self, evidence: Evidence) -> list[Violation]:
        rebuilt = self.base / "rebuilt"
        found = replay_patches(self.original, evidence, rebuilt)
        found = found or compare_trees(rebuilt, self.tree)
        expected = expected_contents(evidence.events)
        self.summary.contents_checked = sum(1 for e in expected.values() if e.sha256)
        return found + check_contents(expected, self.tree)

    async def _line(self, client: FleetClient, evidence: Evidence) -> list[Violation]:
        """The landed line, cloned as a clone runner would: the landings, the final tree."""
        line = await collect_line(client, evidence, self.base / "line")
        if isinstance(line, Violation):
            return [line]
        self.summary.line_commits = len(line.tasks)
        return check_line(line, evidence, self.tree)

    def _figures(self, evidence: Evidence, violations: list[Violation]) -> None:
        s = self.summary
        kinds = Counter(e["type"] for e in evidence.events)
        s.statuses = dict(Counter(t["status"] for t in evidence.tasks.values()))
        s.events, s.observed_events = len(evidence.events), len(self.observed)
        s.vetoes, s.restores = kinds["lease_denied"], kinds["file_restored"]
        s.landed, s.integration_failed = kinds["landed"], kinds["integration_failed"]
        s.landing_checks = kinds["landing_check_finished"]
        s.stacks = sum(1 for e in evidence.events if e["payload"].get("stacked_on"))
        s.stacks_undone = kinds["stack_unwound"]
        s.repairs = kinds["repair_started"]
        s.checks_reused = kinds["check_reused"]
        s.landing_reused = sum(
            1
            for e in evidence.events
            if e["type"] == "landing_check_finished" and e["payload"].get("view") == "reused"
        )
        s.waits = dict(
            Counter(e["payload"]["outcome"] for e in evidence.events if e["type"] == "lease_waited")
        )
        s.unrestorable = kinds["restore_failed"]
        on_resource = [
            e for e in evidence.events if str(e["payload"].get("path")).startswith("/resource:")
        ]
        s.resource_grants = sum(e["type"] == "lease_acquired" for e in on_resource)
        s.resource_vetoes = sum(e["type"] == "lease_denied" for e in on_resource)
        on_part = [e for e in evidence.events if "::" in str(e["payload"].get("path"))]
        s.part_grants = sum(e["type"] == "lease_acquired" for e in on_part)
        granted = [str(e["payload"]["path"]) for e in on_part if e["type"] == "lease_acquired"]
        s.part_grants_by_suffix = dict(Counter(Path(k.split("::")[0]).suffix for k in granted))
        s.part_vetoes = sum(e["type"] == "lease_denied" for e in on_part)
        s.part_upgrades = _upgrades(evidence.events)
        clones = {str(a["id"]) for a in evidence.agents if a.get("workspace") == "clone"}
        s.levels = _levels(evidence.events, clones)
        numbers = [(e["payload"]["sequence"], e["payload"]["value"]) for e in evidence.events
                   if e["type"] == "number_allocated"]  # fmt: skip
        s.numbers_allocated, s.numbers_distinct = len(numbers), len(set(numbers)) == len(numbers)
        s.fail_closed = sum(
            1
            for e in evidence.events
            if e["type"] == "task_requeued" and "could not grant" in str(e["payload"].get("reason"))
        )
        s.requeues = dict(
            Counter(
                str(e["payload"].get("error_kind"))
                for e in evidence.events
                if e["type"] == "task_requeued"
            )
        )
        s.violations = [str(v) for v in violations]

    def cleanup(self, keep: bool) -> None:
        for proc in self.runners:  # a runner still frozen (the run failed mid-pause) must wake
            if proc.alive() and proc.popen is not None:
                proc.popen.send_signal(signal.SIGCONT)
        for proc in [*self.procs, self.server]:
            proc.stop(timeout=5)
        if not keep:
            shutil.rmtree(self.base, ignore_errors=True)


def clone_runners(runners: int, clones: bool, mixed: bool) -> frozenset[int]:
    """The runner numbers (1..runners) that work in clones: all, the even half, or none."""
    if clones:
        return frozenset(range(1, runners + 1))
    return frozenset(range(2, runners + 1, 2)) if mixed else frozenset()


def _git_init(tree: Path) -> None:
    """The tree as a git repository with one commit: the landed line starts from it."""
    for args in (
        ("init", "--quiet"),
        ("add", "--all"),
        (*IDENTITY, "commit", "--quiet", "-m", "chaos tree"),
    ):
        subprocess.run(["git", *args], cwd=tree, check=True, capture_output=True)


def _levels(events: list[dict[str, Any]], clone_agents: set[str]) -> int:
    """First grants of a file in a clone runner's attempt after a task that wrote it landed
    since the attempt began: the clone fetched it at the grant, and the write was a reread.
    From the log, so an upper bound: a landing just before the clone's reset counts too."""
    began: dict[str, int] = {}  # task -> its clone attempt's task_started id
    wrote: dict[str, set[str]] = {}  # task -> files its current attempt wrote
    landed_at: dict[str, int] = {}  # file -> the last task_succeeded of a task that wrote it
    granted: set[tuple[str, str]] = set()
    count = 0
    for event in events:
        kind, task_id = event["type"], str(event.get("task_id"))
        path = str(event["payload"].get("path"))
        if kind == "task_started":
            wrote[task_id] = set()
            granted = {g for g in granted if g[0] != task_id}
            began.pop(task_id, None)
            if event.get("agent_id") in clone_agents:
                began[task_id] = int(event["id"])
        elif kind == "file_changed":
            wrote.setdefault(task_id, set()).add(path)
        elif kind == "task_succeeded":
            landed_at |= dict.fromkeys(wrote.pop(task_id, set()), int(event["id"]))
        elif kind == "lease_acquired" and task_id in began and (task_id, path) not in granted:
            granted.add((task_id, path))
            count += landed_at.get(path, 0) > began[task_id]
    return count


def _upgrades(events: list[dict[str, Any]]) -> int:
    """Whole files granted to a task that then held a part of them (the part -> whole upgrade)."""
    held: set[tuple[str, str]] = set()  # (task, file) with a part held
    count = 0
    for event in events:
        task_id, path = event.get("task_id"), str(event["payload"].get("path"))
        if event["type"] == "lease_acquired":
            file, _, name = path.partition("::")
            count += not name and (task_id, file) in held
            if name:
                held.add((task_id, file))
        elif event["type"] == "lease_released":
            held.discard((task_id, path.partition("::")[0]))
    return count


async def _state(client: FleetClient) -> dict[str, Any]:
    """What must survive a restart: tasks, leases, events (not the live heartbeat times)."""
    tasks = [{k: v for k, v in t.items() if k != "runnable"} for t in await client.tasks()]
    leases = [{k: v for k, v in x.items() if k != "age_s"} for x in await client.leases()]
    return {"tasks": tasks, "leases": leases, "events": await client.all_events()}


async def run(args: argparse.Namespace) -> Summary:
    chaos = Chaos(args)
    workload = build_workload(
        args.seed, args.tasks, args.hot_files, args.fail_rate, args.breakers, args.hub_modules
    )
    chaos.prepare(workload)
    faults = plan_faults(
        chaos.rng, args.runners, args.server_kills, args.runner_kills, args.rogue_writes,
        args.runner_pauses, args.stale_after,
    )  # fmt: skip
    chaos.summary.faults_planned = dict(Counter(f.kind for f in faults))
    observer: asyncio.Task[None] | None = None
    try:
        async with FleetClient(chaos.url, token=chaos.token) as client:
            chaos.server.start()
            await chaos.wait_up(client)
            graph = GraphTasks(workload.graph, checks=CHECKS, sequences=workload.sequences)
            graph.check_fresh = frozenset({FRESH})
            await client.create_tasks(graph)
            await client.set_integration(INTEGRATION)
            observer = asyncio.create_task(chaos.observe())
            for proc in chaos.procs:
                proc.start()
            chaos.lap("start")
            await chaos.drive(client, faults)
            chaos.lap("drain")
            await chaos.finish(client)
            chaos.lap("check")
    finally:
        if observer is not None:
            observer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await observer
        chaos.summary.duration_s = round(time.monotonic() - chaos.started, 1)
        chaos.cleanup(keep=args.keep or not chaos.summary.ok)
    return chaos.summary


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--tasks", type=int, default=500)
    parser.add_argument("--runners", type=int, default=8)
    parser.add_argument("--duration", type=float, default=300.0, help="bound on the whole run, s")
    parser.add_argument(
        "--server-kills", type=int, default=None, help="default: 1 per 100 tasks, at least 2"
    )
    parser.add_argument("--runner-kills", type=int, default=None, help="default: 3 per 100 tasks")
    parser.add_argument(
        "--runner-pauses",
        type=int,
        default=None,
        help="SIGSTOP a runner past the stale window, then SIGCONT; default: 1 per 100 tasks",
    )
    parser.add_argument("--stale-after", type=float, default=10.0, help="the server's, seconds")
    parser.add_argument("--min-gap", type=float, default=1.0, help="seconds between two faults")
    parser.add_argument("--hot-files", type=int, default=12)
    parser.add_argument(
        "--hub-modules", type=int, default=0,
        help="Python modules half the tasks each edit one function of (0: none)",
    )  # fmt: skip
    parser.add_argument(
        "--lease-granularity", choices=["file", "part"], default="file",
        help="the server's CODEFLEET_LEASE_GRANULARITY",
    )  # fmt: skip
    parser.add_argument(
        "--rogue-writes",
        type=int,
        default=0,
        help="the control: append to hot files behind the lock's back (must be caught)",
    )
    parser.add_argument("--fail-rate", type=float, default=0.05)
    parser.add_argument(
        "--breakers",
        type=int,
        default=None,
        help="tasks whose first attempt breaks the integration check (default: 1 per 20 tasks)",
    )
    parser.add_argument(
        "--lease-wait", type=float, default=0.0, help="the server's CODEFLEET_LEASE_WAIT, seconds"
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--clones", action="store_true",
        help="every runner in its own clone of the landed line (runner --clone); a killed one "
        "loses its clone",
    )  # fmt: skip
    where.add_argument(
        "--mixed", action="store_true",
        help="the even-numbered runners in clones, the others in the tree",
    )  # fmt: skip
    parser.add_argument("--json", type=Path, default=None, help="also write the summary here")
    parser.add_argument(
        "--keep", action="store_true", help="keep the run directory (kept on failure)"
    )
    args = parser.parse_args(argv)
    if args.server_kills is None:
        args.server_kills = max(2, args.tasks // 100)
    if args.runner_kills is None:
        args.runner_kills = max(2, 3 * args.tasks // 100)
    if args.runner_pauses is None:
        args.runner_pauses = max(1, args.tasks // 100)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    summary = asyncio.run(run(args))
    text = json.dumps({**asdict(summary), "ok": summary.ok}, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0 if summary.ok else 1


if __name__ == "__main__":
    sys.exit(main())
