"""Coordination tests: the real runner and scripted executor against a real server.

Only the agent's brain is scripted; the runner, the pre-write gate, the HTTP
client, the server, the engine and SQLite are the real ones. Nothing sleeps to
synchronize: tests wait on the drained fleet or on a condition.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from fleet_support import drain as drain_fleet
from fleet_support import events_of

from codefleet.api.client import FleetClient
from codefleet.api.graphfile import GraphTasks
from codefleet.fleet.local import FleetResult, wait_drained
from codefleet.fleet.runner import Runner, RunnerOptions
from codefleet.fleet.scripted import ScriptedExecutor, parse_script
from codefleet.fleet.tools.commandtool import host_shell
from codefleet.fleet.views.layerapply import ShellLimits
from codefleet.models import EventType
from codefleet.server.thread import ServerThread
from codefleet.testing.invariants_landing import check_landing
from codefleet.testing.invariants_reuse import check_reuse

FAST = {"heartbeat_interval": 0.1, "stale_after": 1.0, "tick_interval": 0.05, "backoff_base": 0.0}


async def drain(
    server: ServerThread, workdir: Path, script: dict[str, Any], runners: int = 3
) -> FleetResult:
    """Three runners by default, each with this host's command layer (None: no commands)."""
    shell = host_shell(ShellLimits(), unsandboxed=True)
    return (await drain_fleet(server, workdir, script, runners=runners, shell_config=shell)).result


async def test_a_single_runner_takes_tasks_best_priority_first(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    server = make_server(**FAST)
    async with FleetClient(server.url) as client:
        await client.create_tasks(
            [
                {"id": "low", "title": "l", "description": "do it", "priority": 1},
                {"id": "high", "title": "h", "description": "do it", "priority": 5},
                {"id": "mid", "title": "m", "description": "do it", "priority": 3},
            ]
        )
        result = await drain(server, workdir, {}, runners=1)
        assigned = [e["task_id"] for e in await events_of(client, "task_assigned")]
    assert result.all_succeeded
    assert assigned == ["high", "mid", "low"]


async def test_a_dependent_runs_only_after_its_dependency_succeeded(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    server = make_server(**FAST)
    script = {
        "A": [{"write": {"path": "made.txt", "content": "by A\n"}}],
        "B": [{"append": {"path": "made.txt", "text": "by B\n"}}],
    }
    async with FleetClient(server.url) as client:
        await client.create_tasks(
            [
                {"id": "B", "title": "b", "description": "do it", "depends_on": ["A"]},
                {"id": "A", "title": "a", "description": "do it"},
            ]
        )
        result = await drain(server, workdir, script)
        order = [(e["type"], e["task_id"]) for e in await client.all_events()]
    assert result.all_succeeded
    assert order.index(("task_succeeded", "A")) < order.index(("task_unblocked", "B"))
    assert order.index(("task_unblocked", "B")) < order.index(("task_assigned", "B"))
    assert (workdir / "made.txt").read_text() == "by A\nby B\n"


async def test_a_vetoed_task_gets_the_path_in_scope_and_runs_after_the_holder(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    server = make_server(**FAST)
    script = {
        "holder": [{"edit": {"path": "a.py", "old": "A = 1", "new": "A = 10"}},
                   {"wait_denied": "a.py", "attempt": 1}],
        "late": [{"wait_leased": "a.py", "attempt": 1},
                 {"append": {"path": "a.py", "text": "LATE = True\n"}},
                 {"write": {"path": "late.py", "content": "X = 1\n"}}],
    }  # fmt: skip
    async with FleetClient(server.url) as client:
        await client.create_tasks(
            [
                {"id": "holder", "title": "h", "description": "do it", "file_scope": ["a.py"]},
                {"id": "late", "title": "l", "description": "do it", "file_scope": ["late.py"]},
            ]
        )
        result = await drain(server, workdir, script)
        late = await client.task("late")
        events = await client.all_events()
    assert result.all_succeeded
    denied = [e for e in events if e["type"] == "lease_denied"]
    assert [
        (e["task_id"], e["payload"]["path"], e["payload"]["holder_task_id"]) for e in denied
    ] == [("late", "a.py", "holder")]
    assert late["attempts"] == 2 and "a.py" in late["file_scope"]
    ids = [(e["type"], e["task_id"]) for e in events]
    retry_at = [i for i, x in enumerate(ids) if x == ("task_assigned", "late")][1]
    assert ids.index(("task_succeeded", "holder")) < retry_at
    assert (workdir / "a.py").read_text() == "A = 10\nLATE = True\n"


async def test_eight_runners_appending_to_one_file_lose_no_line(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    server = make_server(**FAST, max_attempts=20)
    script = {
        f"w{n}": [{"append": {"path": "shared.txt", "text": f"line {n}\n"}}] for n in range(8)
    }
    async with FleetClient(server.url) as client:
        await client.create_tasks(
            [{"id": f"w{n}", "title": f"writer {n}", "description": "do it"} for n in range(8)]
        )
        result = await drain(server, workdir, script, runners=8)
        acquired = await events_of(client, "lease_acquired")
    assert result.all_succeeded
    lines = (workdir / "shared.txt").read_text().splitlines()
    assert sorted(lines) == sorted(f"line {n}" for n in range(8))
    assert len(acquired) == 8  # one grant per writer, never two at once (the PK)


async def test_attempt_exhaustion_fails_the_task_and_blocks_its_dependents(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    server = make_server(**FAST)
    async with FleetClient(server.url) as client:
        await client.create_tasks(
            [
                {"id": "bad", "title": "b", "description": "do it", "max_attempts": 2},
                {"id": "child", "title": "c", "description": "do it", "depends_on": ["bad"]},
                {"id": "grandchild", "title": "g", "description": "do it", "depends_on": ["child"]},
            ]
        )
        result = await drain(server, workdir, {"bad": [{"fail": "scripted failure"}]})
        rows = {t["id"]: t for t in result.tasks}
    assert not result.ok
    assert rows["bad"]["status"] == "failed" and rows["bad"]["attempts"] == 2
    assert rows["bad"]["error_kind"] == "attempts_exhausted"
    assert rows["child"]["status"] == rows["grandchild"]["status"] == "blocked_upstream"


async def test_cancelling_a_running_task_stops_its_runner_and_blocks_dependents(
    wait_until: Any, make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    server = make_server(**FAST)
    script = {"slow": [{"write": {"path": "half.txt", "content": "x"}}, {"sleep": 60}]}
    async with FleetClient(server.url) as client:
        await client.create_tasks(
            [
                {"id": "slow", "title": "s", "description": "do it"},
                {"id": "after", "title": "a", "description": "do it", "depends_on": ["slow"]},
            ]
        )
        fleet = asyncio.create_task(drain(server, workdir, script, runners=1))
        await wait_until(lambda: client.leases())
        await client.cancel("slow")
        result = await asyncio.wait_for(fleet, 10)
        rows = {t["id"]: t for t in result.tasks}
        agent = (await client.agents())[0]
        leases = await client.leases()
    assert rows["slow"]["status"] == "cancelled"
    assert not (workdir / "half.txt").exists()  # the cancelled attempt's write was rolled back
    assert rows["after"]["status"] == "blocked_upstream"
    assert agent["epoch"] >= 2  # fenced by the cancel, then registered again
    assert leases == []


async def test_a_zombie_runner_is_fenced_and_its_late_write_never_lands(
    wait_until: Any, make_server: Callable[..., ServerThread], workdir: Path, tmp_path: Path
) -> None:
    server = make_server(**FAST)
    zombie_script = parse_script(
        {
            "job": [
                {"edit": {"path": "a.py", "old": "A = 1", "new": "A = 666"}},
                {"sleep": 1.5},
                {"write": {"path": "zombie.txt", "content": "late"}},
            ]
        }
    )
    async with FleetClient(server.url) as client:
        await client.create_tasks([{"id": "job", "title": "j", "description": "do it"}])
        zombie = Runner(
            FleetClient(server.url),
            ScriptedExecutor(zombie_script),
            RunnerOptions("zombie", workdir, tmp_path / "runs"),
        )
        zombie.heartbeat_s = 3600.0  # its heartbeat never comes: the server will think it died
        stop = asyncio.Event()
        zombie_task = asyncio.create_task(_register_and_run(zombie, stop))
        await wait_until(lambda: _status(client, "job", "running"))
        # Taken back as stale: wait for the event, a permanent fact (the task's `pending` is
        # momentary: the re-registered zombie may take the job again before a poll sees it).
        await wait_until(lambda: _stale_event(client))
        result = await drain(
            server,
            workdir,
            {"job": [{"write": {"path": "healthy.txt", "content": "ok"}}]},
            runners=1,
        )
        stop.set()
        await asyncio.wait_for(zombie_task, 10)
        succeeded = await events_of(client, "task_succeeded")
    assert result.all_succeeded
    assert [e["task_id"] for e in succeeded] == ["job"]
    assert (workdir / "healthy.txt").exists()
    assert not (workdir / "zombie.txt").exists()  # the fenced runner's write was refused
    assert (workdir / "a.py").read_text() == "A = 1\n"  # its early edit was rolled back


async def _register_and_run(runner: Runner, stop: asyncio.Event) -> None:
    beat = runner.heartbeat_s
    await runner.register()
    runner.heartbeat_s = beat
    runner.register = _keep_beat(runner, runner.register)  # type: ignore[method-assign]
    await runner._work_loop(stop)


def _keep_beat(runner: Runner, register: Any) -> Any:
    async def again() -> None:
        await register()
        runner.heartbeat_s = 3600.0

    return again


async def _stale_event(client: FleetClient) -> bool:
    offline = await events_of(client, "agent_offline")
    return any(e["payload"].get("reason") == "agent_stale" for e in offline)


async def _status(client: FleetClient, task_id: str, status: str) -> bool:
    return (await client.task(task_id))["status"] == status


async def test_a_killed_runner_process_has_its_task_requeued_to_another_runner(
    wait_until: Any, make_server: Callable[..., ServerThread], workdir: Path, tmp_path: Path
) -> None:
    server = make_server(**FAST)
    script_file = tmp_path / "script.yaml"
    script_file.write_text(
        yaml.safe_dump(
            {"job": [{"sleep": 30, "attempt": 1}, {"write": {"path": "done.txt", "content": "ok"}}]}
        )
    )
    async with FleetClient(server.url) as client:
        await client.create_tasks([{"id": "job", "title": "j", "description": "do it"}])
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "codefleet.cli",
                "runner",
                "--name",
                "doomed",
                "--dry-run",
                "--script",
                str(script_file),
                "--server",
                server.url,
                "--workdir",
                str(workdir),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "CODEFLEET_RUN_DIR": str(tmp_path / "runs")},
        )
        try:
            await wait_until(lambda: _status(client, "job", "running"), timeout=20)
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        result = await drain(
            server, workdir, {"job": [{"write": {"path": "done.txt", "content": "ok"}}]}, runners=1
        )
        requeued = await events_of(client, "task_requeued")
        offline = await events_of(client, "agent_offline")
    assert result.all_succeeded
    assert [e["payload"]["reason"] for e in requeued] == ["agent_stale"]
    assert offline[0]["payload"]["reason"] == "agent_stale"
    assert (workdir / "done.txt").read_text() == "ok"


def test_run_exits_by_the_verify_command(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    codes = {}
    script = workdir.parent / "script.yaml"
    script.write_text("t:\n- write: {path: t.txt, content: done}\n")
    for verify in ("true", "exit 3"):
        server = make_server(**FAST)
        asyncio.run(_load(server.url, [{"id": "t", "title": "t", "description": "do it"}]))
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "codefleet.cli",
                "run",
                "--dry-run",
                "--script",
                str(script),
                "--runners",
                "2",
                "--verify",
                verify,
                "--server",
                server.url,
                "--workdir",
                str(workdir),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        codes[verify] = done.returncode
        server.stop()  # one server per tree: the next one starts once this one is gone
    assert codes == {"true": 0, "exit 3": 1}


async def _load(url: str, tasks: list[dict[str, Any]]) -> None:
    async with FleetClient(url) as client:
        await client.create_tasks(tasks)


async def test_every_event_type_is_emitted_by_a_scripted_fleet(
    wait_until: Any, make_server: Callable[..., ServerThread], workdir: Path, tmp_path: Path
) -> None:
    """The demo's staged veto plus a failure, a cancel, a check, a usage limit, a runner
    that goes stale, an operator's note and an unanswered question. The veto comes after
    a short wait for the lease that timed out."""
    server = make_server(**FAST, max_attempts=1, question_timeout=0.5, lease_wait=0.3)
    script = {
        "asker": [{"ask": "which?"}],  # noted before it runs; no answer: question_answered
        "hold": [
            {"edit": {"path": "a.py", "old": "A = 1", "new": "A = 2"}},
            {"wait_denied": "a.py", "attempt": 1},
        ],
        "grab": [
            {"wait_leased": "a.py", "attempt": 1},
            {"append": {"path": "a.py", "text": "G = 1\n"}},
        ],
        "doomed": [
            {"write": {"path": "doomed.txt", "content": "half"}},
            {"write": {"path": "gone.txt", "content": "x"}},
            {"make_dir": "doomed.txt"},
            {"fail": "scripted failure"},
        ],  # doomed.txt cannot be restored
        "next": [
            {"check": "ok"},
            {"command": "echo made > made.txt"},
            {"next_number": "migrations"},
        ],
        "limited": [{"rate_limit": 0, "attempt": 1}, {"cost": 0.01}],  # paused, resumed
        "reader": [
            {"read": "r.txt"},
            {"write": {"path": "rr.txt", "content": "1"}},  # stale_read,
            {"wait_succeeded": "writer"},
            {"append": {"path": "rr.txt", "text": "2"}, "turn": 2},
        ],  # reconciled
        "writer": [{"wait_leased": "rr.txt"}, {"write": {"path": "r.txt", "content": "new"}}],
        "twice": [{"write": {"path": "t.txt", "content": "t"}}, {"check": "ok"}],  # check_reused
    }
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=x", "-c",
                 "user.email=x@example.invalid", "commit", "-qm", "start"]):  # fmt: skip
        subprocess.run(["git", "-C", str(workdir), *args], check=True, capture_output=True)
    async with FleetClient(server.url) as client:
        ghost = await client.register("ghost", str(workdir), None)
        await wait_until(lambda: _agent_status(client, "ghost", "offline"), timeout=5)
        back = await client.register("ghost", str(workdir), None)  # comes back: agent_online
        await client.leave(ghost["agent_id"], back["epoch"])
        tasks = [
            {"id": "hold", "title": "h", "description": "do it", "file_scope": ["a.py"]},
            {"id": "grab", "title": "g", "description": "do it", "max_attempts": 2},
            {
                "id": "next",
                "title": "n",
                "description": "do it",
                "depends_on": ["hold"],
                "shell": True,
            },
            {"id": "doomed", "title": "d", "description": "do it"},
            {"id": "orphan", "title": "o", "description": "do it", "depends_on": ["doomed"]},
            {"id": "dropped", "title": "x", "description": "do it", "depends_on": ["next"]},
            {"id": "limited", "title": "l", "description": "do it", "resources": ["db"]},
            {"id": "reader", "title": "r", "description": "do it"},
            {"id": "writer", "title": "w", "description": "do it"},
            {"id": "asker", "title": "a", "description": "do it"},
            {  # last, alone: nothing else writes the tree between its check and its verify
                "id": "twice",
                "title": "t",
                "description": "do it",
                "verify": "ok",
                "depends_on": ["hold", "grab", "next", "limited", "reader", "writer", "asker"],
            },
        ]
        sequences = {
            "migrations": {"start": 1}
        }  # sequence_defined; `next` takes one: number_allocated
        await client.create_tasks(GraphTasks(tasks, sequences=sequences), checks={"ok": "true"})
        edited = {**tasks[5], "title": "x, edited"}  # `dropped` waits on `next`: not started
        await client.load_tasks([edited], redefine=["dropped"])  # task_redefined
        await client.say("asker", "a note")  # operator_message, then _delivered in its prompt
        await client.cancel("dropped")
        await client.retry("dropped")
        await client.cancel("dropped")
        await drain(server, workdir, script)
        await _land_a_break_and_a_halt(client, server, workdir)
        await client.record_commits("codefleet/t", [("hold", "a" * 40)])  # what `commit` posts
        await client.set_budget(0.005)  # below what "limited" spent: fleet_budget_exhausted
        await wait_until(lambda: events_of(client, "fleet_budget_exhausted"), timeout=5)
        events = await client.all_events()
    assert {e["type"] for e in events} == {t.value for t in EventType}
    assert check_reuse(events) == [] and check_landing(events) == []  # each reuse is proved


async def _land_a_break_and_a_halt(
    client: FleetClient, server: ServerThread, workdir: Path
) -> None:
    """Landing's events: a task that breaks the integration check (`integration_failed`) with
    a task stacked on its change (`stack_unwound`), one that breaks it and repairs its change
    in its own session (`repair_started`, `repair_finished`), then a landed tree broken
    behind the lock's back (`landing_halted`), fixed and resumed. The check is slow enough
    for the stacker to take `shared.txt` over while the breaker waits to land."""
    await client.define_checks({"clean": "sleep 0.5 && ! grep -qs BROKEN bad.txt mend.txt"})
    await client.set_integration("clean")
    await client.create_tasks(
        [
            {"id": "breaker", "title": "b", "description": "do it"},
            {"id": "stacker", "title": "s", "description": "do it"},
            {"id": "mender", "title": "m", "description": "do it"},
        ]
    )
    script = {
        "mender": [
            {"write": {"path": "mend.txt", "content": "BROKEN"}},
            {"write": {"path": "mend.txt", "content": "mended"}, "turn": 2},  # its repair turn
        ],
        "breaker": [
            {"write": {"path": "bad.txt", "content": "BROKEN"}},
            {"write": {"path": "shared.txt", "content": "b"}},
        ],
        "stacker": [
            {"wait_landing": "breaker", "attempt": 1},
            {"write": {"path": "shared.txt", "content": "s"}},  # on top of the breaker's
            {"wait_succeeded": "breaker", "attempt": 1},  # undone first: stack_unwound
        ],
    }
    await drain(server, workdir, script)
    (workdir / "bad.txt").write_text("BROKEN by hand")  # the landed tree now fails `clean`
    await client.create_tasks(  # its verify is the integration check: left to it (check_deferred)
        [{"id": "innocent", "title": "i", "description": "do it", "verify": "clean"}]
    )
    await drain(server, workdir, {"innocent": [{"write": {"path": "i.txt", "content": "i"}}]})
    (workdir / "bad.txt").unlink()
    await client.landing_resume()
    await drain(server, workdir, {})
    await client.set_integration(None)


async def _agent_status(client: FleetClient, name: str, status: str) -> bool:
    return any(a["name"] == name and a["status"] == status for a in await client.agents())


async def test_wait_drained_returns_at_once_when_nothing_is_live(server: ServerThread) -> None:
    async with FleetClient(server.url) as client:
        await asyncio.wait_for(wait_drained(client), 5)


class CountingClient(FleetClient):
    """The real client, counting the assignment polls it makes."""

    polls = 0

    async def assignment(self, agent_id: str, epoch: int, wait: float = 0) -> Any:
        self.polls += 1
        return await super().assignment(agent_id, epoch, wait)


async def test_a_runner_takes_the_next_task_from_its_reports_answer_without_polling(
    make_server: Callable[..., ServerThread], workdir: Path
) -> None:
    server = make_server(**FAST)
    chain = [
        {
            "id": f"C{n}",
            "title": f"c{n}",
            "description": "do it",
            "depends_on": [f"C{n - 1}"] if n else [],
        }
        for n in range(4)
    ]
    executor = ScriptedExecutor(parse_script({}), wait_timeout=10)
    async with CountingClient(server.url) as client:
        await client.create_tasks(chain)
        options = RunnerOptions(
            "runner-1", workdir, workdir.parent / "runs", exit_when_drained=True
        )
        runner = Runner(client, executor, options)
        await asyncio.wait_for(runner.run(), timeout=30)
        succeeded = [e["task_id"] for e in await events_of(client, "task_succeeded")]
    assert succeeded == ["C0", "C1", "C2", "C3"]
    assert client.polls == 2  # C0's, and the one that finds the fleet drained
