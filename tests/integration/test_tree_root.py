"""Which directory is the tree, from a subdirectory of a repository (issue 40 item 4).

Run in a subdirectory, `init` and `doctor` work on the repository's root (the
nearest directory above with `.git`, or one CodeFleet already serves), say so
with the reason, and `load`/`doctor` find the `codefleet.yaml` `init` wrote
there; a `serve` in the subdirectory serves the root as well (its tests are in
`test_one_tree.py`).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from codefleet.cli.app import app


def cli(*args: str) -> Result:
    clean = {k: None for k in os.environ if k.startswith(("CODEFLEET_", "ANTHROPIC_", "CLAUDE_"))}
    return CliRunner().invoke(app, list(args), env={**clean, "COLUMNS": "200"})  # type: ignore[arg-type]


def said(result: Result) -> str:
    return " ".join((result.stdout + result.stderr).split())


@pytest.fixture
def subdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`src/lib` inside a small git repository `repo`, and the current directory."""
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "tests" / "test_ok.py").write_text("def test_ok():\n    assert True\n")
    (root / "pyproject.toml").write_text('[project]\nname = "repo"\nversion = "0"\n')
    inner = root / "src" / "lib"
    inner.mkdir(parents=True)
    monkeypatch.chdir(inner)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return inner


def test_init_in_a_subdirectory_writes_the_graph_at_the_repositorys_root_and_says_why(
    subdir: Path,
) -> None:
    root = subdir.parent.parent

    result = cli("init")

    assert result.exit_code == 0, said(result)
    assert (root / "codefleet.yaml").is_file()
    assert not (subdir / "codefleet.yaml").exists()
    assert f"the tree is {root} (the git repository's root" in said(result)
    assert "not a git repository" not in said(result)


def test_doctor_in_a_subdirectory_checks_the_repositorys_root_and_its_graph(
    subdir: Path,
) -> None:
    root = subdir.parent.parent
    assert cli("init").exit_code == 0

    result = cli("doctor", "--json")

    checks = {c["name"]: c for c in __import__("json").loads(result.stdout)}
    assert checks["workdir"]["detail"].startswith(f"{root} exists and is writable")
    assert "the git repository's root" in checks["workdir"]["detail"]
    assert str(root / "codefleet.yaml") in checks["graph"]["detail"]
