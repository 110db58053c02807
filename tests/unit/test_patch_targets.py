"""The Codex `apply_patch` header parser: which files a patch writes (`toolcalls.applypatch`)."""

from __future__ import annotations

import pytest

from codefleet.toolcalls.applypatch import MalformedPatch, patch_targets


def patch(*body: str) -> str:
    return "\n".join(("*** Begin Patch", *body, "*** End Patch")) + "\n"


def test_an_added_file_is_a_target() -> None:
    assert patch_targets(patch("*** Add File: src/new.py", "+x = 1")) == ("src/new.py",)


def test_an_updated_file_is_a_target() -> None:
    body = ("*** Update File: a.py", "@@ def f():", "-    return 1", "+    return 2")
    assert patch_targets(patch(*body)) == ("a.py",)


def test_a_deleted_file_is_a_target() -> None:
    assert patch_targets(patch("*** Delete File: old.py")) == ("old.py",)


def test_a_move_writes_both_its_source_and_its_destination() -> None:
    body = ("*** Update File: a.py", "*** Move to: b.py", "@@", "-x", "+y")
    assert patch_targets(patch(*body)) == ("a.py", "b.py")


def test_every_header_of_a_multi_file_patch_is_a_target_in_order_once() -> None:
    body = (
        "*** Update File: a.py",
        "@@",
        "+1",
        "*** Add File: b.py",
        "+2",
        "*** Delete File: c.py",
        "*** Update File: a.py",
        "@@",
        "+3",
        "*** End of File",
    )
    assert patch_targets(patch(*body)) == ("a.py", "b.py", "c.py")


def test_a_path_with_spaces_is_kept_whole() -> None:
    assert patch_targets(patch("*** Add File: docs/my notes.md", "+hi")) == ("docs/my notes.md",)


def test_dot_dot_and_absolute_paths_are_returned_as_written_for_the_gate_to_refuse() -> None:
    body = ("*** Add File: ../escape.py", "+x", "*** Delete File: /etc/passwd")
    assert patch_targets(patch(*body)) == ("../escape.py", "/etc/passwd")


def test_added_content_that_looks_like_a_header_is_content() -> None:
    assert patch_targets(patch("*** Add File: a.md", "+*** Delete File: b.py")) == ("a.md",)


def test_crlf_line_endings_are_read_like_lf() -> None:
    text = patch("*** Add File: a.py", "+x").replace("\n", "\r\n")
    assert patch_targets(text) == ("a.py",)


def test_a_well_formed_patch_naming_no_file_has_no_target() -> None:
    assert patch_targets(patch()) == ()


@pytest.mark.parametrize(
    "text",
    [
        "",
        "*** Add File: a.py\n+x\n",  # no envelope
        "*** Begin Patch\n*** Add File: a.py\n+x\n",  # no end marker
        patch("*** Add File:   ", "+x"),  # a header with no path
        patch("*** Rename File: a.py"),  # not a header Codex knows
        patch("*** Move to: b.py"),  # a move with no source
        patch("*** Add File: a.py", "+x", "*** Move to: b.py"),  # a move not after an update
        "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n",  # a unified diff is not this format
    ],
)
def test_a_malformed_patch_is_refused(text: str) -> None:
    with pytest.raises(MalformedPatch):
        patch_targets(text)


def test_a_header_after_added_lines_is_read_through_its_leading_space() -> None:
    assert patch_targets(patch("*** Add File: n", "+x", " *** Delete File: held.txt")) == (
        "n",
        "held.txt",
    )


def test_a_unicode_line_separator_is_part_of_a_path_not_a_line_break() -> None:
    assert patch_targets(patch("*** Add File: a\u2028b", "+x")) == ("a\u2028b",)
