"""The operator-facing wire API against a real server: the graph, control, and the read views."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from fleet_support import Runner, register

from codefleet.api.client import FleetClient
from codefleet.attempt import AttemptReport
from codefleet.errors import Forbidden, InvalidGraph, InvalidState, NotFound, StaleEpoch
from codefleet.models import ErrorKind
from codefleet.server.thread import ServerThread

WaitUntil = Callable[..., Awaitable[Any]]


async def take_and_start(client: FleetClient, agent: Runner, task_id: str) -> None:
    task = await client.assignment(*agent, wait=5)
    assert task is not None and task.id == task_id
    await client.start(task_id, *agent)


def statuses(tasks: list[dict[str, Any]]) -> dict[str, str]:
    return {t["id"]: t["status"] for t in tasks}


# -- creating the graph -----------------------------------------------------------------


async def test_creating_tasks_answers_201_with_the_created_ids_in_order(http: httpx.AsyncClient):
    response = await http.post(
        "/tasks",
        json={
            "tasks": [
                {"id": "T1", "title": "a", "description": "do it"},
                {"title": "b", "description": "do it"},
            ]
        },
    )

    assert response.status_code == 201
    created = response.json()["created"]
    assert created[0] == "T1"
    assert created[1].startswith("t_")


INVALID_GRAPHS = {
    "cycle": [
        {"id": "A", "title": "a", "description": "do it", "depends_on": ["B"]},
        {"id": "B", "title": "b", "description": "do it", "depends_on": ["A"]},
    ],
    "self dependency": [{"id": "A", "title": "a", "description": "do it", "depends_on": ["A"]}],
    "unknown dependency": [
        {"id": "A", "title": "a", "description": "do it", "depends_on": ["ghost"]}
    ],
    "duplicate id": [
        {"id": "A", "title": "a", "description": "do it"},
        {"id": "A", "title": "again", "description": "do it"},
    ],
    "invalid id": [{"id": "has space", "title": "a", "description": "do it"}],
    "scope outside the tree": [
        {"id": "A", "title": "a", "description": "do it", "file_scope": ["../../etc/passwd"]}
    ],
}


@pytest.mark.parametrize("case", INVALID_GRAPHS, ids=list(INVALID_GRAPHS))
async def test_an_invalid_graph_is_a_422_invalid_graph_and_nothing_is_written(
    http: httpx.AsyncClient, client: FleetClient, case: str
):
    before = await client.state()
    batch = [{"id": "fine", "title": "fine", "description": "do it"}, *INVALID_GRAPHS[case]]

    response = await http.post("/tasks", json={"tasks": batch})

    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "invalid_graph"
    assert error["message"]
    assert "problem" in error["detail"]
    assert await client.tasks() == []
    assert (await client.state())["last_event_id"] == before["last_event_id"]


async def test_a_duplicate_of_a_stored_task_rejects_the_whole_batch(client: FleetClient):
    await client.create_tasks([{"id": "A", "title": "a", "description": "do it"}])

    with pytest.raises(InvalidGraph):
        await client.create_tasks(
            [
                {"id": "B", "title": "b", "description": "do it"},
                {"id": "A", "title": "again", "description": "do it"},
            ]
        )

    assert [t["id"] for t in await client.tasks()] == ["A"]


# -- reading tasks ----------------------------------------------------------------------


async def test_the_task_list_derives_runnable_and_unmet_dependencies(client: FleetClient):
    await client.create_tasks(
        [
            {"id": "A", "title": "a", "description": "do it"},
            {"id": "B", "title": "b", "description": "do it", "depends_on": ["A"]},
            {"id": "C", "title": "c", "description": "do it", "depends_on": ["A", "B"]},
        ]
    )

    tasks = {t["id"]: t for t in await client.tasks()}

    assert (tasks["A"]["runnable"], tasks["A"]["unmet_dependencies"]) == (True, [])
    assert (tasks["B"]["runnable"], tasks["B"]["unmet_dependencies"]) == (False, ["A"])
    assert (tasks["C"]["runnable"], sorted(tasks["C"]["unmet_dependencies"])) == (False, ["A", "B"])
    assert sorted(tasks["C"]["depends_on"]) == ["A", "B"]


async def test_the_task_list_filters_by_status_and_pages(client: FleetClient):
    await client.create_tasks(
        [{"id": f"T{n}", "title": "t", "description": "do it"} for n in range(5)]
    )
    agent = await register(client, "runner-1")
    await take_and_start(client, agent, "T0")

    assert [t["id"] for t in await client.tasks(status="running")] == ["T0"]
    assert [t["id"] for t in await client.tasks(status="pending")] == ["T1", "T2", "T3", "T4"]
    assert [t["id"] for t in await client.tasks(limit=2, offset=1)] == ["T1", "T2"]


async def test_one_task_shows_its_dependencies_dependents_leases_and_file_changes(
    client: FleetClient,
):
    await client.create_tasks(
        [
            {"id": "A", "title": "a", "description": "do it", "file_scope": ["a.py"]},
            {"id": "B", "title": "b", "description": "do it", "depends_on": ["A"]},
        ]
    )
    agent_id, epoch = await register(client, "runner-1")
    await take_and_start(client, (agent_id, epoch), "A")
    await client.acquire(agent_id, epoch, "A", ["a.py"], "Write")
    await client.record_change(agent_id, epoch, "A", "./a.py", "Write")

    a = await client.task("A")
    b = await client.task("B")

    assert (a["depends_on"], a["dependents"]) == ([], ["B"])
    assert (b["depends_on"], b["dependents"], b["unmet_dependencies"]) == (["A"], [], ["A"])
    assert [(c["path"], c["tool"], c["agent_id"]) for c in a["file_changes"]] == [
        ("a.py", "Write", agent_id)
    ]
    assert [lease["path"] for lease in a["leases"]] == ["a.py"]
    [changed] = await client.events(type_="file_changed")
    assert changed["payload"] == {"path": "a.py", "tool": "Write"}


async def test_an_unknown_task_is_not_found(client: FleetClient):
    with pytest.raises(NotFound):
        await client.task("nope")


# -- cancel and retry -------------------------------------------------------------------


async def test_cancelling_a_running_task_fences_its_agent_releases_its_leases_and_blocks_dependents(
    client: FleetClient,
):
    await client.create_tasks(
        [
            {"id": "A", "title": "a", "description": "do it"},
            {"id": "B", "title": "b", "description": "do it", "depends_on": ["A"]},
        ]
    )
    agent_id, epoch = await register(client, "runner-1")
    await take_and_start(client, (agent_id, epoch), "A")
    await client.acquire(agent_id, epoch, "A", ["a.py"], "Write")

    answer = await client.cancel("A")

    assert answer == {"status": "cancelled"}
    a = await client.task("A")
    assert (a["status"], a["error_kind"]) == ("cancelled", "cancelled")
    assert (await client.task("B"))["status"] == "blocked_upstream"
    assert await client.leases() == []
    released = await client.events(type_="lease_released")
    assert [e["payload"]["reason"] for e in released] == ["cancelled"]
    with pytest.raises(StaleEpoch):
        await client.heartbeat(agent_id, epoch)
    with pytest.raises(StaleEpoch):
        await client.complete("A", agent_id, epoch, AttemptReport(attempt=1, ok=True))


async def test_cancelling_a_finished_task_is_a_409_invalid_state(client: FleetClient):
    await client.create_tasks([{"id": "A", "title": "a", "description": "do it"}])
    await client.cancel("A")

    with pytest.raises(InvalidState):
        await client.cancel("A")


async def test_retrying_a_cancelled_task_brings_it_and_its_dependents_back(client: FleetClient):
    await client.create_tasks(
        [
            {"id": "A", "title": "a", "description": "do it"},
            {"id": "B", "title": "b", "description": "do it", "depends_on": ["A"]},
        ]
    )
    await client.cancel("A")

    answer = await client.retry("A")

    assert answer == {"status": "pending"}
    assert statuses(await client.tasks()) == {"A": "pending", "B": "pending"}
    a = await client.task("A")
    assert (a["attempts"], a["error"], a["error_kind"], a["runnable"]) == (0, None, None, True)


async def test_retrying_a_task_that_did_not_fail_is_a_409_invalid_state(client: FleetClient):
    await client.create_tasks([{"id": "A", "title": "a", "description": "do it"}])

    with pytest.raises(InvalidState):
        await client.retry("A")


# -- agents, leases, conflicts ----------------------------------------------------------------


async def test_an_agent_that_stopped_beating_is_shown_stale_until_the_engine_marks_it_offline(
    make_server: Callable[..., ServerThread], wait_until: WaitUntil
):
    # No timer tick within the test: only writes kick the engine, and reads do not.
    server = make_server(stale_after=0.2, tick_interval=60)
    async with FleetClient(server.url, transport=httpx.AsyncHTTPTransport(verify=False)) as client:
        agent_id, _ = await register(client, "runner-1")
        [fresh] = await client.agents()
        assert (fresh["status"], fresh["stale"]) == ("idle", False)

        async def stale() -> bool:
            return bool((await client.agents())[0]["stale"])

        await wait_until(stale)
        await client.create_tasks([{"id": "T1", "title": "kick a tick", "description": "do it"}])

        await wait_until(lambda: server.app.state.engine.agents.by_id[agent_id].status == "offline")
        [gone] = await client.agents()
        assert (gone["status"], gone["stale"]) == ("offline", False)
        assert [e["agent_id"] for e in await client.events(type_="agent_offline")] == [agent_id]


async def test_conflicts_project_lease_denials_and_resolve_once_the_denied_task_succeeds(
    client: FleetClient,
):
    await client.create_tasks(
        [{"id": "T1", "title": "holder", "description": "do it", "file_scope": ["a.py"]}]
    )
    holder = await register(client, "runner-1")
    await take_and_start(client, holder, "T1")
    await client.acquire(*holder, "T1", ["a.py"], "Write")
    await client.create_tasks([{"id": "T2", "title": "rival", "description": "do it"}])
    rival = await register(client, "runner-2")
    await take_and_start(client, rival, "T2")
    await client.acquire(*rival, "T2", ["a.py"], "Edit")

    [conflict] = await client.conflicts()
    assert {
        k: conflict[k]
        for k in (
            "path",
            "task_id",
            "agent_name",
            "holder_task_id",
            "holder_agent_name",
            "resolved",
        )
    } == {
        "path": "a.py",
        "task_id": "T2",
        "agent_name": "runner-2",
        "holder_task_id": "T1",
        "holder_agent_name": "runner-1",
        "resolved": False,
    }
    assert await client.conflicts(resolved=True) == []

    await client.complete(
        "T2",
        *rival,
        AttemptReport(attempt=1, ok=False, error_kind=ErrorKind.VETO, blocked_on_path="a.py"),
    )
    await client.complete("T1", *holder, AttemptReport(attempt=1, ok=True))
    await take_and_start(client, rival, "T2")
    await client.complete("T2", *rival, AttemptReport(attempt=2, ok=True))

    [resolved] = await client.conflicts()
    assert resolved["resolved"] is True
    assert resolved["event_id"] == conflict["event_id"]
    assert await client.conflicts(resolved=False) == []


# -- state, health, reset ---------------------------------------------------------------


async def test_state_shows_tasks_agents_leases_counters_and_the_last_event_id(
    client: FleetClient,
):
    await client.create_tasks(
        [
            {"id": "A", "title": "a", "description": "do it"},
            {"id": "B", "title": "b", "description": "do it"},
        ]
    )
    agent = await register(client, "runner-1")
    await take_and_start(client, agent, "A")
    await client.acquire(*agent, "A", ["a.py"], "Write")
    await client.complete(
        "A",
        *agent,
        AttemptReport(attempt=1, ok=True, input_tokens=7, output_tokens=3, cost_usd=0.5),
    )

    state = await client.state()

    assert set(state) >= {"tasks", "agents", "leases", "counters", "last_event_id"}
    assert statuses(state["tasks"]) == {"A": "succeeded", "B": "assigned"}
    assert [a["name"] for a in state["agents"]] == ["runner-1"]
    assert state["leases"] == []
    assert state["counters"] == {
        "tasks": {"succeeded": 1, "assigned": 1},
        "input_tokens": 7,
        "output_tokens": 3,
        "cost_usd": 0.5,
    }
    assert state["last_event_id"] == (await client.events())[-1]["id"]


async def test_health_answers_ok_with_the_resolved_working_tree(
    client: FleetClient, server: ServerThread
):
    health = await client.health()

    assert health["status"] == "ok"
    assert health["workdir"] == str(server.settings.workdir.resolve())
    assert health["last_event_id"] == 0


async def test_reset_is_forbidden_unless_the_server_allows_it(client: FleetClient):
    await client.create_tasks([{"id": "A", "title": "a", "description": "do it"}])

    with pytest.raises(Forbidden):
        await client.reset()

    assert [t["id"] for t in await client.tasks()] == ["A"]


async def test_an_allowed_reset_empties_the_fleet_and_keeps_event_ids_increasing(
    make_server: Callable[..., ServerThread],
):
    server = make_server(allow_reset=True)
    async with FleetClient(server.url, transport=httpx.AsyncHTTPTransport(verify=False)) as client:
        await client.create_tasks([{"id": "A", "title": "a", "description": "do it"}])
        await register(client, "runner-1")
        last = (await client.state())["last_event_id"]

        await client.reset()

        state = await client.state()
        assert (state["tasks"], state["agents"], state["leases"]) == ([], [], [])
        await client.create_tasks([{"id": "A", "title": "a again", "description": "do it"}])
        [created] = await client.events(type_="task_created")
        assert created["id"] > last


# -- recording commits ----------------------------------------------------------------


async def test_recording_a_commit_needs_a_succeeded_task_and_a_full_commit_id(
    client: FleetClient, http: httpx.AsyncClient
) -> None:
    await client.create_tasks([{"id": "T1", "title": "a", "description": "d"}])
    sha = "ab" * 20

    with pytest.raises(InvalidState):
        await client.record_commits("codefleet/x", [("T1", sha)])
    with pytest.raises(NotFound):
        await client.record_commits("codefleet/x", [("ghost", sha)])
    short = await http.post(
        "/commits", json={"branch": "b", "commits": [{"task_id": "T1", "commit": "abc"}]}
    )

    assert short.status_code == 422
    assert await client.events(type_="task_committed") == []
