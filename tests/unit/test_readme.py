"""The README's checkable claims: the commands it names exist, its links resolve.

The README is a user's page: outside "Work on CodeFleet itself" it uses the
installed `codefleet`, never `uv run codefleet` (which in a user's repository
creates a `.venv` and a `uv.lock` of its own).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from codefleet.cli.app import app

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
DEV_SECTION = "## Work on CodeFleet itself"


def user_part() -> str:
    """The README without the section for people who work on CodeFleet itself."""
    head, _, rest = README.partition(DEV_SECTION)
    return head + rest.partition("\n## ")[2]


def commands_in_table() -> list[list[str]]:
    """Each `codefleet WORD [WORD]` of the Commands table, as the words before any option."""
    table = README.split("## Commands", 1)[1].split("\n## ", 1)[0]
    found: list[list[str]] = []
    for spelled in re.findall(r"`codefleet ([a-z][a-z -]*)", table):
        words = [w for w in spelled.split() if re.fullmatch(r"[a-z][a-z-]*", w)]
        if words and words not in found:
            found.append(words)
    return found


def test_the_users_part_of_the_readme_runs_the_installed_codefleet_not_uv_run() -> None:
    assert DEV_SECTION in README
    assert "uv run codefleet" not in user_part()


@pytest.mark.parametrize("words", commands_in_table(), ids=" ".join)
def test_every_command_in_the_readme_table_exists(words: list[str]) -> None:
    result = CliRunner().invoke(app, [*words, "--help"])

    assert result.exit_code == 0, f"`codefleet {' '.join(words)}`: {result.output}"


def test_every_page_the_readme_links_exists() -> None:
    links = re.findall(r"\]\(((?:docs/)?[\w./-]+\.(?:md|png))(?:#[\w-]+)?\)", README)

    assert links, "the README links its docs pages"
    assert [link for link in links if not (ROOT / link).is_file()] == []


def test_doctor_names_the_bundled_cli_the_readme_sends_a_user_to_for_the_login() -> None:
    """`claude` is not on the PATH of an installed tool: the README points at doctor's line."""
    from codefleet.cli.start.doctor_checks import bundled_cli, check_cli

    found = check_cli()

    assert "`codefleet doctor`" in README and "_bundled/claude auth" in README
    assert found.ok, found.detail
    assert found.detail.endswith(f"at {bundled_cli()}")


def test_ci_runs_exactly_the_readmes_test_command_and_it_prints_the_closing_counts() -> None:
    """The project's pytest options already say `-q`: one more `-q` drops the `N passed` line."""
    import tomllib

    dev = README.partition(DEV_SECTION)[2].partition("\n## ")[0]
    shown = [line.split("#")[0].strip() for line in dev.splitlines() if "uv run pytest" in line]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    after_marker = ci.partition("# Exactly the README's test command.\n")[2].splitlines()[0]
    addopts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
        "pytest"
    ]["ini_options"]["addopts"]

    assert shown and after_marker == shown[0]
    assert "-q" in addopts.split() and "-q" not in shown[0].split()
