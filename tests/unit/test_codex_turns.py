"""A Claude Code script played by Codex (`fakecodex.codex_turns`): writes become patches."""

from __future__ import annotations

from codefleet.offlinemodels.modelscripts import Text, ToolUse, Turn, WaitFor
from codefleet.offlinemodels.openaiapi import codex_turns
from codefleet.toolcalls.applypatch import patch_targets


def patch_of(turn: Turn) -> str:
    [call] = [i for i in turn.content if isinstance(i, ToolUse)]
    assert call.name == "apply_patch"
    return str(call.input["input"])


def test_a_write_becomes_an_added_file_and_an_edit_an_update_hunk() -> None:
    write = Turn((Text("w"), ToolUse("Write", {"file_path": "a.py", "content": "A = 1\nB = 2\n"})))
    edit = Turn(
        (
            ToolUse(
                "Edit",
                {"file_path": "b.py", "old_string": "x = 1\n", "new_string": "x = 2\ny = 3\n"},
            ),
        )
    )
    added, updated = codex_turns([write, edit])
    assert patch_of(added).splitlines()[1:4] == ["*** Add File: a.py", "+A = 1", "+B = 2"]
    assert patch_of(updated).splitlines()[1:6] == [
        "*** Update File: b.py",
        "@@",
        "-x = 1",
        "+x = 2",
        "+y = 3",
    ]
    assert patch_targets(patch_of(updated)) == ("b.py",)


def test_reads_are_dropped_their_wait_moves_on_and_codefleets_own_tools_are_kept() -> None:
    wait = WaitFor("api.py has been updated", "T3")
    read = Turn((Text("Reading."), ToolUse("Read", {"file_path": "a.py"})), wait_for=wait)
    check = Turn((ToolUse("mcp__codefleet__run_check", {"name": "test"}),))
    write = Turn((ToolUse("Write", {"file_path": "a.py", "content": "x\n"}),))
    done = Turn((Text("Done."),))
    kept = codex_turns([read, check, write, done])
    assert len(kept) == 3 and kept[0] == Turn(check.content, wait_for=wait) and kept[2] == done


def test_a_codex_native_patch_call_is_kept_as_it_is() -> None:
    native = Turn((ToolUse("apply_patch", {"input": "*** Begin Patch\n*** End Patch\n"}),))
    assert codex_turns([native]) == [native]
