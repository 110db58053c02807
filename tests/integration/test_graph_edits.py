"""Editing a graph that is already loaded, through the real CLI against a real server.

A task that has not started takes its edited definition on the next `load` or
`run` (one line per task says so); a task that has run keeps its definition
and its history, and the line says how to replace it. A scripted `run` checks
its script against the graph before it loads anything.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from test_first_hour import GRAPH, SCRIPT, cli, repo, said, server

from codefleet.api.client import FleetClient
from codefleet.server.thread import ServerThread

__all__ = ["repo", "server"]  # the fixtures, used by name


def _task(url: str, task_id: str) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        async with FleetClient(url) as client:
            return await client.task(task_id)

    return asyncio.run(go())


def _ids(url: str) -> list[str]:
    async def go() -> list[str]:
        async with FleetClient(url) as client:
            return [t["id"] for t in await client.tasks()]

    return asyncio.run(go())


def test_a_second_load_gives_a_task_that_never_ran_its_edited_definition(
    repo: Path, server: ServerThread
) -> None:
    graph = repo / "codefleet.yaml"
    graph.write_text(GRAPH)
    assert cli("load", "--server", server.url).exit_code == 0
    graph.write_text(
        GRAPH.replace("depends_on: [T1]}", "depends_on: [T1], priority: 5}").replace(
            "title: Point the README to it, description: d",
            "title: Point the README to it, description: link CONTRIBUTING.md",
        )
    )

    again = cli("load", "--server", server.url)

    assert again.exit_code == 0, said(again)
    assert "T2: not started yet, its definition was updated" in said(again)
    assert "already loaded" not in said(again)
    t2 = _task(server.url, "T2")
    assert (t2["description"], t2["priority"]) == ("link CONTRIBUTING.md", 5)
    assert _task(server.url, "T1")["description"] == "d"  # unchanged: left alone


def test_a_graph_that_now_leases_parts_redefines_its_tasks_that_never_ran(
    repo: Path, server: ServerThread
) -> None:
    graph = repo / "codefleet.yaml"
    graph.write_text(GRAPH)
    assert cli("load", "--server", server.url).exit_code == 0
    assert _task(server.url, "T1")["lease_granularity"] is None  # unset: the runner's
    graph.write_text("lease_granularity: part\n" + GRAPH)

    again = cli("load", "--server", server.url)

    assert again.exit_code == 0, said(again)
    assert "T1: not started yet, its definition was updated" in said(again)
    assert [_task(server.url, t)["lease_granularity"] for t in ("T1", "T2")] == ["part", "part"]


def test_a_run_gives_an_edited_task_that_never_ran_its_new_definition_and_runs_it(
    repo: Path, server: ServerThread
) -> None:
    graph = repo / "codefleet.yaml"
    graph.write_text(GRAPH)
    assert cli("load", "--server", server.url).exit_code == 0
    graph.write_text(GRAPH.replace("Point the README to it", "Point the README to CONTRIBUTING"))
    (repo / "script.yaml").write_text(SCRIPT)

    result = cli("run", "--dry-run", "--script", "script.yaml", "--server", server.url)

    assert result.exit_code == 0, said(result)
    assert f"{graph}: T2: not started yet, its definition was updated" in said(result)
    assert _task(server.url, "T2")["title"] == "Point the README to CONTRIBUTING"
    assert _task(server.url, "T2")["status"] == "succeeded"


def test_an_edited_task_that_has_run_keeps_its_history_and_the_line_says_how_to_replace_it(
    repo: Path, server: ServerThread
) -> None:
    graph = repo / "codefleet.yaml"
    graph.write_text(GRAPH)
    (repo / "script.yaml").write_text(SCRIPT)
    assert cli("run", "--dry-run", "--script", "script.yaml", "--server", server.url).exit_code == 0
    graph.write_text(GRAPH.replace("Point the README to it", "Point the README to CONTRIBUTING"))

    again = cli("load", "--server", server.url)

    assert again.exit_code == 0, said(again)
    assert (
        "T2 has run (succeeded, 1 attempt): the server keeps its definition and its history; "
        "to run the edited one, give the task a new id in the graph" in said(again)
    )
    assert _task(server.url, "T2")["title"] == "Point the README to it"


def test_a_scripted_run_refuses_a_graph_task_its_script_lacks_before_loading_anything(
    repo: Path, server: ServerThread
) -> None:
    (repo / "codefleet.yaml").write_text(
        GRAPH + "  - {id: T3, title: Add a changelog, description: d}\n"
    )
    (repo / "script.yaml").write_text(SCRIPT)  # no T3

    result = cli("run", "--dry-run", "--script", "script.yaml", "--server", server.url)

    assert result.exit_code == 1
    assert "has no script for task(s) T3" in said(result)
    assert _ids(server.url) == []  # checked first: nothing was loaded


def test_run_with_a_graph_warns_about_a_check_whose_program_is_missing_as_graph_check_does(
    repo: Path, server: ServerThread
) -> None:
    graph = repo / "other.yaml"
    graph.write_text("checks:\n  test: nosuchprogram-40 --all\n" + GRAPH)
    (repo / "script.yaml").write_text(SCRIPT)

    checked = cli("graph", "check", str(graph))
    result = cli(
        "run", "--dry-run", "--script", "script.yaml", "--graph", str(graph), "--server", server.url
    )

    warning = "check test: nosuchprogram-40"
    assert warning in said(checked)
    assert result.exit_code == 0, said(result)
    assert f"warning: {warning}" in said(result)
