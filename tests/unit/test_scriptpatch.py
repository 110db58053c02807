"""A dry-run script's `patch` diffs and its step options, read and applied in memory."""

from __future__ import annotations

from pathlib import Path

import pytest

from codefleet.fleet.scripted import ScriptedExecutor
from codefleet.fleet.scriptfile import ScriptError, load_script, parse_script
from codefleet.fleet.scriptpatch import PatchError, apply_hunks, read_patch
from codefleet.fleet.scriptwaits import DEFAULT_WAIT_S

LIB = "def f():\n    return 1\n\n\ndef g():\n    return 2\n"
DIFF = """\
diff --git a/lib.py b/lib.py
index 1111111..2222222 100644
--- a/lib.py
+++ b/lib.py
@@ -4,3 +4,3 @@ def f():
{blank}
 def g():
-    return 2
+    return 3
--- /dev/null
+++ b/new.py
@@ -0,0 +1,2 @@
+import lib
+X = lib.g()
""".format(blank=" ")  # a context line of the empty line: one space


def test_a_git_diff_of_two_files_is_read_and_each_applies() -> None:
    changed, created = read_patch(DIFF)
    assert (changed.path, changed.created, created.path, created.created) == (
        "lib.py", False, "new.py", True,
    )  # fmt: skip
    assert apply_hunks(LIB, changed.hunks, "lib.py") == LIB.replace("return 2", "return 3")
    assert apply_hunks("", created.hunks, "new.py") == "import lib\nX = lib.g()\n"


def test_a_hunk_applies_where_its_lines_moved_and_not_where_they_are_gone() -> None:
    (patch,) = read_patch(DIFF.split("--- /dev/null")[0])
    moved = "# a header another task added\n\n" + LIB
    assert apply_hunks(moved, patch.hunks, "lib.py").endswith("    return 3\n")
    with pytest.raises(PatchError, match=r"lib.py: hunk @@ -4,3 @@ does not apply"):
        apply_hunks(LIB.replace("return 2", "return 5"), patch.hunks, "lib.py")


def test_no_newline_at_the_end_is_kept_as_the_diff_says() -> None:
    diff = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n\\ No newline at end of file\n+b\n"
    (patch,) = read_patch(diff)
    assert apply_hunks("a", patch.hunks, "x") == "b\n"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("just words\n", "line 1 is not part of a unified diff"),
        ("--- a/x\n+++ /dev/null\n@@ -1 +0,0 @@\n-a\n", "deletes x"),
        ("--- a/x\n+++ b/x\n", "x has no hunk"),
    ],
)
def test_what_is_not_a_diff_a_script_can_play_is_refused_naming_why(text: str, says: str) -> None:
    with pytest.raises(PatchError, match=says):
        read_patch(text)


def test_patch_and_write_from_read_their_files_next_to_the_script(tmp_path: Path) -> None:
    (tmp_path / "a.diff").write_text(DIFF)
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "caller.py").write_text("import lib\n")
    (tmp_path / "s.yaml").write_text(
        "T:\n- patch: a.diff\n- write_from: {path: caller.py, from: files/caller.py}\n"
    )
    patch, write_from = load_script(tmp_path / "s.yaml")["T"]
    assert [p.path for p in patch.arg] == ["lib.py", "new.py"]
    assert write_from.arg["content"] == "import lib\n"


def test_a_missing_file_or_a_broken_diff_is_a_script_error_before_the_run(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text("T:\n- patch: nowhere.diff\n")
    with pytest.raises(ScriptError, match=r"T: patch: cannot read .*nowhere.diff"):
        load_script(tmp_path / "s.yaml")
    with pytest.raises(ScriptError, match="T: patch: line 1 is not part of a unified diff"):
        parse_script({"T": [{"patch": "not\na diff\n"}]})
    with pytest.raises(ScriptError, match=r"write_from is \{path: P, from: FILE\}"):
        parse_script({"T": [{"write_from": "x.py"}]})


def test_a_wait_takes_its_limit_from_the_step_then_the_script() -> None:
    script = parse_script(
        {
            "wait_timeout": 90,
            "T": [{"wait_succeeded": "U"}, {"wait_leased": "a.py", "timeout": 5}, {"read": "a"}],
        }
    )
    assert [s.timeout for s in script["T"]] == [90.0, 5.0, None]
    assert list(script) == ["T"]
    # neither: the executor's limit, long enough for a landing on a real library (50 s)
    assert parse_script({"T": [{"wait_succeeded": "U"}]})["T"][0].timeout is None
    assert ScriptedExecutor().wait_timeout == DEFAULT_WAIT_S == 600


@pytest.mark.parametrize(
    ("step", "says"),
    [
        ({"read": "a", "timeout": 5}, "timeout goes with a wait_"),
        ({"wait_leased": "a", "timeout": 0}, "above 0"),
        ({"read": "a", "rework": True, "turn": 2}, "without turn"),
        ({"read": "a", "rework": "yes"}, "rework is true or false"),
    ],
)
def test_step_options_out_of_place_are_refused(step: dict[str, object], says: str) -> None:
    with pytest.raises(ScriptError, match=says):
        parse_script({"T": [step]})


def test_a_rework_step_plays_only_in_the_turn_that_reworks() -> None:
    (normal, rework) = parse_script({"T": [{"read": "a"}, {"rework": True, "read": "b"}]})["T"]
    assert normal.plays(1, 1) and not rework.plays(1, 1)
    assert rework.plays(1, 2, reworks=True) and not normal.plays(1, 2, reworks=True)
    assert normal.plays(2, 1, reworks=True) and rework.plays(2, 1, reworks=True)
