"""Lease keys for parts of a file: the spelling, which keys exclude each other, `Claims`."""

from __future__ import annotations

import itertools

import pytest

from codefleet.toolcalls.partkeys import (
    Claims,
    canonical_part_key,
    covering,
    file_of,
    keys_conflict,
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
    assert keys_conflict("src/api.py", "src/api.py::handle")
    assert keys_conflict("src/api.py::handle", "src/api.py")
    assert keys_conflict("src/api.py", "src/api.py")


def test_two_parts_of_one_file_do_not_conflict_and_one_part_does():
    assert not keys_conflict("src/api.py::handle", "src/api.py::Router")
    assert keys_conflict("src/api.py::handle", "src/api.py::handle")


def test_different_files_never_conflict():
    assert not keys_conflict("src/api.py", "src/app.py")
    assert not keys_conflict("src/api.py::handle", "src/app.py::handle")
    assert not keys_conflict("src/api.py", "src/api.py.bak")


def test_resource_keys_conflict_only_with_themselves():
    assert keys_conflict("/resource:db", "/resource:db")
    assert not keys_conflict("/resource:build::x", "/resource:build")


def test_a_key_is_canonicalized_on_its_path_only():
    def canonical(raw: str) -> str:
        return raw.removeprefix("./").replace("//", "/")

    assert canonical_part_key("./src//api.py::handle", canonical) == "src/api.py::handle"
    assert canonical_part_key("./src/api.py", canonical) == "src/api.py"


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
def test_claims_answer_as_keys_conflict_over_every_key_they_hold(held):
    claims = Claims(held)
    for key in KEYS:
        assert claims.conflicts(key) == any(keys_conflict(key, h) for h in held), (held, key)
        assert claims.isdisjoint([key]) == (not claims.conflicts(key))


def test_claims_count_a_key_once():
    claims = Claims(["a.py::f", "a.py::f"])
    claims.add("a.py::f")
    assert len(claims) == 1 and "a.py::f" in claims
    assert claims.conflicts("a.py") and not claims.conflicts("a.py::g")


def test_a_key_is_covered_by_itself_and_a_part_by_its_whole_file_never_by_a_sibling():
    assert covering("a.py") == ("a.py",)
    assert covering("a.py::f") == ("a.py::f", "a.py")
    assert covering("/resource:db") == ("/resource:db",)
    assert "a.py::g" not in covering("a.py::f") and "a.py::f" not in covering("a.py")
