"""The command line's own surface: `--version`, help that uses the terminal's width, panels."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any

import typer
from typer.core import TyperGroup
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
    order = [text.index(f"\n  {name} ") for name in ("serve", "load", "run", "watch")]
    assert order == sorted(order)


def _command_paths() -> list[list[str]]:
    """Every command and group of the app, as the argv that names it."""

    def walk(command: Any, path: list[str]) -> list[list[str]]:
        found = [path]
        if isinstance(command, TyperGroup):  # the root loads its commands on use (cli.app)
            ctx = typer.Context(command)
            for name in command.list_commands(ctx):
                found += walk(command.get_command(ctx, name), [*path, name])
        return found

    return walk(typer.main.get_command(app), [])


def test_every_help_is_plain_text_with_no_markup_shown_raw() -> None:
    """The help is not rendered as Markdown (decision "Help is plain text"): no backticks,
    emphasis or Rich markup in any text, and no Rich box around any section."""
    for path in _command_paths():
        text = invoke(*path, "--help", columns=100)
        assert text.startswith("Usage: ")
        for markup in ("`", "**", "[bold", "[/", "╭", "│"):
            assert markup not in text, f"`codefleet {' '.join(path)} --help` shows {markup!r}"


def test_a_groups_help_lists_each_commands_whole_first_paragraph() -> None:
    text = " ".join(invoke("--help", columns=80).split())
    assert "reset Delete every task, agent, lease and event. Needs CODEFLEET_ALLOW_RESET=1." in text
    assert "..." not in text.partition("Start here")[2]  # no summary cut short


def test_help_wraps_to_a_narrow_terminal_without_breaking_a_flag_at_its_hyphen() -> None:
    text = invoke("run", "--help", columns=60)
    assert "--max-cost sets the fleet's budget" in " ".join(text.split())
    assert not [line for line in text.splitlines() if line.rstrip().endswith(("--max-", "-"))]
    prose = [line for line in text.splitlines() if line.startswith("  ") and line[2] != " "]
    assert prose and max(len(line) for line in prose) <= 60  # a flag's own column may overflow


def test_reflow_keeps_paragraphs_and_whole_words() -> None:
    from codefleet.cli.helptext import reflow

    text = "one two --max-cost\nthree\n\nfour"
    assert reflow(text, 12, "  ") == "  one two\n  --max-cost\n  three\n\n  four"


def test_run_help_documents_every_step_of_a_dry_run_script_with_an_example(
    tmp_path: Path,
) -> None:
    from codefleet.fleet.scripted import STEP_KINDS, load_script

    text = invoke("run", "--help", columns=100)
    lines = [line.strip() for line in text.splitlines()]

    section = text.partition("Dry-run script")[2]
    assert section, "run --help has no section on the dry-run script"
    documented = {line.split(":")[0] for line in lines if ":" in line}
    assert documented >= STEP_KINDS, sorted(STEP_KINDS - documented)
    assert "attempt: N" in " ".join(section.split())
    # the example stays as YAML: one step a line, indented as written
    assert (
        "T1:" in lines and '- write: {path: CONTRIBUTING.md, content: "# Contributing\\n"}' in lines
    )
    example = section.partition("Example")[2].partition("\n\n")[2]
    example = textwrap.dedent(example.partition("Offline model script")[0])
    (tmp_path / "s.yaml").write_text(example)
    script = load_script(tmp_path / "s.yaml")
    assert sorted(script) == ["A", "B", "T1", "T2"]
    assert [s.rework for s in script["A"] + script["B"]] == [False, True, False, True]


def test_run_help_documents_the_offline_model_script_with_an_example_that_parses() -> None:
    """An installed tool has no examples/ directory: the format is in the help itself."""
    import yaml

    from codefleet.offlinemodels.modelscripts import _TURN_KEYS, scripts_from_dict

    text = invoke("run", "--help", columns=100)
    section = text.partition("\n  Offline model script (")[2]

    assert section, "run --help has no section on the offline model script"
    assert "examples/demo-model.yaml" not in text  # not in an installed tool
    documented = {line.strip().split(":")[0] for line in section.splitlines() if ":" in line}
    assert documented >= _TURN_KEYS, sorted(_TURN_KEYS - documented)
    for tool in ("Write", "Edit", "Read", "mcp__codefleet__run_check"):
        assert tool in section
    example = section.partition("Example")[2].partition(":\n")[2]
    scripts = scripts_from_dict(yaml.safe_load(textwrap.dedent(example)))
    assert list(scripts) == ["T1", "T2-a1"] and scripts["T1"][0].content[1].name == "Write"


def test_the_server_option_says_the_tree_s_record_is_where_the_server_is_found() -> None:
    shown = " ".join(
        CliRunner().invoke(app, ["tasks", "--help"], env={"COLUMNS": "200"}).stdout.split()
    )
    assert ".codefleet/server.json" in shown and "CODEFLEET_SERVER_URL" in shown
