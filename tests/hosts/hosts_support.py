"""The hosts tier's processes: real `codefleet` commands, each with its log."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from codefleet.api.client import FleetClient

CODEFLEET = str(Path(sys.executable).parent / "codefleet")


@dataclass
class Proc:
    """One started process and the file its output goes to."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def output(self, last: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-last:]

    def exited(self) -> bool:
        return self.popen.poll() is not None


@dataclass
class Procs:
    logs: Path
    started: list[Proc] = field(default_factory=list)

    def start(self, name: str, argv: Sequence[str], env: Mapping[str, str] | None = None) -> Proc:
        """Start `argv` with `env` as its whole environment (default: this one's, less
        CODEFLEET_*)."""
        if env is None:
            env = {k: v for k, v in os.environ.items() if not k.startswith("CODEFLEET_")}
        log = self.logs / f"{name}.log"
        with log.open("wb") as out:
            popen = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
        proc = Proc(name, popen, log)
        self.started.append(proc)
        return proc


def alive(proc: Proc) -> None:
    assert not proc.exited(), f"{proc.name} exited ({proc.popen.returncode}):\n{proc.output()}"


async def up(operator: FleetClient, server: Proc) -> bool:
    alive(server)
    try:
        await operator.health()
    except Exception:  # not listening yet: the bounded wait asks again
        return False
    return True
