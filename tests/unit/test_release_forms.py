"""`codefleet release` has two meanings, and says both: a bare `release` names them.

`release NAME...` gives back resources a person holds (`codefleet hold`);
`release --session ID` / `--all-interactive` frees a person's Claude Code
session's file leases (`codefleet join`). Neither needs a server to be told apart.
"""

from __future__ import annotations

import os
import subprocess
import sys

from typer.testing import CliRunner

from codefleet.cli.app import app

CLEAN = {k: v for k, v in os.environ.items() if not k.startswith(("CODEFLEET_", "ANTHROPIC_"))}
FORMS = ("codefleet release NAME...", "codefleet release --session ID", "--all-interactive")


def said(*args: str) -> tuple[int, str]:
    """`codefleet ARGS` run as the installed executable runs it (the launcher, a new process)."""
    done = subprocess.run(
        [sys.executable, "-m", "codefleet", *args],
        capture_output=True,
        text=True,
        env={**CLEAN, "COLUMNS": "200", "CODEFLEET_PORT": "9"},
        timeout=60,
    )
    return done.returncode, " ".join((done.stdout + done.stderr).split())


def test_a_bare_release_names_both_forms_and_asks_no_server() -> None:
    code, text = said("release")

    assert code == 2, text
    assert [form for form in FORMS if form not in text] == [], text
    assert "hold" in text and "join" in text
    assert "server" not in text  # told apart before any server is asked


def test_release_help_says_both_meanings() -> None:
    result = CliRunner().invoke(app, ["release", "--help"], env={"COLUMNS": "200"})
    text = " ".join(result.output.split())

    assert result.exit_code == 0
    assert "codefleet hold" in text and "codefleet join" in text
    assert "release NAME..." in text and "--session ID" in text
