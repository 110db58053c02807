"""The checks registry: the operator's named checks and the check events of attempts.

A check is a name and a shell command, defined by the operator (graph file
`checks:`, `--check NAME=CMD`, `POST /checks`) and stored server-side so every
runner sees one list. Agents only ever pass a name. This part owns the
`checks` table: redefining a name replaces its command, and each new or
changed definition is a `check_defined` event. Its writes run inside the
caller's (the engine's) transaction.

Runners run checks; the registry only records them (`check_started` carries
the command from the table, so the log says what ran, not what a runner
claimed). The engine checks the caller owns the attempt before it records.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from codefleet.coord.storage.store import Store
from codefleet.errors import InvalidGraph, NotFound
from codefleet.models import CHECK_NAME_PATTERN, MAX_CHECK_COMMAND, EventType

__all__ = ["CheckRegistry", "validated_checks"]

CHECK_NAME = re.compile(CHECK_NAME_PATTERN)


def validated_checks(checks: Mapping[str, str]) -> dict[str, str]:
    """The checks, or InvalidGraph naming the first bad name or command."""
    for name, command in checks.items():
        if not isinstance(name, str) or not CHECK_NAME.match(name):
            raise InvalidGraph(
                f"check name {name!r} must match {CHECK_NAME_PATTERN}",
                {"problem": "invalid_check", "check": str(name)},
            )
        if not isinstance(command, str) or not command.strip() or len(command) > MAX_CHECK_COMMAND:
            raise InvalidGraph(
                f"check {name}: the command must be 1-{MAX_CHECK_COMMAND} characters",
                {"problem": "invalid_check", "check": name},
            )
    return dict(checks)


class CheckRegistry:
    def __init__(self, store: Store) -> None:
        self.store = store

    def known(self) -> dict[str, str]:
        return {row["name"]: row["command"] for row in self.store.checks()}

    def command(self, name: str) -> str:
        """The stored command of `name`, or NotFound."""
        command = self.known().get(name)
        if command is None:
            raise NotFound(f"no check named {name!r}", {"check": name})
        return command

    def define(self, checks: Mapping[str, str], at: str) -> list[str]:
        """Upsert inside the caller's transaction; unchanged definitions emit nothing."""
        known = self.known()
        changed = []
        for name, command in sorted(validated_checks(checks).items()):
            if known.get(name) == command:
                continue
            self.store.upsert_check(name, command, at)
            self.store.emit(
                EventType.CHECK_DEFINED, name=name, command=command, replaced=name in known
            )
            changed.append(name)
        return changed

    def define_resources(self, resources: Mapping[str, list[str]]) -> None:
        """Each known check's resources (caller's transaction); an unknown name is skipped."""
        for name, names in sorted(resources.items()):
            self.store.set_check_resources(name, sorted(set(names)))

    def record(
        self, task_id: str, agent_id: str, attempt: int, command: str, report: Mapping[str, Any]
    ) -> int:
        """One `check_started` or `check_finished` event (caller's transaction); its id."""
        if report["phase"] == "started":
            event = self.store.emit(
                EventType.CHECK_STARTED,
                task_id=task_id,
                agent_id=agent_id,
                name=str(report["name"]),
                purpose=report["purpose"],
                attempt=attempt,
                command=command,
            )
        else:
            body = {
                k: v for k, v in report.items() if k not in ("agent_id", "phase") and v is not None
            }
            event = self.store.emit(
                EventType.CHECK_FINISHED, task_id=task_id, agent_id=agent_id, **body
            )
        return int(event["id"])
