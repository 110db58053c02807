"""`codefleet graph check FILE` on real files, and the same analysis served by `GET /graph`.

No model, and a server only where the check reads one: each test writes a small tree
and a graph under `tmp_path` and runs the Typer app in process. The crafted graph has
one of everything the check reports (an overlap pair, a hotspot, a typo, a missing
directory, a new file its task names, a path outside the tree); the shipped demo
graph's one warning is the veto it stages.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from codefleet.api.client import FleetClient
from codefleet.cli.app import app
from codefleet.cli.start.demo_run import examples_dir

CRAFTED = """
tasks:
  - id: A
    title: models
    file_scope: [models.py, shared/util.py]
    estimate_min: 20
    description: Change the models.
  - id: B
    title: api
    file_scope: [api.py, shared/util.py]
    estimate_min: 10
    description: Change the API.
  - id: C
    title: util again
    depends_on: [A]
    file_scope: [./shared/util.py, tests/test_util.py]
    estimate_min: 10
    description: Add tests/test_util.py for the helpers.
  - id: D
    title: typo and a new package
    file_scope: [modles.py, newpkg/mod.py, brand_new.py]
    estimate_min: 5
    description: Edit the models.
"""


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    (root / "shared").mkdir(parents=True)
    (root / "tests").mkdir()
    for name in ("models.py", "api.py", "shared/util.py"):
        (root / name).write_text("X = 1\n")
    return root


def check(tree: Path, graph: str | Path, *args: str) -> tuple[int, str, str]:
    path = graph if isinstance(graph, Path) else tree.parent / "graph.yaml"
    if isinstance(graph, str):
        path.write_text(graph)
    result = CliRunner().invoke(app, ["graph", "check", str(path), "--workdir", str(tree), *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.stdout, result.stderr


def check_json(tree: Path, graph: str | Path, *args: str) -> tuple[int, dict[str, Any]]:
    code, out, _ = check(tree, graph, "--json", *args)
    return code, json.loads(out)


def test_the_demo_graph_is_clean_three_wide_with_a_forty_minute_critical_path() -> None:
    demo = examples_dir()
    code, report = check_json(demo / "demo-repo", demo / "demo-tasks.yaml")

    assert code == 0
    assert report["tasks"] == 5
    assert report["critical_path"] == {"tasks": ["T1", "T2", "T5"], "length": 3, "minutes": 40}
    assert report["max_width"] == 3 and report["width_exact"] is True
    assert report["overlaps"] == [] and report["hotspots"] == []
    assert report["errors"] == []  # its one warning is the veto it stages (T4 in api.py):
    assert [(w["code"], w["task"], w["path"]) for w in report["warnings"]] == [
        ("unscoped_mention", "T4", "api.py")
    ]
    assert report["parallelism"]["runners"] == 3 and report["parallelism"]["unit"] == "minutes"
    assert (report["parallelism"]["makespan"], report["parallelism"]["total_work"]) == (40, 65)


def test_the_json_report_has_the_documented_shape(tree: Path) -> None:
    code, report = check_json(tree, CRAFTED)

    assert code == 0
    assert set(report) == {
        "file",
        "workdir",
        "leases",
        "ok",
        "tasks",
        "critical_path",
        "critical_path_minutes",
        "max_width",
        "width_exact",
        "parallelism",
        "overlaps",
        "hotspots",
        "succeeded",
        "errors",
        "warnings",
    }
    assert set(report["parallelism"]) == {
        "runners",
        "predicted",
        "makespan",
        "total_work",
        "peak",
        "unit",
    }
    assert report["workdir"] == str(tree.resolve())
    assert all(set(w) == {"code", "message", "task", "path"} for w in report["warnings"])


def test_overlap_pairs_are_the_unordered_tasks_sharing_a_canonical_path(tree: Path) -> None:
    _, report = check_json(tree, CRAFTED)

    # C shares shared/util.py (spelled ./shared/util.py) with A and B; C runs after A anyway.
    assert report["overlaps"] == [
        {"tasks": ["A", "B"], "paths": ["shared/util.py"]},
        {"tasks": ["B", "C"], "paths": ["shared/util.py"]},
    ]
    assert report["hotspots"] == [{"path": "shared/util.py", "tasks": ["A", "B", "C"]}]


def test_the_critical_path_width_and_prediction_of_the_crafted_graph(tree: Path) -> None:
    _, report = check_json(tree, CRAFTED, "--runners", "2")

    assert report["critical_path"] == {"tasks": ["A", "C"], "length": 2, "minutes": 30}
    assert report["max_width"] == 3  # B, C and D: no dependency path between them
    # A (first: a dependent waits on it) and D start; B waits for A's util.py, then wins the
    # tie with C on id; C runs last: 20 + 10 + 10 minutes, one runner idle most of the time.
    assert report["parallelism"] == {
        "runners": 2,
        "predicted": 1.12,
        "makespan": 40,
        "total_work": 45,
        "peak": 2,
        "unit": "minutes",
    }


def test_tasks_leased_by_part_with_no_integration_check_are_warned_once(tree: Path) -> None:
    graph = (
        "lease_granularity: part\n"
        "checks: {test: 'true'}\n"
        "tasks:\n"
        "  - {id: A, title: a, description: d, file_scope: [api.py::a], verify: test}\n"
        "  - {id: B, title: b, description: d, file_scope: [api.py::b], verify: test}\n"
    )
    _, report = check_json(tree, graph)
    _, landed = check_json(tree, graph.replace("checks:", "integration: test\nchecks:"))

    codes = [w["code"] for w in report["warnings"]]
    assert codes.count("parts_unchecked") == 1 and "no_integration" not in codes  # verify: set
    assert "parts_unchecked" not in [w["code"] for w in landed["warnings"]]


def test_a_part_its_file_does_not_have_is_warned_with_the_nearest_unless_new(tree: Path) -> None:
    (tree / "number.py").write_text("def apnumber():\n    return 1\n\n\ndef other():\n    pass\n")
    graph = (
        "integration: test\n"
        "checks: {test: 'true'}\n"
        "tasks:\n"
        "  - {id: A, title: a, description: d, file_scope: [number.py::apnumbr]}\n"
        "  - {id: B, title: b, description: d, file_scope: [number.py::other]}\n"
        "  - {id: C, title: c, description: add fresh() to number.py, file_scope: [number.py::fresh]}\n"
    )

    code, report = check_json(tree, graph)

    assert code == 0, "a warning alone does not fail the check"
    parts = [w for w in report["warnings"] if w["code"] == "missing_part"]
    assert [(w["task"], w["path"]) for w in parts] == [("A", "number.py::apnumbr")]
    assert "number.py has no part apnumbr; did you mean number.py::apnumber?" in parts[0]["message"]


def test_a_new_import_statement_is_named_by_its_text_in_the_description(tree: Path) -> None:
    (tree / "router.ts").write_text('import { a } from "./a";\n\nexport function f() {}\n')
    graph = (
        "integration: test\n"
        "checks: {test: 'true'}\n"
        "tasks:\n"
        "  - id: A\n"
        "    title: a\n"
        "    description: 'add `import { b } from \"./b\";` to router.ts'\n"
        "    file_scope: ['router.ts::<import { b } from \"./b\";>']\n"
        "  - id: B\n"
        "    title: b\n"
        "    description: add an import to router.ts\n"
        "    file_scope: ['router.ts::<import { c } from \"./c\";>']\n"
    )

    _, report = check_json(tree, graph)

    parts = [w for w in report["warnings"] if w["code"] == "missing_part"]
    assert [(w["task"], w["path"]) for w in parts] == [
        ("B", 'router.ts::<import { c } from "./c";>')
    ]


def test_a_scope_naming_the_old_import_block_is_warned_to_name_a_statement(tree: Path) -> None:
    (tree / "hub.py").write_text("import os\nfrom x import y\n\n\ndef f():\n    pass\n")
    graph = (
        "integration: test\n"
        "checks: {test: 'true'}\n"
        "tasks:\n"
        "  - {id: A, title: a, description: d, file_scope: ['hub.py::<imports>']}\n"
    )

    code, report = check_json(tree, graph)

    assert code == 0
    (warning,) = [w for w in report["warnings"] if w["code"] == "missing_part"]
    assert warning["message"] == (
        "task A: hub.py has no part <imports>; each import statement is a part of its own: "
        "name one (hub.py::<import os>) or hub.py"
    )


def test_missing_paths_warn_unless_plausibly_new(tree: Path) -> None:
    code, report = check_json(tree, CRAFTED)

    assert code == 0, "warnings alone do not fail the check"
    warnings = {w["path"]: w for w in report["warnings"] if w["code"] != "no_integration"}
    assert set(warnings) == {"modles.py", "newpkg/mod.py"}
    assert "did you mean models.py?" in warnings["modles.py"]["message"]
    assert warnings["modles.py"]["code"] == "missing_path"
    assert warnings["newpkg/mod.py"]["code"] == "missing_directory"
    # brand_new.py: its directory exists, nothing is spelled like it; tests/test_util.py: named.


@pytest.mark.parametrize(
    ("raw", "code", "says"),
    [
        ("../outside.py", "outside_workdir", "resolves outside the working tree"),
        ("/etc/passwd", "outside_workdir", "resolves outside the working tree"),
        (".git/config", "protected_path", "is a protected path"),
        ("shared", "invalid_path", "is a directory"),
    ],
)
def test_a_path_the_server_would_refuse_is_an_error_and_exit_1(
    tree: Path, raw: str, code: str, says: str
) -> None:
    graph = f"tasks:\n  - {{id: A, title: a, description: d, file_scope: [api.py, '{raw}']}}\n"

    exit_code, report = check_json(tree, graph)

    assert exit_code == 1 and report["ok"] is False
    [error] = report["errors"]
    assert (error["code"], error["task"], error["path"]) == (code, "A", raw)
    assert says in error["message"]


def test_an_invalid_graph_is_refused_with_the_loaders_message(tree: Path) -> None:
    graph = (
        "tasks:\n  - {id: A, title: a, description: d, depends_on: [B]}\n"
        "  - {id: B, title: b, description: d, depends_on: [A]}\n"
    )

    code, out, err = check(tree, graph)
    json_code, report = check_json(tree, graph)

    assert code == 1 and out == ""
    assert "cycle: A -> B -> A" in " ".join(err.split())
    assert json_code == 1
    assert report["ok"] is False and "cycle: A -> B -> A" in report["errors"][0]["message"]


def test_the_text_report_names_every_section(tree: Path) -> None:
    code, out, _ = check(tree, CRAFTED)

    text = " ".join(out.split())
    assert code == 0
    for expected in (
        "tasks 4",
        "critical path A -> C (2 task(s), 30 min)",
        "max width 3",
        "on 3 runners",
        "overlapping scopes 2 pair(s)",
        "A + B: shared/util.py",
        "hotspots 1 file(s) in 3 or more scopes",
        "shared/util.py: A, B, C",
        "warning: task D: modles.py does not exist; did you mean models.py?",
        "warning: no task is checked as it lands",
        "OK: 0 error(s), 3 warning(s)",
    ):
        assert expected in text, text


def test_an_unknown_estimate_key_spelling_is_refused(tree: Path) -> None:
    code, _, err = check(tree, "tasks:\n  - {id: A, title: a, description: d, estimate: 5}\n")

    said = " ".join(err.split())
    assert code == 1 and "unknown key 'estimate' (did you mean estimate_min?)" in said


def test_a_missing_tree_is_a_clear_error(tmp_path: Path) -> None:
    code, _, err = check(tmp_path / "nowhere", examples_dir() / "demo-tasks.yaml")

    assert code == 1 and "does not exist" in " ".join(err.split())


def test_the_graph_guide_shows_what_graph_check_prints_for_the_demo_graph() -> None:
    guide = (examples_dir().parent / "docs" / "graph.md").read_text()
    command = "$ codefleet graph check examples/demo-tasks.yaml --workdir examples/demo-repo"
    shown = guide.split(command + "\n", 1)[1].split("```", 1)[0].splitlines()
    demo = examples_dir()

    result = CliRunner().invoke(
        app,
        ["graph", "check", str(demo / "demo-tasks.yaml"), "--workdir", str(demo / "demo-repo")],
        env={"COLUMNS": "200"},
    )

    printed = result.stdout.splitlines()
    assert result.exit_code == 0
    assert printed[0].endswith(str(demo / "demo-repo")) and shown[0].endswith("examples/demo-repo")
    assert printed[1:] == shown[1:], "docs/graph.md's example is out of date"


def test_without_a_graph_it_checks_codefleet_yaml_in_the_current_directory(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tree / "codefleet.yaml").write_text(CRAFTED)
    monkeypatch.chdir(tree)

    result = CliRunner().invoke(app, ["graph", "check", "--json"])

    assert result.exit_code == 0, result.output
    assert Path(json.loads(result.stdout)["file"]).name == "codefleet.yaml"


def test_without_a_graph_or_codefleet_yaml_it_says_how_to_make_one(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tree)

    result = CliRunner().invoke(app, ["graph", "check"])

    assert result.exit_code != 0 and "codefleet init" in result.stderr


def test_a_task_without_an_id_is_named_by_its_position(tree: Path) -> None:
    graph = (
        "tasks:\n  - {id: A, title: a, description: d, file_scope: [api.py]}\n"
        "  - {title: anonymous, description: d}\n"
    )

    code, report = check_json(tree, graph, "--runners", "2")

    assert code == 0 and report["tasks"] == 2
    assert [(w["code"], w["task"]) for w in report["warnings"]] == [
        ("no_integration", None),
        ("no_scope", "#2"),
    ]


async def test_the_server_serves_the_same_analysis_of_its_stored_graph(
    client: FleetClient, http: httpx.AsyncClient
) -> None:
    await client.create_tasks(
        [{"id": "A", "title": "a", "description": "d", "file_scope": ["a.py", "x.py"]},
         {"id": "B", "title": "b", "description": "d", "file_scope": ["./x.py"]},
         {"id": "C", "title": "c", "description": "d", "file_scope": ["c.py"], "depends_on": ["A"]}]
    )  # fmt: skip

    graph = await client.graph(runners=2)
    default = await client.graph()
    refused = await http.get("/graph", params={"runners": 0})

    assert graph["runners"] == 2 and default["runners"] == 3
    assert graph["overlaps"] == [{"tasks": ["A", "B"], "paths": ["x.py"]}]
    assert graph["critical_path"]["tasks"] == ["A", "C"] and graph["max_width"] == 2
    # A first (C waits on it), B waits for x.py; then B and C side by side.
    assert (graph["parallelism"]["makespan"], graph["parallelism"]["peak"]) == (2, 2)
    assert refused.status_code == 422 and refused.json()["error"]["code"] == "invalid_request"


def test_a_scope_whose_every_entry_is_refused_is_an_error_not_a_missing_scope(tree: Path) -> None:
    graph = (
        "tasks:\n  - {id: T4, title: t, description: d, "
        "file_scope: [../outside.txt, /etc/passwd]}\n"
    )

    code, report = check_json(tree, graph, "--runners", "1")

    assert code == 1
    assert [(e["code"], e["task"]) for e in report["errors"]] == [("outside_workdir", "T4")] * 2
    assert "no_scope" not in [w["code"] for w in report["warnings"]], (
        "T4 declared a scope; its refused entries are the errors, not a missing scope"
    )


@pytest.mark.parametrize(
    ("extra", "warned"),
    [("", True), ("integration: test\n", False), ("", False)],
    ids=["neither", "integration", "verify"],
)
def test_a_graph_whose_tasks_land_unchecked_says_so_in_one_line(
    tmp_path: Path, extra: str, warned: bool, request: pytest.FixtureRequest
) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    verify = "verify: test, " if request.node.callspec.id == "verify" else ""
    graph = tmp_path / "g.yaml"
    graph.write_text(
        f"checks: {{test: 'true'}}\n{extra}tasks:\n"
        f"  - {{id: A, title: a, description: a, {verify}file_scope: [a.py]}}\n"
        "  - {id: B, title: b, description: b, file_scope: [b.py]}\n"
    )
    code, report = check_json(tree, graph)
    codes = [w["code"] for w in report["warnings"]]
    assert code == 0 and (codes.count("no_integration") == 1) is warned


def test_a_file_the_description_names_that_another_tasks_scope_holds_is_warned(
    tree: Path,
) -> None:
    """B's description names api.py, which A holds and B does not: B would be vetoed. C
    names it too but runs after A; D names test_api.py, which is not api.py."""
    graph = (
        "tasks:\n"
        "  - {id: A, title: a, description: d, file_scope: [api.py]}\n"
        "  - {id: B, title: b, description: Call the new route from api.py., file_scope: [models.py]}\n"
        "  - {id: C, title: c, description: Document api.py., file_scope: [models.py], depends_on: [A]}\n"
        "  - {id: D, title: d, description: Add tests/test_api.py., file_scope: [tests/test_api.py]}\n"
    )
    code, report = check_json(tree, graph)

    assert code == 0
    mentions = [w for w in report["warnings"] if w["code"] == "unscoped_mention"]
    assert [(w["task"], w["path"]) for w in mentions] == [("B", "api.py")]
    assert "A's file_scope holds and B's does not" in mentions[0]["message"]
    assert "vetoed" in mentions[0]["message"]


def test_tasks_that_succeeded_on_the_trees_server_are_left_out_of_overlaps(
    tree: Path, make_server: Any
) -> None:
    """A and B overlap on shared/util.py; once both succeeded on the tree's server, a
    check of the same graph counts no overlap and says why."""
    from codefleet.fleet.local import FleetOptions, run_fleet
    from codefleet.fleet.runner import RunnerOptions
    from codefleet.fleet.scripted import ScriptedExecutor

    server = make_server(workdir=tree)
    before_code, before = check_json(tree, CRAFTED)

    async def succeed_a_and_b() -> None:
        async with FleetClient(server.url) as client:
            await client.create_tasks([{"id": t, "title": t, "description": "d"} for t in "AB"])
        options = FleetOptions(RunnerOptions("runner", tree, tree.parent / "runs"), runners=1)
        await run_fleet(server.url, lambda _: ScriptedExecutor({}), options)

    asyncio.run(succeed_a_and_b())
    code, report = check_json(tree, CRAFTED)
    _, out, _ = check(tree, CRAFTED)

    assert [o["tasks"] for o in before["overlaps"]] == [["A", "B"], ["B", "C"]]
    assert before["succeeded"] == [] and code == before_code == 0
    assert report["overlaps"] == [] and report["succeeded"] == ["A", "B"]
    said = " ".join(out.split())
    assert "already succeeded A, B: on this tree's server; not counted above" in said
