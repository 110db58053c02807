"""A check's failure text: the failing lines first, then the tail, whole lines, escaped.

The outputs in `checkoutputs/` are real: a pytest run with pytest-benchmark (one test
fails; the benchmark table comes after the failure), a unittest run with two failures,
and a script that dies with a traceback.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from codefleet.failuretext import BREAKS, GAP, failure_excerpt

OUTPUTS = Path(__file__).with_name("checkoutputs")
BENCHMARK = (OUTPUTS / "pytest-benchmark-failed.txt").read_text()
UNITTEST = (OUTPUTS / "unittest-failed.txt").read_text()
TRACEBACK = (OUTPUTS / "traceback.txt").read_text()
FAILED = "FAILED test_shop.py::test_total_with_tax - assert 36.0 == 36.5"
ASSERTION = "E       assert 36.0 == 36.5"


@pytest.mark.parametrize("limit", [200, 400, 2_000])
def test_a_pytest_run_with_a_benchmark_table_shows_its_failed_line_and_its_assertion(
    limit: int,
) -> None:
    excerpt = failure_excerpt(BENCHMARK, limit)

    assert FAILED in excerpt.splitlines()
    assert ASSERTION in excerpt.splitlines()
    assert len(excerpt) <= limit


def test_the_failing_lines_come_first_then_the_last_lines() -> None:
    lines = failure_excerpt(BENCHMARK, 400).splitlines()

    assert lines[:3] == [GAP, ASSERTION, "E        +  where 36.0 = price([10, 20])"]
    assert lines[-1] == BENCHMARK.splitlines()[-1]  # the closing `1 failed, 6 passed` line
    assert "OPS: Operations Per Second" not in "\n".join(lines)  # the table's legend left out


def test_a_unittest_run_shows_which_tests_failed() -> None:
    lines = failure_excerpt(UNITTEST, 300).splitlines()

    assert "FAIL: test_empty (test_cart.CartTest.test_empty)" in lines
    assert "FAIL: test_total (test_cart.CartTest.test_total)" in lines
    assert lines[-1] == "FAILED (failures=2)"


def test_a_unittest_run_with_room_shows_its_assertions() -> None:
    lines = failure_excerpt(UNITTEST, 500).splitlines()

    assert "AssertionError: 1 != 0" in lines and "AssertionError: 4 != 3" in lines


def test_a_traceback_shows_its_last_frame_and_its_exception_before_the_output_before_it() -> None:
    lines = failure_excerpt(TRACEBACK, 300).splitlines()

    assert lines[:4] == [
        GAP,
        '  File "/work/tree/crash.py", line 3, in load',
        "    with open(path) as f:",
        "         ^^^^^^^^^^",
    ]
    assert lines[-1].startswith("FileNotFoundError: [Errno 2] No such file or directory")
    assert '  File "/work/tree/crash.py", line 9, in <module>' not in lines  # not the first


@pytest.mark.parametrize(
    "output", [BENCHMARK, UNITTEST, TRACEBACK], ids=["pytest", "unittest", "traceback"]
)
@pytest.mark.parametrize("limit", [60, 120, 160, 300, 700, 1_500])
def test_a_line_shown_is_a_whole_line_of_the_output_or_one_cut_after_a_word(
    output: str, limit: int
) -> None:
    whole = {line.rstrip() for line in output.splitlines()}

    excerpt = failure_excerpt(output, limit)

    assert len(excerpt) <= limit
    for line in excerpt.splitlines():
        if line in whole or line == GAP:
            continue
        assert line.endswith(GAP), line
        cut = line[: -len(GAP)]
        assert any(cut_after_a_word(w, cut) for w in whole), line


def cut_after_a_word(whole: str, cut: str) -> bool:
    """`cut` begins `whole` and ends where a word or a separator ends."""
    rest = whole[len(cut) :]
    return whole.startswith(cut) and bool(rest) and (rest[0] == " " or cut[-1] in BREAKS)


def test_an_output_that_fits_is_shown_whole_without_its_blank_ends() -> None:
    assert failure_excerpt("\n\nE   assert 1 == 2\n\ndone\n\n", 100) == "E   assert 1 == 2\n\ndone"


def test_an_escape_sequence_in_the_output_is_shown_escaped_and_colour_is_dropped() -> None:
    output = "\x1b]0;owned\x07title\n\x1b[31mFAILED\x1b[0m test_x.py::test_y\x1b[2J\n"

    excerpt = failure_excerpt(output, 200)

    assert excerpt == "\\x1b]0;owned\\x07title\nFAILED test_x.py::test_y\\x1b[2J"
    assert "\x1b" not in failure_excerpt(output * 50, 200)


def test_a_carriage_return_keeps_what_a_terminal_shows_after_it() -> None:
    assert failure_excerpt("progress 10%\rprogress 100%\nFAILED\r\n", 100) == (
        "progress 100%\nFAILED"
    )


def test_an_excerpt_of_an_excerpt_is_the_same_excerpt() -> None:
    once = failure_excerpt(BENCHMARK, 2_000)

    assert failure_excerpt(once, 2_000) == once
