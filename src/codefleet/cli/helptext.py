"""Plain-text `--help`: the command line's help without Rich, at the terminal's width.

Typer renders help through Rich when `rich_markup_mode` is set, and Rich's
Markdown, tables and traceback cost more to import than everything else
`codefleet --help` does (decision "Help is plain text"). The app is built from
the classes here instead: the help of Typer's bundled Click formatter, with
the commands listed under their help panels (in the order the panels first
appear, unpanelled commands first), each command's whole first paragraph
rather than 45 characters of it, paragraphs reflowed to the terminal's full
width, and no word broken at a hyphen (`--max-cost` stays whole).
"""

from __future__ import annotations

import inspect
import shutil
import textwrap
from collections.abc import Callable, Sequence
from typing import Any

import typer
from typer._click.core import Command, Context  # Typer's bundled Click, pinned with typer
from typer._click.formatting import HelpFormatter
from typer.core import TyperCommand, TyperGroup
from typer.models import CommandFunctionType

__all__ = ["CliTyper", "PanelGroup", "PlainCommand", "PlainFormatter", "reflow"]

# Where a command with no help panel is listed, as in Typer's Rich help.
DEFAULT_PANEL = "Commands"
NAME_COLUMN_MAX = 30  # a longer option or command name pushes its help to the next line
COLUMN_GAP = 2
MIN_WIDTH = 50  # Click's floor: narrower terminals still get 50 columns
TRANSPORT_NOTE = (
    "Transport knobs, not listed above, work as flags and as their CODEFLEET_* variables: "
    '{flags} (the README, "Transport knobs").'
)


def reflow(text: str, width: int, indent: str = "") -> str:
    """`text`'s paragraphs (split at blank lines) each refilled to `width`, words kept whole.

    A paragraph whose first line is `\\b` (Click's marker) keeps its lines as written.
    """
    paragraphs = [p for p in inspect.cleandoc(text).split("\n\n") if p.strip()]
    return "\n\n".join(_paragraph(p, width, indent) for p in paragraphs)


def _paragraph(text: str, width: int, indent: str) -> str:
    head, _, kept = text.partition("\n")
    if head.strip() == "\b":
        return "\n".join(indent + line for line in kept.splitlines())
    return textwrap.fill(
        " ".join(text.split()),
        max(width, len(indent) + 10),
        initial_indent=indent,
        subsequent_indent=indent,
        break_on_hyphens=False,
        break_long_words=False,
    )


class PlainFormatter(HelpFormatter):
    """Click's help formatter at the terminal's width, wrapping without breaking words.

    The width is the terminal's (`COLUMNS` when set), not capped at Click's 80
    and not Typer's test runner's forced 80.
    """

    def __init__(
        self, indent_increment: int = 2, width: int | None = None, max_width: int | None = None
    ) -> None:
        columns = shutil.get_terminal_size().columns
        width = width or max(min(columns, max_width or columns) - 2, MIN_WIDTH)
        super().__init__(indent_increment, width, max_width)

    def write_text(self, text: str) -> None:
        self.write(reflow(text, self.width, " " * self.current_indent) + "\n")

    def write_dl(
        self,
        rows: Sequence[tuple[str, str]],
        col_max: int = NAME_COLUMN_MAX,
        col_spacing: int = COLUMN_GAP,
    ) -> None:
        rows = list(rows)
        if not rows:
            return
        first_col = min(max(len(name) for name, _ in rows), col_max) + col_spacing
        margin = " " * (self.current_indent + first_col)
        for name, text in rows:
            lead = f"{'':>{self.current_indent}}{name}"
            if not text:
                self.write(lead + "\n")
                continue
            lines = reflow(text, self.width - first_col - self.current_indent).splitlines()
            if len(name) <= first_col - col_spacing:
                self.write(lead.ljust(len(margin)) + lines[0] + "\n")
            else:
                self.write(f"{lead}\n{margin}{lines[0]}\n")
            self.write("".join(f"{margin}{line}\n" if line else "\n" for line in lines[1:]))


class PlainContext(typer.Context):
    formatter_class = PlainFormatter


class PlainCommand(TyperCommand):
    """A command whose help is written by `PlainFormatter`, naming its hidden options (the
    transport knobs, `cli.settingopts`) after the ones it lists."""

    context_class = PlainContext

    def format_epilog(self, ctx: Context, formatter: HelpFormatter) -> None:
        hidden = [p.opts[0] for p in self.get_params(ctx) if getattr(p, "hidden", False)]
        if hidden:
            formatter.write_paragraph()
            formatter.write_text(TRANSPORT_NOTE.format(flags=", ".join(hidden)))
        super().format_epilog(ctx, formatter)


class PanelGroup(TyperGroup):
    """A group whose help lists its commands under their help panels."""

    context_class = PlainContext

    def help_rows(self, ctx: Context) -> list[tuple[str, str, str]]:
        """(name, help panel, line) of each command the help lists, in its order."""
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                panel = getattr(command, "rich_help_panel", None) or DEFAULT_PANEL
                rows.append((name, panel, summary(command)))
        return rows

    def format_commands(self, ctx: Context, formatter: HelpFormatter) -> None:
        panels: dict[str, list[tuple[str, str]]] = {DEFAULT_PANEL: []}
        for name, panel, line in self.help_rows(ctx):
            panels.setdefault(panel, []).append((name, line))
        width = max((len(name) for rows in panels.values() for name, _ in rows), default=0)
        for panel, rows in panels.items():
            if rows:  # one column for every panel: names padded to the longest
                with formatter.section(panel):
                    formatter.write_dl([(name.ljust(width), text) for name, text in rows])


def summary(command: Command) -> str:
    """A command's line in its group's help: its short help, or its help's first paragraph."""
    text = command.short_help or (command.help or "").partition("\f")[0]
    return " ".join(inspect.cleandoc(text).split("\n\n")[0].split())


class CliTyper(typer.Typer):
    """A Typer app whose group and commands write plain help (no Rich)."""

    def __init__(self, *, cls: type[PanelGroup] = PanelGroup, **kwargs: Any) -> None:
        super().__init__(cls=cls, rich_markup_mode=None, **kwargs)

    def command(
        self, name: str | None = None, *, cls: type[TyperCommand] | None = None, **kwargs: Any
    ) -> Callable[[CommandFunctionType], CommandFunctionType]:
        return super().command(name, cls=cls or PlainCommand, **kwargs)
