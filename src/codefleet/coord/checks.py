"""The engine's check duties: the operator's named checks, check events, foreign pre-images.

A check is a name and a shell command, defined by the operator (graph file
`checks:`, `--check NAME=CMD`, `POST /checks`) and stored server-side so every
runner sees one list. Agents only ever pass a name. Redefining a name replaces
its command; each new or changed definition is a `check_defined` event.

Runners run checks; the engine only records them (`check_started` carries the
command from the table, so the log says what ran, not what a runner claimed)
and answers the read a runner needs to build the isolated view: the pre-image
of every path leased by ANOTHER in-flight task. Without rollback nothing is
captured, so those paths are listed as `unrestorable` and the view is not
isolated from them.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from codefleet.errors import InvalidGraph, NotFound, NotOwner
from codefleet.models import CHECK_NAME_PATTERN, EventType, to_iso

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from codefleet.coord.agents import AgentState
    from codefleet.coord.index import LiveTask
    from codefleet.coord.store import Store
    from codefleet.models import TaskStatus

__all__ = ["ChecksMixin", "validated_checks"]

CHECK_NAME = re.compile(CHECK_NAME_PATTERN)
MAX_COMMAND = 4096


def validated_checks(checks: Mapping[str, str]) -> dict[str, str]:
    """The checks, or InvalidGraph naming the first bad name or command."""
    for name, command in checks.items():
        if not isinstance(name, str) or not CHECK_NAME.match(name):
            raise InvalidGraph(
                f"check name {name!r} must match {CHECK_NAME_PATTERN}",
                {"problem": "invalid_check", "check": str(name)},
            )
        if not isinstance(command, str) or not command.strip() or len(command) > MAX_COMMAND:
            raise InvalidGraph(
                f"check {name}: the command must be 1-{MAX_COMMAND} characters",
                {"problem": "invalid_check", "check": name},
            )
    return dict(checks)


class ChecksMixin:
    store: Store
    clock: Callable[[], datetime]
    leases: dict[str, tuple[str, str]]

    if TYPE_CHECKING:

        def transition(self) -> AbstractContextManager[None]: ...
        def check_epoch(self, agent_id: str, epoch: int) -> AgentState: ...
        def touch(self, agent: AgentState) -> None: ...
        def _owned(self, task_id: str, agent_id: str) -> LiveTask: ...
        def require_task(self, task_id: str) -> TaskStatus: ...

    def known_checks(self) -> dict[str, str]:
        return {row["name"]: row["command"] for row in self.store.checks()}

    def define_checks(self, checks: Mapping[str, str]) -> dict[str, Any]:
        """Define or redefine named checks; returns the names whose command changed."""
        valid = validated_checks(checks)
        with self.transition():
            changed = self._store_checks(valid, to_iso(self.clock()))
        return {"defined": sorted(valid), "changed": changed}

    def _store_checks(self, checks: Mapping[str, str], at: str) -> list[str]:
        """Upsert inside the caller's transaction; unchanged definitions emit nothing."""
        known = self.known_checks()
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

    def record_check(
        self, task_id: str, agent_id: str, epoch: int, report: Mapping[str, Any]
    ) -> dict[str, Any]:
        """One `check_started` or `check_finished` event for the owner's current attempt."""
        agent = self.check_epoch(agent_id, epoch)
        self.touch(agent)
        task = self._owned(task_id, agent_id)
        if report["attempt"] != task.attempts:
            raise NotOwner(
                f"attempt {report['attempt']} of {task_id} is over",
                {"task_id": task_id, "attempt": task.attempts},
            )
        name = str(report["name"])
        command = self.known_checks().get(name)
        if command is None:
            raise NotFound(f"no check named {name!r}", {"check": name})
        body = {k: v for k, v in report.items() if k not in ("agent_id", "phase") and v is not None}
        with self.transition():
            if report["phase"] == "started":
                event = self.store.emit(
                    EventType.CHECK_STARTED, task_id=task_id, agent_id=agent_id,
                    name=name, purpose=report["purpose"], attempt=task.attempts, command=command,
                )  # fmt: skip
            else:
                event = self.store.emit(
                    EventType.CHECK_FINISHED, task_id=task_id, agent_id=agent_id, **body
                )
        return {"event_id": event["id"]}

    def foreign_preimages(self, task_id: str) -> dict[str, Any]:
        """Pre-images of every path leased by another task: what the isolated view restores."""
        self.require_task(task_id)
        found = self.store.foreign_preimages(task_id)
        covered = {image.path for _, image in found}
        unrestorable = sorted(
            path for path, (_, holder) in self.leases.items()
            if holder != task_id and path not in covered
        )  # fmt: skip
        files = [
            {
                "path": image.path, "holder_task_id": holder, "existed": image.existed,
                "mode": image.mode, "created_dirs": list(image.created_dirs),
                "content_b64": base64.b64encode(image.content).decode("ascii"),
            }
            for holder, image in found
        ]  # fmt: skip
        return {"task_id": task_id, "files": files, "unrestorable": unrestorable}
