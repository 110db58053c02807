"""`lease_granularity: auto`, the default: parts where a landing check runs both changes
together, whole files where none does; the start of a run and `graph check` say which.

Real server, real runners and SQLite; only the agents' brains are scripted. Each script
forces the overlap as tests/integration/test_part_leases_fleet.py does: with parts,
neither task ends before the other was granted its part; with whole files, the second
task writes only once the first holds the file.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_part_leases_fleet import codefleet_cli

from codefleet.api.client import FleetClient
from codefleet.fleet.local import FleetOptions, run_fleet
from codefleet.fleet.runner import RunnerOptions
from codefleet.fleet.scripted import ScriptedExecutor, parse_script
from codefleet.models import Granularity

FAST = {"heartbeat_interval": 0.1, "stale_after": 5.0, "tick_interval": 0.05, "backoff_base": 0.0}
CHECKS = {"test": "true"}

API = '''"""The hub."""

import os


def handle(request):
    return 1


def route(path):
    return path
'''
BOTH = API.replace("return 1", "return 'one'").replace("return path", "return path.upper()")

SIDE_BY_SIDE = {
    "T1": [
        {"edit": {"path": "api.py", "old": "return 1", "new": "return 'one'"}},
        {"wait_acquired": "api.py::route"},
    ],
    "T2": [
        {"edit": {"path": "api.py", "old": "return path", "new": "return path.upper()"}},
        {"wait_acquired": "api.py::handle"},
    ],
}
ONE_AFTER_THE_OTHER = {
    "T1": [
        {"edit": {"path": "api.py", "old": "return 1", "new": "return 'one'"}},
        {"wait_denied": "api.py"},
    ],
    "T2": [
        {"wait_leased": "api.py", "attempt": 1},
        {"edit": {"path": "api.py", "old": "return path", "new": "return path.upper()"}},
    ],
}
TASKS = [
    {"id": t, "title": f"edit api.py ({t})", "description": "edit api.py"} for t in ("T1", "T2")
]


async def play(
    server: Any,
    workdir: Path,
    script: dict[str, Any],
    integration: str | None,
    runner: RunnerOptions | None = None,
) -> tuple[Any, list[dict[str, Any]]]:
    """Lay out `api.py`, create T1 and T2 (with the landing check `integration`, if any) and
    drain them on one runner each: the fleet's result and the event log."""
    (workdir / "api.py").write_text(API)
    runner = runner or RunnerOptions("runner", workdir, workdir.parent / "runs")
    executor = ScriptedExecutor(parse_script(script), wait_timeout=20)
    async with FleetClient(server.url) as client:
        await client.create_tasks(TASKS, CHECKS)
        if integration:
            await client.set_integration(integration)
        result = await run_fleet(server.url, lambda _: executor, FleetOptions(runner, runners=2))
        return result, await client.all_events()


def leased(events: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {(e["task_id"], e["payload"]["path"]) for e in events if e["type"] == "lease_acquired"}


def denied(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["task_id"], e["payload"]["path"]) for e in events if e["type"] == "lease_denied"]


@pytest.mark.parametrize("flag", [None, Granularity.AUTO], ids=["no-flag", "runner-says-auto"])
async def test_with_an_integration_check_two_tasks_edit_one_hub_module_at_once_by_part(
    make_server: Any, workdir: Path, flag: Granularity | None
) -> None:
    server = make_server(**FAST)  # the default: auto
    runner = RunnerOptions("runner", workdir, workdir.parent / "runs", lease_granularity=flag)

    result, events = await play(server, workdir, SIDE_BY_SIDE, "test", runner)

    assert result.all_succeeded, result.tasks
    assert denied(events) == []
    assert leased(events) == {("T1", "api.py::handle"), ("T2", "api.py::route")}
    assert (workdir / "api.py").read_text() == BOTH
    assert all(t["attempts"] == 1 for t in result.tasks)


async def test_without_an_integration_check_the_hub_module_is_leased_whole(
    make_server: Any, workdir: Path
) -> None:
    server = make_server(**FAST)  # the default: auto

    result, events = await play(server, workdir, ONE_AFTER_THE_OTHER, None)

    assert result.all_succeeded, result.tasks
    assert denied(events) == [("T2", "api.py")]
    assert {key for _, key in leased(events)} == {"api.py"}
    assert (workdir / "api.py").read_text() == BOTH


BY_PART = (
    "leases: by part (lease_granularity: auto; the integration check 'test' runs every two "
    "changes of a file together)"
)
WHOLE = (
    "leases: whole files (lease_granularity: auto; no integration check runs two changes of a "
    "file together: set `integration:` to lease by part)"
)


@pytest.mark.parametrize(
    ("integration", "says"), [("test", BY_PART), (None, WHOLE)], ids=["integration", "none"]
)
def test_run_and_graph_check_state_which_leases_apply(
    make_server: Any, workdir: Path, tmp_path: Path, integration: str | None, says: str
) -> None:
    (workdir / "api.py").write_text(API)
    server = make_server(**FAST)
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump({"T1": [SIDE_BY_SIDE["T1"][0]]}))
    graph = tmp_path / "graph.yaml"
    landing = {"integration": integration} if integration else {}
    graph.write_text(yaml.safe_dump({"checks": CHECKS, **landing, "tasks": TASKS[:1]}))

    checked = codefleet_cli_wide(
        "graph", "check", str(graph), "--workdir", str(workdir), cwd=workdir
    )
    run = codefleet_cli_wide(
        *("run", "--dry-run", "--script", str(script), "--graph", str(graph)),
        *("--server", server.url, "--run-dir", str(tmp_path / "runs")),
        cwd=workdir,
    )

    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"leases {says.removeprefix('leases: ')}" in " ".join(checked.stdout.split())
    assert run.returncode == 0, run.stdout + run.stderr
    assert says in " ".join((run.stdout + run.stderr).split())


def test_a_runners_own_flag_is_stated_at_the_start_of_a_run(
    make_server: Any, workdir: Path, tmp_path: Path
) -> None:
    (workdir / "api.py").write_text(API)
    server = make_server(**FAST)
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump({"T1": [SIDE_BY_SIDE["T1"][0]]}))
    graph = tmp_path / "graph.yaml"
    graph.write_text(yaml.safe_dump({"checks": CHECKS, "integration": "test", "tasks": TASKS[:1]}))

    run = codefleet_cli_wide(
        *("run", "--dry-run", "--script", str(script), "--graph", str(graph)),
        *("--server", server.url, "--run-dir", str(tmp_path / "runs")),
        *("--lease-granularity", "file"),
        cwd=workdir,
    )

    assert run.returncode == 0, run.stdout + run.stderr
    said = " ".join((run.stdout + run.stderr).split())
    assert "leases: whole files (lease_granularity: file), this run's --lease-granularity" in said


def first_lines(args: list[str], cwd: Path, count: int) -> list[str]:
    """Start `codefleet ARGS` in `cwd`, read its first `count` lines, stop it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODEFLEET_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "codefleet.cli", *args],
        cwd=cwd,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**env, "PYTHONUNBUFFERED": "1", "COLUMNS": "300"},
    )
    try:
        assert proc.stdout is not None
        return [proc.stdout.readline().rstrip("\n") for _ in range(count)]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.parametrize(
    ("flag", "says"),
    [
        ([], "r1: leases as each task's assignment says (a task's lease_granularity, else the "
             "server's; the server resolves auto: by part where an integration check is set)"),
        (["--lease-granularity", "part"],
         "r1: leases by part (lease_granularity: part), this runner's --lease-granularity"),
    ],
    ids=["no-flag", "flag"],
)  # fmt: skip
def test_a_runner_states_at_its_start_what_decides_its_leases(
    make_server: Any, workdir: Path, tmp_path: Path, flag: list[str], says: str
) -> None:
    server = make_server(**FAST)
    (tmp_path / "s.yaml").write_text("{}\n")
    args = ["runner", "--name", "r1", "--dry-run", "--script", str(tmp_path / "s.yaml")]

    lines = first_lines([*args, "--server", server.url, *flag], workdir, 2)

    assert lines[0].startswith("r1: tree ")
    assert lines[1] == says


def codefleet_cli_wide(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`codefleet_cli`, 300 columns wide: the start line and graph check's rows unwrapped."""
    return codefleet_cli(*args, cwd=cwd, columns=300)
