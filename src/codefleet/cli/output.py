"""The command line's two Rich consoles: standard output and standard error.

Importing Rich costs tens of milliseconds that `codefleet --help` must not pay:
it loads with the first command module that prints (`codefleet --help` loads none,
`tests/unit/test_cli_imports.py`).

Every text the consoles write passes `safetext.terminal_safe`, in a terminal
and piped alike: a printed string before Rich reads it (so it is laid out as
shown), and every segment again as the buffer is written (so a `Text` built
elsewhere, the dashboard's frame, is held too, however Rich split it). No
control character of a text reaches the screen; only Rich's own styles and
cursor moves do. Markup and emoji codes are off unless a print asks
(`markup=True`, with its values `escape`d): an agent's `[red]` is text.

A console whose reader went away (`codefleet run | tee log`: the terminal's
Ctrl-C stops `tee` too) falls silent and its stream points at the null device;
it never raises from a print (Rich's own answer, `SystemExit`, would escape the
event loop from whichever task printed and cut the run's stop short;
docs/decisions/0155-a-failed-check-reads-failing-lines-first.md).

Piped, one `Text` (the event printer's line) skips Rich's layout: its pieces
between style changes go to the buffer as Rich would put them there, each
made safe the same way, so the bytes are Rich's at a tenth of the cost
(decision 0176).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from itertools import pairwise
from typing import Any, Final

from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.segment import Segment
from rich.text import Text

from codefleet.safetext import terminal_safe

__all__ = ["PlainConsole", "console", "err_console", "print_error", "reader_gone"]

UNBOUNDED: Final = 1_000_000  # the width a piped line may take: whole, never wrapped


class PlainConsole(Console):
    """A console whose output, when it is not a terminal, is plain whole lines.

    Piped or redirected, nothing wraps or crops (each print is as wide as its
    widest line: a table or a panel takes its content's natural width) and no
    escape sequence is written: one carried by the text printed is shown escaped
    (a check's colour codes dropped). In a terminal, Rich wraps to the terminal's width
    as usual. See docs/decisions/0101-piped-output-is-whole-plain-lines.md, "Piped output is whole plain lines".
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**{"markup": False, "emoji": False, **kwargs})

    def print(self, *objects: Any, **kwargs: Any) -> None:
        if self.is_terminal:
            super().print(*objects, **kwargs)
            return
        if not kwargs and self._lays_out_as_is(objects):
            self._print_line(objects[0])
            return
        kwargs.setdefault("soft_wrap", True)
        width = self._natural_width(objects, kwargs.get("markup"))
        kept = self._width
        self._width = width or kept
        try:
            super().print(*objects, **kwargs)
        finally:
            self._width = kept

    def _lays_out_as_is(self, objects: tuple[Any, ...]) -> bool:
        """One `Text` Rich would write piped as it stands: no tab to expand, no colour, no
        render hook (a live display) and no recording that would keep its styles."""
        return (
            len(objects) == 1
            and type(objects[0]) is Text
            and "\t" not in objects[0].plain
            and self._color_system is None
            and not self._render_hooks
            and not self.record
        )

    def _print_line(self, text: Text) -> None:
        """`text` and a newline, cut where Rich cuts it (at each span's ends), into the buffer."""
        plain = text.plain
        ends = {0, len(plain)}
        for span in text.spans:
            ends.update((min(span.start, len(plain)), min(span.end, len(plain))))
        with self:  # written (or not, when quiet) as Rich writes its own buffer
            self._buffer.extend(Segment(plain[a:b]) for a, b in pairwise(sorted(ends)))
            self._buffer.append(Segment.line())

    def _natural_width(self, objects: tuple[Any, ...], markup: bool | None) -> int | None:
        """The widest line the objects need; None when one takes whatever width it is given
        (an expanding table, the live dashboard): that one gets the usual width."""
        options = self.options.update(width=UNBOUNDED, markup=markup)
        renderables = [
            self.render_str(o, markup=markup) if isinstance(o, str) else o for o in objects
        ]
        widths = [Measurement.get(self, options, r).maximum for r in renderables]
        return None if any(w >= UNBOUNDED for w in widths) else max([1, *widths])

    def on_broken_pipe(self) -> None:
        """The reader left: print nothing more, here or at exit; the command carries on."""
        self.quiet = True
        reader_gone(self.file)

    def render_str(self, text: str, **kwargs: Any) -> Text:
        """A printed string escaped before Rich reads it (laid out as shown, `\\r` kept)."""
        return super().render_str(terminal_safe(text), **kwargs)

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer(
            s if s.control else Segment(terminal_safe(s.text), s.style) for s in buffer
        )


def reader_gone(stream: Any) -> None:
    """Point `stream`'s descriptor at the null device: its reader left (a broken pipe), and
    what is still buffered or printed later must not fail the command (nor its exit)."""
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, stream.fileno())
    except (OSError, ValueError):  # a stream with no descriptor of its own (a test's buffer)
        pass
    finally:
        os.close(null)


console = PlainConsole()
err_console = PlainConsole(stderr=True)


def print_error(message: str) -> None:
    """`message` on standard error as a command's error line."""
    err_console.print(f"[bold red]error:[/] {escape(message)}", markup=True, highlight=False)
