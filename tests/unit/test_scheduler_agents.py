"""A mixed fleet in the scheduler: a task that names an agent kind runs only on that kind."""

from __future__ import annotations

from dataclasses import replace

from test_scheduler import NOW, agent, state, task

from codefleet.coord.policy.scheduler import Assign, schedule


def test_a_codex_task_goes_to_the_codex_agent_even_when_a_claude_agent_waited_longer() -> None:
    claude = agent("a1", idle_for=60.0)
    codex = replace(agent("a2", idle_for=5.0), agent="codex")
    needs_codex = replace(task("T1", "a.py"), agent="codex")
    decisions = schedule(state(candidates=(needs_codex,), agents=(claude, codex)), NOW)
    assert [d for d in decisions if isinstance(d, Assign)] == [Assign("T1", "a2")]


def test_a_task_needing_an_absent_kind_waits_and_does_not_block_the_others() -> None:
    claude = agent("a1")
    needs_codex = replace(task("T1", "a.py", priority=5), agent="codex")
    any_agent = task("T2", "b.py")
    decisions = schedule(state(candidates=(needs_codex, any_agent), agents=(claude,)), NOW)
    assert [d for d in decisions if isinstance(d, Assign)] == [Assign("T2", "a1")]


def test_a_task_naming_no_kind_runs_on_any_agent_longest_idle_first() -> None:
    codex = replace(agent("a2", idle_for=60.0), agent="codex")
    claude = agent("a1", idle_for=5.0)
    decisions = schedule(state(candidates=(task("T1", "a.py"),), agents=(claude, codex)), NOW)
    assert [d for d in decisions if isinstance(d, Assign)] == [Assign("T1", "a2")]
