"""`parts.kept`: the last texts mapped are kept, within a budget of text and a number of texts."""

from __future__ import annotations

from codefleet.parts.kept import KeptIndexes
from codefleet.parts.python import PYTHON


def test_a_kept_text_answers_its_index_and_an_unknown_one_says_it_is_not_kept() -> None:
    kept: KeptIndexes[str] = KeptIndexes()
    index = PYTHON.index("x = 1\n")
    kept.keep("x = 1\n", 6, index)
    kept.keep("not python(\n", 12, None)  # a text without parts is kept too: as None

    assert kept.get("x = 1\n") == (True, index)
    assert kept.get("not python(\n") == (True, None)
    assert kept.get("y = 2\n") == (False, None)


def test_the_text_asked_for_longest_ago_leaves_first_past_the_budget() -> None:
    kept: KeptIndexes[str] = KeptIndexes(budget=10, texts=100)
    for key in ("a", "b", "c"):
        kept.keep(key, 4, None)  # 12 > 10: "a" leaves
    assert [kept.get(k)[0] for k in ("a", "b", "c")] == [False, True, True]

    kept.get("b")  # asked for: "c" is now the oldest
    kept.keep("d", 4, None)
    assert [kept.get(k)[0] for k in ("b", "c", "d")] == [True, False, True]


def test_no_more_texts_than_the_bound_are_kept_and_a_text_over_the_budget_never_is() -> None:
    kept: KeptIndexes[str] = KeptIndexes(budget=1_000, texts=2)
    for key in ("a", "b", "c"):
        kept.keep(key, 1, None)
    kept.keep("huge", 1_001, None)

    assert len(kept) == 2
    assert [kept.get(k)[0] for k in ("a", "b", "c", "huge")] == [False, True, True, False]
