"""`codefleet run --offline --model-script FILE` on one's own repository, with no key.

`codefleet init --scripts` in a small repository writes the graph and the
scripted model's turns for its two example tasks; `run --offline` then runs
them through real Claude Code sessions (the bundled CLI, the real hook, the
real lease server) against CodeFleet's built-in model, and the verdict is
green with its cost labelled simulated.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from codefleet.cli.app import app
from codefleet.server.thread import ServerThread


def test_run_offline_plays_the_init_scripts_through_the_real_cli_to_a_green_run(
    make_server: Callable[..., ServerThread], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "theirs"
    repo.mkdir()
    (repo / "README.md").write_text("# theirs\n\nA small library.\n")
    monkeypatch.chdir(repo)
    server = make_server(workdir=repo, run_dir=tmp_path / "runs", heartbeat_interval=0.5)
    clean = {k: None for k in os.environ if k.startswith(("CODEFLEET_", "ANTHROPIC_", "CLAUDE_"))}
    runner = CliRunner()

    init = runner.invoke(app, ["init", "--scripts"], env=clean)  # type: ignore[arg-type]
    result = runner.invoke(
        app,
        [
            "run",
            "--offline",
            "--model-script",
            "codefleet.model.yaml",
            "--server",
            server.url,
            "--run-dir",
            str(tmp_path / "runs"),
        ],
        env={**clean, "HOME": str(tmp_path / "home"), "COLUMNS": "200"},  # type: ignore[dict-item]
    )

    assert init.exit_code == 0, init.output
    assert result.exit_code == 0, result.output
    assert (
        result.stdout.splitlines()[0] == f"run: tree {repo} · server {server.url} · offline agents"
    )
    assert "PASS" in result.stdout and "simulated, nothing spent" in result.stdout
    assert (repo / "CONTRIBUTING.md").read_text().startswith("# Contributing to theirs")
    assert (
        (repo / "README.md")
        .read_text()
        .endswith("\n## Contributing\n\nSee [CONTRIBUTING.md](CONTRIBUTING.md).\n")
    )
