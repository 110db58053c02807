"""The checks registry: the operator's named checks and the check events of attempts.

A check is a name and a shell command, defined by the operator (graph file
`checks:`, `--check NAME=CMD`, `POST /checks`) and stored server-side so every
runner sees one list. Agents only ever pass a name. This part owns the
`checks` table: redefining a name replaces its command, and each new or
changed definition is a `check_defined` event (a changed one says what it
was, the file it came from, and the task whose write left that file as it is).
Its writes run inside the caller's (the engine's) transaction.

It also owns the files the checks come from (`sources`: the graph files a
load named, kept in `server_meta`): each is protected from agents in the
engine's tree (`TreeRoot.protect`) from the load on, across restarts
(docs/decisions/0151-the-checks-own-file-is-protected.md).

Runners run checks; the registry only records them (`check_started` carries
the command from the table, so the log says what ran, not what a runner
claimed; a `check_finished` and a `check_reused` carry the runner's command and
content identity, what a reuse must match). The engine checks the caller owns
the attempt before it records.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Mapping
from typing import Any, Final

from codefleet.coord.storage.store import Store
from codefleet.errors import InvalidGraph, NotFound
from codefleet.models import CHECK_NAME_PATTERN, MAX_CHECK_COMMAND, EventType
from codefleet.paths import TreeRoot
from codefleet.rollback import content_sha256

__all__ = ["CheckRegistry", "source_key", "validated_checks"]

CHECK_NAME = re.compile(CHECK_NAME_PATTERN)
SOURCES_KEY: Final = "check_sources"  # `server_meta`: the checks' files, a JSON list of keys


def source_key(raw: str) -> str:
    """A checks' file as a key relative to the tree, or InvalidGraph (absolute, `..`)."""
    key = posixpath.normpath(raw.strip())
    if not key or key.startswith("/") or key == "." or ".." in key.split("/"):
        raise InvalidGraph(
            f"the checks' file {raw!r} must be a relative path inside the tree",
            {"problem": "invalid_source", "source": raw},
        )
    return key


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


# A check event's phase, as the runner reports it, and the event it is (`finished`: its own).
PHASE_EVENTS: Final = {
    "started": EventType.CHECK_STARTED,
    "deferred": EventType.CHECK_DEFERRED,
    "reused": EventType.CHECK_REUSED,
    "repair_started": EventType.REPAIR_STARTED,
    "repair_finished": EventType.REPAIR_FINISHED,
}
# What a `check_reused` says of the run it stands for: the runner's command and content
# identity, that run's purpose and its `check_finished` (`testing.invariants_reuse`).
REUSE_FIELDS: Final = ("reused_from", "reused_event", "command", "identity")
# The fields a repair turn's events carry beyond a check event's (`fleet.repair`).
REPAIR_FIELDS: Final = (
    "cause",
    "turn",
    "outcome",
    "cost_usd",
    "spent_usd",
    "input_tokens",
    "output_tokens",
    "kept_event",  # a repair turn that changed nothing: the failed run that stands (0175)
    "identity",  # ... and the content identity it ran on
)


class CheckRegistry:
    def __init__(self, store: Store, tree: TreeRoot) -> None:
        self.store = store
        self.tree = tree
        for key in self.sources():  # protected again after a restart
            tree.protect(key)

    def sources(self) -> list[str]:
        """The files checks were loaded from, as keys in the tree (each protected)."""
        raw = self.store.meta(SOURCES_KEY)
        return [str(k) for k in json.loads(raw)] if raw else []

    def written_by(self, key: str) -> str | None:
        """The task whose recorded write left the file `key` as it is now, if one did
        (a person's write, or none recorded: None)."""
        now = content_sha256(self.tree.root / key)
        if now is None:
            return None
        rows = self.store.writes_since(key, "", "")
        return next((str(r["task_id"]) for r in reversed(rows) if r["sha256"] == now), None)

    def known(self) -> dict[str, str]:
        return {row["name"]: row["command"] for row in self.store.checks()}

    def command(self, name: str) -> str:
        """The stored command of `name`, or NotFound."""
        command = self.known().get(name)
        if command is None:
            raise NotFound(f"no check named {name!r}", {"check": name})
        return command

    def define(self, checks: Mapping[str, str], at: str, source: str | None = None) -> list[str]:
        """Upsert inside the caller's transaction; unchanged definitions emit nothing.

        `source` is the file (a key in the tree) the checks were read from: protected
        from now on, and named with its last task writer in a changed check's event."""
        known = self.known()
        if source is not None:
            self._protect(source)
        changed = []
        for name, command in sorted(validated_checks(checks).items()):
            if known.get(name) == command:
                continue
            self.store.upsert_check(name, command, at)
            self.store.emit(EventType.CHECK_DEFINED, **self._defined(name, command, known, source))
            changed.append(name)
        return changed

    def _defined(
        self, name: str, command: str, known: Mapping[str, str], source: str | None
    ) -> dict[str, Any]:
        """A `check_defined` event's payload: a replaced check's old command and file."""
        payload: dict[str, Any] = {"name": name, "command": command, "replaced": name in known}
        if name in known:
            payload["was"] = known[name]
            if source is not None:
                payload["source"] = source
                payload["written_by"] = self.written_by(source)
        return payload

    def _protect(self, source: str) -> None:
        """Protect the checks' file and remember it (caller's transaction)."""
        self.tree.protect(source)
        sources = self.sources()
        if source not in sources:
            self.store.set_meta(SOURCES_KEY, json.dumps([*sources, source]))

    def define_reuse(self, reuse: Mapping[str, bool]) -> None:
        """Whether each known check's passing result may be reused (caller's transaction)."""
        for name, may in sorted(reuse.items()):
            self.store.set_check_reuse(name, may)

    def define_resources(self, resources: Mapping[str, list[str]]) -> None:
        """Each known check's resources (caller's transaction); an unknown name is skipped."""
        for name, names in sorted(resources.items()):
            self.store.set_check_resources(name, sorted(set(names)))

    def record(
        self, task_id: str, agent_id: str, attempt: int, command: str, report: Mapping[str, Any]
    ) -> int:
        """One `check_started`, `check_finished`, `check_deferred` (a verify the landing check
        runs instead) or `check_reused` (it passed on this same content before: not run)
        event, in the caller's transaction; its id."""
        phase = report["phase"]
        if phase == "finished":
            body = {
                k: v for k, v in report.items() if k not in ("agent_id", "phase") and v is not None
            }
            event = self.store.emit(
                EventType.CHECK_FINISHED, task_id=task_id, agent_id=agent_id, **body
            )
            return int(event["id"])
        extra: dict[str, Any] = {}
        if phase == "started":
            extra["command"] = command
        elif phase == "reused":
            extra = {k: report[k] for k in REUSE_FIELDS if report.get(k) is not None}
        elif phase in ("repair_started", "repair_finished"):
            extra = {k: report[k] for k in REPAIR_FIELDS if report.get(k) is not None}
        event = self.store.emit(
            PHASE_EVENTS[phase],
            task_id=task_id,
            agent_id=agent_id,
            name=str(report["name"]),
            purpose=report["purpose"],
            attempt=attempt,
            **extra,
        )
        return int(event["id"])
