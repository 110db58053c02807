"""A broken grammar package is a clear error at start, and `doctor` names it (issue 55).

The real command line in a subprocess, with a `tree_sitter_go` first on the path whose
import fails, as a broken install's would: no command that maps parts starts, each says
which package, and nothing falls back to leasing Go files whole.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

NAMED = "the Go grammar does not load (package tree-sitter-go"


@pytest.fixture
def broken_go(tmp_path: Path) -> dict[str, str]:
    """The environment of a command whose Go grammar package does not import."""
    package = tmp_path / "site" / "tree_sitter_go"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('raise ImportError("a broken install")\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODEFLEET_")}
    return {**env, "PYTHONPATH": str(tmp_path / "site"), "COLUMNS": "400"}


def codefleet(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "codefleet", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_doctor_names_the_broken_grammar_package(broken_go: dict[str, str], tmp_path: Path) -> None:
    ran = codefleet(broken_go, tmp_path, "doctor", "--json", "--workdir", str(tmp_path))

    assert ran.returncode == 1, ran.stderr
    [grammars] = json.loads(ran.stdout)
    assert grammars["name"] == "grammars" and grammars["ok"] is False
    assert NAMED in grammars["detail"]


def test_a_command_that_maps_parts_stops_at_start_naming_the_package(
    broken_go: dict[str, str], tmp_path: Path
) -> None:
    graph = tmp_path / "graph.yaml"
    graph.write_text("tasks:\n  - {id: A, title: a, description: edit api/handlers.go}\n")
    ran = codefleet(broken_go, tmp_path, "graph", "check", str(graph))

    assert ran.returncode == 1
    assert ran.stderr.startswith(f"codefleet: {NAMED}"), ran.stderr
    assert "Traceback" not in ran.stderr


def test_with_every_grammar_installed_doctor_says_which_languages_have_parts(
    tmp_path: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODEFLEET_")}
    ran = codefleet(env, tmp_path, "doctor", "--json", "--workdir", str(tmp_path))

    [grammars] = [c for c in json.loads(ran.stdout) if c["name"] == "grammars"]
    assert grammars["ok"] is True
    assert grammars["detail"] == (
        "parts of Go, Java, JavaScript, Rust, TSX, TypeScript files: every grammar loads"
    )
