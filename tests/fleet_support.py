"""What fleet tests share: drain a scripted fleet, register a runner, read events of one type.

`drain` runs the real runners (`run_fleet`) against a real server with the one scripted
brain (`ScriptedExecutor`) until the graph drains, and hands back both the fleet's result
and the executor (what each attempt was handed, its check and command results). A test
file that drains with its own options binds them once (`functools.partial`), so the
difference is one line in that file. `register` joins one runner over the wire client;
`events_of` reads every event of one type. `shell_here` is the host's command layer;
`server_settings` the settings of a server a module-scoped fixture starts itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import httpx

from codefleet.api.client import FleetClient
from codefleet.config import Settings
from codefleet.fleet.local import FleetOptions, FleetResult, run_fleet
from codefleet.fleet.runner import RunnerOptions
from codefleet.fleet.scripted import ScriptedExecutor, parse_script
from codefleet.fleet.tools.commandtool import ShellConfig, host_shell
from codefleet.fleet.views.layerapply import ShellLimits
from codefleet.server.thread import ServerThread


class Drained(NamedTuple):
    """A drained fleet: what `run_fleet` returned, and the executor every runner drove."""

    result: FleetResult
    executor: ScriptedExecutor


def scripted(script: Any, wait_timeout: float = 10.0) -> ScriptedExecutor:
    """The scripted brain for `script`: raw (task -> list of step dicts) or already parsed."""
    raw = script is None or any(isinstance(s, dict) for steps in script.values() for s in steps)
    return ScriptedExecutor(parse_script(script) if raw else script, wait_timeout=wait_timeout)


async def drain(
    server: ServerThread,
    tree: Path,
    script: Any,
    *,
    runners: int = 2,
    wait_timeout: float = 10.0,
    landing_worker: bool = True,
    clones: Path | None = None,
    in_clones: int | None = None,
    token: str | None = None,
    **runner: Any,
) -> Drained:
    """Run `runners` runners in `tree` (or in clones under `clones`) until the graph drains;
    `runner`: more of every runner's options (`RunnerOptions`)."""
    executor = scripted(script, wait_timeout)
    options = FleetOptions(
        RunnerOptions("runner", tree, tree.parent / "runs", **runner),
        runners=runners,
        landing_worker=landing_worker,
        clones=clones,
        in_clones=in_clones,
    )
    return Drained(await run_fleet(server.url, lambda _: executor, options, token=token), executor)


@dataclass(frozen=True)
class Runner:
    """A registered runner; it unpacks as `(id, epoch)`, the two every runner call takes."""

    name: str
    id: str
    epoch: int

    def __iter__(self) -> Any:
        return iter((self.id, self.epoch))


async def register(client: FleetClient, name: str, pid: int | None = 1234) -> Runner:
    """Register runner `name` in the server's own tree, as process `pid`."""
    answer = await client.register(name, (await client.health())["workdir"], pid)
    return Runner(name, answer["agent_id"], answer["epoch"])


async def started_holder(client: FleetClient, workdir: Path) -> tuple[str, int]:
    """Task H (scope a.py) created, assigned to runner "holder" and started: its agent, epoch."""
    await client.create_tasks(
        [{"id": "H", "title": "holder", "description": "do it", "file_scope": ["a.py"]}]
    )
    holder = await client.register("holder", str(workdir), None)
    agent, epoch = holder["agent_id"], holder["epoch"]
    assert await client.assignment(agent, epoch, wait=5)
    await client.start("H", agent, epoch)
    return agent, epoch


async def events_of(fleet: FleetClient | str, type_: str) -> list[dict[str, Any]]:
    """Every event of type `type_`, oldest first; a URL opens a client for this one read."""
    if isinstance(fleet, str):
        async with FleetClient(fleet) as client:
            return await events_of(client, type_)
    return [e for e in await fleet.all_events() if e["type"] == type_]


def loopback_transport() -> httpx.AsyncHTTPTransport:
    """Plain HTTP on 127.0.0.1: skip loading the CA bundle (slow) for a TLS we never use."""
    return httpx.AsyncHTTPTransport(verify=False)


def shell_here(limits: ShellLimits | None = None) -> ShellConfig:
    """This host's command layer (unsandboxed), with `limits`; fails when it cannot build one."""
    config = host_shell(limits or ShellLimits(), unsandboxed=True)
    assert config is not None, "this host cannot build a command layer (user namespaces?)"
    return config


def server_settings(root: Path, tree: Path, **overrides: Any) -> Settings:
    """A server on `tree` with its database and runs under `root`, any free port, no `.env`
    read, and the defaults but for `overrides` (not the `make_server` fixture's speed-ups)."""
    fields = {"port": 0, "db": root / "db.sqlite", "workdir": tree, "run_dir": root / "runs"}
    return Settings(_env_file=None, **(fields | overrides))  # type: ignore[call-arg]
