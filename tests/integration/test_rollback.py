"""A failed attempt leaves nothing behind; a succeeded one leaves its patch.

Real runner, scripted brain, real server and SQLite, real files.
"""

from __future__ import annotations

import filecmp
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import httpx
from fleet_support import drain, events_of

from codefleet.api.client import FleetClient
from codefleet.api.graphfile import load_graph
from codefleet.attempt import AttemptReport
from codefleet.cli.start.demo_run import examples_dir
from codefleet.fleet.scripted import load_script
from codefleet.models import ErrorKind
from codefleet.server.thread import ServerThread
from codefleet.statedir import STATE_DIR

FAST = {"heartbeat_interval": 0.1, "stale_after": 1.0, "tick_interval": 0.05, "backoff_base": 0.0}


async def test_a_vetoed_attempt_is_undone_and_its_retry_starts_from_the_original(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    server = make_server(**FAST)
    script = {
        "holder": [{"append": {"path": "a.py", "text": "HOLDER = 1\n"}}, {"wait_denied": "a.py", "attempt": 1}],
        # attempt 1: a new file and an edit, then the veto on a.py; attempt 2 needs the ORIGINAL b.py
        "late": [{"wait_leased": "a.py", "attempt": 1},
                 {"write": {"path": "pkg/new/extra.py", "content": "E = 1\n"}},
                 {"edit": {"path": "pkg/b.py", "old": "B = 2", "new": "B = 3"}},
                 {"append": {"path": "a.py", "text": "LATE = 1\n"}}],
    }  # fmt: skip
    async with FleetClient(server.url) as client:
        await client.create_tasks(
            [
                {"id": "holder", "title": "h", "description": "do it", "file_scope": ["a.py"]},
                {"id": "late", "title": "l", "description": "do it", "file_scope": ["pkg/b.py"]},
            ]
        )
        result, _ = await drain(server, workdir, script)
        restored = [
            (e["task_id"], e["payload"]["path"])
            for e in await client.all_events()
            if e["type"] == "file_restored"
        ]
    assert result.all_succeeded
    assert sorted(restored) == [("late", "pkg/b.py"), ("late", "pkg/new/extra.py")]
    assert (workdir / "pkg/b.py").read_text() == "B = 3\n"  # edited once, by the retry
    assert (workdir / "a.py").read_text() == "A = 1\nHOLDER = 1\nLATE = 1\n"


async def test_with_keep_failed_edits_a_failed_attempt_leaves_its_writes(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    script = {"bad": [{"write": {"path": "left.txt", "content": "x"}}, {"fail": "boom"}]}
    outcomes = {}
    for keep in (False, True):
        shutil.rmtree(workdir / "left.txt", ignore_errors=True)
        (workdir / "left.txt").unlink(missing_ok=True)
        server = make_server(**FAST, keep_failed_edits=keep, max_attempts=1)
        async with FleetClient(server.url) as client:
            await client.create_tasks([{"id": "bad", "title": "b", "description": "do it"}])
            await drain(server, workdir, script)
        outcomes[keep] = (workdir / "left.txt").exists()
        server.stop()  # one server per tree: the next one starts once this one is gone
    assert outcomes == {False: False, True: True}


async def test_a_file_over_the_pre_image_cap_is_refused_with_a_reason(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    (workdir / "huge.bin").write_bytes(b"x" * 4096)
    server = make_server(**FAST, preimage_max_bytes=1024)
    async with FleetClient(server.url) as client:
        await client.create_tasks([{"id": "t", "title": "t", "description": "do it"}])
        agent = await client.register("r", str(workdir), None)
        assert await client.assignment(agent["agent_id"], agent["epoch"], wait=5)
        answer = await client.acquire(agent["agent_id"], agent["epoch"], "t", ["huge.bin"], "Write")
        small = await client.acquire(agent["agent_id"], agent["epoch"], "t", ["a.py"], "Write")
    assert answer["decision"] == "deny"
    assert answer["denied"][0]["reason"] == "too_large"
    assert "4096 bytes" in answer["message"]
    assert small["decision"] == "allow"


async def test_a_restart_between_write_and_report_still_restores_the_file(
    make_server: Callable[..., ServerThread], workdir: Path, tmp_path: Path
) -> None:
    db = tmp_path / "restart.sqlite"
    first = make_server(**{**FAST, "stale_after": 60}, db=db)
    async with FleetClient(first.url) as client:
        await client.create_tasks([{"id": "t", "title": "t", "description": "do it"}])
        agent = await client.register("r", str(workdir), None)
        await client.assignment(agent["agent_id"], agent["epoch"], wait=5)
        await client.start("t", agent["agent_id"], agent["epoch"])
        granted = await client.acquire(agent["agent_id"], agent["epoch"], "t", ["a.py"], "Edit")
        assert granted["decision"] == "allow"
    (workdir / "a.py").write_text("half-done\n")
    first.stop()
    second = make_server(**{**FAST, "stale_after": 60}, db=db, port=first.settings.port)
    async with FleetClient(second.url) as client:
        answer = await client.complete(
            "t",
            agent["agent_id"],
            agent["epoch"],
            AttemptReport(attempt=1, ok=False, error="crashed", error_kind=ErrorKind.AGENT_ERROR),
        )
        leases = await client.leases()
    assert answer["status"] == "pending"
    assert (workdir / "a.py").read_text() == "A = 1\n"
    assert leases == []


async def test_the_patches_of_the_demo_replayed_in_completion_order_rebuild_its_tree(
    make_server: Callable[..., ServerThread], tmp_path: Path
) -> None:
    examples = examples_dir()
    original, tree = tmp_path / "original", tmp_path / "demo"
    shutil.copytree(examples / "demo-repo", original)
    shutil.copytree(examples / "demo-repo", tree)
    server = make_server(**FAST, workdir=tree)
    async with FleetClient(server.url) as client:
        await client.create_tasks(load_graph(examples / "demo-tasks.yaml"))
        result, _ = await drain(server, tree, load_script(examples / "demo-script.yaml"), runners=3)
        order = [e["task_id"] for e in await events_of(client, "task_succeeded")]
        patches = [await client.patch(task_id) for task_id in order]
        async with httpx.AsyncClient(base_url=server.url) as raw:
            text = (await raw.get(f"/tasks/{order[0]}/patch")).text
        detail = await client.task(order[0])
    assert result.all_succeeded and len(order) == 5
    assert text == "".join(f["diff"] for f in patches[0]["files"])
    assert detail["patch"]["files"] == len(patches[0]["files"]) > 0
    for patch in patches:
        diff = "".join(f["diff"] for f in patch["files"])
        subprocess.run(["git", "apply", "-"], cwd=original, input=diff, text=True, check=True)
    compared = filecmp.dircmp(original, tree, ignore=["__pycache__", STATE_DIR])  # never patched
    assert _differences(compared) == []


def _differences(cmp: filecmp.dircmp[str]) -> list[str]:
    found = [*cmp.left_only, *cmp.right_only, *cmp.diff_files]
    for sub in cmp.subdirs.values():
        found += _differences(sub)
    return found


async def test_a_file_that_cannot_be_restored_fails_its_task_and_keeps_a_visible_lease(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    server = make_server(**{**FAST, "stale_after": 60})
    async with FleetClient(server.url) as client:
        await client.create_tasks(
            [
                {"id": "bad", "title": "b", "description": "do it"},
                {"id": "next", "title": "n", "description": "do it"},
            ]
        )
        agent = await client.register("r", str(workdir), None)
        ident, epoch = agent["agent_id"], agent["epoch"]
        first = await client.assignment(ident, epoch, wait=5)
        assert first is not None
        bad, other = first.id, "next" if first.id == "bad" else "bad"
        await client.start(bad, ident, epoch)
        await client.acquire(ident, epoch, bad, ["a.py", "pkg/b.py"], "Edit")
        (workdir / "pkg" / "b.py").write_text("edited\n")
        (workdir / "a.py").unlink()
        (workdir / "a.py").mkdir()  # the leased file became a directory

        answer = await client.complete(
            bad, ident, epoch, AttemptReport(attempt=1, ok=False, error="x")
        )
        task, leases = await client.task(bad), await client.leases()
        failed = await client.events(type_="restore_failed")
        following = await client.assignment(ident, epoch, wait=5)  # the fleet goes on

    assert answer["status"] == "failed"
    assert task["error_kind"] == "infra" and "a.py" in task["error"]
    assert [(x["path"], x["task_id"], x["restoring"]) for x in leases] == [("a.py", bad, True)]
    assert "directory" in leases[0]["restore_error"]
    assert [(e["task_id"], e["payload"]["path"]) for e in failed] == [(bad, "a.py")]
    assert (workdir / "pkg" / "b.py").read_text() == "B = 2\n"
    assert following is not None and following.id == other
