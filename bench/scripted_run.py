"""One scripted graph on an in-process server: the shared body of `hubfile`, `hubland`, `waiting`.

`play` starts a `ServerThread` on the given settings, loads the graph, drains it on
`runners` in-process runners with the scripted executor (`fleet.local.run_fleet`:
the real gate, server and store), and returns the makespan with the tasks and the
event log as the server ends them. The server is stopped whatever happens.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codefleet.api.client import FleetClient
from codefleet.config import Settings
from codefleet.fleet.local import FleetOptions, run_fleet
from codefleet.fleet.runner import RunnerOptions
from codefleet.fleet.scripted import ScriptedExecutor, parse_script
from codefleet.server.thread import ServerThread

__all__ = ["Played", "play"]


@dataclass(frozen=True, slots=True)
class Played:
    makespan_s: float  # from the graph loaded to the fleet drained
    tasks: list[dict[str, Any]]
    events: list[dict[str, Any]]


async def play(
    settings: Settings,
    graph: list[dict[str, Any]],
    script: dict[str, Any],
    runners: int,
    checks: dict[str, str] | None = None,
    integration: str | None = None,
) -> Played:
    """Drain `graph` under `script` on `runners` runners over `settings.workdir`, with `checks`
    and an `integration` check every task's landing must pass (the runners' landing worker)."""
    server = ServerThread(settings).start()
    try:
        async with FleetClient(server.url) as client:
            await client.create_tasks(graph, checks=checks)
            if integration is not None:
                await client.set_integration(integration)
        started = time.monotonic()
        parsed = parse_script(script)
        runner = RunnerOptions("runner", Path(settings.workdir), Path(settings.run_dir))
        await run_fleet(
            server.url,
            lambda _n: ScriptedExecutor(parsed),
            FleetOptions(runner, runners=runners, simulated=True),
        )
        makespan = time.monotonic() - started
        async with FleetClient(server.url) as client:
            return Played(makespan, await client.tasks(), await client.all_events())
    finally:
        server.stop()
