"""The way on after a failure names the flags the run used, through the real CLI.

A keyless run (`--dry-run --script FILE`) that fails: its verdict, `retry`,
`cancel` and `tasks ID` each name the next `codefleet run` with the same
flags, read from the run's `fleet_started` event, not a bare `codefleet run`
that needs a key.
"""

from __future__ import annotations

from pathlib import Path

from test_first_hour import GRAPH, cli, repo, said, server

from codefleet.server.thread import ServerThread

__all__ = ["repo", "server"]  # the fixtures, used by name

FAILING = """\
T1:
- fail: cannot write it
T2:
- append: {path: README.md, text: "\\nSee CONTRIBUTING.md.\\n"}
"""
AGAIN = "codefleet run --dry-run --script failing.yaml"


def failed_run(repo: Path, url: str) -> str:
    (repo / "codefleet.yaml").write_text(
        GRAPH.replace("title: Write", "max_attempts: 1, title: Write")
    )
    (repo / "failing.yaml").write_text(FAILING)
    result = cli("run", "--dry-run", "--script", "failing.yaml", "--server", url)
    assert result.exit_code == 1, said(result)
    return said(result)


def test_a_failed_dry_runs_verdict_names_the_next_commands_with_its_flags(
    repo: Path, server: ServerThread
) -> None:
    verdict = failed_run(repo, server.url)

    assert "FAIL" in verdict
    assert f"next: `codefleet tasks T1` says why; `codefleet retry --failed`, then `{AGAIN}`" in (
        verdict
    )


def test_retry_cancel_and_tasks_name_the_run_with_the_flags_the_last_run_used(
    repo: Path, server: ServerThread
) -> None:
    failed_run(repo, server.url)

    shown = cli("tasks", "T1", "--server", server.url)
    retried = cli("retry", "T1", "--server", server.url)
    cancelled = cli("cancel", "T1", "--server", server.url)

    assert f"`codefleet retry T1`, then `{AGAIN}`" in said(shown)
    assert retried.exit_code == 0, said(retried)
    assert f"next: `{AGAIN}` runs them" in said(retried)
    assert cancelled.exit_code == 0, said(cancelled)
    assert f"(`codefleet retry T1`, then `{AGAIN}`, brings it back)" in said(cancelled)
