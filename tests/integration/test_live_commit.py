"""`run --commit` and the demo: each task is committed the moment it succeeds.

The demo runs whole (its own server, three scripted runners, a git workspace);
the interrupted run is the real `codefleet run --commit` process, killed while a
task is still running: the work that finished is on the branch already.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from git_support import checkout_to, commits_on, git, make_repository, person_state, tree_files
from rich.console import Console

from codefleet.api.client import FleetClient
from codefleet.cli.start.demo_run import run_demo
from codefleet.server.thread import ServerThread

FAST = {"heartbeat_interval": 0.1, "stale_after": 5.0, "tick_interval": 0.05, "backoff_base": 0.0}


def live_run(script: Path, server: ServerThread, tree: Path, tmp_path: Path) -> list[str]:
    """`codefleet run` with scripted agents committing each task to the branch `live`."""
    return [
        sys.executable,
        "-m",
        "codefleet.cli",
        "run",
        "--dry-run",
        "--commit",
        "--branch",
        "live",
        "--runners",
        "2",
        "--script",
        str(script),
        "--server",
        server.url,
        "--workdir",
        str(tree),
        "--run-dir",
        str(tmp_path / "runs"),
    ]


def test_the_dry_run_demo_ends_with_its_branch_and_five_commits_in_a_git_workspace(
    tmp_path: Path,
) -> None:
    out = io.StringIO()
    runs = tmp_path / ".codefleet" / "runs"  # where the demo runs by default: in a state dir

    ok = run_demo("dry-run", runs, console=Console(file=out, width=200))

    text = out.getvalue()
    assert ok, text
    assert "left out" not in text  # the tree's own .codefleet is ignored there as everywhere
    [tree] = runs.glob("demo-*/tree")
    [branch] = git(tree, "branch", "--list", "codefleet/*", "--format=%(refname:short)").split()
    commits = commits_on(tree, branch)
    assert sorted(c["trailers"]["CodeFleet-Task"] for c in commits) == [
        "T1",
        "T2",
        "T3",
        "T4",
        "T5",
    ]
    assert git(tree, "rev-list", "--count", "main") == "1\n"  # the demo repository, as shipped
    assert git(tree, "symbolic-ref", "HEAD") == "refs/heads/main\n"
    assert tree_files(checkout_to(tree, branch, tmp_path / "tip")) == tree_files(tree)
    tail = text[text.index(f"branch {branch} ·") :]
    shown = [line.split()[0] for line in tail.splitlines()[1:6]]
    assert shown == [c["sha"][: len(shown[0])] for c in reversed(commits)]


async def test_an_interrupted_run_commit_keeps_the_work_that_finished(
    make_server: Callable[..., ServerThread], tmp_path: Path, wait_until: Any
) -> None:
    tree = tmp_path / "repo"
    tree.mkdir()
    (tree / "a.py").write_text("A = 1\n")
    make_repository(tree)
    server = make_server(**FAST, workdir=tree)
    script = tmp_path / "script.yaml"
    script.write_text(
        yaml.safe_dump(
            {
                "first": [{"append": {"path": "a.py", "text": "FIRST = 1\n"}}],
                # never ends on its own: nobody is ever denied this path
                "stuck": [{"write": {"path": "b.py", "content": "B = 1\n"}}, {"wait_denied": "x"}],
            }
        )
    )
    async with FleetClient(server.url) as client:
        await client.create_tasks(
            [
                {"id": "first", "title": "First", "description": "scripted"},
                {"id": "stuck", "title": "Stuck", "description": "scripted"},
            ]
        )
    before = person_state(tree)
    run = subprocess.Popen(
        live_run(script, server, tree, tmp_path),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        async with FleetClient(server.url) as client:

            async def committed() -> bool:
                events = await client.events(type_="task_committed")
                return any(e["task_id"] == "first" for e in events)

            await wait_until(committed, timeout=60)
            assert (await client.task("stuck"))["status"] == "running"
    finally:
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()

    [first] = commits_on(tree, "live")
    assert first["trailers"]["CodeFleet-Task"] == "first" and first["files"] == ["a.py"]
    assert git(tree, "show", "live:a.py") == "A = 1\nFIRST = 1\n"
    after = person_state(tree)
    assert (after["head"], after["branch"], after["index"]) == (
        before["head"],
        before["branch"],
        before["index"],
    )


async def test_run_commit_skips_an_uncommittable_task_with_its_reason_and_commits_the_rest(
    make_server: Callable[..., ServerThread], tmp_path: Path
) -> None:
    tree = tmp_path / "repo"
    tree.mkdir()
    (tree / "a.py").write_text("A = 1\n")
    make_repository(tree)
    server = make_server(**FAST, workdir=tree)
    script = tmp_path / "script.yaml"
    script.write_text(
        yaml.safe_dump(
            {
                "odd": [{"write": {"path": "git~1/config", "content": "[core]\n"}}],
                "fine": [{"append": {"path": "a.py", "text": "FINE = 1\n"}}],
            }
        )
    )
    async with FleetClient(server.url) as client:
        await client.create_tasks(
            [
                {"id": "odd", "title": "Odd", "description": "scripted"},
                {"id": "fine", "title": "Fine", "description": "scripted"},
            ]
        )

    run = subprocess.run(
        [*live_run(script, server, tree, tmp_path), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert run.returncode == 1, run.stderr  # every task succeeded, one is not on the branch
    history = json.loads(run.stdout)["history"]
    assert [c["task_id"] for c in history["commits"]] == ["fine"]
    assert [(s["task_id"], s["paths"]) for s in history["skipped"]] == [("odd", ["git~1/config"])]
    assert history["error"] is None and history["mismatched"] == []
    assert git(tree, "show", "live:a.py") == "A = 1\nFINE = 1\n"
