"""`parts.changes`: the parts a write changes, for any kind of file (here the toy `SECTIONS`).

Each changed line takes the part that owns it on its side; the rule reads only the
mapper's `Index`, so a mapper that is not Python's gets the same answers.
"""

from __future__ import annotations

from test_model import DOC, SECTIONS

from codefleet.parts.changes import changed_parts
from codefleet.parts.model import PartChange


def change(old: str, new: str) -> PartChange:
    found = changed_parts(old, new, SECTIONS)
    assert found is not None
    return found


def test_a_line_changed_inside_one_section_takes_that_section_only():
    assert change(DOC, DOC.replace("second", "2nd")) == PartChange(
        frozenset({"two"}), frozenset(), frozenset()
    )


def test_a_section_added_or_deleted_is_taken_by_its_name_on_its_side():
    added = change(DOC, DOC + "\n# four\nfourth\n")
    assert (added.changed, added.added, added.deleted) == (set(), {"four"}, set())
    deleted = change(DOC, DOC.replace("\n# three\nthird\n", ""))
    assert (deleted.changed, deleted.added, deleted.deleted) == (set(), set(), {"three"})


def test_a_renamed_section_holds_its_old_name_and_its_new_one():
    assert change(DOC, DOC.replace("# two", "# deux")).names == {"two", "deux"}


def test_blank_lines_added_between_sections_take_the_section_below_them_never_nothing():
    assert change(DOC, DOC.replace("second\n", "second\n\n\n")).names == {"three"}


def test_an_unchanged_text_changes_nothing_and_a_side_without_parts_gives_none():
    assert change(DOC, DOC).names == set()
    assert changed_parts(DOC, "no heading\n" + DOC, SECTIONS) is None
    assert changed_parts("no heading\n", DOC, SECTIONS) is None


def test_a_new_file_takes_every_section_it_creates():
    assert change("", DOC).added == {"one", "two", "three"}
