"""The command line's two Rich consoles: standard output and standard error.

Importing Rich costs tens of milliseconds that `codefleet --help` must not pay,
so this module is imported by the commands that print, inside their bodies,
never by a command module's top (`tests/unit/test_cli_imports.py`).
"""

from __future__ import annotations

from typing import Any

from rich.console import Console

__all__ = ["PlainConsole", "console", "err_console"]


class PlainConsole(Console):
    """A console that never wraps lines when its output is not a terminal.

    Piped or redirected, a URL or a path must stay on one line to stay usable;
    in a terminal, Rich wraps to the terminal's width as usual.
    """

    def print(self, *objects: Any, **kwargs: Any) -> None:
        kwargs.setdefault("soft_wrap", not self.is_terminal)
        super().print(*objects, **kwargs)


console = PlainConsole()
err_console = PlainConsole(stderr=True)
