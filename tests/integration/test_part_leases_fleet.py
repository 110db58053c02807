"""Two agents in one file: tasks editing different functions of one module run side by side.

Real server, real runners and SQLite; only the agents' brains are scripted. Each
script forces the overlap (neither ends before the other was granted its part,
and the second grant comes while the first is held), so the two edits are in
flight at once, deterministically.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from codefleet.api.client import FleetClient
from codefleet.api.graphfile import parse_graph
from codefleet.fleet.local import FleetOptions, run_fleet
from codefleet.fleet.runner import RunnerOptions
from codefleet.fleet.scripted import ScriptedExecutor, parse_script
from codefleet.fleet.tools.commandtool import host_shell
from codefleet.fleet.views.layerapply import ShellLimits
from codefleet.models import Granularity
from codefleet.testing.invariants import check, collect, compare_trees, replay_patches
from codefleet.ui.outofscope import ScopeWatch

FAST = {"heartbeat_interval": 0.1, "stale_after": 5.0, "tick_interval": 0.05, "backoff_base": 0.0}
PARTS = {**FAST, "lease_granularity": "part"}

API = '''"""The API."""

import os


def handle(request):
    return 1


def route(path):
    return path


class Router:
    pass
'''


def edit(old: str, new: str, **more: Any) -> dict[str, Any]:
    return {"edit": {"path": "api.py", "old": old, "new": new}, **more}


def tasks(*ids: str, **fields: Any) -> list[dict[str, Any]]:
    """A task per id editing api.py, each with `fields` (e.g. its `lease_granularity`)."""
    return [
        {"id": t, "title": f"edit api.py ({t})", "description": "edit api.py", **fields}
        for t in ids
    ]


async def play(
    server: Any,
    workdir: Path,
    script: dict[str, Any],
    *task_ids: str,
    runner: RunnerOptions | None = None,
    specs: list[dict[str, Any]] | None = None,
) -> tuple[Any, list[dict[str, Any]]]:
    """Lay out `api.py` as `API`, create the tasks (`specs`, else `tasks(*task_ids)`), drain
    them on one runner each, and prove the invariants (part-aware): the fleet's result and
    the event log."""
    (workdir / "api.py").write_text(API)
    runner = runner or RunnerOptions("runner", workdir, workdir.parent / "runs")
    executor = ScriptedExecutor(parse_script(script), wait_timeout=20)
    options = FleetOptions(runner, runners=len(task_ids))
    async with FleetClient(server.url) as client:
        await client.create_tasks(specs or tasks(*task_ids))
        result = await run_fleet(server.url, lambda _: executor, options)
        events = await client.all_events()
        assert check(await collect(client)) == []
    return result, events


def codefleet_cli(*args: str, cwd: Path, columns: int = 200) -> subprocess.CompletedProcess[str]:
    """The real command line, as a subprocess (none of our CODEFLEET_ settings), `columns` wide."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODEFLEET_")}
    return subprocess.run(
        [sys.executable, "-m", "codefleet.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "COLUMNS": str(columns)},
        check=False,
    )


def of_type(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == kind]


def acquired(events: list[dict[str, Any]]) -> set[tuple[str, str]]:
    """(task, key) of every lease granted."""
    return {(e["task_id"], e["payload"]["path"]) for e in of_type(events, "lease_acquired")}


async def test_two_tasks_edit_different_functions_of_one_module_at_once_with_no_veto(
    make_server: Any, workdir: Path
) -> None:
    server = make_server(**PARTS)
    script = {
        "T1": [edit("return 1", "return 'one'"), {"wait_acquired": "api.py::route"}],
        "T2": [edit("return path", "return path.upper()"), {"wait_acquired": "api.py::handle"}],
    }
    result, events = await play(server, workdir, script, "T1", "T2")

    assert result.all_succeeded, result.tasks
    assert of_type(events, "lease_denied") == []
    assert (workdir / "api.py").read_text() == API.replace("return 1", "return 'one'").replace(
        "return path", "return path.upper()"
    )
    assert acquired(events) == {("T1", "api.py::handle"), ("T2", "api.py::route")}
    assert all(t["attempts"] == 1 for t in result.tasks)


async def test_a_third_task_editing_a_held_function_is_refused_naming_the_part(
    make_server: Any, workdir: Path
) -> None:
    server = make_server(**PARTS)
    script = {
        "T1": [edit("return 1", "return 'one'"), {"wait_denied": "api.py::handle"}],
        "T3": [
            {"wait_leased": "api.py::handle", "attempt": 1},
            edit("return 1", "return 3", attempt=1),
            edit("return 'one'", "return 3", attempt=2),
        ],
    }
    result, events = await play(server, workdir, script, "T1", "T3")
    (t3,) = [t for t in result.tasks if t["id"] == "T3"]

    assert result.all_succeeded, result.tasks
    (denied,) = of_type(events, "lease_denied")
    assert denied["task_id"] == "T3" and denied["payload"]["path"] == "api.py::handle"
    assert denied["payload"]["holder_task_id"] == "T1"
    (requeued,) = [e for e in of_type(events, "task_requeued") if e["task_id"] == "T3"]
    assert "api.py::handle is held by" in requeued["payload"]["reason"]
    assert requeued["payload"]["blocked_on_path"] == "api.py::handle"
    assert "api.py::handle" in t3["file_scope"]  # the veto widened its scope by the part
    assert "return 3" in (workdir / "api.py").read_text()


async def test_of_two_concurrent_editors_the_failed_one_is_rolled_back_and_the_other_stays(
    make_server: Any, workdir: Path
) -> None:
    server = make_server(**PARTS)
    script = {
        "T1": [edit("return 1", "return 'one'"), {"wait_acquired": "api.py::route"}],
        "T2": [
            edit("return path", "return path.upper()", attempt=1),
            {"wait_acquired": "api.py::handle", "attempt": 1},
            {"fail": "T2 gives up", "attempt": 1},
            edit("    pass\n", "    prefix = '/'\n", attempt=2),
        ],
    }
    result, events = await play(server, workdir, script, "T1", "T2")

    assert result.all_succeeded, result.tasks
    restored = [(e["task_id"], e["payload"]["path"]) for e in of_type(events, "file_restored")]
    assert restored == [("T2", "api.py")]
    # T1's change stands; T2's first attempt is gone; its second attempt's change is there
    assert (workdir / "api.py").read_text() == API.replace("return 1", "return 'one'").replace(
        "    pass\n", "    prefix = '/'\n"
    )


async def test_with_lease_granularity_file_the_same_two_edits_collide_on_the_whole_file(
    make_server: Any, workdir: Path
) -> None:
    server = make_server(**{**FAST, "lease_granularity": "file"})
    script = {
        "T1": [edit("return 1", "return 'one'"), {"wait_denied": "api.py"}],
        "T2": [
            {"wait_leased": "api.py", "attempt": 1},
            edit("return path", "return path.upper()"),
        ],
    }
    result, events = await play(server, workdir, script, "T1", "T2")

    assert result.all_succeeded, result.tasks
    (denied,) = of_type(events, "lease_denied")
    assert denied["task_id"] == "T2" and denied["payload"]["path"] == "api.py"
    assert {key for _, key in acquired(events)} == {"api.py"}  # no part key under the off switch
    assert (workdir / "api.py").read_text() == API.replace("return 1", "return 'one'").replace(
        "return path", "return path.upper()"
    )


@pytest.mark.parametrize("task_says", [None, "part"], ids=["over-the-server", "over-the-task"])
async def test_a_runners_own_lease_granularity_wins(
    make_server: Any, workdir: Path, task_says: str | None
) -> None:
    server = make_server(**PARTS)
    script = {"T1": [edit("return 1", "return 'one'")]}
    runner = RunnerOptions(
        "runner", workdir, workdir.parent / "runs", lease_granularity=Granularity.FILE
    )
    specs = tasks("T1", **({"lease_granularity": task_says} if task_says else {}))
    result, events = await play(server, workdir, script, "T1", runner=runner, specs=specs)

    assert result.all_succeeded, result.tasks
    assert [e["payload"]["path"] for e in of_type(events, "lease_acquired")] == ["api.py"]


async def test_a_graph_asking_for_parts_gets_them_from_a_server_that_leases_files(
    make_server: Any, workdir: Path
) -> None:
    server = make_server(**FAST)  # the default, auto, with no integration check: whole files
    script = {
        "T1": [edit("return 1", "return 'one'"), {"wait_acquired": "api.py::route"}],
        "T2": [edit("return path", "return path.upper()"), {"wait_acquired": "api.py::handle"}],
    }
    graph = parse_graph({"lease_granularity": "part", "tasks": tasks("T1", "T2")})
    result, events = await play(server, workdir, script, "T1", "T2", specs=graph)

    assert result.all_succeeded, result.tasks
    assert of_type(events, "lease_denied") == []
    assert acquired(events) == {("T1", "api.py::handle"), ("T2", "api.py::route")}


async def test_a_task_that_says_file_leases_the_whole_file_under_a_server_of_parts(
    make_server: Any, workdir: Path
) -> None:
    server = make_server(**PARTS)
    script = {
        "T1": [edit("return 1", "return 'one'"), {"wait_denied": "api.py"}],
        "T2": [{"wait_leased": "api.py::handle", "attempt": 1}, edit("    pass\n", "    x = 1\n")],
    }
    specs = [*tasks("T1"), *tasks("T2", lease_granularity="file")]
    result, events = await play(server, workdir, script, "T1", "T2", specs=specs)

    assert result.all_succeeded, result.tasks
    (denied,) = of_type(events, "lease_denied")  # a whole file excludes the part T1 holds
    assert denied["task_id"] == "T2" and denied["payload"]["path"] == "api.py::handle"
    assert acquired(events) == {("T1", "api.py::handle"), ("T2", "api.py")}


def command_runner(workdir: Path) -> RunnerOptions:
    shell = host_shell(ShellLimits(), unsandboxed=True)
    assert shell is not None, "this host cannot build a command layer (user namespaces?)"
    return RunnerOptions(
        "runner", workdir, workdir.parent / "runs", shell_default=True, shell_config=shell
    )


async def test_a_command_that_rewrites_a_file_another_task_holds_a_part_of_is_refused(
    make_server: Any, workdir: Path
) -> None:
    server = make_server(**PARTS)
    rewrite = "sed -i 's/return /return  /' api.py"  # every function, the held one too
    script = {
        "T1": [edit("return 1", "return 'one'"), {"wait_denied": "api.py::handle"}],
        "T2": [{"wait_leased": "api.py::handle", "attempt": 1}, {"command": rewrite}],
    }
    result, events = await play(server, workdir, script, "T1", "T2", runner=command_runner(workdir))

    assert result.all_succeeded, result.tasks
    (denied,) = of_type(events, "lease_denied")
    assert denied["task_id"] == "T2" and denied["payload"]["path"] == "api.py::handle"
    assert denied["payload"]["holder_task_id"] == "T1"
    (requeued,) = [e for e in of_type(events, "task_requeued") if e["task_id"] == "T2"]
    assert requeued["payload"]["attempt"] == 1
    # T1's change is not lost to the command's rewrite of the file as it saw it
    assert (workdir / "api.py").read_text() == API.replace("return 1", "return  'one'").replace(
        "return path", "return  path"
    )


async def test_a_command_that_changes_another_part_of_a_held_file_lands_by_part(
    make_server: Any, workdir: Path
) -> None:
    server = make_server(**PARTS)
    script = {
        "T1": [edit("return 1", "return 'one'"), {"wait_acquired": "api.py::route"}],
        "T2": [
            {"wait_leased": "api.py::handle"},
            {"command": "sed -i 's/return path/return path.strip()/' api.py"},
        ],
    }
    result, events = await play(server, workdir, script, "T1", "T2", runner=command_runner(workdir))

    assert result.all_succeeded, result.tasks
    assert of_type(events, "lease_denied") == []
    assert acquired(events) == {("T1", "api.py::handle"), ("T2", "api.py::route")}
    # the command ran on T1's pre-image of api.py; only its own part landed, T1's stays
    assert (workdir / "api.py").read_text() == API.replace("return 1", "return 'one'").replace(
        "return path", "return path.strip()"
    )


async def replayed(
    server: Any, workdir: Path, into: Path, was: dict[str, str] | None = None
) -> list[Any]:
    """Every succeeded task's patch applied, in landing order, to the tree as it was (only
    the files of `was` changed, api.py by default: it was `API`), and the result compared
    with the real tree."""
    source = into.parent / f"{into.name}-original"
    shutil.copytree(workdir, source, ignore=shutil.ignore_patterns(".codefleet"))
    for path, text in (was or {"api.py": API}).items():
        (source / path).write_text(text)
    async with FleetClient(server.url) as client:
        evidence = await collect(client)
    return replay_patches(source, evidence, into) or compare_trees(into, workdir)


async def test_a_task_granted_its_module_whole_after_another_landed_fails_and_keeps_that_change(
    make_server: Any, workdir: Path, tmp_path: Path
) -> None:
    server = make_server(**PARTS)
    script = {
        "T1": [
            edit("return 1", "return 'one'"),
            {"wait_succeeded": "T2", "attempt": 1},
            # an Edit whose old_string is not in the file: the gate cannot map it to parts
            # and, with nobody else in api.py, is granted the whole file; the Edit fails
            edit("not in the file", "x", attempt=1),
        ],
        "T2": [{"wait_leased": "api.py::handle"}, edit("return path", "return path.upper()")],
    }
    result, events = await play(server, workdir, script, "T1", "T2")

    assert result.all_succeeded, result.tasks
    assert ("T1", "api.py") in acquired(events)  # the part -> whole upgrade happened
    assert (workdir / "api.py").read_text() == API.replace("return 1", "return 'one'").replace(
        "return path", "return path.upper()"
    )
    assert await replayed(server, workdir, tmp_path / "replay") == []


async def test_a_task_granted_its_module_whole_after_another_landed_patches_only_its_change(
    make_server: Any, workdir: Path, tmp_path: Path
) -> None:
    server = make_server(**PARTS)
    script = {
        "T1": [
            edit("return 1", "return 'one'"),
            {"wait_succeeded": "T2"},
            {"append": {"path": "api.py", "text": "# T1 was here\n"}},  # the whole file
        ],
        "T2": [{"wait_leased": "api.py::handle"}, edit("return path", "return path.upper()")],
    }
    result, events = await play(server, workdir, script, "T1", "T2")

    assert result.all_succeeded, result.tasks
    assert ("T1", "api.py") in acquired(events)
    async with FleetClient(server.url) as client:
        patch = await client.patch("T1")
    assert "path.upper()" not in str(patch)  # T2's landed change is not T1's
    assert await replayed(server, workdir, tmp_path / "replay") == []


def init_edit(old: str, new: str, **more: Any) -> dict[str, Any]:
    return {"edit": {"path": "pkg/__init__.py", "old": old, "new": new}, **more}


BETA = "\n\ndef beta():\n    return 2\n"
ADD_ALPHA = init_edit("", "def alpha():\n    return 1\n", attempt=1)  # into the empty module
ADD_BETA = init_edit("    return 1\n", "    return 1\n" + BETA, attempt=1)
ADD_GAMMA = init_edit("def beta", "def gamma():\n    return 3\n\n\ndef beta", attempt=2)
EMPTY_MODULE = {  # T1 adds alpha to an empty module, T2 adds beta, T1's first attempt fails
    "landed": {
        "T1": [ADD_ALPHA, {"wait_succeeded": "T2", "attempt": 1}, {"fail": "no", "attempt": 1},
               ADD_GAMMA],
        "T2": [{"wait_leased": "pkg/__init__.py::alpha"}, ADD_BETA],
    },
    "still-holding": {  # T2 holds beta until T1's second attempt has begun
        "T1": [ADD_ALPHA, {"wait_acquired": "pkg/__init__.py::beta", "attempt": 1},
               {"fail": "no", "attempt": 1}, ADD_GAMMA, {"wait_succeeded": "T2", "attempt": 2}],
        "T2": [{"wait_leased": "pkg/__init__.py::alpha"}, ADD_BETA,
               {"wait_leased": "pkg/__init__.py::gamma"}],
    },
}  # fmt: skip


@pytest.mark.parametrize("other", list(EMPTY_MODULE))
async def test_on_an_empty_module_a_failed_attempt_keeps_the_definition_another_task_added(
    make_server: Any, workdir: Path, tmp_path: Path, other: str
) -> None:
    server = make_server(**PARTS)
    (workdir / "pkg" / "__init__.py").write_text("")
    result, events = await play(server, workdir, EMPTY_MODULE[other], "T1", "T2")

    assert result.all_succeeded, result.tasks
    assert of_type(events, "restore_failed") == []
    restored = [(e["task_id"], e["payload"]["path"]) for e in of_type(events, "file_restored")]
    assert restored == [("T1", "pkg/__init__.py")]
    assert (  # no blank lines left on top of the module by alpha's removal
        workdir / "pkg" / "__init__.py"
    ).read_text() == "def gamma():\n    return 3\n" + BETA
    was = {"pkg/__init__.py": ""}
    assert await replayed(server, workdir, tmp_path / "replay", was) == []  # the patches apply


async def test_a_write_is_outside_its_scope_by_the_keys_it_leased_not_by_its_file(
    make_server: Any, workdir: Path
) -> None:
    server = make_server(**PARTS)
    script = {
        "T1": [
            edit("return 1", "return 'one'"),  # api.py::handle: its declared part
            edit("return path", "return path.upper()"),  # api.py::route: outside
            {"append": {"path": "api.py", "text": "# T1\n"}},  # api.py whole: outside
        ],
        # api.py::Router under a scope of the whole file (run after T1: the scopes overlap)
        "T2": [edit("    pass\n", "    x = 1\n")],
    }
    specs = [
        *tasks("T1", file_scope=["api.py::handle"]),
        *tasks("T2", file_scope=["api.py"]),
    ]
    result, events = await play(server, workdir, script, "T1", "T2", specs=specs)
    watch = ScopeWatch()
    said = [(e["task_id"], found) for e in events if (found := watch.take(e)) is not None]

    assert result.all_succeeded, result.tasks
    assert said == [("T1", "api.py::route"), ("T1", "api.py")]
    assert watch.outside == {"T1": ["api.py::route", "api.py"]}
    assert watch.line("T1", "api.py::route") == (
        "T1 wrote api.py::route outside its declared scope (api.py::handle)"
    )


def test_run_says_which_tasks_held_parts_of_one_file_at_once_as_the_demo_does(
    make_server: Any, workdir: Path, tmp_path: Path
) -> None:
    (workdir / "api.py").write_text(API)
    server = make_server(**PARTS)
    script = tmp_path / "script.yaml"
    script.write_text(
        yaml.safe_dump(
            {
                "T1": [edit("return 1", "return 'one'"), {"wait_acquired": "api.py::route"}],
                "T2": [
                    edit("return path", "return path.upper()"),
                    {"wait_acquired": "api.py::handle"},
                ],
            }
        )
    )
    graph = tmp_path / "graph.yaml"
    graph.write_text(yaml.safe_dump({"lease_granularity": "part", "tasks": tasks("T1", "T2")}))
    common = ["--dry-run", "--script", str(script), "--graph", str(graph), "--server", server.url]
    run_dir = ["--run-dir", str(tmp_path / "runs")]

    shown = codefleet_cli("run", *common, *run_dir, cwd=workdir)
    again = codefleet_cli("run", "--json", *common, *run_dir, cwd=workdir)  # nothing left: none

    assert shown.returncode == 0, shown.stderr
    said = " ".join(shown.stdout.split())
    assert "SIDE BY SIDE api.py: T1 held handle while T2 held route" in said
    assert json.loads(again.stdout)["side_by_side"] == []
