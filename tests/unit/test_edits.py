"""`parts.edits`: the text an `Edit` or a `MultiEdit` would leave, replayed before the write."""

from __future__ import annotations

from codefleet.parts.edits import apply_edit, apply_multi_edit


def test_an_edit_replaces_its_one_match():
    assert apply_edit("a = 1\nb = 2\n", "b = 2", "b = 3") == "a = 1\nb = 3\n"


def test_an_edit_that_the_tool_would_refuse_gives_none():
    assert apply_edit("a\na\n", "a", "b") is None
    assert apply_edit("a\n", "z", "b") is None
    assert apply_edit("a\n", "a", "a") is None


def test_replace_all_replaces_every_match():
    assert apply_edit("a\na\n", "a", "b", replace_all=True) == "b\nb\n"


def test_an_empty_old_string_creates_an_empty_file_only():
    assert apply_edit("", "", "x = 1\n") == "x = 1\n"
    assert apply_edit("y\n", "", "x = 1\n") is None


def test_a_multi_edit_applies_its_edits_in_order_all_or_nothing():
    edits = [
        {"old_string": "a = 1", "new_string": "a = 2"},
        {"old_string": "a = 2", "new_string": "a = 3"},
    ]
    assert apply_multi_edit("a = 1\n", edits) == "a = 3\n"
    assert apply_multi_edit("a = 1\n", [*edits, {"old_string": "q", "new_string": "r"}]) is None
    assert apply_multi_edit("a = 1\n", [{"old_string": 1}]) is None


def test_replace_all_with_no_match_is_still_refused():
    assert apply_edit("a\n", "z", "b", replace_all=True) is None


def test_a_multi_edit_whose_replace_all_is_not_a_boolean_is_refused():
    edits = [{"old_string": "a", "new_string": "b", "replace_all": "yes"}]
    assert apply_multi_edit("a\n", edits) is None
    assert apply_multi_edit("a\n", []) == "a\n"
