"""`codefleet watch` against a real server: what it shows, and how it survives a restart.

Each test runs `watch` as a task with a recording console and a stop event,
drives the server through `FleetClient` as runners would (register, take,
start, lease, report), waits on the painted view model (never on a sleep),
then stops the dashboard and reads the final frame it printed.
"""

from __future__ import annotations

import asyncio
import io
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from fleet_support import Runner
from fleet_support import register as register_runner
from rich.console import Console

from codefleet.api.client import FleetClient
from codefleet.attempt import AttemptReport
from codefleet.models import ErrorKind
from codefleet.server.thread import ServerThread
from codefleet.ui.dashboard import follow_compact, watch
from codefleet.ui.viewmodel import ViewModel

WaitUntil = Callable[..., Awaitable[Any]]
POLL_S = 5.0
register = partial(register_runner, pid=None)  # runners with no process id


@dataclass
class Dashboard:
    """A running `watch`: its console, and every view model it painted."""

    console: Console
    views: list[ViewModel] = field(default_factory=list)

    @property
    def view(self) -> ViewModel | None:
        return self.views[-1] if self.views else None

    def text(self) -> str:
        return self.console.export_text()


@asynccontextmanager
async def watching(url: str) -> AsyncIterator[Dashboard]:
    """Run `watch` on a recording console until the block ends, then let it print its frame."""
    dash = Dashboard(Console(record=True, width=160, height=60, file=io.StringIO()))
    stop = asyncio.Event()
    task = asyncio.create_task(
        watch(url, None, dash.console, stop=stop, refresh_per_second=50, on_view=dash.views.append)
    )
    try:
        yield dash
    finally:
        stop.set()
        await task


async def take_and_start(client: FleetClient, runner: Runner, task_id: str) -> None:
    task = await client.assignment(runner.id, runner.epoch, wait=POLL_S)
    assert task is not None and task.id == task_id, f"{runner.name} got {task}"
    await client.start(task_id, runner.id, runner.epoch)


async def acquire(client: FleetClient, runner: Runner, task_id: str, path: str) -> str:
    answer = await client.acquire(runner.id, runner.epoch, task_id, [path], "Edit")
    return str(answer["decision"])


@dataclass
class CaughtUp:
    """True once a painted view is live and has seen `last_event_id`; says where it is if not."""

    dash: Dashboard
    last_event_id: int

    def __call__(self) -> bool:
        view = self.dash.view
        return (
            view is not None
            and view.last_event_id >= self.last_event_id
            and view.connection == "live"
        )

    def __repr__(self) -> str:
        view = self.dash.view
        where = view and (view.connection, view.last_event_id)
        return f"dashboard at {where}, waiting for event #{self.last_event_id} while live"


async def test_the_dashboard_shows_statuses_the_veto_with_its_holder_the_leases_and_a_summary(
    server: ServerThread, client: FleetClient, wait_until: WaitUntil
) -> None:
    async with watching(server.url) as dash:
        await client.create_tasks(
            [
                {"id": "T1", "title": "edit a", "description": "do it", "file_scope": ["a.py"]},
                {"id": "T2", "title": "edit b", "description": "do it", "file_scope": ["pkg/b.py"]},
            ]
        )
        one, two = await register(client, "runner-1"), await register(client, "runner-2")
        await take_and_start(client, one, "T1")
        await take_and_start(client, two, "T2")
        assert await acquire(client, one, "T1", "a.py") == "allow"
        await wait_until(
            lambda: dash.view and [lease.path for lease in dash.view.leases] == ["a.py"]
        )

        assert await acquire(client, two, "T2", "a.py") == "deny"
        veto = AttemptReport(
            attempt=1,
            ok=False,
            error="blocked on a.py",
            error_kind=ErrorKind.VETO,
            blocked_on_path="a.py",
        )
        await client.complete("T2", two.id, two.epoch, veto)
        await client.complete(
            "T1", one.id, one.epoch, AttemptReport(attempt=1, ok=True, summary="A = 2")
        )
        await take_and_start(client, two, "T2")  # runner-2 idled first, so it gets T2 again
        assert await acquire(client, two, "T2", "a.py") == "allow"

        last = (await client.state())["last_event_id"]
        await wait_until(CaughtUp(dash, last))
        await wait_until(
            lambda: dash.view and [t.status for t in dash.view.tasks] == ["succeeded", "running"]
        )
        await wait_until(
            lambda: dash.view and dash.view.leases and dash.view.leases[0].task_id == "T2"
        )

    text = dash.text()
    assert re.search(r"T1\s+edit a\s+succeeded\s+1/3\s+0\.0000\s+landed #1 · A = 2", text)
    assert re.search(
        r"T2\s+edit b\s+running\s+2/3\s+0\.0000\s+last attempt: blocked on a\.py", text
    )
    assert "T2 · runner-2: VETO a.py: held by runner-1 (T1)" in text
    assert re.search(r"T2: requeued \(veto\): .* · scope \+ a\.py", text)
    assert re.search(r"T1 · runner-1: ✓ ", text)
    assert re.search(r"runner-1\s+idle\s+-\s+\d+s\s+1/0", text), "agent table"
    assert re.search(r"runner-2\s+busy\s+T2\s+\d+s\s+0/1", text), "agent table"
    assert re.search(r"a\.py\s+runner-2\s+T2\s+\d+s", text), "lease table"
    assert (
        f"● live │ running 1 · succeeded 1 │ $0.0000 · 0/0 tok · vetoes 1 · event #{last}" in text
    )


async def test_the_dashboard_reconnects_after_a_restart_and_logs_every_event_once(
    make_server: Callable[..., ServerThread], tmp_path: Any, wait_until: WaitUntil
) -> None:
    first = make_server(db=tmp_path / "shared.sqlite")
    async with watching(first.url) as dash:
        async with FleetClient(first.url) as client:
            await client.create_tasks(
                [{"id": "T1", "title": "before the restart", "description": "do it"}]
            )
            await register(client, "runner-1")
            await wait_until(CaughtUp(dash, (await client.state())["last_event_id"]))
            record = (await client.health())["database_id"]

        await asyncio.to_thread(crash, first)
        await wait_until(lambda: dash.view and dash.view.connection.startswith("reconnecting"))

        second = make_server(db=tmp_path / "shared.sqlite", port=first.settings.port)
        async with FleetClient(second.url) as client:
            assert (await client.health())["database_id"] == record, "one record, restarted"
            await client.create_tasks(
                [{"id": "T2", "title": "after the restart", "description": "do it"}]
            )
            await register(client, "runner-2")
            every = [e["id"] for e in await client.all_events()]
            await wait_until(CaughtUp(dash, every[-1]))
            await wait_until(lambda: dash.view and len(dash.view.tasks) == 2)

    assert dash.view is not None
    logged = [line.event_id for line in dash.view.log]
    assert logged == every, "each event logged exactly once, in order, across the restart"
    assert any(v.connection.startswith("reconnecting") for v in dash.views)
    text = dash.text()
    assert "T2: created: after the restart" in text
    assert text.count("T1: created: before the restart") == 1


async def test_the_dashboard_follows_a_fresh_database_behind_the_same_address(
    make_server: Callable[..., ServerThread], tmp_path: Any, wait_until: WaitUntil
) -> None:
    first = make_server(db=tmp_path / "old.sqlite")
    async with watching(first.url) as dash:
        async with FleetClient(first.url) as client:
            await client.create_tasks([{"id": "T1", "title": "the old run", "description": "x"}])
            one = await register(client, "runner-1")
            await take_and_start(client, one, "T1")
            await client.complete("T1", one.id, one.epoch, AttemptReport(attempt=1, ok=True))
            await wait_until(CaughtUp(dash, (await client.state())["last_event_id"]))
            await wait_until(lambda: dash.view and dash.view.landing is not None)

        await asyncio.to_thread(crash, first)  # `codefleet runs new`, then a fresh `serve`
        second = make_server(db=tmp_path / "new.sqlite", port=first.settings.port)
        async with FleetClient(second.url) as client:
            await client.create_tasks([{"id": "T2", "title": "the new run", "description": "x"}])
            every = [e["id"] for e in await client.all_events()]
            await wait_until(
                lambda: (
                    dash.view
                    and dash.view.connection == "live"
                    and [t.id for t in dash.view.tasks] == ["T2"]
                    and [line.event_id for line in dash.view.log] == every
                )
            )

    view = dash.views[-1]
    assert view.last_event_id == every[-1], "the event number is the new record's"
    assert view.landing is None, "the old record's landing panel is gone"
    assert not any("T1" in line.text for line in view.log)


async def test_the_compact_printer_prints_notable_events_and_catches_up_before_it_returns(
    server: ServerThread, client: FleetClient
) -> None:
    console = Console(record=True, width=160, file=io.StringIO())
    stop = asyncio.Event()
    printer = asyncio.create_task(follow_compact(server.url, None, console, stop))
    await client.create_tasks([{"id": "T1", "title": "edit a", "description": "do it"}])
    one = await register(client, "runner-1")
    await take_and_start(client, one, "T1")
    await client.complete("T1", one.id, one.epoch, AttemptReport(attempt=1, ok=True))
    stop.set()  # at once: the printer must still catch up to the last event

    cursor = await printer
    text = console.export_text()
    assert cursor == (await client.state())["last_event_id"]
    assert "T1: attempt 1 → runner-1" in text
    assert "T1 · runner-1: ✓ succeeded" in text
    assert "created" not in text, "only notable events"


def crash(server: ServerThread) -> None:
    """Take `server` down with a dashboard attached (stop() ends the open streams first)."""
    server.stop()
