"""A `uv run` check resolves once per content of what defines its lock (issue 53, item 5).

Real server, runner and landing worker, SQLite and the real `uv` (offline: the
project has no dependencies); only the agent's brain is scripted. The check's
program prints the command line of the uv that started it (its parent), so the
command actually run says whether uv resolved (`--frozen`). The tree has no `uv.lock`: each view's resolution writes one that
the view takes away with it, so without the kept lock every check resolves.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from codefleet.api.client import FleetClient
from codefleet.fleet.local import FleetOptions, run_fleet
from codefleet.fleet.runner import RunnerOptions
from codefleet.fleet.scripted import ScriptedExecutor, parse_script
from codefleet.fleet.views.runinview import Mask, ViewKind, layer_problem, run_in_view
from codefleet.fleet.views.uvlock import LockCache, Resolution
from codefleet.server.thread import ServerThread

pytestmark = pytest.mark.skipif(shutil.which("uv") is None, reason="needs uv")

FAST = {"heartbeat_interval": 0.1, "stale_after": 5.0, "tick_interval": 0.05, "backoff_base": 0.0}
PYPROJECT = '[project]\nname = "demo"\nversion = "0"\nrequires-python = ">=3.11"\n'
SUITE = "uv run --project . python probe.py"
PROBE = """import os, lib
uv = open(f"/proc/{os.getppid()}/cmdline", "rb").read().split(b"\\0")
print("uv", b" ".join(uv[1:3]).decode())
assert lib.VALUE == 2
assert "UV_FROZEN" not in os.environ  # a uv this program started would resolve as usual
"""
WRITE = {"write": {"path": "lib.py", "content": "VALUE = 2\n"}}
CHECK = {"check": "suite"}
NOTE = {"write": {"path": "notes.txt", "content": "new content: not the same view\n"}}
EDIT = {"write": {"path": "pyproject.toml", "content": PYPROJECT + "# edited\n"}}
# after the agent's last check: its landing check is on other content, so it runs (0177)
LATE = {"write": {"path": "late.txt", "content": "written after the last check\n"}}


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("UV_OFFLINE", "1")
    root = tmp_path / "project"
    root.mkdir()
    (root / "pyproject.toml").write_text(PYPROJECT)
    (root / "lib.py").write_text("VALUE = 1\n")
    (root / "probe.py").write_text(PROBE)
    (root / ".gitignore").write_text(".venv/\n.codefleet/\n")
    (root / ".codefleet").mkdir()  # where the locks are kept (the server's state directory)
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=x", "-c",
                 "user.email=x@example.invalid", "commit", "-qm", "start"]):  # fmt: skip
        subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)
    return root


async def run(
    make_server: Callable[..., ServerThread], tree: Path, steps: list[Any], cache: bool = True
) -> list[dict[str, Any]]:
    """Drain one task under `steps` with `suite` as its landing check; the events of the
    checks that ran."""
    server = make_server(**FAST, workdir=tree)
    task = {"id": "T1", "title": "two", "description": "make it 2", "verify": "suite"}
    async with FleetClient(server.url) as client:
        await client.create_tasks([task], {"suite": SUITE})
        await client.set_integration("suite")
        executor = ScriptedExecutor(parse_script({"T1": steps}))
        runner = RunnerOptions("runner", tree, tree.parent / "runs", uv_lock_cache=cache)
        result = await run_fleet(server.url, lambda _: executor, FleetOptions(runner))
        assert result.ok, result.tasks
        events = await client.all_events()
    ran = [e for e in events if e["type"] in ("check_finished", "landing_check_finished")]
    return [e for e in ran if e["payload"].get("view") != "reused"]  # the checks that ran


def started(events: list[dict[str, Any]]) -> list[tuple[str, str | None, str]]:
    """Per check run: its event, how uv started, and what the command saw of UV_FROZEN."""
    return [
        (
            e["type"],
            e["payload"].get("resolution"),
            "frozen" if "uv run --frozen" in e["payload"]["output_tail"] else "resolving",
        )
        for e in events
    ]


async def test_a_second_uv_run_check_on_the_same_project_files_skips_the_resolution(
    make_server: Callable[..., ServerThread], tree: Path
) -> None:
    events = await run(make_server, tree, [WRITE, CHECK, NOTE, CHECK, LATE])

    assert started(events) == [
        ("check_finished", "resolved", "resolving"),
        ("check_finished", "skipped", "frozen"),
        ("landing_check_finished", "skipped", "frozen"),
    ]
    assert all(e["payload"].get("passed", True) for e in events)
    assert not (tree / "uv.lock").exists()  # the kept lock is laid into views only
    assert len(list((tree / ".codefleet").glob("uv-lock-*"))) == 1


async def test_an_edit_to_pyproject_between_two_checks_makes_uv_resolve_again(
    make_server: Callable[..., ServerThread], tree: Path
) -> None:
    events = await run(make_server, tree, [WRITE, CHECK, EDIT, CHECK, LATE])

    assert started(events) == [
        ("check_finished", "resolved", "resolving"),
        ("check_finished", "resolved", "resolving"),
        ("landing_check_finished", "skipped", "frozen"),  # the edited file's lock, kept
    ]


async def test_an_edit_to_the_lock_between_two_checks_makes_uv_resolve_again(
    make_server: Callable[..., ServerThread], tree: Path
) -> None:
    lock = {"write": {"path": "uv.lock", "content": 'version = 1\nrequires-python = ">=3.11"\n'}}
    events = await run(make_server, tree, [WRITE, CHECK, lock, CHECK])

    assert [resolution for _, resolution, _ in started(events)][:2] == ["resolved", "resolved"]


async def test_with_the_cache_off_every_check_resolves(
    make_server: Callable[..., ServerThread], tree: Path
) -> None:
    events = await run(make_server, tree, [WRITE, CHECK, NOTE, CHECK, LATE], cache=False)

    assert started(events) == [
        ("check_finished", None, "resolving"),
        ("check_finished", None, "resolving"),
        ("landing_check_finished", None, "resolving"),
    ]


@pytest.mark.parametrize("kind", [ViewKind.COPY, ViewKind.LAYER])
async def test_each_view_kind_lays_the_kept_lock_in_and_runs_frozen(
    tree: Path, tmp_path: Path, kind: ViewKind
) -> None:
    if kind is ViewKind.LAYER and layer_problem(tree) is not None:
        pytest.skip(f"no layer on this host: {layer_problem(tree)}")
    (tree / "lib.py").write_text("VALUE = 2\n")
    locks = LockCache(tree)

    async def nothing_held() -> Mask:
        return Mask({})

    runs = [
        await run_in_view(tree, nothing_held, SUITE, timeout=120, cap=4000, view=kind, locks=locks)
        for _ in range(2)
    ]

    assert [(r.ran.exit_code, r.resolution) for r in runs] == [
        (0, Resolution.RESOLVED),
        (0, Resolution.SKIPPED),
    ]
    assert "uv run --frozen" in runs[1].ran.output and "uv run --project" in runs[0].ran.output
    assert not runs[1].isolated  # the lock laid in is no file another task holds
    assert [p.name[:8] for p in (tree / ".codefleet").glob("uv-lock-*")] == ["uv-lock-"]
