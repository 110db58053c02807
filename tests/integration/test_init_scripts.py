"""What `codefleet init --scripts` writes runs as written: the dry-run script through
`run --dry-run --script`, to a green verdict with the example tasks' changes in the tree.

The model script's run (`run --offline --model-script codefleet.model.yaml`, the real
bundled CLI) is tests/cli/test_run_offline.py; the help that documents both formats is
tests/unit/test_cli_help.py.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from codefleet.cli.app import app
from codefleet.server.thread import ServerThread


def test_run_dry_run_plays_the_init_script_to_a_green_run_that_verifies_with_the_found_check(
    make_server: Callable[..., ServerThread], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "theirs"
    (repo / "tests").mkdir(parents=True)
    (repo / "README.md").write_text("# theirs\n\nA small library.\n")
    (repo / "setup.py").write_text('from setuptools import setup\nsetup(name="theirs")\n')
    (repo / "tests" / "__init__.py").write_text("")
    (repo / "tests" / "test_ok.py").write_text(
        "import unittest\n\n\nclass T(unittest.TestCase):\n    def test_ok(self):\n"
        "        self.assertTrue(True)\n"
    )
    monkeypatch.chdir(repo)
    server = make_server(workdir=repo, run_dir=tmp_path / "runs", heartbeat_interval=0.5)
    clean = {k: None for k in os.environ if k.startswith(("CODEFLEET_", "ANTHROPIC_", "CLAUDE_"))}
    runner = CliRunner()

    init = runner.invoke(app, ["init", "--scripts"], env=clean)  # type: ignore[arg-type]
    graph = (repo / "codefleet.yaml").read_text()
    result = runner.invoke(
        app,
        ["run", "--dry-run", "--script", "codefleet.script.yaml", "--server", server.url],
        env={**clean, "COLUMNS": "200"},  # type: ignore[dict-item]
    )

    assert init.exit_code == 0, init.output
    assert "python -m unittest discover -q" in graph and "verify: test" in graph
    assert result.exit_code == 0, result.output
    assert "PASS" in result.stdout
    assert (repo / "CONTRIBUTING.md").read_text().startswith("# Contributing to theirs")
    assert (
        (repo / "README.md")
        .read_text()
        .endswith("\n## Contributing\n\nSee [CONTRIBUTING.md](CONTRIBUTING.md).\n")
    )
