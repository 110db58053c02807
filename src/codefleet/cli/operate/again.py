"""The next `codefleet run` with the flags the last run used, for the hints after a failure.

`run` records its agents' flags in its `fleet_started` event (`RunFlags.payload`:
the mode and the script and graph files, as absolute paths); the verdict, `retry`,
`cancel` and `tasks ID` read the last one back (`last_run`) and name the command
that runs the fleet again, keyless when the run was (`--dry-run --script FILE`,
`--offline --model-script FILE`). A path inside the current directory is shown
relative to it. No run recorded: a bare `codefleet run`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from codefleet.api.client import FleetClient

__all__ = ["RunFlags", "last_run", "next_run"]

# The flag a mode plays its file with (`cli.run.agentchoice`).
SCRIPT_FLAG: Final = {"dry-run": "--script", "offline": "--model-script"}


@dataclass(frozen=True, slots=True)
class RunFlags:
    """The flags of one `codefleet run` that another one needs to do the same."""

    mode: str = "live"  # `Agents.mode`: live, dry-run or offline
    script: Path | None = None  # the --script or --model-script file
    graph: Path | None = None  # --graph, when given

    def payload(self) -> dict[str, Any]:
        """The `fleet_started` fields that record these flags."""
        said: dict[str, Any] = {"agents": self.mode}
        if self.script is not None:
            said["script"] = str(self.script.resolve())
        if self.graph is not None:
            said["graph"] = str(self.graph.resolve())
        return said

    @classmethod
    def of(cls, payload: Mapping[str, Any]) -> RunFlags:
        """The flags a `fleet_started` payload records (an older run's records none: live)."""
        script, graph = payload.get("script"), payload.get("graph")
        return cls(
            str(payload.get("agents") or "live"),
            Path(script) if script else None,
            Path(graph) if graph else None,
        )

    def command(self, cwd: Path | None = None) -> str:
        """`codefleet run` with these flags, its paths relative to `cwd` where inside it."""
        words = ["codefleet", "run"]
        if self.mode in SCRIPT_FLAG:
            words.append(f"--{self.mode}")
            if self.script is not None:
                words += [SCRIPT_FLAG[self.mode], _shown(self.script, cwd or Path.cwd())]
        if self.graph is not None:
            words += ["--graph", _shown(self.graph, cwd or Path.cwd())]
        return " ".join(words)


def _shown(path: Path, cwd: Path) -> str:
    try:
        shown = str(path.relative_to(Path(os.path.realpath(cwd))))
    except ValueError:
        shown = str(path)
    return shown if " " not in shown else f"'{shown}'"


async def last_run(client: FleetClient) -> RunFlags | None:
    """The flags of the last run the server recorded, or None before any run."""
    started = await client.events(type_="fleet_started")
    while len(started) == 10_000:  # the page is full: there may be more runs after it
        more = await client.events(since=int(started[-1]["id"]), type_="fleet_started")
        if not more:
            break
        started = more
    return RunFlags.of(started[-1].get("payload") or {}) if started else None


async def next_run(client: FleetClient) -> str:
    """The command that runs the fleet again as the last run did."""
    flags = await last_run(client)
    return (flags or RunFlags()).command()
