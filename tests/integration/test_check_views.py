"""Check views as overlay layers: real namespaces, overlayfs, processes, server and leases.

A check runs at the tree's own path in a layer (`fleet.views.runinview.run_in_view`) that
shows every file another in-flight task holds at its pre-image, costs one file
per held path, and lets nothing through to the tree; the copy stays the
fallback. Without user namespaces and overlayfs the layer cases skip with the
reason (and fail under CI).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from fleet_support import started_holder
from tool_support import unavailable

from codefleet.api.client import FleetClient
from codefleet.attempt import AttemptReport
from codefleet.fleet.local import FleetOptions, run_fleet
from codefleet.fleet.runner import Runner, RunnerOptions
from codefleet.fleet.scripted import ScriptedExecutor, parse_script
from codefleet.fleet.views.identity import view_identity
from codefleet.fleet.views.runinview import Mask, ViewKind, host_view, run_in_view
from codefleet.rollback import PreImage, capture
from codefleet.server.thread import ServerThread

FAST = {"heartbeat_interval": 0.1, "stale_after": 5.0, "tick_interval": 0.05, "backoff_base": 0.0}
MANY = 2_000


@pytest.fixture
def layered(tmp_path: Path) -> Path:
    """Where views are made; the layer must work here (else the test is unavailable)."""
    views, probe = tmp_path / "views", tmp_path / "probe"
    views.mkdir()
    probe.mkdir()
    if host_view(probe, views) is not ViewKind.LAYER:
        from codefleet.fleet.views.layer import shell_support

        unavailable(f"no overlay layer here: {shell_support().describe}")
    return views


def many_files(root: Path, count: int = MANY) -> None:
    for n in range(count):
        folder = root / f"d{n // 100:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{n:05d}.txt").write_text(f"{n}\n")


def hold(root: Path, edits: Mapping[str, str | None]) -> dict[str, PreImage]:
    """Capture each path's pre-image, then make "another task's" half-done edit to it."""
    images = {}
    for path, edit in edits.items():
        images[path] = capture(root, path)
        target = root / path
        if edit is None:
            target.unlink()
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(edit)
    return images


def git_repository(root: Path) -> None:
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=x", "-c",
                 "user.email=x@example.invalid", "commit", "-qm", "start"]):  # fmt: skip
        subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def answers(*masks: Mapping[str, PreImage]) -> Callable[[], Awaitable[Mask]]:
    """A mask source that answers `masks` in turn (the last one from then on)."""
    calls: list[int] = []

    async def fetch() -> Mask:
        calls.append(1)
        return Mask(masks[min(len(calls), len(masks)) - 1])

    return fetch


async def test_a_layer_view_on_a_tree_of_many_files_lays_out_only_the_held_files(
    tmp_path: Path, layered: Path
) -> None:
    root = tmp_path / "tree"
    many_files(root)
    (root / "mine.txt").write_text("my own edit\n")  # this task's work, in the live tree
    images = hold(root, {"d000/f00001.txt": "HALF\n", "d001/f00100.txt": "HALF\n",
                         "d002/new.txt": "CREATED\n"})  # fmt: skip
    command = (
        f"pwd; cat d000/f00001.txt d001/f00100.txt mine.txt; ls d002 | grep -c new; "
        f"echo scratch > d000/f00002.txt; rm d003/f00300.txt; "
        f"find {layered} -type f | wc -l"
    )

    run = await run_in_view(root, answers(images), command, timeout=30, cap=10_000,
                            view_dir=layered)  # fmt: skip

    lines = run.ran.output.splitlines()
    assert run.ran.exit_code == 0, run.ran.output
    assert lines[:5] == [str(root), "1", "100", "my own edit", "0"]
    # What the view made: two pre-images and the hidden list, not a walk of 2,000 files.
    assert run.view is ViewKind.LAYER and run.files == 2
    assert int(lines[-1]) == 4, run.ran.output  # 2 images, the hidden list, the one write
    assert run.isolated == ("d000/f00001.txt", "d001/f00100.txt", "d002/new.txt")
    assert (root / "d000" / "f00002.txt").read_text() == "2\n"  # nothing reached the tree
    assert (root / "d003" / "f00300.txt").exists()
    assert (root / "d000" / "f00001.txt").read_text() == "HALF\n"
    assert list(layered.iterdir()) == []  # the layer was deleted


async def test_the_copy_view_still_shows_the_same_tree_when_it_is_asked_for(
    tmp_path: Path,
) -> None:
    root = tmp_path / "tree"
    many_files(root, 50)
    images = hold(root, {"d000/f00001.txt": "HALF\n", "d000/new.txt": "CREATED\n"})
    command = "cat d000/f00001.txt; test -e d000/new.txt && echo NEW || echo NO-NEW; rm d000/*"

    run = await run_in_view(root, answers(images), command, timeout=30, cap=10_000,
                            view=ViewKind.COPY)  # fmt: skip

    assert run.ran.output == "1\nNO-NEW\n" and run.ran.exit_code == 0
    assert run.view is ViewKind.COPY and run.files == 51
    assert run.isolated == ("d000/f00001.txt", "d000/new.txt")
    assert (root / "d000" / "f00002.txt").read_text() == "2\n"


def test_views_made_inside_the_tree_fall_back_to_the_copy(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    (root / ".views").mkdir(parents=True)

    assert host_view(root, root / ".views") is ViewKind.COPY


async def test_a_file_leased_by_another_task_during_a_layer_run_reruns_the_check_in_a_copy(
    tmp_path: Path, layered: Path
) -> None:
    root = tmp_path / "tree"
    many_files(root, 10)
    before = capture(root, "d000/f00001.txt")
    edited = {"d000/f00001.txt": before}
    seen: list[str] = []

    async def fetch() -> Mask:
        seen.append("fetch")
        if len(seen) == 2:  # after the layer run: another task took it and began editing
            (root / "d000" / "f00001.txt").write_text("HALF\n")
        return Mask(edited if len(seen) >= 2 else {})

    run = await run_in_view(root, fetch, "cat d000/f00001.txt", timeout=30, cap=10_000,
                            view_dir=layered)  # fmt: skip

    assert run.disturbed == ("d000/f00001.txt",)
    assert run.view is ViewKind.COPY and len(seen) == 4  # layer: 2 fetches, then the copy's 2
    assert run.ran.output == "1\n" and run.isolated == ("d000/f00001.txt",)


async def test_a_mask_the_caller_fetched_is_shown_as_is_and_the_view_still_fetches_after(
    tmp_path: Path, layered: Path
) -> None:
    """The check's own fetch (for its identity) is the view's first: one fetch, after the run,
    says what was leased meanwhile; a new lease then still reruns the check in a copy."""
    root = tmp_path / "tree"
    many_files(root, 10)
    git_repository(root)
    images = hold(root, {"d000/f00001.txt": "HALF\n"})
    calls: list[int] = []
    late: dict[str, PreImage] = {}

    async def fetch() -> Mask:
        calls.append(1)
        return Mask({**images, **late})

    command = "cat d000/f00001.txt d000/f00002.txt"
    calm = await run_in_view(root, fetch, command, timeout=30, cap=10_000, view_dir=layered,
                             mask=Mask(images), identify=True)  # fmt: skip
    assert (calm.ran.output, calm.view, calm.disturbed) == ("1\n2\n", ViewKind.LAYER, ())
    assert len(calls) == 1  # the one fetch: after the run
    assert calm.identity is not None and calm.identity == view_identity(root, images)

    late.update(hold(root, {"d000/f00002.txt": "HALF\n"}))  # leased after the caller's fetch
    moved = await run_in_view(root, fetch, command, timeout=30, cap=10_000, view_dir=layered,
                              mask=Mask(images), identify=True)  # fmt: skip
    assert moved.disturbed == ("d000/f00002.txt",) and moved.view is ViewKind.COPY
    assert moved.identity is None  # disturbed: no identity stands for the run
    assert moved.ran.output == "1\n2\n" and len(calls) == 4  # after the layer, the copy's 2
    assert list(layered.iterdir()) == []


async def test_a_tasks_check_runs_in_a_layer_with_the_other_tasks_file_at_its_pre_image(
    make_server: Callable[..., ServerThread],
    workdir: Path,
    wait_until: Callable[..., Awaitable[Any]],
    layered: Path,
) -> None:
    server = make_server(**FAST)
    snap = (
        "pwd; cat a.py own.py; test -e pkg/extra.py && echo EXTRA || echo NO-EXTRA; "
        f"echo mess > a.py; rm own.py; {sys.executable} -c 'print(1)'"
    )
    script = {"T": [{"write": {"path": "own.py", "content": "OWN = 1\n"}}, {"check": "snap"}]}
    async with FleetClient(server.url) as client:
        agent, epoch = await started_holder(client, workdir)
        granted = await client.acquire(agent, epoch, "H", ["a.py", "pkg/extra.py"], "Write")
        assert granted["decision"] == "allow"
        (workdir / "a.py").write_text("A = 'half-done'\n")  # H's unfinished work
        (workdir / "pkg" / "extra.py").write_text("EXTRA = 1\n")
        await client.create_tasks(
            [{"id": "T", "title": "t", "description": "do it", "file_scope": ["own.py"]}],
            {"snap": snap},
        )
        executor = ScriptedExecutor(parse_script(script))
        stop = asyncio.Event()
        options = RunnerOptions(
            "runner-1", workdir, workdir.parent / "runs", poll_wait=0.2, check_dir=layered
        )
        runner = asyncio.create_task(Runner(client, executor, options).run(stop))
        await wait_until(lambda: _succeeded(client, "T"), timeout=10)
        stop.set()
        await runner
        [finished] = [e["payload"] for e in await client.events(type_="check_finished")]
        await client.complete("H", agent, epoch, AttemptReport(attempt=1, ok=False, error="stop"))

    assert finished["output_tail"] == f"{workdir}\nA = 1\nOWN = 1\nNO-EXTRA\n1\n"
    assert finished["view"] == "layer" and finished["view_files"] == 1
    assert finished["isolated"] == ["a.py", "pkg/extra.py"] and finished["disturbed"] == []
    assert (workdir / "own.py").read_text() == "OWN = 1\n"  # the check's rm stayed in the layer
    assert list(layered.iterdir()) == []


async def _succeeded(client: FleetClient, task_id: str) -> bool:
    return bool((await client.task(task_id))["status"] == "succeeded")


async def test_a_tasks_check_with_views_inside_the_tree_runs_in_a_copy_and_says_so(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    server = make_server(**FAST)
    inside = workdir / ".views"
    inside.mkdir()
    script = {"t": [{"check": "look"}, {"expect_check": "pass"}]}
    async with FleetClient(server.url) as client:
        await client.create_tasks(
            [{"id": "t", "title": "t", "description": "do it"}], {"look": "pwd; cat a.py"}
        )
        executor = ScriptedExecutor(parse_script(script), wait_timeout=10)
        result = await run_fleet(
            server.url,
            lambda _: executor,
            FleetOptions(
                RunnerOptions("runner", workdir, workdir.parent / "runs", check_dir=inside)
            ),
        )
        [finished] = [e["payload"] for e in await client.events(type_="check_finished")]

    assert result.all_succeeded
    assert finished["view"] == "copy" and finished["view_files"] >= 2  # a.py, pkg/b.py, ...
    assert finished["output_tail"].endswith(f"/{workdir.name}\nA = 1\n")
    assert not finished["output_tail"].startswith(f"{workdir}\n")  # not at the tree's path
    assert list(inside.iterdir()) == []


def test_doctor_says_where_checks_run_and_why_a_copy(tmp_path: Path, layered: Path) -> None:
    def doctor(**env: str) -> dict[str, Any]:
        ran = subprocess.run(
            [sys.executable, "-m", "codefleet.cli", "doctor", "--json", "--workdir", str(tmp_path)],
            capture_output=True, text=True, timeout=120, cwd=tmp_path, env={**os.environ, **env},
        )  # fmt: skip
        [found] = [c for c in json.loads(ran.stdout) if c["name"] == "check-views"]
        return dict(found)

    layer, copy = doctor(), doctor(CODEFLEET_CHECK_DIR=str(tmp_path / "inside"))

    assert layer["ok"] and "overlay layers on the tree's path" in layer["detail"]
    assert not copy["ok"] and copy["required"] is False
    assert "copies of the tree" in copy["detail"] and "inside the tree" in copy["detail"]


async def test_a_file_leased_while_a_tasks_check_runs_reruns_it_in_a_copy_with_no_identity(
    make_server: Callable[..., ServerThread],
    workdir: Path,
    wait_until: Callable[..., Awaitable[Any]],
    layered: Path,
    tmp_path: Path,
) -> None:
    """The check's mask is fetched once, before `check_started`, for its identity and its
    view (decision 0173): a lease another task takes while the command runs still shows in
    the mask fetched after it, so the run is disturbed, runs again in a copy, and its
    `check_finished` has no identity (nothing may reuse it)."""
    git_repository(workdir)
    server = make_server(**FAST)
    marks = tmp_path / "marks"
    marks.mkdir()
    held = f"touch {marks}/running; while [ ! -e {marks}/go ]; do sleep 0.01; done; cat a.py"
    async with FleetClient(server.url) as client:
        agent, epoch = await started_holder(client, workdir)
        await client.create_tasks(
            [{"id": "T", "title": "t", "description": "do it"}], {"held": held}
        )
        twice = [{"check": "held"}, {"check": "held"}]  # the second: H held a.py before it
        executor = ScriptedExecutor(parse_script({"T": twice}))
        stop = asyncio.Event()
        options = RunnerOptions(
            "runner-1", workdir, workdir.parent / "runs", poll_wait=0.2, check_dir=layered
        )
        runner = asyncio.create_task(Runner(client, executor, options).run(stop))
        await wait_until((marks / "running").exists, timeout=30)  # T's command runs
        granted = await client.acquire(agent, epoch, "H", ["a.py"], "Write")
        assert granted["decision"] == "allow"
        (workdir / "a.py").write_text("A = 'half-done'\n")  # H's edit, during T's run
        (marks / "go").touch()
        await wait_until(lambda: _succeeded(client, "T"), timeout=30)
        stop.set()
        await runner
        events = await client.all_events()
        await client.complete("H", agent, epoch, AttemptReport(attempt=1, ok=False, error="stop"))

    checks = [e for e in events if e["type"] in ("check_started", "check_finished")]
    assert [e["type"] for e in checks] == ["check_started", "check_finished"] * 2
    disturbed, calm = checks[1]["payload"], checks[3]["payload"]
    assert disturbed["disturbed"] == ["a.py"] and disturbed["view"] == "copy"
    assert disturbed["output_tail"] == "A = 1\n"  # the copy shows H's file at its pre-image
    assert disturbed["passed"] is True and disturbed.get("identity") is None
    assert (calm["disturbed"], calm["view"], calm["output_tail"]) == ([], "layer", "A = 1\n")
    assert len(calm["identity"]) == 64  # the control: held still, so it has one
    assert list(layered.iterdir()) == []
