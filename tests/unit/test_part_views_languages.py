"""A check's view by part in every language with a mapper: the engine, a real tree and SQLite.

Two tasks hold different definitions of one file and have both written them; the view
of one task's check shows the other holder's definition as it was and its own as it is,
as for Python (tests/unit/test_part_leases.py).
"""

from __future__ import annotations

import base64

import pytest
from test_part_leases import Fleet, fleet  # noqa: F401  (the fixture)

# language -> (path, text, (part, line, changed line) of T1, of T2)
FILES = {
    "ts": (
        "src/router.ts",
        "export function first() {\n  return 1;\n}\n\nexport const second = () => 2;\n",
        ("first", "return 1;", "return 11;"),
        ("second", "() => 2;", "() => 22;"),
    ),
    "tsx": (
        "src/App.tsx",
        "export function A() {\n  return <b>1</b>;\n}\n\nexport function B() {\n  return <i/>;\n}\n",
        ("A", "<b>1</b>", "<b>11</b>"),
        ("B", "<i/>", "<i>22</i>"),
    ),
    "js": (
        "src/index.js",
        "function first() {\n  return 1;\n}\n\nclass Second {}\n",
        ("first", "return 1;", "return 11;"),
        ("Second", "class Second {}", "class Second { x = 22; }"),
    ),
    "go": (
        "api/handlers.go",
        "package api\n\nfunc First() int {\n\treturn 1\n}\n\nfunc (s *S) Second() int {\n\treturn 2\n}\n",
        ("First", "return 1\n", "return 11\n"),
        ("S.Second", "return 2\n", "return 22\n"),
    ),
    "rust": (
        "src/lib.rs",
        "pub fn first() -> i32 {\n    1\n}\n\nimpl S {\n    fn second() -> i32 { 2 }\n}\n",
        ("first", "    1\n", "    11\n"),
        ("impl S", "{ 2 }", "{ 22 }"),
    ),
    "java": (
        "src/A.java",
        "class A {\n    int f() { return 1; }\n}\n\nclass B {\n    int f() { return 2; }\n}\n",
        ("A", "return 1;", "return 11;"),
        ("B", "return 2;", "return 22;"),
    ),
}


def write(on: Fleet, task_id: str, path: str, name: str, old: str, new: str) -> None:
    """Lease the part (it must be granted), make the edit on the file as it is, record it."""
    assert on.acquire(task_id, f"{path}::{name}").allowed
    target = on.tree / path
    target.write_text(target.read_text().replace(old, new, 1))
    on.record(task_id, path=path)


@pytest.mark.parametrize("language", list(FILES))
def test_a_check_view_shows_the_other_holders_definition_as_it_was_and_its_own_as_it_is(
    fleet: Fleet,  # noqa: F811
    language: str,
) -> None:
    path, text, (first, one, mine), (second, two, theirs) = FILES[language]
    (fleet.tree / path).parent.mkdir(parents=True, exist_ok=True)
    (fleet.tree / path).write_text(text)
    fleet.start("T1", "T2")
    write(fleet, "T1", path, first, one, mine)
    write(fleet, "T2", path, second, two, theirs)

    view = fleet.engine.runner.foreign_preimages("T2")

    (shown,) = view["files"]
    assert base64.b64decode(shown["content_b64"]).decode() == text.replace(two, theirs)
    assert shown["holder_task_id"] == "T1" and view["unrestorable"] == []
    assert fleet.held() == {f"{path}::{first}": "T1", f"{path}::{second}": "T2"}
