"""`codefleet plan`: the planner through the real bundled Claude Code CLI, offline.

`plan --offline` is the whole command: a real read-only session over the demo
repository against the built-in fake model playing examples/plan-model.yaml,
whose first answer has a dependency cycle and whose second is fixed. The
other tests drive the same session class (`session.ReadOnlySession`) and
loop (`planner.plan_graph`) against this test's own fake model: a graph that
stays wrong fails after two feedback rounds, reads outside the tree are
refused, a budget stop fails the plan, and the options are the hardened ones.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from test_hardening_cli import canary_command, plant
from typer.testing import CliRunner

from codefleet.api.client import FleetClient
from codefleet.api.graphfile import load_graph
from codefleet.cli.app import app
from codefleet.cli.start.demo_run import examples_dir
from codefleet.offlinemodels.anthropicapi import FakeModel, marker, session_env
from codefleet.planning.check import tree_for
from codefleet.planning.planner import Plan, PlanFailed, plan_graph
from codefleet.server.thread import ServerThread
from codefleet.session.readonly import ReadOnlySession

GOAL = "Tag rules, search, routes, export and docs for the bookmarks service"
TIMEOUT_S = 90.0
CYCLE = "cycle: P2 -> P4 -> P2"


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, " ".join(result.stdout.split()), " ".join(result.stderr.split())


def test_plan_offline_sends_the_cycle_back_and_writes_the_corrected_graph(tmp_path: Path) -> None:
    out = tmp_path / "tasks.yaml"

    code, said, err = invoke("plan", GOAL, "--offline", "-o", str(out), "--run-dir", str(tmp_path))

    assert code == 0, err
    assert f"answer 1 has 1 error(s); sending them back: your graph: {CYCLE}" in said
    header = out.read_text().splitlines()[:6]
    assert header[1] == f"# goal: {GOAL}"
    assert header[2].startswith("# date: 20") and header[3] == "# model: claude-opus-5-5"
    assert header[4].startswith("# cost: $0.") and "(2 answer(s), 1 feedback round(s))" in header[4]
    graph = load_graph(out)
    assert [t["id"] for t in graph] == ["P1", "P2", "P3", "P4", "P5"]
    assert graph[1]["depends_on"] == ["P1"] and graph.checks == {
        "test": "python -m unittest discover -s tests -q"
    }
    assert "critical path P1 -> P2 -> P4 -> P5 (4 task(s), 50 min)" in said
    assert "OK: 0 error(s)" in said
    [record_file] = (tmp_path / "plans").glob("plan-*.json")
    record = json.loads(record_file.read_text())
    first, second = record["exchanges"]
    assert first["errors"] == [f"your graph: {CYCLE} (each task depends on the next one)"]
    assert CYCLE in second["sent"] and second["errors"] == []
    assert first["session_id"] == second["session_id"], "the feedback went to the same session"
    assert sorted(record["init"]["tools"]) == ["Glob", "Grep", "Read"]
    assert record["init"]["permissionMode"] == "dontAsk"
    code, _, _ = invoke("graph", "check", str(out), "--workdir", str(examples_dir() / "demo-repo"))
    assert code == 0


def test_plan_offline_load_posts_the_graph_to_the_server(
    tmp_path: Path, server: ServerThread
) -> None:
    out = tmp_path / "tasks.yaml"

    code, said, err = invoke(
        "plan",
        GOAL,
        "--offline",
        "-o",
        str(out),
        "--run-dir",
        str(tmp_path),
        "--load",
        "--server",
        server.url,
    )

    assert code == 0, err
    assert "loaded: created 5 task(s): P1 P2 P3 P4 P5" in said

    async def stored() -> list[dict[str, Any]]:
        async with FleetClient(server.url) as client:
            return await client.tasks()

    tasks = {t["id"]: t for t in asyncio.run(stored())}
    assert sorted(tasks) == ["P1", "P2", "P3", "P4", "P5"]
    assert tasks["P4"]["file_scope"] == ["export.py", "tests/test_export.py"]


def test_plan_refuses_an_existing_output_before_any_session(tmp_path: Path) -> None:
    out = tmp_path / "tasks.yaml"
    out.write_text("mine\n")

    code, _, err = invoke("plan", GOAL, "--offline", "-o", str(out), "--run-dir", str(tmp_path))

    assert code == 1 and "exists; choose another --output or pass --force" in err
    assert out.read_text() == "mine\n"
    assert not (tmp_path / "plans").exists(), "no session ran"


# -- the session and the loop against this test's own fake model --------------------------


def _cyclic(n: int) -> dict[str, Any]:
    block = (
        "```yaml\ntasks:\n"
        "  - {id: A, title: a, description: do a, file_scope: [a.py], depends_on: [B]}\n"
        "  - {id: B, title: b, description: do b, file_scope: [b.py], depends_on: [A]}\n```\n"
    )
    return {"content": [{"text": f"Answer {n}.\n\n{block}"}]}


async def _plan(fake: FakeModel, tree: Path, home: Path, script: str, **limits: Any) -> Plan:
    session = ReadOnlySession(tree, env=session_env(fake, home), **limits)
    async with asyncio.timeout(TIMEOUT_S), session:
        return await plan_graph(
            session, "a goal", tree_for(tree, tree / "db", tree / "runs"), marker=marker(script)
        )


async def test_a_graph_still_wrong_after_two_feedback_rounds_fails_with_its_errors(
    fake_model: FakeModel, tree: Path, tmp_path: Path
) -> None:
    fake_model.add_script("stubborn", [_cyclic(1), _cyclic(2), _cyclic(3), _cyclic(4)])

    with pytest.raises(PlanFailed) as failed:
        await _plan(fake_model, tree, tmp_path / "home", "stubborn")

    assert str(failed.value) == "the graph still has errors after 2 feedback round(s)"
    assert failed.value.errors == (
        "your graph: cycle: A -> B -> A (each task depends on the next one)",
    )
    assert len(failed.value.exchanges) == 3
    requests = fake_model.requests("stubborn")
    assert [r.turn for r in requests] == [0, 1, 2], "three answers in one conversation, no fourth"
    feedback = [
        m
        for m in requests[-1].body["messages"]
        if m["role"] == "user" and "cycle: A -> B" in str(m)
    ]
    assert len(feedback) == 2


async def test_reads_outside_the_tree_are_refused_and_writes_do_not_exist(
    fake_model: FakeModel, tree: Path, tmp_path: Path
) -> None:
    (tree / "a.py").write_text("A = 1\n")
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET\n")
    good = "```yaml\ntasks:\n  - {id: A, title: a, description: do a, file_scope: [a.py]}\n```"
    fake_model.add_script("nosy", [
        {"content": [{"tool_use": {"name": "Read", "input": {"file_path": str(secret)}}}]},
        {"content": [{"tool_use": {"name": "Glob", "input": {"pattern": "../*"}}}]},
        {"content": [{"tool_use": {"name": "Write", "input": {"file_path": "x.py", "content": ""}}}]},
        {"content": [{"tool_use": {"name": "Bash", "input": {"command": "cat ../secret.txt"}}}]},
        {"content": [{"tool_use": {"name": "Read", "input": {"file_path": "a.py"}}}]},
        {"content": [{"text": good}]},
    ])  # fmt: skip

    plan = await _plan(fake_model, tree, tmp_path / "home", "nosy")

    results = fake_model.tool_results("nosy")
    assert [r.is_error for r in results] == [True, True, True, True, False]
    assert "outside the working tree" in results[0].content
    assert "outside the working tree" in results[1].content
    assert "TOP SECRET" not in "".join(r.content for r in results)
    assert "A = 1" in results[4].content
    assert not (tree / "x.py").exists()
    assert [t["id"] for t in plan.verdict.graph or []] == ["A"]


async def test_a_budget_stop_fails_the_plan_with_the_sessions_reason(
    fake_model: FakeModel, tree: Path, tmp_path: Path
) -> None:
    costly = {"content": [{"text": "thinking"}], "usage": {"input_tokens": 5_000_000}}
    fake_model.add_script("costly", [costly, costly])

    with pytest.raises(PlanFailed) as failed:
        await _plan(fake_model, tree, tmp_path / "home", "costly", max_budget_usd=0.01)

    assert "the planning session failed: session ended with error_max_budget_usd" in str(
        failed.value
    )
    assert failed.value.cost_usd > 0.01


async def test_planted_settings_hooks_and_mcp_servers_are_not_loaded_by_the_planning_session(
    fake_model: FakeModel, tree: Path, tmp_path: Path
) -> None:
    canaries, home = tmp_path / "canaries", tmp_path / "home"
    canaries.mkdir()
    plant(tree, home, canaries)
    good = "```yaml\ntasks:\n  - {id: A, title: a, description: do a, file_scope: [a.py]}\n```"
    fake_model.add_script("planted", [
        {"content": [{"tool_use": {"name": "Bash", "input": {"command": canary_command(canaries / "bash")}}}]},
        {"content": [{"tool_use": {"name": "mcp__planted_tree__anything", "input": {}}}]},
        {"content": [{"text": good}]},
    ])  # fmt: skip
    session = ReadOnlySession(tree, env=session_env(fake_model, home))

    async with asyncio.timeout(TIMEOUT_S), session:
        plan = await plan_graph(
            session, "a goal", tree_for(tree, tree / "db", tree / "runs"), marker=marker("planted")
        )

    assert session.init is not None
    assert sorted(session.init["tools"]) == ["Glob", "Grep", "Read"]
    assert session.init["mcp_servers"] == [] and session.init["permissionMode"] == "dontAsk"
    assert sorted(p.name for p in canaries.iterdir()) == [], "a planted command ran"
    assert [r.is_error for r in fake_model.tool_results("planted")] == [True, True]
    assert plan.verdict.ok
