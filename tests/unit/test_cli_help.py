"""The command line's own surface: `--version`, help that uses the terminal's width, panels."""

from __future__ import annotations

import re

from typer.testing import CliRunner

from codefleet import __version__
from codefleet.cli.app import app


def invoke(*args: str, columns: int = 200) -> str:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, result.output
    return re.sub(r"\x1b\[[0-9;]*m", "", result.output)


def test_version_prints_the_installed_version() -> None:
    assert invoke("--version").strip() == f"codefleet {__version__}"
    assert re.fullmatch(r"\d+\.\d+\.\d+.*", __version__)


def test_help_paragraphs_reflow_to_a_wide_terminal_instead_of_the_source_wrapping() -> None:
    text = invoke("run", "--help")
    # The docstring wraps this sentence after "Exits 0"; a wide terminal shows it on one line.
    assert "Exits 0 only if every task succeeded (and --verify passed" in text


def test_help_groups_the_commands_in_panels_in_the_order_of_a_first_run() -> None:
    text = invoke("--help")
    panels = [p for p in ("Start here", "Run a fleet", "Inspect and operate") if p in text]
    assert panels == ["Start here", "Run a fleet", "Inspect and operate"]
    order = [text.index(f"│ {name} ") for name in ("serve", "load", "run", "watch")]
    assert order == sorted(order)
