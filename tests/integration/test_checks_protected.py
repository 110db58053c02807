"""An agent cannot switch the checks off: the attacks of issue 51, item 4, through the real CLI.

The graph file a run loads (its `checks:`, its `integration:`) is protected from
the fleet's agents once the server knows it: a `Write` to it and a command that
rewrites or deletes it are refused like a write into `.claude/`, while a
person's own session (the `join` hook) may still edit it. A check whose
command changed since the server last had it (a graph file edited between runs,
by anybody) is not applied without the operator saying yes: a run with no
terminal refuses, naming the check, both commands, the task that last wrote the
file and how to accept; `--check NAME=CMD` is that yes. The verdict and
`codefleet report` name a task that deleted a test file, and a check changed.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from test_first_hour import cli, repo, said, server

from codefleet.api.client import FleetClient
from codefleet.api.graphfile import load_graph
from codefleet.cli.run.runprep import GraphFile, RunRefused, load_graph_file
from codefleet.hook.command import HookArgs
from codefleet.hook.command import run as run_hook
from codefleet.server.thread import ServerThread

__all__ = ["repo", "server"]  # the fixtures, used by name

GRAPH = """\
checks:
  test: python -c pass
integration: test
tasks:
  - {id: T1, title: a, description: d}
"""
RUN = ("run", "--dry-run", "--script", "script.yaml")


def _events(url: str, kind: str) -> list[dict[str, Any]]:
    async def go() -> list[dict[str, Any]]:
        async with FleetClient(url) as client:
            return [e["payload"] for e in await client.events(type_=kind)]

    return asyncio.run(go())


def test_an_agents_write_to_the_graph_file_is_refused_as_protected(
    repo: Path, server: ServerThread
) -> None:
    graph = repo / "codefleet.yaml"
    graph.write_text(GRAPH)
    (repo / "script.yaml").write_text(
        "T1:\n- write: {path: codefleet.yaml, content: 'checks: {test: \"true\"}'}\n"
    )

    result = cli(*RUN, "--server", server.url)

    assert graph.read_text() == GRAPH, said(result)
    [refused, *_] = _events(server.url, "task_requeued")
    assert refused["reason"].startswith("The write was refused: codefleet.yaml is a protected path")


@pytest.mark.parametrize(
    "command", ["rm codefleet.yaml", "echo 'checks: {test: true}' > codefleet.yaml"]
)
def test_a_command_that_rewrites_or_deletes_the_graph_file_is_refused(
    repo: Path, server: ServerThread, command: str
) -> None:
    graph = repo / "codefleet.yaml"
    graph.write_text(GRAPH)
    (repo / "script.yaml").write_text(f"T1:\n- command: {json.dumps(command)}\n")

    result = cli(*RUN, "--shell", "--shell-unsandboxed", "--server", server.url)

    assert graph.read_text() == GRAPH, said(result)
    [finished] = _events(server.url, "command_finished")
    assert finished["applied"] == [] and "codefleet.yaml" in finished["error"], finished
    assert "protected path" in finished["error"]


def _run_that_writes_a_new_graph(repo: Path, url: str) -> Path:
    """Run 1: the graph's `test` check is defined; task T1 writes a second graph file,
    `next.yaml`, whose `test` check is `true` (a file the server does not know yet)."""
    (repo / "codefleet.yaml").write_text(GRAPH)
    weakened = GRAPH.replace("python -c pass", "'true'").replace("id: T1", "id: T2")
    (repo / "script.yaml").write_text(
        f"T1:\n- write: {{path: next.yaml, content: {weakened!r}}}\nT2: []\n"
    )
    first = cli(*RUN, "--server", url)
    assert first.exit_code == 0, said(first)
    return repo / "next.yaml"


def test_a_run_whose_graph_changed_a_check_refuses_without_a_terminal_naming_the_task(
    repo: Path, server: ServerThread
) -> None:
    _run_that_writes_a_new_graph(repo, server.url)

    again = cli(*RUN, "--graph", "next.yaml", "--server", server.url)

    assert again.exit_code == 1, said(again)
    assert (
        "check test changed in next.yaml (last written by task T1): it was `python -c pass`, "
        "now `true`; not applied" in said(again)
    )
    assert "--check test=true" in said(again)
    assert asyncio.run(_checks(server.url)) == {"test": "python -c pass"}  # not applied
    assert "T2" not in asyncio.run(_ids(server.url))  # nothing of the file was loaded


async def _checks(url: str) -> dict[str, str]:
    async with FleetClient(url) as client:
        return await client.checks()


async def _ids(url: str) -> list[str]:
    async with FleetClient(url) as client:
        return [t["id"] for t in await client.tasks()]


def test_the_operators_check_option_accepts_the_change_and_the_verdict_names_it(
    repo: Path, server: ServerThread
) -> None:
    _run_that_writes_a_new_graph(repo, server.url)

    again = cli(*RUN, "--graph", "next.yaml", "--check", "test=true", "--server", server.url)

    assert again.exit_code == 0, said(again)
    assert asyncio.run(_checks(server.url)) == {"test": "true"}
    assert "check test changed: `python -c pass` → `true` (next.yaml last written by T1)" in said(
        again
    )
    assert _report_lines(server.url) == [
        "check test changed: `python -c pass` → `true` (next.yaml last written by T1)"
    ]


def _report_lines(url: str) -> list[str]:
    """The report's section on what the checks run (`codefleet report --format json`)."""
    report = cli("report", "--format", "json", "--server", url)
    assert report.exit_code == 0, said(report)
    return list(json.loads(report.stdout)["sections"]["checks"])


def test_the_verdict_and_the_report_name_a_task_that_deleted_a_test_file(
    repo: Path, server: ServerThread
) -> None:
    (repo / "codefleet.yaml").write_text(GRAPH)
    (repo / "script.yaml").write_text("T1:\n- command: rm tests/test_ok.py\n")

    result = cli(*RUN, "--shell", "--shell-unsandboxed", "--server", server.url)

    assert result.exit_code == 0, said(result)
    assert not (repo / "tests" / "test_ok.py").exists()
    assert "T1 deleted test file(s): tests/test_ok.py" in said(result)
    assert _report_lines(server.url) == ["T1 deleted test file(s): tests/test_ok.py"]


def test_a_persons_own_session_may_still_edit_the_graph_file(
    repo: Path, server: ServerThread
) -> None:
    (repo / "codefleet.yaml").write_text(GRAPH)
    (repo / "script.yaml").write_text("T1: []\n")
    assert cli(*RUN, "--server", server.url).exit_code == 0  # the server knows the file now
    body = {
        "session_id": "0aeef531-72cc-4552-9656-7482e7ecde15",
        "cwd": str(repo),
        "tool_name": "Edit",
        "tool_input": {
            "file_path": str(repo / "codefleet.yaml"),
            "old_string": "a",
            "new_string": "b",
        },
    }

    printed = run_hook(HookArgs("pre-tool-use", server.url, str(repo)), json.dumps(body), {})

    assert printed == ""  # allowed: a person's write is not the fleet's to refuse


def test_load_asks_the_same_of_a_check_the_graph_changed(repo: Path, server: ServerThread) -> None:
    graph = repo / "codefleet.yaml"
    graph.write_text(GRAPH)
    assert cli("load", "--server", server.url).exit_code == 0
    graph.write_text(GRAPH.replace("python -c pass", "'true'"))  # a person's edit: no task named

    refused = cli("load", "--server", server.url)
    accepted = cli("load", "--check", "test=true", "--server", server.url)

    assert refused.exit_code == 1, said(refused)
    assert "check test changed in codefleet.yaml: it was `python -c pass`, now `true`" in said(
        refused
    )
    assert accepted.exit_code == 0, said(accepted)
    assert asyncio.run(_checks(server.url)) == {"test": "true"}


@pytest.mark.parametrize("yes", [True, False])
def test_on_a_terminal_the_operator_is_asked_and_the_answer_decides(
    repo: Path, server: ServerThread, yes: bool
) -> None:
    graph = repo / "codefleet.yaml"
    graph.write_text(GRAPH)
    assert cli("load", "--server", server.url).exit_code == 0
    graph.write_text(GRAPH.replace("python -c pass", "'true'"))
    asked: list[str] = []

    def confirm(question: str) -> bool:
        asked.append(question)
        return yes

    async def load_again() -> None:
        async with FleetClient(server.url) as client:
            loaded = GraphFile(graph, load_graph(graph, standalone=False))
            await load_graph_file(client, loaded, {}, source="codefleet.yaml", confirm=confirm)

    if yes:
        asyncio.run(load_again())
    else:
        with pytest.raises(RunRefused, match=r"check test changed in codefleet\.yaml"):
            asyncio.run(load_again())

    assert asked == [
        "check test changed in codefleet.yaml: it was `python -c pass`, now `true`. Apply it?"
    ]
    expected = "true" if yes else "python -c pass"
    assert asyncio.run(_checks(server.url)) == {"test": expected}
