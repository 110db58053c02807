"""A renderable shown escaped line by line: the dashboard's frame safe on any console.

`Escaped(inner)` lays `inner` out, passes each segment's text through
`safetext.terminal_safe` and fits a line an escape widened to the width again, so no
control character a title, note, name or reason carries reaches the screen,
whichever console draws the frame (the CLI's console escapes too; a bare
Rich console does not). Rich's own control segments pass untouched.
"""

from __future__ import annotations

from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.segment import Segment

from codefleet.safetext import terminal_safe

__all__ = ["Escaped"]


class Escaped:
    """`inner`, its text escaped line by line, no line wider than it was given."""

    def __init__(self, inner: RenderableType) -> None:
        self.inner = inner

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for line in console.render_lines(self.inner, options, pad=False):
            safe = [s if s.control else Segment(terminal_safe(s.text), s.style) for s in line]
            if Segment.get_line_length(safe) > options.max_width:  # an escape is wider
                safe = Segment.adjust_line_length(safe, options.max_width)
            yield from safe
            yield Segment.line()
