"""Named resources, sequence numbers and ports over the wire, against a real server.

Tasks that name one resource never run at once: it is a lease row under its
own namespace, taken at assignment and released with the attempt.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from fleet_support import Runner, register

from codefleet.api.client import FleetClient
from codefleet.api.graphfile import GraphTasks, parse_graph
from codefleet.attempt import AttemptReport
from codefleet.errors import StaleEpoch
from codefleet.fleet.gate.prewrite import WriteGate
from codefleet.fleet.tools.attemptchecks import Checker, CheckLimits
from codefleet.fleet.tools.resourcecalls import ResourceTools
from codefleet.models import ErrorKind
from codefleet.paths import TreeRoot
from codefleet.resources import resource_key
from codefleet.review.collisionstats import fleet_stats
from codefleet.review.facts import run_facts
from codefleet.review.fetch import fetch_record
from codefleet.review.statsjson import stats_json
from codefleet.server.thread import ServerThread

POLL_S = 5.0
DB = resource_key("db")


def spec(task_id: str, *resources: str, **fields: Any) -> dict[str, Any]:
    return {
        "id": task_id,
        "title": task_id,
        "description": "do it",
        "resources": list(resources),
        **fields,
    }


async def holders(client: FleetClient) -> dict[str, str]:
    return {lease["path"]: lease["task_id"] for lease in await client.leases()}


async def statuses(client: FleetClient) -> dict[str, str]:
    return {t["id"]: t["status"] for t in await client.tasks()}


async def test_two_tasks_naming_one_resource_never_run_at_once_even_with_two_idle_agents(
    client: FleetClient, wait_until: Any
):
    agents = [await register(client, "runner-1"), await register(client, "runner-2")]
    await client.create_tasks([spec("T1", "db"), spec("T2", "db")])

    first = await wait_until(lambda: _first_assignment(client, agents))
    (agent_id, epoch), task = first
    other = next(a for a in agents if a.id != agent_id)

    assert task.resources == ("db",)
    assert await holders(client) == {DB: task.id}
    assert await client.assignment(*other) is None  # the tick that assigned one left it idle
    assert sorted((await statuses(client)).values()) == ["assigned", "pending"]

    await client.complete(task.id, agent_id, epoch, AttemptReport(attempt=1, ok=True))
    second = await client.assignment(*other, wait=POLL_S) or await client.assignment(
        agent_id, epoch, wait=POLL_S
    )

    assert second is not None and second.id != task.id
    assert await holders(client) == {DB: second.id}


async def _first_assignment(client: FleetClient, agents: list[Runner]) -> Any:
    for agent in agents:
        task = await client.assignment(*agent)
        if task is not None:
            return agent, task
    return None


async def test_a_file_named_like_a_resource_is_leased_beside_it_and_never_collides(
    client: FleetClient, wait_until: Any
):
    first = await register(client, "runner-1")
    await client.create_tasks([spec("T1", "db")])
    await wait_until(lambda: client.assignment(*first))
    second = await register(client, "runner-2")
    await client.create_tasks([spec("T2")])
    await wait_until(lambda: client.assignment(*second))

    answer = await client.acquire(second.id, second.epoch, "T2", ["resource:db"], "Write")
    spoof = await client.acquire(second.id, second.epoch, "T2", [DB], "Write")

    assert answer["decision"] == "allow"
    assert spoof["decision"] == "deny"  # a path can never name a resource's key
    assert await holders(client) == {DB: "T1", "resource:db": "T2"}


async def test_a_resource_name_with_a_slash_or_too_many_resources_is_a_clear_422(
    http: httpx.AsyncClient,
):
    slash = await http.post("/tasks", json={"tasks": [spec("T1", "db/x")]})
    many = await http.post(
        "/tasks", json={"tasks": [spec("T1", *(f"r{n}" for n in range(10_000)))]}
    )

    assert slash.status_code == 422
    assert "resources" in slash.text
    assert many.status_code == 422
    assert "at most 64" in many.text


async def test_the_resource_lease_is_released_when_the_attempt_is_taken_back(
    client: FleetClient, server: ServerThread, wait_until: Any
):
    agent = await register(client, "runner-1")
    await client.create_tasks([spec("T1", "db")])
    await wait_until(lambda: client.assignment(*agent))

    await client.cancel("T1")

    assert await holders(client) == {}


async def test_a_resource_another_task_holds_is_no_file_a_checks_view_could_not_put_back(
    client: FleetClient, wait_until: Any
):
    """A check's view puts back the files other tasks hold; a resource is none, so it is not
    listed as unrestorable (which would cost the view its content identity, and its reuse)."""
    agent = await register(client, "runner-1")
    await client.create_tasks([spec("T1", "db"), spec("T2")])
    await wait_until(lambda: client.assignment(*agent))
    assert await holders(client) == {DB: "T1"}

    view = await client.foreign_preimages("T2")

    assert view["files"] == [] and view["unrestorable"] == []


# -- a resource taken mid-task -----------------------------------------------------------------


async def test_a_resource_taken_mid_task_that_another_task_holds_is_a_veto_that_widens_resources(
    client: FleetClient, wait_until: Any
):
    first = await register(client, "runner-1")
    await client.create_tasks([spec("T1", "db")])
    await wait_until(lambda: client.assignment(*first))
    second = await register(client, "runner-2")
    await client.create_tasks([spec("T2")])
    await wait_until(lambda: client.assignment(*second))

    answer = await client.acquire_resource(second.id, second.epoch, "T2", "db")
    await client.complete(
        "T2",
        second.id,
        second.epoch,
        AttemptReport(attempt=1, ok=False, error_kind=ErrorKind.VETO, blocked_on_path=DB),
    )

    assert answer["decision"] == "deny"
    assert answer["denied"][0]["holder_task_id"] == "T1"
    assert (await client.task("T2"))["resources"] == ["db"]
    assert await client.assignment(*second) is None  # T1 still holds db: T2 waits
    await client.complete("T1", first.id, first.epoch, AttemptReport(attempt=1, ok=True))
    again = await client.assignment(*second, wait=POLL_S) or await client.assignment(
        *first, wait=POLL_S
    )
    assert again is not None and again.id == "T2" and again.resources == ("db",)
    assert await holders(client) == {DB: "T2"}


async def test_stats_read_over_the_wire_count_a_veto_on_a_resource_per_resource_not_as_a_file(
    client: FleetClient, wait_until: Any
):
    first = await register(client, "runner-1")
    await client.create_tasks([spec("T1", "db")])
    await wait_until(lambda: client.assignment(*first))
    second = await register(client, "runner-2")
    await client.create_tasks([spec("T2")])
    await wait_until(lambda: client.assignment(*second))
    assert (await client.acquire_resource(second.id, second.epoch, "T2", "db"))[
        "decision"
    ] == "deny"
    await client.complete(
        "T2",
        second.id,
        second.epoch,
        AttemptReport(attempt=1, ok=False, error_kind=ErrorKind.VETO, blocked_on_path=DB),
    )

    found = stats_json(fleet_stats(run_facts(await fetch_record(client, with_ledgers=False))))

    assert [(r["name"], r["vetoes"], r["tasks"]) for r in found["resources"]] == [
        ("db", 1, ["T1", "T2"])
    ]
    assert found["files"] == []


async def test_taking_a_resource_you_hold_again_is_allowed_and_writes_nothing(
    client: FleetClient, wait_until: Any
):
    agent = await register(client, "runner-1")
    await client.create_tasks([spec("T1", "db")])
    await wait_until(lambda: client.assignment(*agent))
    before = len(await client.all_events())

    answer = await client.acquire_resource(agent.id, agent.epoch, "T1", "db")

    assert answer["decision"] == "allow"
    assert len(await client.all_events()) == before


# -- sequences -------------------------------------------------------------------------------


async def load_with_sequences(
    http: httpx.AsyncClient, sequences: dict[str, Any], *tasks: dict[str, Any]
) -> httpx.Response:
    return await http.post("/tasks", json={"tasks": list(tasks), "sequences": sequences})


async def test_fifty_concurrent_numbers_from_five_agents_are_fifty_distinct_values_and_a_restart_continues_above_them(
    make_server: Any, wait_until: Any, tmp_path: Any
):
    db = tmp_path / "seq.sqlite"
    server = make_server(db=db)
    async with FleetClient(server.url) as client:
        agents = [await register(client, f"runner-{n}") for n in range(5)]
        created = await client.create_tasks(
            GraphTasks([spec(f"T{n}") for n in range(5)], sequences={"migrations": {"start": 1}})
        )
        owned = await wait_until(lambda: _all_assigned(client, agents))
        calls = [
            client.next_number(agent_id, epoch, task_id, "migrations")
            for (agent_id, epoch), task_id in owned
            for _ in range(10)
        ]
        values = [answer["value"] for answer in await asyncio.gather(*calls)]
        events = await client.all_events()
    server.stop()

    assert sorted(values) == list(range(1, 51))
    allocated = [e for e in events if e["type"] == "number_allocated"]
    assert sorted(e["payload"]["value"] for e in allocated) == sorted(values)
    assert {e["task_id"] for e in allocated} == set(created)
    restarted = make_server(db=db)
    async with FleetClient(restarted.url) as client:
        agent = await register(client, "runner-0")
        task = await wait_until(lambda: client.assignment(*agent))  # one taken back at register
        after = await client.next_number(agent.id, agent.epoch, task.id, "migrations")
    assert after["value"] > max(values)


async def _all_assigned(
    client: FleetClient, agents: list[Runner]
) -> list[tuple[Runner, str]] | None:
    owned = []
    for agent in agents:
        task = await client.assignment(*agent)
        if task is None:
            return None
        owned.append((agent, task.id))
    return owned


async def test_an_unknown_sequence_is_refused_with_the_known_ones(
    client: FleetClient, http: httpx.AsyncClient, wait_until: Any
):
    agent = await register(client, "runner-1")
    loaded = await load_with_sequences(http, {"migrations": {"start": 7}}, spec("T1"))
    await wait_until(lambda: client.assignment(*agent))

    answer = await client.next_number(agent.id, agent.epoch, "T1", "migration")
    first = await client.next_number(agent.id, agent.epoch, "T1", "migrations")

    assert loaded.status_code == 201
    assert answer["value"] is None and answer["known"] == ["migrations"]
    assert "migrations" in answer["refused"]
    assert first["value"] == 7


async def test_a_sequence_starts_after_the_highest_number_its_glob_finds_in_the_tree(
    client: FleetClient, http: httpx.AsyncClient, workdir: Any, wait_until: Any
):
    (workdir / "migrations").mkdir()
    for name in ("0001_init.py", "0002_users.py", "README.md", "0009_old.txt"):
        (workdir / "migrations" / name).write_text("")
    agent = await register(client, "runner-1")
    await load_with_sequences(
        http, {"migrations": {"start_after": "migrations/[0-9]*_*.py"}}, spec("T1")
    )
    await wait_until(lambda: client.assignment(*agent))

    answer = await client.next_number(agent.id, agent.epoch, "T1", "migrations")

    assert answer["value"] == 3


async def test_a_sequence_glob_outside_the_tree_is_a_clear_422(http: httpx.AsyncClient):
    escape = await load_with_sequences(http, {"m": {"start_after": "../*.py"}}, spec("T1"))
    absolute = await load_with_sequences(http, {"m": {"start_after": "/etc/*"}}, spec("T1"))
    both = await load_with_sequences(http, {"m": {"start": 1, "start_after": "a*"}}, spec("T1"))

    assert [r.status_code for r in (escape, absolute, both)] == [422, 422, 422]
    assert "inside the tree" in escape.text and "inside the tree" in absolute.text
    assert (await http.get("/tasks")).json()["tasks"] == []


LARGEST = 2**63 - 1  # SQLite's largest INTEGER


@pytest.mark.parametrize("name", [f"{LARGEST}_x.py", "12345678901234567890_x.py"])
async def test_a_file_numbered_past_what_a_sequence_can_hand_out_is_a_clear_422_naming_it(
    http: httpx.AsyncClient, workdir: Any, name: str
):
    (workdir / "migrations").mkdir()
    (workdir / "migrations" / name).write_text("")

    loaded = await load_with_sequences(http, {"m": {"start_after": "migrations/*.py"}}, spec("T1"))

    assert loaded.status_code == 422
    assert f"migrations/{name}" in loaded.text
    assert (await http.get("/tasks")).json()["tasks"] == []


async def test_a_sequence_hands_out_sqlites_largest_integer_once_then_refuses_as_exhausted(
    client: FleetClient, http: httpx.AsyncClient, workdir: Any, wait_until: Any
):
    (workdir / f"{LARGEST - 2}_x.py").write_text("")
    agent = await register(client, "runner-1")
    await load_with_sequences(http, {"m": {"start_after": "*_x.py"}}, spec("T1"))
    await wait_until(lambda: client.assignment(*agent))

    answers = [await client.next_number(agent.id, agent.epoch, "T1", "m") for _ in range(4)]

    assert [a["value"] for a in answers] == [LARGEST - 1, LARGEST, None, None]
    assert "exhausted" in answers[2]["refused"] and str(LARGEST) in answers[2]["refused"]
    shown = (await http.get("/resources")).json()["sequences"]
    assert shown == [{"name": "m", "last_value": LARGEST, "next": None}]


async def test_next_number_from_a_fenced_runner_is_409_like_any_fenced_call(
    client: FleetClient, http: httpx.AsyncClient, wait_until: Any
):
    agent = await register(client, "runner-1")
    await load_with_sequences(http, {"migrations": {"start": 1}}, spec("T1"))
    await wait_until(lambda: client.assignment(*agent))
    await register(client, "runner-1")  # a new incarnation: the old epoch is fenced

    with pytest.raises(StaleEpoch):
        await client.next_number(agent.id, agent.epoch, "T1", "migrations")
    with pytest.raises(StaleEpoch):
        await client.acquire_resource(agent.id, agent.epoch, "T1", "db")


# -- ports, and the read of it all -------------------------------------------------------------


async def test_two_tasks_allocating_ports_get_distinct_free_ports_held_until_their_attempts_end(
    client: FleetClient, workdir: Any, wait_until: Any
):
    gates = []
    for n in (1, 2):
        agent = await register(client, f"runner-{n}")
        await client.create_tasks([spec(f"T{n}")])
        await wait_until(lambda agent=agent: client.assignment(*agent))
        gates.append(WriteGate(client, TreeRoot(workdir), agent.id, agent.epoch, f"T{n}"))

    ports = [await ResourceTools(gate).allocate_port() for gate in gates]

    assert all(p.ok for p in ports) and ports[0].value != ports[1].value
    for port in ports:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port.value))  # free on this host: nothing listens on it
    assert await holders(client) == {
        resource_key(f"port:{ports[0].value}"): "T1",
        resource_key(f"port:{ports[1].value}"): "T2",
    }
    await client.complete(
        "T1", gates[0].agent_id, gates[0].epoch, AttemptReport(attempt=1, ok=True)
    )
    assert await holders(client) == {resource_key(f"port:{ports[1].value}"): "T2"}


async def test_get_resources_shows_holders_their_waiters_and_each_sequences_last_value(
    client: FleetClient, http: httpx.AsyncClient, wait_until: Any
):
    agent = await register(client, "runner-1")
    await load_with_sequences(
        http, {"migrations": {"start": 5}}, spec("T1", "db"), spec("T2", "db")
    )
    task = await wait_until(lambda: client.assignment(*agent))
    await client.next_number(agent.id, agent.epoch, task.id, "migrations")

    answer = await client.resources()

    waiting = "T2" if task.id == "T1" else "T1"
    assert [
        (r["name"], r["task_id"], r["holder_agent_name"], r["waiters"]) for r in answer["resources"]
    ] == [("db", task.id, "runner-1", [waiting])]
    assert answer["sequences"] == [{"name": "migrations", "last_value": 5, "next": 6}]


# -- a person holds a resource (`codefleet hold db` / `codefleet release db`) --------------------

CODEFLEET = Path(sys.executable).parent / "codefleet"


def codefleet(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CODEFLEET), *argv], capture_output=True, text=True, timeout=60, check=False
    )


async def test_a_person_holding_a_resource_keeps_tasks_naming_it_waiting_until_released(
    client: FleetClient, server: ServerThread, wait_until: Any
):
    held = await asyncio.to_thread(codefleet, "hold", "db", "--user", "ada", "--server", server.url)
    agent = await register(client, "runner-1")
    await client.create_tasks([spec("T1", "db"), spec("T2")])
    other = await wait_until(lambda: client.assignment(*agent))
    await client.complete(other.id, agent.id, agent.epoch, AttemptReport(attempt=1, ok=True))
    waiting = await client.assignment(*agent)  # the tick after T2 left T1 waiting for db
    unheld = await asyncio.to_thread(codefleet, "release", "db", "--server", server.url)
    then = await client.assignment(*agent, wait=POLL_S)

    assert held.returncode == 0 and "ada@hold-ada holds db" in held.stdout
    assert other.id == "T2" and waiting is None
    assert unheld.returncode == 0 and "released db" in unheld.stdout
    assert then is not None and then.id == "T1"
    assert await holders(client) == {DB: "T1"}


async def test_holding_a_resource_a_task_holds_is_refused_naming_the_task_and_so_is_releasing_it(
    client: FleetClient, server: ServerThread, wait_until: Any
):
    agent = await register(client, "runner-1")
    await client.create_tasks([spec("T1", "db")])
    await wait_until(lambda: client.assignment(*agent))

    held = await asyncio.to_thread(codefleet, "hold", "db", "--user", "ada", "--server", server.url)
    unheld = await asyncio.to_thread(codefleet, "release", "db", "--server", server.url)

    assert held.returncode == 1 and "db is held by runner-1 for task T1" in held.stdout
    assert unheld.returncode == 1 and "not released: db (held by task T1)" in unheld.stdout
    assert await holders(client) == {DB: "T1"}


# -- checks that name resources ------------------------------------------------------------------


async def test_a_check_naming_a_held_resource_answers_busy_without_running_then_runs_once_free(
    client: FleetClient, http: httpx.AsyncClient, workdir: Any, wait_until: Any
):
    defined = await http.post(
        "/checks",
        json={"checks": {"migrate": {"run": "true", "resources": ["db"]}, "lint": "true"}},
    )
    first = await register(client, "runner-1")
    await client.create_tasks([spec("T1", "db")])
    await wait_until(lambda: client.assignment(*first))
    second = await register(client, "runner-2")
    await client.create_tasks([spec("T2")])
    await wait_until(lambda: client.assignment(*second))
    commands, resources = await client.check_specs()
    gate = WriteGate(client, TreeRoot(workdir), second.id, second.epoch, "T2")
    checker = Checker(gate, commands, 1, CheckLimits(resource_wait=0.2), resources)

    busy = await checker.run("migrate")
    started_while_busy = await client.events(type_="check_started")
    await client.complete("T1", first.id, first.epoch, AttemptReport(attempt=1, ok=True))
    ran = await checker.run("migrate")

    assert defined.status_code == 200 and resources == {"migrate": ["db"]}
    assert busy.refused == "busy: db is held by T1" and not busy.infra
    assert started_while_busy == []  # it did not run
    assert ran.passed
    assert await holders(client) == {DB: "T2"}  # taken for the rest of the attempt, like a file


def test_a_check_may_name_resources_in_the_graph_and_the_plain_form_stays_valid():
    loaded = parse_graph(
        {
            "tasks": [{"id": "T1", "title": "t", "description": "d", "verify": "migrate"}],
            "checks": {
                "migrate": {"run": "alembic upgrade head", "resources": ["db"]},
                "lint": "ruff .",
            },
        }
    )

    assert loaded.checks == {"migrate": "alembic upgrade head", "lint": "ruff ."}
    assert loaded.check_resources == {"migrate": ["db"]}


# -- the two-migrations scenario, end to end through `codefleet run` ---------------------------

SCENARIO_GRAPH = """\
sequences:
  migrations: {start_after: "migrations/[0-9]*_*.py"}
tasks:
  - {id: users-email, title: Add users.email, description: Write the next migration., resources: [db]}
  - {id: tags, title: Add the tags table, description: Write the next migration., resources: [db]}
"""
SCENARIO_SCRIPT = """\
users-email:
  - next_number: {sequence: migrations, write: "migrations/{number:04d}_users_email.py", content: "# {number}"}
tags:
  - next_number: {sequence: migrations, write: "migrations/{number:04d}_tags.py", content: "# {number}"}
"""


def test_two_tasks_adding_migrations_through_codefleet_run_get_distinct_numbers(
    server: ServerThread, workdir: Path, tmp_path: Path
):
    (workdir / "migrations").mkdir()
    (workdir / "migrations" / "0001_init.py").write_text("# 1")
    (workdir / "migrations" / "0002_users.py").write_text("# 2")
    graph, script = tmp_path / "graph.yaml", tmp_path / "script.yaml"
    graph.write_text(SCENARIO_GRAPH)
    script.write_text(SCENARIO_SCRIPT)

    done = codefleet(
        "run",
        "--runners",
        "2",
        "--dry-run",
        "--script",
        str(script),
        "--graph",
        str(graph),
        "--server",
        server.url,
        "--workdir",
        str(workdir),
    )

    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    made = sorted(p.name for p in (workdir / "migrations").iterdir())
    assert made[:2] == ["0001_init.py", "0002_users.py"] and len(made) == 4
    assert sorted(name[:4] for name in made[2:]) == ["0003", "0004"]  # one each, never both 0003
