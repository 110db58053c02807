"""The graph's task defaults (`shell:`, `shell_network:`, `on_stale_read`, `lease_granularity`),
and their bad values."""

from __future__ import annotations

import pytest

from codefleet.api.graphfile import GraphError, leases_line, parse_graph
from codefleet.models import Granularity


def graph(**top: object) -> dict[str, object]:
    tasks = [
        {"id": "T1", "title": "a", "description": "do a"},
        {
            "id": "T2",
            "title": "b",
            "description": "do b",
            "shell": False,
            "on_stale_read": "ignore",
            "lease_granularity": "file",
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


def test_the_graph_level_lease_granularity_reaches_every_task_that_does_not_say_its_own() -> None:
    specs = parse_graph(graph(lease_granularity="part"))

    assert [s.get("lease_granularity") for s in specs] == ["part", "file"]
    assert "lease_granularity" not in parse_graph(graph())[0]  # unset: the runner decides


def test_a_bad_lease_granularity_names_the_allowed_values_at_the_top_and_on_a_task() -> None:
    broken = graph(lease_granularity="function")
    broken["tasks"][0]["lease_granularity"] = "line"  # type: ignore[index]
    with pytest.raises(GraphError) as err:
        parse_graph(broken)

    message = str(err.value)
    assert "lease_granularity 'function' is not one of part, file, auto" in message
    assert "task #1 (T1): lease_granularity: Input should be 'part', 'file' or 'auto'" in message


def test_auto_leases_by_part_with_an_integration_check_and_whole_files_without() -> None:
    assert Granularity.AUTO.resolved("test") is Granularity.PART
    assert Granularity.AUTO.resolved(None) is Granularity.FILE
    assert Granularity.FILE.resolved("test") is Granularity.FILE
    assert Granularity.PART.resolved(None) is Granularity.PART


def test_the_leases_line_states_the_graphs_choice_and_the_tasks_leased_otherwise() -> None:
    auto = Granularity.AUTO
    assert leases_line(parse_graph(graph()), auto, "test") == (
        "by part (lease_granularity: auto; the integration check 'test' runs every two changes "
        "of a file together); leased otherwise: T2 (file)"
    )
    assert leases_line(parse_graph(graph(lease_granularity="part")), auto, None) == (
        "whole files (lease_granularity: auto; no integration check runs two changes of a file "
        "together: set `integration:` to lease by part); leased otherwise: T1 (part)"
    )
    same = parse_graph({"tasks": [{"id": "T1", "title": "a", "description": "d"}]})
    assert leases_line(same, auto, None).startswith("whole files (lease_granularity: auto;")
