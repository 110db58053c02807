"""Which lease keys a write takes: the parts of a Python file it changes, else the whole file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from codefleet.parts.python import PythonParts
from codefleet.toolcalls import writeparts
from codefleet.toolcalls.writeparts import write_keys

API = '''"""The API."""

import os


def handle(request):
    return 1


def route(path):
    return path


class Router:
    pass
'''


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "api.py").write_text(API)
    return tmp_path


def edit(old: str, new: str, **more: object) -> dict[str, object]:
    return {"file_path": "api.py", "old_string": old, "new_string": new, **more}


def test_an_edit_inside_one_function_takes_that_function(tree: Path) -> None:
    assert write_keys(tree, "api.py", "Edit", edit("return 1", "return 2")) == ["api.py::handle"]


def test_an_edit_that_changes_lines_in_two_parts_takes_both(tree: Path) -> None:
    spanning = edit("    return 1\n\n\ndef route(path):", "    return 2\n\n\ndef route(p):")
    assert write_keys(tree, "api.py", "Edit", spanning) == ["api.py::handle", "api.py::route"]


def test_a_write_of_the_whole_file_that_changes_one_part_takes_only_that_part(
    tree: Path,
) -> None:
    content = API.replace("    pass\n", "    prefix = '/'\n")
    assert write_keys(tree, "api.py", "Write", {"content": content}) == ["api.py::Router"]


def test_a_new_function_takes_its_own_name_and_a_new_import_its_own_statement(
    tree: Path,
) -> None:
    added = edit("class Router:", "def ping():\n    return 'pong'\n\n\nclass Router:")
    assert write_keys(tree, "api.py", "Edit", added) == ["api.py::ping"]
    imported = edit("import os\n", "import os\nimport re\n")
    assert write_keys(tree, "api.py", "Edit", imported) == ["api.py::<import re>"]


def test_a_rename_takes_the_old_name_and_the_new(tree: Path) -> None:
    renamed = edit("def route(path):", "def path_of(path):")
    assert write_keys(tree, "api.py", "Edit", renamed) == ["api.py::path_of", "api.py::route"]


def test_a_multi_edit_takes_the_parts_of_all_its_edits(tree: Path) -> None:
    edits = {"edits": [{"old_string": "return 1", "new_string": "return 2"},
                       {"old_string": "    pass", "new_string": "    x = 1"}]}  # fmt: skip
    assert write_keys(tree, "api.py", "MultiEdit", edits) == ["api.py::Router", "api.py::handle"]


@pytest.mark.parametrize(
    ("why", "content"),
    [
        ("the write does not parse", API + "def broken(:\n"),
        ("the write changes nothing", API),
    ],
)
def test_a_write_whose_parts_cannot_be_told_takes_the_whole_file(
    tree: Path, why: str, content: str
) -> None:
    assert write_keys(tree, "api.py", "Write", {"content": content}) == ["api.py"], why


def test_a_file_that_does_not_parse_now_takes_the_whole_file(tree: Path) -> None:
    (tree / "api.py").write_text("def broken(:\n")
    assert write_keys(tree, "api.py", "Write", {"content": API}) == ["api.py"]


def test_an_edit_the_tool_would_refuse_takes_the_whole_file(tree: Path) -> None:
    assert write_keys(tree, "api.py", "Edit", edit("not in the file", "x")) == ["api.py"]
    assert write_keys(tree, "api.py", "Edit", edit("return", "x")) == ["api.py"]  # two matches


def test_other_files_and_tools_take_the_whole_file(tree: Path) -> None:
    (tree / "notes.md").write_text("# notes\n")
    assert write_keys(tree, "notes.md", "Write", {"content": "# more\n"}) == ["notes.md"]
    assert write_keys(tree, "new.py", "Write", {"content": "X = 1\n"}) == ["new.py"]  # absent
    assert write_keys(tree, "api.py", "NotebookEdit", {"new_source": "x"}) == ["api.py"]
    assert write_keys(tree, "api.py", "apply_patch", {"command": "..."}) == ["api.py"]


def test_a_symlink_a_large_file_and_a_path_with_two_colons_take_the_whole_file(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    os.symlink(tree / "api.py", tree / "alias.py")
    assert write_keys(tree, "alias.py", "Write", {"content": API + "X = 1\n"}) == ["alias.py"]
    (tree / "odd::name.py").write_text(API)
    assert write_keys(tree, "odd::name.py", "Edit", edit("return 1", "return 2")) == [
        "odd::name.py"
    ]
    monkeypatch.setattr(PythonParts, "max_bytes", len(API) - 1)  # the file's mapper's bound
    assert write_keys(tree, "api.py", "Edit", edit("return 1", "return 2")) == ["api.py"]


def big_module(kilobytes: int) -> str:
    body = "".join(
        f"\n\ndef func_{n}(x):\n    return x + {n}\n" for n in range(kilobytes * 1000 // 36)
    )
    return '"""A big module."""\n' + body


def test_a_module_over_the_part_bound_is_leased_whole_and_so_is_a_write_that_grows_one_past_it(
    tree: Path,
) -> None:
    (tree / "big.py").write_text(big_module(300))
    assert write_keys(tree, "big.py", "Edit", edit("return x + 7\n", "return x + 77\n")) == [
        "big.py"
    ]
    grown = API + big_module(300)
    assert write_keys(tree, "api.py", "Write", {"content": grown}) == ["api.py"]
    assert writeparts.rewrite_parts("api.py", API, grown) is None


def test_a_file_that_is_not_utf8_takes_the_whole_file(tree: Path) -> None:
    (tree / "latin.py").write_bytes(b"X = '\xe9'\n")
    assert write_keys(tree, "latin.py", "Write", {"content": "X = 'e'\n"}) == ["latin.py"]


# -- a command's rewrite (run_command): mapped against what it saw, landed by part -----------

SEEN = API.encode()


def test_a_rewrite_takes_the_parts_it_changes_adds_and_deletes_against_what_it_saw() -> None:
    after = API.replace("return path", "return path.strip()").replace(
        "class Router:\n    pass\n", ""
    )
    added = API + "\n\ndef extra():\n    pass\n"

    assert writeparts.rewrite_parts("api.py", SEEN, after.encode()) == {"route", "Router"}
    assert writeparts.rewrite_parts("api.py", SEEN, added.encode()) == {"extra"}
    assert writeparts.rewrite_parts("api.txt", SEEN, added.encode()) is None  # not Python
    assert writeparts.rewrite_parts("api.py", SEEN, b"def (:\n") is None  # does not parse
    assert writeparts.rewrite_parts("api.py", SEEN, SEEN) is None  # changes nothing


def test_a_rewrite_lands_on_the_current_file_keeping_another_holders_part() -> None:
    after = API.replace("return path", "return path.strip()").encode()
    current = API.replace("return 1", "return 'one'").encode()  # another task's part since

    merged = writeparts.merge_rewrite("api.py", current, SEEN, after, frozenset({"route"}))

    assert (
        merged
        == API.replace("return 1", "return 'one'")
        .replace("return path", "return path.strip()")
        .encode()
    )


def test_a_rewrite_of_a_part_changed_since_the_command_saw_it_does_not_land() -> None:
    after = API.replace("return path", "return path.strip()").encode()
    current = API.replace("return path", "return path.lower()").encode()

    assert writeparts.merge_rewrite("api.py", current, SEEN, after, frozenset({"route"})) is None
