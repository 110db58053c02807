"""Whether a check's command can start: its programs, looked up the way a check runs them.

`missing_programs` reads the program word of each simple command and looks it
up on the PATH of `check_env` (CodeFleet's own virtualenv off it), or in the
tree for a path. `graph check` and `doctor` warn with it (`load` is covered in
tests/integration/test_checks.py).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from codefleet.cli.app import app
from codefleet.fleet.views.programs import command_programs, missing_programs
from codefleet.fleet.views.shell import check_env

GRAPH = (
    "checks: {lint: flake9-is-not-installed ., test: 'true'}\n"
    "tasks:\n  - {id: T, title: t, verify: lint, description: d, file_scope: [a.py]}\n"
)


@pytest.mark.parametrize(
    ("command", "programs"),
    [
        ("flake9 .", ["flake9"]),
        ("cd sub && FOO=1 pytest -q 2>&1 | tail -n 5; ./run.sh", ["pytest", "tail", "./run.sh"]),
        ("python -m unittest discover -s tests -q", ["python"]),
        ("$TOOL check || exit 1", []),  # an expansion: not guessed; `exit` is the shell's
        ("echo 'unterminated", []),
    ],
)
def test_the_program_of_each_simple_command_is_read_and_shell_words_are_skipped(
    command: str, programs: list[str]
) -> None:
    assert command_programs(command) == programs


def test_a_program_only_in_codefleets_own_environment_is_missing_for_a_check(
    tmp_path: Path,
) -> None:
    own, system = tmp_path / "venv", tmp_path / "usr-bin"
    for directory in (own / "bin", system):
        directory.mkdir(parents=True)
    for program in (own / "bin" / "flake9", system / "tool"):
        program.write_text("#!/bin/sh\n")
        program.chmod(0o755)
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "plain.sh").write_text("#!/bin/sh\n")
    base = {"PATH": f"{own / 'bin'}{os.pathsep}{system}", "VIRTUAL_ENV": str(own)}
    env = check_env(tmp_path / "tree", base, own_prefix="")

    found = missing_programs(
        "flake9 . && tool && ./plain.sh && ./absent.sh", tmp_path / "tree", env
    )

    assert found == [
        ("flake9", "was not found"),
        ("./plain.sh", "is not executable"),
        ("./absent.sh", "was not found"),
    ]


def test_graph_check_warns_about_a_check_whose_program_is_not_found(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("A = 1\n")
    (tmp_path / "codefleet.yaml").write_text(GRAPH)
    result = CliRunner().invoke(
        app,
        ["graph", "check", str(tmp_path / "codefleet.yaml"), "--workdir", str(tmp_path), "--json"],
    )
    assert result.exit_code == 0, result.output
    warnings = {w["code"]: w for w in json.loads(result.output)["warnings"]}
    assert "flake9-is-not-installed was not found" in warnings["missing_program"]["message"]


def test_doctor_warns_about_a_check_whose_program_is_not_found(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("A = 1\n")
    (tmp_path / "codefleet.yaml").write_text(GRAPH)
    result = CliRunner().invoke(
        app,
        [
            "doctor",
            "--graph",
            str(tmp_path / "codefleet.yaml"),
            "--workdir",
            str(tmp_path),
            "--json",
        ],
    )
    checks = {c["name"]: c for c in json.loads(result.output)}
    assert not checks["checks"]["ok"] and not checks["checks"]["required"]
    assert "lint: flake9-is-not-installed was not found" in checks["checks"]["detail"]
