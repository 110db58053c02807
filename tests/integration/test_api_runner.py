"""The runner-facing wire API against a real server: register, poll, start, lease, report.

Every test talks HTTP to a `ServerThread` on loopback through the real
`FleetClient` (or raw httpx where the raw answer is the point).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from fleet_support import Runner, register

from codefleet.api.client import FleetClient, handed_task
from codefleet.attempt import AssignedTask, AttemptReport
from codefleet.errors import NotOwner, StaleEpoch
from codefleet.models import ErrorKind
from codefleet.server.thread import ServerThread

POLL_S = 5.0
WaitUntil = Callable[..., Awaitable[Any]]


async def take(client: FleetClient, runner: Runner) -> AssignedTask:
    task = await client.assignment(runner.id, runner.epoch, wait=POLL_S)
    assert task is not None, f"{runner.name} got no assignment"
    return task


async def running(client: FleetClient, name: str, task_id: str, *scope: str) -> Runner:
    """Register `name`, create `task_id` and have the runner take and start it."""
    runner = await register(client, name)
    await client.create_tasks(
        [{"id": task_id, "title": task_id, "description": "do it", "file_scope": list(scope)}]
    )
    task = await take(client, runner)
    assert task.id == task_id
    await client.start(task_id, runner.id, runner.epoch)
    return runner


def report(attempt: int, ok: bool = True, **fields: Any) -> AttemptReport:
    return AttemptReport(attempt=attempt, ok=ok, **fields)


async def lease_rows(client: FleetClient) -> list[tuple[str, str]]:
    return [(lease["path"], lease["task_id"]) for lease in await client.leases()]


# -- registration, heartbeat, assignment ----------------------------------------------


async def test_register_answers_the_agent_id_epoch_and_the_servers_intervals(
    client: FleetClient, server: ServerThread
):
    answer = await client.register("runner-1", (await client.health())["workdir"], 1234)

    assert re.fullmatch(r"a_[0-9a-f]{12}", answer["agent_id"])
    assert answer["epoch"] == 1
    assert answer["status"] == "idle"
    assert answer["heartbeat_interval_s"] == server.settings.heartbeat_interval
    assert answer["poll_interval_s"] == server.settings.poll_interval
    assert answer["task_timeout_s"] == server.settings.task_timeout
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", answer["server_time"])


async def test_registering_the_same_name_again_keeps_the_id_and_bumps_the_epoch(
    client: FleetClient,
):
    first = await register(client, "runner-1")
    second = await register(client, "runner-1")

    assert second.id == first.id
    assert second.epoch > first.epoch
    assert [a["name"] for a in await client.agents()] == ["runner-1"]


async def test_a_heartbeat_answers_the_status_and_the_epoch(client: FleetClient):
    runner = await register(client, "runner-1")

    assert await client.heartbeat(runner.id, runner.epoch) == {"status": "idle", "epoch": 1}


async def test_with_nothing_to_do_the_assignment_is_empty(client: FleetClient):
    runner = await register(client, "runner-1")

    assert await client.assignment(runner.id, runner.epoch, wait=0) is None


async def test_a_long_poll_answers_with_a_task_created_while_it_waits(
    client: FleetClient, server: ServerThread, wait_until: WaitUntil
):
    runner = await register(client, "runner-1")
    engine = server.app.state.engine
    # A poll that ignored the wake-up would run out its 30 s and be cut off below.
    poll = asyncio.create_task(client.assignment(runner.id, runner.epoch, wait=30))
    await wait_until(lambda: runner.id in engine.agents._waiters)
    assert not poll.done()

    await client.create_tasks([{"id": "T1", "title": "first", "description": "do it"}])
    task = await asyncio.wait_for(poll, timeout=10)

    assert task is not None
    assert task.id == "T1"


async def test_an_assignment_carries_what_the_runner_needs_to_run_the_task(
    client: FleetClient, http: httpx.AsyncClient
):
    runner = await register(client, "runner-1")
    await client.create_tasks(
        [
            {
                "id": "T1",
                "title": "rename",
                "description": "rename A to AA",
                "priority": 4,
                "file_scope": ["./a.py"],
            }
        ]
    )

    response = await http.get(
        f"/agents/{runner.id}/assignment",
        params={"wait": POLL_S},
        headers={"X-Agent-Epoch": str(runner.epoch)},
    )
    task = response.json()["task"]

    assert {k: task[k] for k in ("id", "title", "description", "priority", "file_scope")} == {
        "id": "T1",
        "title": "rename",
        "description": "rename A to AA",
        "priority": 4,
        "file_scope": ["a.py"],
    }
    assert task["attempts"] == 1
    assert task["blocked_on_path"] is None
    assert task["deadline"].endswith("Z")
    assert await take(client, runner) == AssignedTask.from_wire(task)  # parsed in one place


async def test_start_marks_the_task_running_and_only_its_owner_may_start_it(
    client: FleetClient, wait_until: WaitUntil
):
    runner = await register(client, "runner-1")
    other = await register(client, "runner-2")
    await client.create_tasks([{"id": "T1", "title": "t", "description": "do it"}])
    await wait_until(lambda: client.assignment(runner.id, runner.epoch))
    stranger_task = await client.assignment(other.id, other.epoch)
    assert stranger_task is None

    with pytest.raises(NotOwner):
        await client.start("T1", other.id, other.epoch)
    answer = await client.start("T1", runner.id, runner.epoch)

    assert answer == {"status": "running"}
    assert (await client.task("T1"))["status"] == "running"


# -- leases ---------------------------------------------------------------------------


async def test_a_free_path_is_granted_and_a_held_one_is_denied_naming_the_holder(
    client: FleetClient,
):
    holder = await running(client, "runner-1", "T1")
    rival = await running(client, "runner-2", "T2")

    allow = await client.acquire(holder.id, holder.epoch, "T1", ["a.py"], "Write")
    deny = await client.acquire(rival.id, rival.epoch, "T2", ["a.py"], "Edit")

    assert allow == {"decision": "allow", "granted": ["a.py"]}
    assert deny["decision"] == "deny"
    [denied] = deny["denied"]
    assert {
        k: denied[k]
        for k in ("path", "holder_agent_id", "holder_agent_name", "holder_task_id", "reason")
    } == {
        "path": "a.py",
        "holder_agent_id": holder.id,
        "holder_agent_name": "runner-1",
        "holder_task_id": "T1",
        "reason": "held",
    }
    assert "runner-1" in deny["message"]
    assert await lease_rows(client) == [("a.py", "T1")]


async def test_two_spellings_of_one_file_share_one_lease(client: FleetClient, server: ServerThread):
    holder = await running(client, "runner-1", "T1")
    rival = await running(client, "runner-2", "T2")
    absolute = str(server.settings.workdir / "pkg" / "b.py")

    first = await client.acquire(holder.id, holder.epoch, "T1", ["./pkg//b.py"], "Write")
    again = await client.acquire(holder.id, holder.epoch, "T1", ["x/../pkg/b.py", absolute], "Edit")
    rival_answer = await client.acquire(rival.id, rival.epoch, "T2", [absolute], "Write")

    assert first == {"decision": "allow", "granted": ["pkg/b.py"]}
    assert again == {"decision": "allow", "granted": ["pkg/b.py"]}
    assert rival_answer["decision"] == "deny"
    assert rival_answer["denied"][0]["path"] == "pkg/b.py"
    assert await lease_rows(client) == [("pkg/b.py", "T1")]


@pytest.mark.parametrize("raw", ["../outside.py", "pkg/../../outside.py", "/etc/passwd"])
async def test_a_path_outside_the_tree_is_denied_by_the_server(client: FleetClient, raw: str):
    runner = await running(client, "runner-1", "T1")

    answer = await client.acquire(runner.id, runner.epoch, "T1", [raw], "Write")

    assert answer["decision"] == "deny"
    assert [d["reason"] for d in answer["denied"]] == ["outside_workdir"]
    assert await lease_rows(client) == []


async def test_a_path_into_git_is_denied_as_protected(client: FleetClient):
    runner = await running(client, "runner-1", "T1")

    answer = await client.acquire(runner.id, runner.epoch, "T1", [".git/config"], "Write")

    assert [d["reason"] for d in answer["denied"]] == ["protected_path"]


async def test_a_request_for_several_paths_is_all_or_nothing(client: FleetClient):
    holder = await running(client, "runner-1", "T1")
    rival = await running(client, "runner-2", "T2")
    await client.acquire(holder.id, holder.epoch, "T1", ["pkg/b.py"], "Write")

    answer = await client.acquire(
        rival.id, rival.epoch, "T2", ["a.py", "pkg/b.py", "new.py"], "MultiEdit"
    )

    assert answer["decision"] == "deny"
    assert [d["path"] for d in answer["denied"]] == ["pkg/b.py"]
    assert await lease_rows(client) == [("pkg/b.py", "T1")]
    acquired = [e["payload"]["path"] for e in await client.events(type_="lease_acquired")]
    assert acquired == ["pkg/b.py"]


async def test_one_bad_path_in_a_request_denies_the_good_ones_too(client: FleetClient):
    runner = await running(client, "runner-1", "T1")

    answer = await client.acquire(runner.id, runner.epoch, "T1", ["a.py", "../x.py"], "Write")

    assert answer["decision"] == "deny"
    assert await lease_rows(client) == []


async def test_re_acquiring_your_own_lease_is_allowed_and_adds_nothing(client: FleetClient):
    runner = await running(client, "runner-1", "T1")
    await client.acquire(runner.id, runner.epoch, "T1", ["a.py"], "Write")

    answer = await client.acquire(runner.id, runner.epoch, "T1", ["a.py", "new.py"], "Edit")

    assert answer == {"decision": "allow", "granted": ["a.py", "new.py"]}
    assert await lease_rows(client) == [("a.py", "T1"), ("new.py", "T1")]
    acquired = [e["payload"]["path"] for e in await client.events(type_="lease_acquired")]
    assert acquired == ["a.py", "new.py"]


async def test_a_lease_request_for_a_task_that_is_not_yours_is_denied(client: FleetClient):
    await running(client, "runner-1", "T1")
    other = await register(client, "runner-2")

    answer = await client.acquire(other.id, other.epoch, "T1", ["a.py"], "Write")

    assert [d["reason"] for d in answer["denied"]] == ["not_owner"]
    assert await lease_rows(client) == []


async def test_sixteen_runners_racing_for_one_path_get_exactly_one_allow_and_one_lease_row(
    client: FleetClient,
):
    n = 16
    runners = [await register(client, f"runner-{i:02}") for i in range(n)]
    await client.create_tasks(
        [{"id": f"T{i:02}", "title": "race", "description": "do it"} for i in range(n)]
    )
    tasks = await asyncio.gather(*(take(client, r) for r in runners))
    assert len({t.id for t in tasks}) == n

    answers = await asyncio.gather(
        *(
            client.acquire(r.id, r.epoch, t.id, ["hot.py"], "Write")
            for r, t in zip(runners, tasks, strict=True)
        )
    )

    allowed = [i for i, a in enumerate(answers) if a["decision"] == "allow"]
    assert len(allowed) == 1
    winner = runners[allowed[0]]
    holder_names = {a["denied"][0]["holder_agent_name"] for a in answers if a["decision"] == "deny"}
    assert holder_names == {winner.name}
    leases = await client.leases()
    assert [(lease["path"], lease["agent_id"]) for lease in leases] == [("hot.py", winner.id)]
    assert len(await client.events(type_="lease_denied")) == n - 1


async def test_the_lease_table_names_the_holder_and_the_leases_age(client: FleetClient):
    runner = await running(client, "runner-1", "T1")
    await client.acquire(runner.id, runner.epoch, "T1", ["a.py"], "Write")

    [lease] = await client.leases()

    assert (lease["path"], lease["task_id"], lease["agent_id"]) == ("a.py", "T1", runner.id)
    assert lease["holder_agent_name"] == "runner-1"
    assert lease["age_s"] >= 0


# -- fencing --------------------------------------------------------------------------


async def test_a_call_with_a_stale_epoch_is_a_409_stale_epoch_envelope(
    client: FleetClient, http: httpx.AsyncClient
):
    old = await register(client, "runner-1")
    new = await register(client, "runner-1")

    response = await http.post(
        f"/agents/{old.id}/heartbeat", json={}, headers={"X-Agent-Epoch": str(old.epoch)}
    )

    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "stale_epoch"
    assert error["detail"] == {"agent_id": old.id, "epoch": new.epoch}
    assert error["message"]
    with pytest.raises(StaleEpoch):
        await client.assignment(old.id, old.epoch)
    with pytest.raises(StaleEpoch):
        await client.acquire(old.id, old.epoch, "T1", ["a.py"], "Write")


# -- completion reports -------------------------------------------------------------


async def test_a_duplicate_completion_report_is_answered_but_not_applied_twice(client: FleetClient):
    runner = await running(client, "runner-1", "T1")
    done = report(1, summary="done", input_tokens=10, output_tokens=5, cost_usd=0.25)

    first = await client.complete("T1", runner.id, runner.epoch, done)
    second = await client.complete("T1", runner.id, runner.epoch, done)

    assert (first["status"], first["duplicate"]) == ("succeeded", False)
    assert (second["status"], second["duplicate"]) == ("succeeded", True)
    task = await client.task("T1")
    assert (task["input_tokens"], task["cost_usd"]) == (10, 0.25)
    assert len(await client.events(type_="task_succeeded")) == 1
    [agent] = await client.agents()
    assert agent["tasks_succeeded"] == 1


async def test_a_report_from_an_agent_that_does_not_own_the_task_is_409_not_owner(
    client: FleetClient,
):
    await running(client, "runner-1", "T1")
    other = await register(client, "runner-2")

    with pytest.raises(NotOwner):
        await client.complete("T1", other.id, other.epoch, report(1))
    assert (await client.task("T1"))["status"] == "running"


async def test_a_report_for_an_attempt_the_task_has_moved_past_is_never_applied(
    client: FleetClient,
):
    old = await running(client, "runner-1", "T1", "a.py")
    await client.acquire(old.id, old.epoch, "T1", ["a.py"], "Write")
    new = await register(client, "runner-1")  # the old incarnation's attempt is taken back
    task = await take(client, new)
    assert (task.id, task.attempts) == ("T1", 2)

    with pytest.raises(StaleEpoch):
        await client.complete("T1", old.id, old.epoch, report(1))
    late = await client.complete("T1", new.id, new.epoch, report(1, summary="from attempt 1"))

    assert late["duplicate"] is True
    row = await client.task("T1")
    assert (row["status"], row["attempts"], row["result_summary"]) == ("assigned", 2, None)
    assert await client.events(type_="task_succeeded") == []


async def test_after_a_retry_the_next_attempts_report_is_applied_and_the_old_one_is_not(
    client: FleetClient,
):
    runner = await running(client, "runner-1", "T1")
    failed = await client.complete(
        "T1", runner.id, runner.epoch, report(1, ok=False, error_kind=ErrorKind.BUDGET)
    )
    assert failed["status"] == "failed"

    await client.retry("T1")
    task = await take(client, runner)
    assert (task.id, task.attempts) == ("T1", 2)  # numbered on: attempt 1 stays in the record
    await client.start("T1", runner.id, runner.epoch)
    again = await client.complete("T1", runner.id, runner.epoch, report(1, summary="old"))
    answer = await client.complete("T1", runner.id, runner.epoch, report(2, summary="second life"))

    assert again["duplicate"] is True
    assert (answer["status"], answer["duplicate"]) == ("succeeded", False)
    assert (await client.task("T1"))["result_summary"] == "second life"


async def test_a_failed_veto_report_requeues_with_the_path_folded_into_the_scope(
    client: FleetClient,
):
    runner = await running(client, "runner-1", "T1", "pkg/b.py")

    answer = await client.complete(
        "T1",
        runner.id,
        runner.epoch,
        report(1, ok=False, error_kind=ErrorKind.VETO, blocked_on_path="./a.py"),
    )

    assert (answer["status"], answer["backoff_until"], answer["duplicate"]) == (
        "pending",
        None,
        False,
    )
    task = await client.task("T1")
    assert task["file_scope"] == ["a.py", "pkg/b.py"]
    assert task["blocked_on_path"] == "a.py"


# -- leaving ----------------------------------------------------------------------------


async def test_leaving_requeues_the_task_releases_the_leases_and_goes_offline(client: FleetClient):
    runner = await running(client, "runner-1", "T1", "a.py")
    await client.acquire(runner.id, runner.epoch, "T1", ["a.py"], "Write")

    await client.leave(runner.id, runner.epoch)

    task = await client.task("T1")
    assert (task["status"], task["assigned_agent_id"], task["error_kind"]) == (
        "pending",
        None,
        "infra",
    )
    assert await client.leases() == []
    [agent] = await client.agents()
    assert agent["status"] == "offline"
    released = await client.events(type_="lease_released")
    assert [e["payload"]["reason"] for e in released] == ["agent_left"]
    with pytest.raises(StaleEpoch):
        await client.heartbeat(runner.id, runner.epoch)


# -- the next task in the report's answer ----------------------------------------------


async def test_a_report_answer_hands_over_the_runners_next_task_as_its_assignment_reads(
    client: FleetClient,
):
    runner = await running(client, "runner-1", "T1")
    await client.create_tasks([{"id": "T2", "title": "T2", "description": "then this"}])

    answer = await client.complete("T1", runner.id, runner.epoch, report(1))

    handed = handed_task(answer)
    assert handed is not None and handed.id == "T2"
    assert handed == await client.assignment(runner.id, runner.epoch)  # the same assignment


async def test_a_report_answer_with_nothing_ready_hands_over_nothing(client: FleetClient):
    runner = await running(client, "runner-1", "T1")
    await client.create_tasks(
        [{"id": "T2", "title": "T2", "description": "d", "depends_on": ["T1"]}]
    )
    ended = report(1, ok=False, error_kind=ErrorKind.CANCELLED, error="not this")

    failed = await client.complete("T1", runner.id, runner.epoch, ended)

    assert failed["status"] == "failed" and failed["next"] is None  # T2 is blocked with it
    assert handed_task(failed) is None
    assert await client.assignment(runner.id, runner.epoch) is None
