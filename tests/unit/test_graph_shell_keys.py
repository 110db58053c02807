"""The graph's `shell:` / `shell_network:` defaults beside `on_stale_read`, and their bad values."""

from __future__ import annotations

import pytest

from codefleet.api.graphfile import GraphError, parse_graph


def graph(**top: object) -> dict[str, object]:
    tasks = [
        {"id": "T1", "title": "a", "description": "do a"},
        {
            "id": "T2",
            "title": "b",
            "description": "do b",
            "shell": False,
            "on_stale_read": "ignore",
        },
    ]
    return {"tasks": tasks, **top}


def test_the_graph_level_shell_and_policy_reach_every_task_that_does_not_say_its_own() -> None:
    specs = parse_graph(graph(shell=True, shell_network=True, on_stale_read="retry"))

    assert [(s.get("shell"), s.get("shell_network"), s.get("on_stale_read")) for s in specs] == [
        (True, True, "retry"),
        (False, True, "ignore"),
    ]


def test_a_bad_shell_key_is_reported_with_every_other_problem_of_the_file() -> None:
    with pytest.raises(GraphError) as err:
        parse_graph(graph(shell="yes", shell_network=1, on_stale_read="FAKE", jobs=[]))

    message = str(err.value)
    assert message.startswith("the graph: 4 problems:")
    assert "'shell' must be true or false" in message
    assert "'shell_network' must be true or false" in message
    assert "on_stale_read 'FAKE' is not one of" in message
    assert "unknown top-level key 'jobs'" in message
