"""The rules under "an agent cannot switch the checks off" (issue 51, item 4), one at a time.

The tree refuses a file once it is protected (`TreeRoot.protect`), whatever the
spelling; the check registry protects the checks' file and keeps it protected
across a restart; a `check_defined` that replaced a command says what it was and
which task's write left the file as it is; the lines the verdict and the report
show name a deleted test only when the landed attempt deleted it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from codefleet.cli.run.checkchange import ChangedCheck, changed_by_graph, graph_key, split_given
from codefleet.coord.engine import Engine, EngineConfig
from codefleet.coord.storage.store import Store
from codefleet.paths import PathRejected, TreeRoot
from codefleet.review.report.checksections import (
    check_changes,
    deleted_tests,
    is_test_path,
    weakened_lines,
)
from codefleet.rollback import content_sha256


def test_a_protected_file_is_refused_under_any_spelling_and_a_key_outside_changes_nothing(
    tmp_path: Path,
) -> None:
    (tmp_path / "codefleet.yaml").write_text("tasks: []\n")
    (tmp_path / "sub").mkdir()
    tree = TreeRoot(tmp_path)
    assert tree.canonical("codefleet.yaml") == "codefleet.yaml"

    tree.protect("codefleet.yaml")
    tree.protect("../elsewhere.yaml")

    for spelling in ("codefleet.yaml", "./codefleet.yaml", "sub/../codefleet.yaml"):
        with pytest.raises(PathRejected, match="protected path"):
            tree.canonical(spelling)
    assert tree.canonical("codefleet.yml") == "codefleet.yml"  # a neighbour is not


def test_the_registry_protects_the_checks_file_and_a_restarted_engine_still_does(
    tmp_path: Path,
) -> None:
    root = tmp_path / "tree"
    root.mkdir()
    (root / "plan.yaml").write_text("checks: {test: pytest}\n")
    db = tmp_path / "db.sqlite"
    store = Store(db)
    engine = Engine(store, TreeRoot(root), EngineConfig())
    engine.operator.define_checks({"test": "pytest -q"}, "plan.yaml")
    store.close()

    restarted_tree = TreeRoot(root)
    Engine(Store(db), restarted_tree, EngineConfig())

    with pytest.raises(PathRejected, match="protected path"):
        restarted_tree.canonical("plan.yaml")


def test_a_replaced_check_names_its_old_command_its_file_and_the_task_that_wrote_it(
    tmp_path: Path,
) -> None:
    (tmp_path / "plan.yaml").write_text("weakened\n")
    store = Store(tmp_path / "db.sqlite")
    engine = Engine(store, TreeRoot(tmp_path), EngineConfig())
    engine.operator.define_checks({"test": "pytest -q"})
    now = content_sha256(tmp_path / "plan.yaml")
    with engine.transition():  # T3's write left the file as it is; T4's was undone since
        store.insert_change("T3", "a3", "plan.yaml", "Write", "2026-01-01T00:00:02Z", 1, now)
        store.insert_change("T4", "a4", "plan.yaml", "Write", "2026-01-01T00:00:03Z", 1, "ab")
        store.insert_change("i-ann", "p1", "plan.yaml", "Edit", "2026-01-01T00:00:04Z", None)

    engine.operator.define_checks({"test": "true"}, "plan.yaml")

    [defined] = [e for e in store.events(0, 100, "check_defined") if e["payload"].get("was")]
    assert defined["payload"] == {
        "name": "test",
        "command": "true",
        "replaced": True,
        "was": "pytest -q",
        "source": "plan.yaml",
        "written_by": "T3",
    }
    store.close()


def _event(kind: str, task_id: str, **payload: Any) -> dict[str, Any]:
    return {"type": kind, "task_id": task_id, "payload": payload}


@pytest.mark.parametrize(
    ("path", "is_test"),
    [
        ("tests/test_ok.py", True),
        ("pkg/tests/helpers.py", True),
        ("test_api.py", True),
        ("api_test.go", True),
        ("web/button.test.tsx", True),
        ("web/button.spec.ts", True),
        ("conftest.py", True),
        ("src/contest.py", False),
        ("src/latest.py", False),
        ("docs/testing.md", False),
    ],
)
def test_what_counts_as_a_test_file(path: str, is_test: bool) -> None:
    assert is_test_path(path) is is_test


def test_a_deleted_test_is_named_only_when_the_landed_attempt_left_it_deleted() -> None:
    events = [
        _event("task_started", "T1"),
        _event("file_changed", "T1", path="tests/test_a.py"),  # deleted in attempt 1...
        _event("task_started", "T1"),  # ...which was rolled back
        _event("file_changed", "T1", path="tests/test_b.py"),
        _event("task_started", "T2"),
        _event("file_changed", "T2", path="tests/test_c.py"),
        _event("file_changed", "T2", path="tests/test_c.py", sha256="ab"),  # made again
        _event("task_started", "T3"),
        _event("file_changed", "T3", path="tests/test_d.py"),  # T3 failed: rolled back
        _event("file_changed", "T1", path="src/gone.py"),  # not a test
    ]

    assert deleted_tests(events, {"T1", "T2"}) == {"T1": ["tests/test_b.py"]}


def test_the_lines_name_deleted_tests_then_each_replaced_check() -> None:
    events = [
        _event("task_started", "T1"),
        _event("file_changed", "T1", path="tests/test_b.py"),
        {
            "type": "check_defined",
            "task_id": None,
            "payload": {"name": "test", "command": "pytest"},
        },
        {
            "type": "check_defined",
            "task_id": None,
            "payload": {"name": "test", "command": "true", "replaced": True, "was": "pytest"}
            | {"source": "plan.yaml", "written_by": "T1"},
        },
    ]

    assert [c.name for c in check_changes(events)] == ["test"]
    assert weakened_lines(events, {"T1"}) == [
        "T1 deleted test file(s): tests/test_b.py",
        "check test changed: `pytest` → `true` (plan.yaml last written by T1)",
    ]


def test_a_graph_change_the_command_line_gives_is_the_operators_own() -> None:
    graph = {"test": "true", "lint": "ruff check", "new": "echo"}
    defined = {"test": "pytest -q", "lint": "ruff", "other": "x"}

    assert changed_by_graph(graph, {"lint": "ruff check"}, defined) == [
        ("test", "pytest -q", "true")
    ]


def test_the_refusal_says_how_to_accept_the_change_quoted_for_a_shell() -> None:
    change = ChangedCheck("test", "pytest -q", "pytest -q -k 'not slow'", "codefleet.yaml", "T4")

    assert change.refusal() == (
        "check test changed in codefleet.yaml (last written by task T4): it was `pytest -q`, "
        "now `pytest -q -k 'not slow'`; not applied. To apply it, run again with "
        "--check 'test=pytest -q -k '\"'\"'not slow'\"'\"''; to keep the old one, restore "
        "codefleet.yaml"
    )


def test_a_graph_outside_the_tree_has_no_key(tmp_path: Path) -> None:
    (tmp_path / "tree" / "sub").mkdir(parents=True)

    assert graph_key(tmp_path / "tree" / "sub" / "g.yaml", tmp_path / "tree") == "sub/g.yaml"
    assert graph_key(tmp_path / "g.yaml", tmp_path / "tree") is None


def test_a_change_only_the_operator_typed_is_defined_apart_from_the_file() -> None:
    graph = {"test": "true", "lint": "ruff check", "doc": "mkdocs build"}
    given = {"test": "true", "lint": "ruff check --fix", "new": "echo"}
    defined = {"test": "pytest -q", "lint": "ruff", "doc": "mkdocs build"}

    with_file, typed = split_given(graph, given, defined)

    assert typed == {"lint": "ruff check --fix"}  # the file says otherwise: the operator's own
    assert with_file == {"test": "true", "lint": "ruff", "doc": "mkdocs build", "new": "echo"}
