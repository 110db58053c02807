"""`codefleet tasks`' table, drawn without Rich for the fast path (`cli.operate.quick`).

Piped, it is the text Rich prints for `ui.report.task_table` (its heavy-head
box, each column as wide as its widest line, a cell's lines kept): a test
compares the two (tests/unit/test_quick_commands.py), so a column added to
one shows up as a difference. On a terminal, titles and notes are cropped as
there (48 and 90 characters), the widest columns give way until the table
fits the terminal's width (their text wrapped), the header is bold and the
status coloured as `ui.report.STATUS_STYLE` says. Standard library only.
"""

from __future__ import annotations

import os
import sys
import unicodedata
from collections.abc import Sequence
from typing import Any, Final, TextIO

from codefleet.models import AttemptCounts
from codefleet.safetext import terminal_safe

__all__ = ["COLUMNS", "NO_TASKS_HINT", "STATUS_SGR", "render", "task_cells", "task_table"]

# What `tasks` says (on stderr, both paths) when the server holds no task at all.
NO_TASKS_HINT: Final = (
    "no task on this server yet: `codefleet run` loads ./codefleet.yaml and runs it "
    "(`codefleet load FILE` only loads one; `codefleet init` writes a starter graph)"
)

COLUMNS: Final = ("task", "title", "status", "att.", "cost $", "note")
STATUS_COLUMN: Final = 2
CROP: Final = (48, 90)  # a title's and a note's most characters on a terminal
# `ui.report.STATUS_STYLE` as terminal colours (a test holds the two to the same statuses).
STATUS_SGR: Final = {
    "pending": "2",
    "assigned": "36",
    "running": "1;36",
    "landing": "1;35",
    "succeeded": "32",
    "failed": "1;31",
    "blocked_upstream": "31",
    "cancelled": "33",
}


def _note(task: dict[str, Any]) -> str:
    """`ui.report._note`: a success's summary (and what it recovered from), else the error."""
    if task["status"] == "succeeded":
        note = task.get("result_summary") or ""
        if task.get("attempts", 0) > 1 and task.get("error_kind"):
            note = f"after {task['error_kind']} on attempt 1; {note}"
        return note
    return task.get("error") or ""


def task_cells(task: dict[str, Any], *, crop: bool) -> tuple[str, ...]:
    """One task's row, the cells of `ui.report.task_table`."""
    title_max, note_max = CROP if crop else (None, None)
    return (
        task["id"],
        task["title"][:title_max],
        task["status"],
        AttemptCounts.of(task).short(),
        f"{task.get('cost_usd', 0.0):.4f}",
        _note(task)[:note_max],
    )


def task_table(tasks: Sequence[dict[str, Any]], out: TextIO | None = None) -> None:
    """Print the table of `tasks` as `codefleet tasks` does."""
    out = out or sys.stdout
    terminal = out.isatty()
    rows = [task_cells(t, crop=terminal) for t in tasks]
    width = _terminal_width() if terminal else None
    out.write(render(rows, width=width, styled=terminal and _colour()))


def render(rows: Sequence[Sequence[str]], *, width: int | None, styled: bool) -> str:
    """The table's lines: `Tasks`, the head in a heavy box, one row per task (a cell's lines
    kept, wrapped when `width` is given and the table would be wider)."""
    cells = [[_lines(c) for c in row] for row in rows]
    least = [len(h) for h in COLUMNS]
    widths = [
        max([least[i], *(_cells(line) for row in cells for line in row[i])])
        for i in range(len(COLUMNS))
    ]
    if width is not None:
        widths = _fit(widths, least, width)
        cells = [[_wrap(c, w) for c, w in zip(row, widths, strict=True)] for row in cells]
    plain = [None] * len(COLUMNS)
    lines = ["\x1b[3mTasks\x1b[0m" if styled else "Tasks", _rule("┏━┳┓", widths)]
    head = [[h] for h in COLUMNS]
    lines += _row_lines(head, widths, "┃", ["1"] * len(COLUMNS) if styled else plain)
    lines.append(_rule("┡━╇┩", widths))
    for row, given in zip(cells, rows, strict=True):
        styles: list[str | None] = list(plain)
        if styled:
            styles[STATUS_COLUMN] = STATUS_SGR.get(given[STATUS_COLUMN])
        lines += _row_lines(row, widths, "│", styles)
    lines.append(_rule("└─┴┘", widths))
    return "\n".join(lines) + "\n"


def _lines(text: str) -> list[str]:
    return terminal_safe(text).split("\n")


def _cells(text: str) -> int:
    """The columns `text` takes on a terminal (wide characters two, combining marks none)."""
    if text.isascii():
        return len(text)
    return sum(
        0 if unicodedata.combining(ch) else 2 if unicodedata.east_asian_width(ch) in "WF" else 1
        for ch in text
    )


def _rule(chars: str, widths: Sequence[int]) -> str:
    left, fill, cross, right = tuple(chars)
    return left + cross.join(fill * (w + 2) for w in widths) + right


def _row_lines(
    row: Sequence[Sequence[str]],
    widths: Sequence[int],
    bar: str,
    styles: Sequence[str | None],
) -> list[str]:
    """A row's lines, each cell padded to its column and wrapped in its style's colour."""
    out = []
    for i in range(max(len(c) for c in row)):
        parts = []
        for cell, w, sgr in zip(row, widths, styles, strict=True):
            line = cell[i] if i < len(cell) else ""
            pad = " " * (w - _cells(line))
            shown = f"\x1b[{sgr}m{line}\x1b[0m" if sgr and line else line
            parts.append(f" {shown}{pad} ")
        out.append(bar + bar.join(parts) + bar)
    return out


def _fit(widths: list[int], least: Sequence[int], total: int) -> list[int]:
    """The widths, the widest narrowed one column at a time, until the table fits `total`."""
    widths = list(widths)
    while sum(widths) + 3 * len(widths) + 1 > total:
        widest = max(range(len(widths)), key=lambda i: (widths[i] - least[i], widths[i]))
        if widths[widest] <= least[widest]:
            break
        widths[widest] -= 1
    return widths


def _wrap(lines: Sequence[str], width: int) -> list[str]:
    """Each line wrapped at spaces into `width` columns, a longer word folded."""
    out: list[str] = []
    for line in lines:
        current = ""
        for word in line.split(" "):
            candidate = f"{current} {word}" if current else word
            if _cells(candidate) <= width:
                current = candidate
                continue
            if current:
                out.append(current)
            while _cells(word) > width:
                out.append(word[:width])
                word = word[width:]
            current = word
        out.append(current)
    return out


def _terminal_width() -> int:
    try:
        return int(os.environ.get("COLUMNS") or os.get_terminal_size(sys.stdout.fileno()).columns)
    except (ValueError, OSError):
        return 80


def _colour() -> bool:
    return "NO_COLOR" not in os.environ and os.environ.get("TERM") not in ("dumb", "unknown")
