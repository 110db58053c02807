"""The command line's two Rich consoles: standard output and standard error.

Importing Rich costs tens of milliseconds that `codefleet --help` must not pay,
so this module is imported by the commands that print, inside their bodies,
never by a command module's top (`tests/unit/test_cli_imports.py`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Final

from rich.console import Console
from rich.measure import Measurement
from rich.segment import Segment

__all__ = ["PlainConsole", "console", "err_console"]

# An ANSI escape sequence (CSI, OSC or a two-character escape), as check and model output carry.
ANSI: Final = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
UNBOUNDED: Final = 1_000_000  # the width a piped line may take: whole, never wrapped


class PlainConsole(Console):
    """A console whose output, when it is not a terminal, is plain whole lines.

    Piped or redirected, nothing wraps or crops (each print is as wide as its
    widest line: a table or a panel takes its content's natural width) and no
    escape sequence is written, not even one carried by the text printed (a
    check's coloured output). In a terminal, Rich wraps to the terminal's width
    as usual. See docs/decisions.md, "Piped output is whole plain lines".
    """

    def print(self, *objects: Any, **kwargs: Any) -> None:
        if self.is_terminal:
            super().print(*objects, **kwargs)
            return
        kwargs.setdefault("soft_wrap", True)
        width = self._natural_width(objects, kwargs.get("markup"))
        kept = self._width
        self._width = width or kept
        try:
            super().print(*objects, **kwargs)
        finally:
            self._width = kept

    def _natural_width(self, objects: tuple[Any, ...], markup: bool | None) -> int | None:
        """The widest line the objects need; None when one takes whatever width it is given
        (an expanding table, the live dashboard): that one gets the usual width."""
        options = self.options.update(width=UNBOUNDED, markup=markup)
        renderables = [
            self.render_str(o, markup=markup) if isinstance(o, str) else o for o in objects
        ]
        widths = [Measurement.get(self, options, r).maximum for r in renderables]
        return None if any(w >= UNBOUNDED for w in widths) else max([1, *widths])

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        if self.is_terminal:
            return super()._render_buffer(buffer)
        return super()._render_buffer(
            Segment(ANSI.sub("", s.text), s.style, s.control) for s in buffer
        )


console = PlainConsole()
err_console = PlainConsole(stderr=True)
