"""`codefleet commit`: one commit per succeeded task, and the person's checkout untouched.

Real runner with a scripted brain, real server and SQLite, the real `git`
binary and the real command line. Every test compares the person's HEAD,
checked-out branch, `git status` and index bytes before and after.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from fleet_support import drain, events_of
from git_support import (
    checkout_to,
    codefleet,
    commit_json,
    commits_on,
    git,
    make_repository,
    person_state,
    tree_files,
)

from codefleet.api.client import FleetClient
from codefleet.api.graphfile import load_graph
from codefleet.cli.start.demo_run import examples_dir
from codefleet.fleet.scripted import load_script
from codefleet.server.thread import ServerThread

FAST = {"heartbeat_interval": 0.1, "stale_after": 5.0, "tick_interval": 0.05, "backoff_base": 0.0}


def plain_tree(tmp_path: Path) -> Path:
    tree = tmp_path / "repo"
    (tree / "pkg").mkdir(parents=True)
    (tree / "a.py").write_text("A = 1\n")
    (tree / "pkg" / "b.py").write_text("B = 2\n")
    (tree / "README.md").write_text("# repo\n")
    return tree


async def succeeded_order(url: str) -> list[str]:
    async with FleetClient(url) as client:
        events = await client.all_events()
    return [e["task_id"] for e in events if e["type"] == "task_succeeded"]


async def test_the_demo_becomes_five_commits_in_success_order_and_the_checkout_is_untouched(
    make_server: Callable[..., ServerThread], tmp_path: Path
) -> None:
    examples = examples_dir()
    tree = tmp_path / "demo"
    shutil.copytree(examples / "demo-repo", tree)
    make_repository(tree)
    server = make_server(**FAST, workdir=tree)
    async with FleetClient(server.url) as client:
        await client.create_tasks(load_graph(examples / "demo-tasks.yaml"))
        assert (
            await drain(server, tree, load_script(examples / "demo-script.yaml"), runners=3)
        ).result.ok
        patches = {t["id"]: await client.patch(t["id"]) for t in await client.tasks()}
    order = await succeeded_order(server.url)
    before = person_state(tree)

    made = commit_json(server.url, "--branch", "fleet")

    assert person_state(tree) == before
    commits = commits_on(tree, "fleet")
    assert [c["trailers"]["CodeFleet-Task"] for c in commits] == order
    assert [c["task_id"] for c in made["commits"]] == order
    for commit in commits:
        task = commit["trailers"]["CodeFleet-Task"]
        assert commit["files"] == sorted(f["path"] for f in patches[task]["files"]), task
    t4 = next(c for c in commits if c["trailers"]["CodeFleet-Task"] == "T4")
    assert t4["body"].startswith("Add request-id middleware\n\n")
    assert (t4["trailers"]["CodeFleet-Attempts"], t4["trailers"]["CodeFleet-Vetoes"]) == ("2", "1")
    assert tree_files(checkout_to(tree, "fleet", tmp_path / "tip")) == tree_files(tree)
    assert made["left_out"] == [] and made["not_succeeded"] == []
    async with FleetClient(server.url) as client:
        recorded = await events_of(client, "task_committed")
    assert [(e["task_id"], e["payload"]["commit"]) for e in recorded] == [
        (c["trailers"]["CodeFleet-Task"], c["sha"]) for c in commits
    ]


async def test_a_task_whose_two_files_were_edited_across_a_veto_and_a_retry_commits_each_once(
    make_server: Callable[..., ServerThread], tmp_path: Path
) -> None:
    tree = plain_tree(tmp_path)
    make_repository(tree)
    server = make_server(**FAST, workdir=tree)
    script = {
        "holder": [{"append": {"path": "a.py", "text": "HOLDER = 1\n"}}, {"wait_denied": "a.py", "attempt": 1}],
        # attempt 1 edits pkg/b.py, then is vetoed on a.py (b.py is rolled back); attempt 2 does both
        "late": [{"wait_leased": "a.py", "attempt": 1},
                 {"edit": {"path": "pkg/b.py", "old": "B = 2", "new": "B = 3"}},
                 {"append": {"path": "a.py", "text": "LATE = 1\n"}}],
    }  # fmt: skip
    async with FleetClient(server.url) as client:
        await client.create_tasks(
            [
                {
                    "id": "holder",
                    "title": "Hold a.py",
                    "description": "scripted",
                    "file_scope": ["a.py"],
                },
                {
                    "id": "late",
                    "title": "Edit both",
                    "description": "scripted",
                    "file_scope": ["pkg/b.py"],
                },
            ]
        )
        assert (await drain(server, tree, script)).result.all_succeeded
    before = person_state(tree)

    commit_json(server.url, "--branch", "review")

    assert person_state(tree) == before
    holder, late = commits_on(tree, "review")
    assert (holder["trailers"]["CodeFleet-Task"], holder["files"]) == ("holder", ["a.py"])
    assert (late["trailers"]["CodeFleet-Task"], late["files"]) == ("late", ["a.py", "pkg/b.py"])
    assert late["trailers"]["CodeFleet-Vetoes"] == "1"
    assert git(tree, "show", f"{holder['sha']}:a.py") == "A = 1\nHOLDER = 1\n"
    assert git(tree, "show", f"{late['sha']}:a.py") == "A = 1\nHOLDER = 1\nLATE = 1\n"
    diff = git(tree, "show", "--format=", late["sha"], "--", "pkg/b.py")
    assert [
        line for line in diff.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")
    ] == [
        "-B = 2",
        "+B = 3",
    ]


async def test_a_path_edited_outside_the_lock_is_refused_by_name_and_no_branch_is_made(
    make_server: Callable[..., ServerThread], tmp_path: Path
) -> None:
    tree = plain_tree(tmp_path)
    make_repository(tree)
    server = make_server(**FAST, workdir=tree)
    script = {
        "edit": [{"append": {"path": "a.py", "text": "TASK = 1\n"}}],
        "other": [{"append": {"path": "pkg/b.py", "text": "OTHER = 1\n"}}],
    }
    async with FleetClient(server.url) as client:
        await client.create_tasks(
            [
                {"id": "edit", "title": "e", "description": "scripted"},
                {"id": "other", "title": "o", "description": "scripted"},
            ]
        )
        assert (await drain(server, tree, script)).result.all_succeeded
    with (tree / "a.py").open("a") as sneaky:  # a write that took no lease
        sneaky.write("BYPASS = 1\n")
    before = person_state(tree)

    done = codefleet("commit", "--server", server.url)

    assert done.returncode == 1
    assert "outside the lock" in done.stderr
    named = [line.strip() for line in done.stderr.splitlines()[1:]]
    assert named == ["a.py"]
    assert git(tree, "branch", "--list", "codefleet/*") == ""
    assert person_state(tree) == before


async def test_a_failed_task_leaves_no_trace_and_is_listed(
    make_server: Callable[..., ServerThread], tmp_path: Path
) -> None:
    tree = plain_tree(tmp_path)
    make_repository(tree)
    server = make_server(**FAST, workdir=tree, max_attempts=1)
    script = {
        "good": [{"append": {"path": "a.py", "text": "GOOD = 1\n"}}],
        "doomed": [{"write": {"path": "doomed.txt", "content": "half"}},
                   {"edit": {"path": "pkg/b.py", "old": "B = 2", "new": "B = 0"}},
                   {"fail": "scripted failure"}],
    }  # fmt: skip
    async with FleetClient(server.url) as client:
        await client.create_tasks(
            [
                {"id": "good", "title": "g", "description": "scripted"},
                {"id": "doomed", "title": "d", "description": "scripted"},
            ]
        )
        await drain(server, tree, script)
    before = person_state(tree)

    made = commit_json(server.url, "--branch", "review")

    assert person_state(tree) == before
    assert [c["trailers"]["CodeFleet-Task"] for c in commits_on(tree, "review")] == ["good"]
    tip = tree_files(checkout_to(tree, "review", tmp_path / "tip"))
    assert "doomed.txt" not in tip and tip["pkg/b.py"] == b"B = 2\n"
    assert made["not_succeeded"] == [
        {"task_id": "doomed", "status": "failed", "paths": ["doomed.txt", "pkg/b.py"]}
    ]
    assert made["left_out"] == []


async def test_the_persons_staged_and_unstaged_changes_stay_and_are_listed_as_left_out(
    make_server: Callable[..., ServerThread], tmp_path: Path
) -> None:
    tree = plain_tree(tmp_path)
    make_repository(tree)
    (tree / "notes.md").write_text("my notes\n")
    git(tree, "add", "notes.md")
    (tree / "README.md").write_text("# repo, edited by hand\n")
    server = make_server(**FAST, workdir=tree)
    async with FleetClient(server.url) as client:
        await client.create_tasks([{"id": "t", "title": "t", "description": "scripted"}])
        await drain(server, tree, {"t": [{"append": {"path": "a.py", "text": "T = 1\n"}}]})
    before = person_state(tree)

    made = commit_json(server.url, "--branch", "review")

    assert person_state(tree) == before
    assert git(tree, "diff", "--cached", "--name-only") == "notes.md\n"
    assert made["left_out"] == ["README.md", "notes.md"]
    tip = tree_files(checkout_to(tree, "review", tmp_path / "tip"))
    assert "notes.md" not in tip and tip["README.md"] == b"# repo\n"
    assert tip["a.py"] == b"A = 1\nT = 1\n"


def test_a_tree_that_is_not_a_git_repository_gets_a_clear_error(
    make_server: Callable[..., ServerThread], tmp_path: Path
) -> None:
    tree = plain_tree(tmp_path)
    server = make_server(**FAST, workdir=tree)

    done = codefleet("commit", "--server", server.url)

    assert done.returncode == 1
    assert "is not in a git repository" in done.stderr and "git init" in done.stderr
    assert not (tree / ".git").exists()


async def test_commit_refuses_a_branch_that_exists_and_starts_onto_the_ref_given(
    make_server: Callable[..., ServerThread], tmp_path: Path
) -> None:
    tree = plain_tree(tmp_path)
    start = make_repository(tree)
    (tree / "README.md").write_text("# repo v2\n")
    git(tree, "commit", "--quiet", "-am", "second")
    server = make_server(**FAST, workdir=tree)
    async with FleetClient(server.url) as client:
        await client.create_tasks([{"id": "t", "title": "t", "description": "scripted"}])
        await drain(server, tree, {"t": [{"append": {"path": "a.py", "text": "T = 1\n"}}]})

    taken = codefleet("commit", "--server", server.url, "--branch", "main")
    made = commit_json(server.url, "--onto", start, "--author", "Fleet Bot <bot@example.invalid>")

    assert taken.returncode == 1 and "exists already" in taken.stderr
    assert made["branch"].startswith("codefleet/") and made["base"] == start
    assert git(tree, "rev-parse", f"{made['branch']}^") == f"{start}\n"
    assert git(tree, "log", "-1", "--format=%an <%ae>|%cn", made["branch"]) == (
        "Fleet Bot <bot@example.invalid>|Fleet Bot\n"
    )
    assert made["left_out"] == ["README.md"]  # changed since --onto, touched by no task


async def test_a_server_that_keeps_no_patches_gets_a_clear_refusal_not_an_empty_branch(
    make_server: Callable[..., ServerThread], tmp_path: Path
) -> None:
    tree = plain_tree(tmp_path)
    make_repository(tree)
    server = make_server(**FAST, workdir=tree, keep_failed_edits=True)
    async with FleetClient(server.url) as client:
        await client.create_tasks([{"id": "t", "title": "t", "description": "scripted"}])
        await drain(server, tree, {"t": [{"append": {"path": "a.py", "text": "T = 1\n"}}]})

    done = codefleet("commit", "--server", server.url)

    assert done.returncode == 1
    assert "--keep-failed-edits" in done.stderr
    assert git(tree, "branch", "--list", "codefleet/*") == ""


async def test_committing_a_run_again_says_which_tasks_are_already_on_which_branch(
    make_server: Callable[..., ServerThread], tmp_path: Path
) -> None:
    tree = plain_tree(tmp_path)
    make_repository(tree)
    server = make_server(**FAST, workdir=tree)
    async with FleetClient(server.url) as client:
        await client.create_tasks([{"id": "t", "title": "t", "description": "scripted"}])
        await drain(server, tree, {"t": [{"append": {"path": "a.py", "text": "T = 1\n"}}]})

    first = commit_json(server.url)
    again = codefleet("commit", "--server", server.url)

    assert first["already_committed"] == {}
    assert again.returncode == 0, again.stderr
    assert f"already committed: t on {first['branch']}" in again.stdout


async def test_one_uncommittable_task_is_skipped_with_its_reason_and_the_others_commit(
    make_server: Callable[..., ServerThread], tmp_path: Path
) -> None:
    tree = plain_tree(tmp_path)
    make_repository(tree)
    server = make_server(**FAST, workdir=tree)
    script = {"first": [{"append": {"path": "a.py", "text": "FIRST = 1\n"}}],
              "odd": [{"write": {"path": "git~1/config", "content": "[core]\n"}}],
              "last": [{"append": {"path": "pkg/b.py", "text": "LAST = 1\n"}}]}  # fmt: skip
    async with FleetClient(server.url) as client:
        for task_id in script:  # one after another: success order first, odd, last
            await client.create_tasks([{"id": task_id, "title": task_id, "description": "s"}])
            assert (
                await drain(server, tree, {task_id: script[task_id]}, runners=1)
            ).result.all_succeeded
    before = person_state(tree)

    done = codefleet("commit", "--server", server.url, "--branch", "review", "--json")
    again = codefleet("commit", "--server", server.url, "--branch", "review-2")

    made = json.loads(done.stdout)
    assert done.returncode == 1 and again.returncode == 1  # a success is not on the branch
    assert person_state(tree) == before
    assert [c["trailers"]["CodeFleet-Task"] for c in commits_on(tree, "review")] == [
        "first",
        "last",
    ]
    [skipped] = made["skipped"]
    assert (skipped["task_id"], skipped["paths"]) == ("odd", ["git~1/config"])
    assert "invalid path 'git~1/config'" in skipped["reason"]
    assert made["mismatched"] == [] and made["left_out"] == []
    assert "skipped odd (succeeded, not committed): git refused its recorded change" in again.stdout


async def test_files_with_unusual_names_written_through_the_lock_commit_with_their_own_bytes(
    make_server: Callable[..., ServerThread], tmp_path: Path
) -> None:
    tree = plain_tree(tmp_path)
    (tree / "bin.dat").write_bytes(b"\x00the other file")
    make_repository(tree)
    server = make_server(**FAST, workdir=tree)
    names = {'"bin.dat"': "\x00its own bytes", "tab\there.txt": "tab\n", '"quoted.txt': "q\n"}
    script = {"odd": [{"write": {"path": name, "content": text}} for name, text in names.items()]}
    async with FleetClient(server.url) as client:
        await client.create_tasks([{"id": "odd", "title": "odd names", "description": "s"}])
        assert (await drain(server, tree, script, runners=1)).result.all_succeeded

    made = commit_json(server.url, "--branch", "review")

    assert made["skipped"] == [] and made["mismatched"] == []
    [commit] = commits_on(tree, "review")
    tip = tree_files(checkout_to(tree, "review", tmp_path / "tip"))
    assert {name: tip[name] for name in names} == {n: t.encode() for n, t in names.items()}
    assert commit["trailers"]["CodeFleet-Task"] == "odd"


HOLD_AN_INDEX = """
import sys
from pathlib import Path
from codefleet.review.git import Repo
with Repo.open(Path(sys.argv[1])).temp_index() as index:
    print(index.parent, flush=True)
    sys.stdin.read()  # until killed, or until stdin closes
"""


def holding_an_index(tree: Path, tmp: Path) -> tuple[subprocess.Popen[str], Path]:
    """A process in the middle of a commit: its private index directory exists and is in use."""
    held = subprocess.Popen(
        [sys.executable, "-c", HOLD_AN_INDEX, str(tree)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(tmp)},
    )
    assert held.stdout is not None
    return held, Path(held.stdout.readline().strip())


async def test_commit_removes_the_index_directories_killed_runs_left_and_only_those(
    make_server: Callable[..., ServerThread], tmp_path: Path
) -> None:
    tree = plain_tree(tmp_path)
    make_repository(tree)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    server = make_server(**FAST, workdir=tree)
    async with FleetClient(server.url) as client:
        await client.create_tasks([{"id": "t", "title": "t", "description": "scripted"}])
        await drain(server, tree, {"t": [{"append": {"path": "a.py", "text": "T = 1\n"}}]})
    killed, left = holding_an_index(tree, tmp)
    killed.kill()  # SIGKILL: no cleanup runs
    killed.wait()
    running, in_use = holding_an_index(tree, tmp)
    others = [tmp / "codefleet-index-someone-else", tmp / "codefleet-index-young", tmp / "other"]
    for path in others:
        path.mkdir()
    os.chown(others[0], 12345, 12345)
    hours_ago = time.time() - 2 * 3600
    for path in (left, in_use, others[0], others[2]):
        os.utime(path, (hours_ago, hours_ago))

    try:
        done = codefleet("commit", "--server", server.url, env={"TMPDIR": str(tmp)})
        assert done.returncode == 0, done.stderr
        assert sorted(p.name for p in tmp.iterdir()) == sorted(p.name for p in [in_use, *others])
    finally:
        running.communicate("")
    assert not in_use.exists()  # its owner removed it itself
