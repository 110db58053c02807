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


def test_a_runs_verdict_shows_its_own_figures_apart_from_the_graphs_and_names_old_failures(
    repo: Path, server: ServerThread
) -> None:
    failed_run(repo, server.url)  # T1 failed, T2 blocked below it
    graph = repo / "codefleet.yaml"
    graph.write_text(graph.read_text() + "  - {id: T3, title: Add a changelog, description: d}\n")
    (repo / "failing.yaml").write_text(FAILING + "T3:\n- write: {path: CHANGES.md, content: x}\n")

    second = cli("run", "--dry-run", "--script", "failing.yaml", "--server", server.url)

    verdict = said(second)
    assert second.exit_code == 1  # the graph is not green: `run` exits 0 only if it is
    assert "this run: 1/1 task(s) succeeded · 0 veto(es)" in verdict
    assert "the graph: 1/3 tasks succeeded" in verdict
    assert "old: T1 failed before this run (`codefleet retry T1`" in verdict
    assert "old: T2 was blocked upstream before this run" in verdict


def test_the_report_of_a_database_with_several_runs_shows_the_last_runs_own_figures(
    repo: Path, server: ServerThread
) -> None:
    failed_run(repo, server.url)
    graph = repo / "codefleet.yaml"
    graph.write_text(graph.read_text() + "  - {id: T3, title: Add a changelog, description: d}\n")
    (repo / "failing.yaml").write_text(FAILING + "T3:\n- write: {path: CHANGES.md, content: x}\n")
    assert cli("run", "--dry-run", "--script", "failing.yaml", "--server", server.url).exit_code

    page = cli("report", "--format", "md", "--server", server.url)

    assert page.exit_code == 0, said(page)
    assert "1 of 3 succeeded (all 2 runs)" in said(page)
    assert (
        "1 of 1 task(s) it worked on succeeded · 0 veto(es) · "
        "old (not retried since an earlier run): T1, T2" in said(page)
    )
