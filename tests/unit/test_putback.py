"""`parts.putback`: named parts of a pre-image put back into the file as it is now.

Run over the toy `SECTIONS` mapper: putting back reads only the mapper's `Index`, so the
answers for a kind of file that is not Python are the same.
"""

from __future__ import annotations

from test_model import DOC, SECTIONS

from codefleet.parts.model import Preimage
from codefleet.parts.putback import parts_of, preimages, put_back_parts, restore_parts


def test_the_parts_of_a_text_are_in_file_order_and_make_up_the_text():
    parts = parts_of(DOC, SECTIONS)
    assert parts is not None
    assert [p.name for p in parts] == ["one", "two", "three"]
    assert "".join(p.text for p in parts) == DOC
    assert parts_of("no heading\n", SECTIONS) is None


def test_a_preimage_is_the_parts_text_and_its_neighbours_and_none_for_a_name_it_lacks():
    assert preimages(DOC, {"two", "new"}, SECTIONS) == {
        "two": Preimage("\n\n# two\nsecond\n", after="one", before="three"),
        "new": Preimage(None, after=None),
    }
    assert preimages("no heading\n", {"two"}, SECTIONS) is None


def test_putting_one_writers_section_back_keeps_another_writers_change():
    mine = DOC.replace("second", "2nd")
    both = mine.replace("third", "3rd")  # another task changed "three" meanwhile
    taken = preimages(DOC, {"two"}, SECTIONS)
    assert taken is not None
    assert restore_parts(both, taken, mapper=SECTIONS) == DOC.replace("third", "3rd")


def test_a_section_the_writer_added_is_removed_and_one_it_deleted_goes_back_in_place():
    added = DOC + "\n# four\nfourth\n"
    assert put_back_parts(added.encode(), [(DOC.encode(), ["four"])], SECTIONS) == DOC.encode()
    deleted = DOC.replace("\n\n# two\nsecond\n", "")
    assert put_back_parts(deleted.encode(), [(DOC.encode(), ["two"])], SECTIONS) == DOC.encode()


def test_one_part_in_two_pre_images_or_a_pre_image_without_parts_cannot_be_put_back():
    now = DOC.replace("second", "2nd").encode()
    assert put_back_parts(now, [(DOC.encode(), ["two"]), (DOC.encode(), ["two"])], SECTIONS) is None
    assert put_back_parts(now, [(b"no heading\n", ["two"])], SECTIONS) is None


def test_nothing_taken_leaves_the_file_as_it_is():
    assert put_back_parts(b"# x\n", [], SECTIONS) == b"# x\n"
