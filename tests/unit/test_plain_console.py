"""The piped console (`cli.output.PlainConsole`): a line of `Text` written as Rich writes it.

Piped, one `Text` skips Rich's layout (the event printer's every line). What
it writes must be what Rich itself writes for the same print: a print with a
keyword goes the whole way through Rich, so each case prints both ways and
compares the bytes, for styled pieces, hostile control text (a colour sequence
cut by a style change, a carriage return, a bidi override), wide characters,
newlines and trailing spaces. A tab, a recording console or a terminal go the
whole way through Rich.
"""

from __future__ import annotations

import io

import pytest
from rich.text import Span, Text

from codefleet.cli.output import PlainConsole
from codefleet.ui.dashboardrender import log_text
from codefleet.ui.viewmodel import LogLine

SGR_CUT = Text("a \x1b[31mred\x1b[0m b", spans=[Span(0, 4, "bold"), Span(4, 12, "red")])
CASES = {
    "log line": log_text(LogLine(42, "15:50:29", "T4: requeued (veto): api.py", "yellow", False)),
    "plain": Text("nothing styled"),
    "empty": Text(""),
    "colour cut by a style change": SGR_CUT,
    "control text": Text("q\rall PASS \x9b31m \u202egnp.exe \x07\x7f", style="red"),
    "wide and newlines": Text("界 one\n  two  \n", spans=[Span(2, 9, "dim"), Span(0, 1, "b")]),
    "spans past the end": Text("short", spans=[Span(1, 40, "dim"), Span(3, 3, "red")]),
    "overlapping spans": Text("overlap here", spans=[Span(0, 7, "red"), Span(3, 12, "dim")]),
}


def printed(text: Text, **kwargs: object) -> str:
    console = PlainConsole(file=io.StringIO(), width=20)
    console.print(text, **kwargs)
    return console.file.getvalue()  # type: ignore[attr-defined]


@pytest.mark.parametrize("text", CASES.values(), ids=CASES.keys())
def test_a_piped_line_of_text_is_written_as_rich_writes_it(text: Text) -> None:
    through_rich = printed(text, soft_wrap=True)  # a keyword: Rich's own layout
    assert printed(text) == through_rich
    assert "\x1b" not in through_rich and "\r" not in through_rich


def test_a_tab_a_recording_or_a_terminal_is_laid_out_by_rich() -> None:
    console = PlainConsole(file=io.StringIO(), width=20)
    assert console._lays_out_as_is((CASES["log line"],)), "guard: a log line is written as is"
    assert not console._lays_out_as_is((Text("a\tb"),))
    assert not console._lays_out_as_is(("a string",))
    assert not PlainConsole(file=io.StringIO(), record=True)._lays_out_as_is((Text("a"),))
    terminal = PlainConsole(file=io.StringIO(), force_terminal=True, width=20)
    assert not terminal._lays_out_as_is((Text("a"),))
    assert printed(Text("a\tb")) == "a       b\n"  # Rich expanded the tab


def test_a_quiet_console_writes_nothing() -> None:
    console = PlainConsole(file=io.StringIO(), quiet=True)
    console.print(CASES["log line"])
    assert console.file.getvalue() == ""  # type: ignore[attr-defined]
