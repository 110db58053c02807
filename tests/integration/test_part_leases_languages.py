"""Two agents in one file, in every language with a mapper: TS, TSX, JS, Go, Rust and Java.

Real server, real runners and SQLite; only the agents' brains are scripted. One small file
per language with two top-level definitions; each script forces the overlap it tests, as
tests/integration/test_part_leases_fleet.py does for Python: two tasks in different
definitions at once, a third refused the one held, a failed editor put back by part, an
unparsable write taking the whole file, and the patches applying in landing order; and
`graph check` counting overlap by part, and a command's change landing by part.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from codefleet.api.client import FleetClient
from codefleet.cli.app import app
from codefleet.fleet.local import FleetOptions, run_fleet
from codefleet.fleet.runner import RunnerOptions
from codefleet.fleet.scripted import ScriptedExecutor, parse_script
from codefleet.fleet.tools.commandtool import host_shell
from codefleet.fleet.views.layerapply import ShellLimits
from codefleet.testing.invariants import check, collect, compare_trees, replay_patches

PARTS = {
    "heartbeat_interval": 0.1,
    "stale_after": 5.0,
    "tick_interval": 0.05,
    "backoff_base": 0.0,
    "lease_granularity": "part",
}


@dataclass(frozen=True)
class Source:
    """A file of two definitions: their part names and the text each edit replaces."""

    path: str
    text: str
    first: str  # part names
    second: str
    one: str  # a line of `first`'s body
    two: str  # a line of `second`'s body
    broken: str  # `two` made unparsable


SOURCES = {
    "ts": Source(
        "src/router.ts",
        'import { log } from "./log";\n\nexport function first(): number {\n  return 1;\n}\n'
        "\nexport function second(): number {\n  return 2;\n}\n",
        "first",
        "second",
        "return 1;",
        "return 2;",
        "return (2;",
    ),
    "tsx": Source(
        "src/App.tsx",
        'import React from "react";\n\nexport function First() {\n  return <b>1</b>;\n}\n'
        "\nexport function Second() {\n  return <i>2</i>;\n}\n",
        "First",
        "Second",
        "<b>1</b>",
        "<i>2</i>",
        "(<i>2</i>",
    ),
    "js": Source(
        "src/index.js",
        "const log = require('./log');\n\nfunction first() {\n  return 1;\n}\n"
        "\nexport const second = () => {\n  return 2;\n};\n",
        "first",
        "second",
        "return 1;",
        "return 2;",
        "return (2;",
    ),
    "go": Source(
        "api/handlers.go",
        'package api\n\nimport "fmt"\n\nfunc First() int {\n\treturn 1\n}\n'
        "\nfunc (s *Server) Second() int {\n\treturn 2\n}\n",
        "First",
        "Server.Second",
        "return 1\n",
        "return 2\n",
        "return (2\n",
    ),
    "rust": Source(
        "src/lib.rs",
        "use std::fmt;\n\npub fn first() -> i32 {\n    return 1;\n}\n"
        "\nimpl Server {\n    pub fn second(&self) -> i32 {\n        return 2;\n    }\n}\n",
        "first",
        "impl Server",
        "return 1;",
        "return 2;",
        "return (2;",
    ),
    "java": Source(
        "src/First.java",
        "package api;\n\nimport java.util.List;\n\nclass First {\n    int f() { return 1; }\n}\n"
        "\nclass Second {\n    int f() { return 2; }\n}\n",
        "First",
        "Second",
        "return 1;",
        "return 2;",
        "return (2;",
    ),
}


def edit(source: Source, old: str, new: str, **more: Any) -> dict[str, Any]:
    return {"edit": {"path": source.path, "old": old, "new": new}, **more}


def key(source: Source, name: str) -> str:
    return f"{source.path}::{name}"


def changed(text: str, *edits: tuple[str, str]) -> str:
    for old, new in edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text


async def play(
    server: Any,
    workdir: Path,
    source: Source,
    script: dict[str, Any],
    runner: RunnerOptions | None = None,
) -> tuple[Any, list[dict[str, Any]]]:
    """Lay out the file, run a task per script entry on a runner each, prove the invariants."""
    (workdir / source.path).parent.mkdir(parents=True, exist_ok=True)
    (workdir / source.path).write_text(source.text)
    runner = runner or RunnerOptions("runner", workdir, workdir.parent / "runs")
    executor = ScriptedExecutor(parse_script(script), wait_timeout=20)
    specs = [{"id": t, "title": f"edit {source.path} ({t})", "description": "d"} for t in script]
    async with FleetClient(server.url) as client:
        await client.create_tasks(specs)
        result = await run_fleet(
            server.url, lambda _: executor, FleetOptions(runner, runners=len(script))
        )
        events = await client.all_events()
        assert check(await collect(client)) == []
    return result, events


def of_type(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == kind]


def acquired(events: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {(e["task_id"], e["payload"]["path"]) for e in of_type(events, "lease_acquired")}


async def replayed(server: Any, workdir: Path, into: Path, source: Source) -> list[Any]:
    """Every succeeded task's patch applied in landing order to the tree as it was, against
    the real tree."""
    original = into.parent / f"{into.name}-original"
    shutil.copytree(workdir, original, ignore=shutil.ignore_patterns(".codefleet"))
    (original / source.path).write_text(source.text)
    async with FleetClient(server.url) as client:
        evidence = await collect(client)
    return replay_patches(original, evidence, into) or compare_trees(into, workdir)


LANGUAGES = pytest.mark.parametrize("source", list(SOURCES.values()), ids=list(SOURCES))


@LANGUAGES
async def test_two_tasks_edit_different_definitions_at_once_and_the_patches_apply_in_order(
    make_server: Any, workdir: Path, tmp_path: Path, source: Source
) -> None:
    server = make_server(**PARTS)
    one, two = (
        (source.one, source.one.replace("1", "11")),
        (source.two, source.two.replace("2", "22")),
    )
    script = {
        "T1": [edit(source, *one), {"wait_acquired": key(source, source.second)}],
        "T2": [edit(source, *two), {"wait_acquired": key(source, source.first)}],
    }
    result, events = await play(server, workdir, source, script)

    assert result.all_succeeded, result.tasks
    assert of_type(events, "lease_denied") == []
    assert acquired(events) == {
        ("T1", key(source, source.first)),
        ("T2", key(source, source.second)),
    }
    assert (workdir / source.path).read_text() == changed(source.text, one, two)
    assert await replayed(server, workdir, tmp_path / "replay", source) == []


@LANGUAGES
async def test_a_third_task_editing_a_held_definition_is_refused_naming_the_part(
    make_server: Any, workdir: Path, source: Source
) -> None:
    server = make_server(**PARTS)
    mine = source.one.replace("1", "11")
    script = {
        "T1": [edit(source, source.one, mine), {"wait_denied": key(source, source.first)}],
        "T3": [
            {"wait_leased": key(source, source.first), "attempt": 1},
            edit(source, source.one, source.one.replace("1", "3"), attempt=1),
            edit(source, mine, source.one.replace("1", "3"), attempt=2),
        ],
    }
    result, events = await play(server, workdir, source, script)
    (t3,) = [t for t in result.tasks if t["id"] == "T3"]

    assert result.all_succeeded, result.tasks
    (denied,) = of_type(events, "lease_denied")
    assert denied["task_id"] == "T3" and denied["payload"]["path"] == key(source, source.first)
    assert denied["payload"]["holder_task_id"] == "T1"
    (requeued,) = [e for e in of_type(events, "task_requeued") if e["task_id"] == "T3"]
    assert f"{key(source, source.first)} is held by" in requeued["payload"]["reason"]
    assert key(source, source.first) in t3["file_scope"]
    assert (workdir / source.path).read_text() == changed(
        source.text, (source.one, source.one.replace("1", "3"))
    )


@LANGUAGES
async def test_of_two_concurrent_editors_the_failed_one_is_put_back_by_part(
    make_server: Any, workdir: Path, tmp_path: Path, source: Source
) -> None:
    server = make_server(**PARTS)
    one = (source.one, source.one.replace("1", "11"))
    script = {
        "T1": [edit(source, *one), {"wait_acquired": key(source, source.second)}],
        "T2": [
            edit(source, source.two, source.two.replace("2", "22"), attempt=1),
            {"wait_acquired": key(source, source.first), "attempt": 1},
            {"fail": "T2 gives up", "attempt": 1},
            edit(source, source.two, source.two.replace("2", "5"), attempt=2),
        ],
    }
    result, events = await play(server, workdir, source, script)

    assert result.all_succeeded, result.tasks
    restored = [(e["task_id"], e["payload"]["path"]) for e in of_type(events, "file_restored")]
    assert restored == [("T2", source.path)]
    # T1's change stands; T2's first attempt is gone; its second attempt's change is there
    expected = changed(source.text, one, (source.two, source.two.replace("2", "5")))
    assert (workdir / source.path).read_text() == expected
    assert await replayed(server, workdir, tmp_path / "replay", source) == []


@LANGUAGES
async def test_a_write_that_leaves_the_file_unparsable_takes_the_whole_file(
    make_server: Any, workdir: Path, source: Source
) -> None:
    server = make_server(**PARTS)
    one = (source.one, source.one.replace("1", "11"))
    script = {
        "T1": [edit(source, *one), {"wait_denied": key(source, source.first)}],
        "T2": [
            {"wait_leased": key(source, source.first), "attempt": 1},
            edit(source, source.two, source.broken),  # in its own definition, but unparsable
        ],
    }
    result, events = await play(server, workdir, source, script)

    assert result.all_succeeded, result.tasks
    (denied,) = of_type(events, "lease_denied")  # the whole file excludes the part T1 holds
    assert denied["task_id"] == "T2" and denied["payload"]["path"] == key(source, source.first)
    assert acquired(events) == {("T1", key(source, source.first)), ("T2", source.path)}
    assert (workdir / source.path).read_text() == changed(
        source.text, one, (source.two, source.broken)
    )


@LANGUAGES
def test_graph_check_counts_overlap_by_part_and_names_a_part_the_file_lacks(
    tmp_path: Path, source: Source
) -> None:
    tree = tmp_path / "tree"
    (tree / source.path).parent.mkdir(parents=True)
    (tree / source.path).write_text(source.text)
    first, second, typo = (key(source, n) for n in (source.first, source.second, "Frist"))
    graph = tmp_path / "graph.yaml"
    graph.write_text(
        yaml.safe_dump(
            {
                "integration": "test",
                "checks": {"test": "true"},
                "tasks": [
                    {"id": "A", "title": "a", "description": "d", "file_scope": [first]},
                    {"id": "B", "title": "b", "description": "d", "file_scope": [second]},
                    {"id": "C", "title": "c", "description": "d", "file_scope": [source.path]},
                    {"id": "D", "title": "d", "description": "d", "file_scope": [typo]},
                ],
            }
        )
    )
    ran = CliRunner().invoke(app, ["graph", "check", str(graph), "--workdir", str(tree), "--json"])
    report = json.loads(ran.stdout)

    pairs = {tuple(o["tasks"]) for o in report["overlaps"]}
    assert pairs == {("A", "C"), ("B", "C"), ("C", "D")}  # A and B: different parts
    (missing,) = [w for w in report["warnings"] if w["code"] == "missing_part"]
    assert missing["task"] == "D" and f"{source.path} has no part Frist" in missing["message"]


def command_runner(workdir: Path) -> RunnerOptions:
    shell = host_shell(ShellLimits(), unsandboxed=True)
    assert shell is not None, "this host cannot build a command layer (user namespaces?)"
    return RunnerOptions(
        "runner", workdir, workdir.parent / "runs", shell_default=True, shell_config=shell
    )


@pytest.mark.parametrize("source", [SOURCES["ts"], SOURCES["go"]], ids=["ts", "go"])
async def test_a_command_that_changes_another_definition_of_a_held_file_lands_by_part(
    make_server: Any, workdir: Path, source: Source
) -> None:
    server = make_server(**PARTS)
    one = (source.one, source.one.replace("1", "11"))
    sed = f"sed -i 's/{source.two.strip()}/{source.two.strip().replace('2', '7')}/' {source.path}"
    script = {
        "T1": [edit(source, *one), {"wait_acquired": key(source, source.second)}],
        "T2": [{"wait_leased": key(source, source.first)}, {"command": sed}],
    }
    result, events = await play(server, workdir, source, script, command_runner(workdir))

    assert result.all_succeeded, result.tasks
    assert of_type(events, "lease_denied") == []
    assert acquired(events) == {
        ("T1", key(source, source.first)),
        ("T2", key(source, source.second)),
    }
    # the command ran on T1's pre-image; only its own definition landed, T1's change stays
    two = (source.two, source.two.replace("2", "7"))
    assert (workdir / source.path).read_text() == changed(source.text, one, two)
