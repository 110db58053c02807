"""A run without a real model spends nothing, and every place that shows its cost says so.

`run --dry-run` tells the server its agents are simulated (`fleet_started`
carries `simulated: true`); the verdict of `run`, `codefleet report` and
`codefleet stats`, `codefleet tasks ID` and `codefleet budget` (from the server's
`budget.simulated`, which the dashboards read too) then read the priced figure as
"simulated, nothing spent".
Real server, real runner, scripted brain, the real command line.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from typer.testing import CliRunner

from codefleet.cli.app import app
from codefleet.server.thread import ServerThread

FAST = {"heartbeat_interval": 0.1, "stale_after": 5.0, "tick_interval": 0.05, "backoff_base": 0.0}


def test_a_dry_runs_cost_reads_as_simulated_in_the_verdict_the_report_and_the_stats(
    make_server: Callable[..., ServerThread], workdir: Path, tmp_path: Path
) -> None:
    server = make_server(**FAST)
    graph = tmp_path / "graph.yaml"
    graph.write_text("tasks:\n  - {id: T, title: t, description: d, file_scope: [new.py]}\n")
    script = tmp_path / "script.yaml"
    script.write_text("T:\n  - write: {path: new.py, content: 'N = 1'}\n  - cost: 0.0125\n")
    cli = CliRunner()

    def say(*args: str) -> str:
        done = cli.invoke(app, [*args, "--server", server.url], env={"COLUMNS": "200"})
        assert done.exit_code == 0, done.output
        return " ".join(done.output.split())

    say("load", str(graph))
    ran = say(
        "run",
        "--dry-run",
        "--script",
        str(script),
        "--runners",
        "1",
        "--workdir",
        str(workdir),
        "--run-dir",
        str(tmp_path / "runs"),
    )
    report = say("report")
    report_json = json.loads(
        cli.invoke(app, ["report", "--format", "json", "--server", server.url]).output
    )
    stats = say("stats")
    task = say("tasks", "T")
    budget = say("budget")

    assert "$0.0125 simulated, nothing spent" in ran
    assert "$0.0125 simulated, nothing spent" in report
    assert report_json["sections"]["cost"]["simulated"] is True
    assert "$0.0125 simulated, nothing spent" in stats
    assert "usage $0.0125 simulated, nothing spent · 0 in / 0 out tokens" in task
    assert budget == "no fleet budget · $0.0125 simulated, nothing spent"
