"""Reading a planner's answer, and what the planner sends and writes (no session here).

`extract_block` picks the one YAML block; `judge_answer` turns every problem
into one plain line for the feedback message; `build_plan_prompt` states the
file's shape and what runs well; `plan_file` writes the header comment. The
tree is the shipped demo repository, read only.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import yaml

from codefleet.api.graphfile import parse_graph
from codefleet.cli.start.demo_run import examples_dir
from codefleet.planning.answer import AnswerError, extract_block, judge_answer
from codefleet.planning.check import tree_for
from codefleet.planning.planner import Exchange, Plan, plan_file
from codefleet.planning.planprompt import build_feedback, build_plan_prompt

DEMO = examples_dir() / "demo-repo"
TREE = tree_for(DEMO, DEMO / "codefleet.db", DEMO / "runs")
GOOD = """\
tasks:
  - id: A
    title: tags
    description: |
      Normalize tags in models.py.

      ```python
      normalize_tags(["X"])
      ```
    file_scope: [models.py]
"""


def fenced(body: str, tag: str = "yaml") -> str:
    return f"```{tag}\n{body}```\n"


def test_the_one_yaml_block_is_extracted_even_with_a_fence_inside_a_description() -> None:
    answer = f"Here it is.\n\n{fenced(GOOD)}\nThat is all."

    assert extract_block(answer) == GOOD


def test_an_untagged_block_counts_when_no_block_is_tagged_yaml() -> None:
    assert extract_block(f"Plan:\n{fenced(GOOD, tag='')}") == GOOD


def test_a_tagged_yaml_block_wins_over_other_code_blocks() -> None:
    answer = fenced("print(1)\n", tag="python") + fenced(GOOD) + fenced("ls\n", tag="")

    assert extract_block(answer) == GOOD


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        ("No block at all.", "no fenced YAML block"),
        (fenced(GOOD) + fenced(GOOD), "has 2 fenced YAML blocks; answer with exactly one"),
    ],
)
def test_no_block_or_several_is_a_problem_for_the_model(answer: str, says: str) -> None:
    with pytest.raises(AnswerError, match=says):
        extract_block(answer)


def test_a_good_answer_is_loaded_and_analysed() -> None:
    verdict = judge_answer(fenced(GOOD), TREE)

    assert verdict.ok and verdict.errors == ()
    assert verdict.analysis is not None and verdict.analysis.tasks == 1
    assert verdict.graph == parse_graph(yaml.safe_load(GOOD))


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ("tasks: [\n", "your graph is not valid YAML: "),
        (
            "tasks:\n  - {id: A, title: a, description: d, owner: me}\n",
            "your graph: task #1 (A): unknown key 'owner' (known keys: agent, ask, depends_on,",
        ),
        (
            "tasks:\n  - {id: A, title: a, description: d, depends_on: [Z]}\n",
            "your graph: task A depends on unknown task Z",
        ),
        (
            "tasks:\n  - {id: A, title: a, description: d, depends_on: [B]}\n"
            "  - {id: B, title: b, description: d, depends_on: [A]}\n",
            "your graph: cycle: A -> B -> A (each task depends on the next one)",
        ),
        (
            "tasks:\n  - {id: A, title: a, description: d, file_scope: [../x.py]}\n",
            "task A: file_scope entry '../x.py': ../x.py resolves outside the working tree",
        ),
        (
            "tasks:\n  - {id: A, title: a, description: d, verify: test}\n",
            "your graph: task A verifies with unknown check 'test'; define it under 'checks:'",
        ),
    ],
    ids=["yaml", "unknown-key", "unknown-dep", "cycle", "outside", "verify"],
)
def test_every_problem_is_one_plain_line(body: str, error: str) -> None:
    verdict = judge_answer(fenced(body), TREE)

    assert not verdict.ok
    assert len(verdict.errors) == 1 and verdict.errors[0].startswith(error), verdict.errors


def test_warnings_do_not_send_a_graph_back() -> None:
    body = "tasks:\n  - {id: A, title: a, description: d, file_scope: [modles.py]}\n"

    verdict = judge_answer(fenced(body), TREE, runners=1)

    assert verdict.ok
    assert verdict.warnings == ("task A: modles.py does not exist; did you mean models.py?",)


def test_the_prompt_states_the_shape_the_rules_and_the_goal() -> None:
    prompt = build_plan_prompt("Add search", tasks=4, marker="[[fakemodel:plan]]")

    for expected in (
        "exactly ONE fenced YAML block",
        "Disjoint file scopes",
        "Explicit dependencies",
        "A short critical path",
        "verify: test",
        "Complete descriptions",
        "estimate_min",
        "Allowed keys per task: id, title, description, file_scope, depends_on, priority",
        "# The goal\n\nAdd search\n\nAim for about 4 tasks.",
    ):
        assert expected in prompt
    assert prompt.rstrip().endswith("[[fakemodel:plan]]")
    assert "fakemodel" not in build_plan_prompt("Add search")


def test_the_prompts_example_graph_is_a_valid_graph() -> None:
    example = extract_block(build_plan_prompt("x").split("exactly this shape", 1)[1])

    graph = parse_graph(yaml.safe_load(example))

    assert [t["id"] for t in graph] == ["T1"] and graph.checks == {"test": "python -m pytest -q"}


def test_feedback_lists_each_error_and_warning_on_its_own_line() -> None:
    text = build_feedback(["your graph: cycle: A -> B -> A"], ["task C declares no file_scope"])

    assert "- error: your graph: cycle: A -> B -> A\n" in text
    assert "- warning: task C declares no file_scope\n" in text
    assert "exactly one fenced YAML block" in text


def test_the_written_file_has_a_header_comment_and_loads_as_the_graph() -> None:
    verdict = judge_answer(fenced(GOOD), TREE)
    plan = Plan(verdict, (Exchange("p", "a", ("e",)), Exchange("f", "b")), 0.0425, "claude-x")

    text = plan_file(
        plan, "Add search\nand export", datetime(2026, 7, 31, 18, 4, tzinfo=UTC), "t.yaml"
    )

    assert text.splitlines()[:7] == [
        "# Task graph planned by `codefleet plan`.",
        "# goal: Add search",
        "#       and export",
        "# date: 2026-07-31T18:04:00Z",
        "# model: claude-x",
        "# cost: $0.0425 (2 answer(s), 1 feedback round(s))",
        "# check it: codefleet graph check t.yaml; run it: codefleet load t.yaml",
    ]
    assert parse_graph(yaml.safe_load(text)) == verdict.graph
