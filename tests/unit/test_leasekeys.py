"""Lease keys: the spelling, the one rule of which exclude each other, `KeyIndex`."""

from __future__ import annotations

import itertools

import pytest

from codefleet.toolcalls.leasekeys import (
    KeyIndex,
    covering,
    excludes,
    file_of,
    part_key,
    split_part_key,
)


def test_a_part_key_is_the_path_then_two_colons_then_the_name():
    assert part_key("src/api.py", "handle") == "src/api.py::handle"
    assert split_part_key("src/api.py::handle") == ("src/api.py", "handle")
    assert split_part_key("src/api.py::<imports>") == ("src/api.py", "<imports>")
    assert split_part_key("src/api.py") == ("src/api.py", None)


def test_a_part_name_may_contain_two_colons_the_path_may_not():
    key = part_key("a.py", "<print(x[::2])>")
    assert split_part_key(key) == ("a.py", "<print(x[::2])>")
    with pytest.raises(ValueError, match="::"):
        part_key("odd::name.py", "f")
    with pytest.raises(ValueError):
        part_key("a.py", "")
    with pytest.raises(ValueError):
        split_part_key("a.py::")


def test_a_whole_file_key_and_any_part_of_that_file_conflict():
    assert excludes("src/api.py", "src/api.py::handle")
    assert excludes("src/api.py::handle", "src/api.py")
    assert excludes("src/api.py", "src/api.py")


def test_two_parts_of_one_file_do_not_conflict_and_one_part_does():
    assert not excludes("src/api.py::handle", "src/api.py::Router")
    assert excludes("src/api.py::handle", "src/api.py::handle")


def test_different_files_never_conflict():
    assert not excludes("src/api.py", "src/app.py")
    assert not excludes("src/api.py::handle", "src/app.py::handle")
    assert not excludes("src/api.py", "src/api.py.bak")


def test_resource_keys_conflict_only_with_themselves():
    assert excludes("/resource:db", "/resource:db")
    assert not excludes("/resource:build::x", "/resource:build")


def test_a_resource_key_is_never_split_into_a_part():
    assert split_part_key("/resource:build::x") == ("/resource:build::x", None)
    assert file_of("/resource:db") == "/resource:db"
    assert file_of("src/api.py::handle") == "src/api.py"


KEYS = [
    "src/api.py",
    "src/api.py::handle",
    "src/api.py::Router",
    "src/api.py::<imports>",
    "src/app.py",
    "src/app.py::handle",
    "src/api.py.bak",
    "/resource:db",
]


@pytest.mark.parametrize(
    "held", [list(c) for n in range(4) for c in itertools.combinations(KEYS, n)]
)
def test_an_index_answers_by_the_rule_over_every_key_it_holds(held):
    index: KeyIndex[str] = KeyIndex()
    index.update(held, "T1")
    for key in KEYS:
        assert index.conflicts(key) == any(excludes(key, h) for h in held), (held, key)
        assert index.excluded_by(key) == sorted(h for h in held if excludes(key, h)), (held, key)
        assert index.isdisjoint([key]) == (not index.conflicts(key))


def test_an_index_holds_a_key_once_and_lets_it_go():
    index: KeyIndex[str] = KeyIndex()
    index.update(["a.py::f", "a.py::f"], "T1")
    index.put("a.py::f", "T2")  # held again: the value is the latest
    assert len(index) == 1 and index.held == {"a.py::f": "T2"}
    assert index.conflicts("a.py") and not index.conflicts("a.py::g")
    assert index.pop("a.py::f") == "T2"
    assert not index.conflicts("a.py") and index.keys_on("a.py") == set()


def test_a_key_is_covered_by_itself_and_a_part_by_its_whole_file_never_by_a_sibling():
    assert covering("a.py") == ("a.py",)
    assert covering("a.py::f") == ("a.py::f", "a.py")
    assert covering("/resource:db") == ("/resource:db",)
    assert "a.py::g" not in covering("a.py::f") and "a.py::f" not in covering("a.py")
