"""`parts.kinds`: which mapper tells a file's parts, by the file's name."""

from __future__ import annotations

from codefleet.parts import python as python_parts
from codefleet.parts.kinds import MAPPERS, mapper_for


def test_a_file_has_the_parts_of_its_kind_or_none() -> None:
    assert mapper_for("src/api.py") is python_parts.PYTHON
    assert mapper_for("stubs/api.pyi") is python_parts.PYTHON
    assert mapper_for("README.md") is None and mapper_for("api.py.bak") is None


def test_a_name_is_matched_by_its_ending_not_by_what_it_contains() -> None:
    assert mapper_for("api.pyc") is None
    assert mapper_for("py") is None
    assert mapper_for("scripts.py/notes.txt") is None


def test_no_ending_is_claimed_by_two_mappers_and_every_mapper_tells_parts() -> None:
    endings = [suffix for suffixes, _ in MAPPERS for suffix in suffixes]
    assert len(endings) == len(set(endings))
    assert all(suffix.startswith(".") for suffix in endings)
    for suffixes, mapper in MAPPERS:
        assert mapper_for(f"x{suffixes[0]}") is mapper
        assert mapper.index("") is not None  # an empty file of its kind: parts, none of them
