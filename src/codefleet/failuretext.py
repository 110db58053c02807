"""A check's failure text for a person: the failing lines first, then the tail, whole lines.

A failing check's output can be long and end in what does not say what failed (a
benchmark table, a coverage report, a summary), so its last characters are not what
a person should read first. `failure_excerpt` keeps, within a size, the lines that
say what failed — pytest's `FAILED`/`ERROR` lines and its `E   ` assertion lines,
unittest's `FAIL:`/`ERROR:` headers, each exception line (`AssertionError: 1 != 0`,
`test_x.py:22: AssertionError`) with its traceback's last frame — then as many of the
last lines as fit. Invariants: lines are whole (one longer than a line's share is
cut at a word and ends in `…`), a gap between shown lines is a `…` line, a carriage
return keeps what a terminal would show after it, and every line is `terminal_safe`
(a control character shown escaped, a colour code dropped) with real line breaks.
Pure and standard library only: applied where a check's output is cut (the landing
worker, the landing queue) and again, smaller, where it is shown
(docs/decisions/0155-a-failed-check-reads-failing-lines-first.md).
"""

from __future__ import annotations

import re
from typing import Final

from codefleet.safetext import terminal_safe

__all__ = ["EXCERPT_CHARS", "GAP", "failure_excerpt"]

EXCERPT_CHARS: Final = 2_000  # what a landing event and a halt keep of a check's output
LINE_CHARS: Final = 240  # the most one shown line takes (a third of a small excerpt)
GAP: Final = "…"  # a line standing for the lines left out
HEAD_SHARE: Final = 2 / 3  # the failing lines take at most this much; the tail the rest
FAILING: Final = re.compile(
    r"(?:FAILED|ERROR)\b"  # pytest's summary lines, unittest's closing line
    r"|(?:FAIL|ERROR): "  # unittest's header of one failure
    r"|E {2,}\S"  # pytest's assertion lines
)
EXCEPTION: Final = re.compile(
    r"(?:\S+:\d+: )?[A-Za-z_][\w.]*(?:Error|Exception|Failure|Exit|Interrupt)\b(?::.*)?"
)
FRAME: Final = '  File "'
BREAKS: Final = " /:.,;()[]=-"  # where a line too long to show whole is cut


def failure_excerpt(output: str, limit: int = EXCERPT_CHARS) -> str:
    """At most `limit` characters of `output`: its failing lines, then its last lines."""
    lines = _shown_lines(output)
    if len("\n".join(lines)) <= limit:
        return "\n".join(lines)
    width = max(1, min(LINE_CHARS, limit // 3))
    lines = [_cut(line, width) for line in lines]
    head = _fitting(_failing(lines), lines, int(limit * HEAD_SHARE))
    start = _tail_start(lines, head, limit)
    return "\n".join(_assembled(lines, [i for i in head if i < start], start))


def _shown_lines(output: str) -> list[str]:
    """The output's lines as a terminal shows them, escaped, without blank ends."""
    lines = [
        terminal_safe(line.rstrip("\r").rsplit("\r", 1)[-1]).rstrip() for line in output.split("\n")
    ]
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)
    return lines


def _cut(line: str, width: int) -> str:
    """`line` within `width`, cut after a whole word or a separator (`…` says it was cut)."""
    if len(line) <= width:
        return line
    room = line[: width - 1]
    at = max(room.rfind(c) for c in BREAKS)
    if at >= width // 4:
        room = room[: at + (room[at] != " ")]
    return room.rstrip() + GAP


def _failing(lines: list[str]) -> list[list[int]]:
    """The indexes of the lines that say what failed, by rank: what failed (`FAILED …`,
    `FAIL: …`), then how (an assertion or exception line), then where (its last frame)."""
    what: list[int] = []
    how: list[int] = []
    where: list[int] = []
    for i, line in enumerate(lines):
        if FAILING.match(line):
            (how if line.startswith("E ") else what).append(i)
        elif EXCEPTION.fullmatch(line):
            how.append(i)
            where.extend(_last_frame(lines, i))
    return [what, how, where]


def _last_frame(lines: list[str], exception: int) -> range:
    """The traceback frame just above an exception line: its `File` line and its source."""
    i = exception - 1
    while i >= 0 and lines[i].startswith(" ") and not lines[i].startswith(FRAME):
        i -= 1
    return range(i, exception) if i >= 0 and lines[i].startswith(FRAME) else range(0)


def _fitting(ranks: list[list[int]], lines: list[str], room: int) -> list[int]:
    """The failing lines that fit in `room` characters with their gaps, taken rank by rank
    (in order within a rank, up to the first that does not fit); shown in order."""
    kept: set[int] = set()
    for rank in ranks:
        for i in rank:
            if i in kept:
                continue
            if len("\n".join(_assembled(lines, sorted(kept | {i}), len(lines)))) > room:
                break
            kept.add(i)
    return sorted(kept)


def _tail_start(lines: list[str], head: list[int], limit: int) -> int:
    """Where the last lines begin: as many whole lines as fit beside `head` within `limit`."""
    room = limit - len("\n".join(_assembled(lines, head, len(lines))))  # the gap before included
    start = len(lines)
    while start > 0 and len(lines[start - 1]) + 1 <= room:
        start -= 1
        room -= len(lines[start]) + 1
    return start


def _assembled(lines: list[str], head: list[int], start: int) -> list[str]:
    """The head's lines, then the lines from `start`, a gap line wherever lines are left out."""
    shown: list[str] = []
    last = -1
    for i in [*head, *range(start, len(lines))]:
        if i != last + 1:
            shown.append(GAP)
        shown.append(lines[i])
        last = i
    if last != len(lines) - 1:
        shown.append(GAP)
    return shown
