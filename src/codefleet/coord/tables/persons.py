"""Persons: a person's own Claude Code session inside the lock.

A session that ran `codefleet hook pre-tool-use` (installed by `codefleet
join`) becomes a person's session: an agent named after the person and the
session (`alice@0aeef531`) holding an open-ended task of its own (`i-0aeef531`);
the wire and the tables call its kind `interactive`. Its leases are rows of
`file_leases` under that task id, taken lazily at each write like a runner's,
so the one primary key keeps excluding everybody: a fleet write to a person's
file is vetoed and requeued with the path in its scope, and the scheduler counts
the person's paths as busy.

What a person's session never is: scheduled (it is not in the agent
registry the scheduler sees, and its task is not in the task graph), retried,
fenced (it has no epoch), or rolled back (no pre-images are taken: its edits
are the person's). Its leases go, all at once, at `SessionEnd`, by an
operator's `codefleet release`, or when the session has not written for
`interactive_idle` seconds; each is one `agent_offline` event with
`kind: interactive` and the reason, after a `lease_released` per path.

This part owns the sessions (`by_session`, `by_agent`); the lease table owns
the lease mirror, which this part changes only through its `grant` and
`drop`. It is handed the lease table, the name lookup of lease holders and
the engine's `kick` and `transition` (every write here is one), never the engine.
"""

from __future__ import annotations

import itertools
import logging
import re
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from codefleet.coord.policy.answers import Denial, HolderRef, LeaseAnswer
from codefleet.coord.policy.leaserule import Door, Verdict, decide
from codefleet.coord.storage.database import Row
from codefleet.coord.storage.store import Store
from codefleet.coord.tables.leases import HolderOf, LeaseTable, denial
from codefleet.errors import NotFound
from codefleet.models import (
    READ_RECORDED_TOOLS,
    DenyReason,
    EventType,
    ReleaseReason,
    from_iso,
    new_agent_id,
    to_iso,
)
from codefleet.paths import TreeRoot, lease_keys
from codefleet.resources import resource_key

__all__ = ["PERSON_KIND", "PersonSession", "Persons"]

log = logging.getLogger(__name__)

PERSON_KIND: Final = "interactive"  # the wire's `kind` of a person's session's agent, task, lease
TASK_PREFIX: Final = "i-"
# Paths the fleet can never lease: a person's write there cannot collide with an agent's
# (a hard-linked file is one no task may lease either).
NOT_LEASABLE: Final = frozenset(
    {DenyReason.OUTSIDE_WORKDIR, DenyReason.PROTECTED_PATH, DenyReason.HARD_LINK}
)
USER_CHARS: Final = re.compile(r"[^A-Za-z0-9._-]")
RANDOM_ID: Final = re.compile(r"[0-9a-fA-F-]+")  # a session id a prefix may stand for


@dataclass(slots=True)
class PersonSession:
    session_id: str
    agent_id: str
    name: str
    task_id: str
    title: str
    active: bool
    started_at: datetime
    last_write_at: datetime
    ended_at: datetime | None = None
    end_reason: str | None = None

    def row(self) -> Row:
        return {
            "session_id": self.session_id,
            "agent_id": self.agent_id,
            "name": self.name,
            "task_id": self.task_id,
            "title": self.title,
            "active": int(self.active),
            "started_at": to_iso(self.started_at),
            "last_write_at": to_iso(self.last_write_at),
            "ended_at": to_iso(self.ended_at) if self.ended_at else None,
            "end_reason": self.end_reason,
        }


class Persons:
    """The sessions of people in one engine; every method runs on the engine's thread."""

    def __init__(
        self,
        store: Store,
        tree: TreeRoot,
        clock: Callable[[], datetime],
        leases: LeaseTable,
        holder_of: HolderOf,
        kick: Callable[[], None],
        idle_after: float,
        transition: Callable[[], AbstractContextManager[None]],
    ) -> None:
        self.store = store
        self.transition = transition  # the engine's: a person's write is a transition too
        self.tree = tree
        self.clock = clock
        self.leases = leases
        self.holder_of = holder_of
        self.kick = kick
        self.idle_after = timedelta(seconds=idle_after)
        self.by_session: dict[str, PersonSession] = {}
        self.by_agent: dict[str, PersonSession] = {}

    def load(self) -> None:
        """Rebuild from SQLite (start-up, and after a rolled-back transaction)."""
        self.by_session = {}
        self.by_agent = {}
        for row in self.store.person_sessions():
            session = PersonSession(
                session_id=row["session_id"],
                agent_id=row["agent_id"],
                name=row["name"],
                task_id=row["task_id"],
                title=row["title"],
                active=bool(row["active"]),
                started_at=from_iso(row["started_at"]),
                last_write_at=from_iso(row["last_write_at"]),
                ended_at=from_iso(row["ended_at"]) if row["ended_at"] else None,
                end_reason=row["end_reason"],
            )
            self._index(session)

    def _index(self, session: PersonSession) -> None:
        self.by_session[session.session_id] = session
        self.by_agent[session.agent_id] = session

    # -- the hook's calls ----------------------------------------------------------------

    def acquire(self, session_id: str, user: str, paths: list[str], tool: str) -> LeaseAnswer:
        """All-or-nothing leases for one write of a person's session; always an answer."""
        keys, skipped, rejected = self._keys(paths)
        if rejected:
            return LeaseAnswer.deny(rejected)
        if not keys:  # nothing the fleet could ever lease: no session, no lease
            return LeaseAnswer(True, skipped=tuple(skipped))
        now = self.clock()
        with self.transition():
            session = self._session(session_id, user, now)
            refused = self._take(session, keys, tool)
            if refused is not None:
                return refused
            self._touch(session, now)
        ref = HolderRef(session.agent_id, session.name, session.task_id)
        return LeaseAnswer(True, granted=tuple(keys), skipped=tuple(skipped), holder=ref)

    def _take(self, session: PersonSession, keys: list[str], tool: str) -> LeaseAnswer | None:
        """Grant `keys` to the person's session by the lease rule (`policy.leaserule`, the
        person's door: no stack, no pre-image); the denial, or None once granted."""
        request = self.leases.ask(Door.PERSON, session.task_id, keys)
        if decide(request) is Verdict.DENY:
            return self._deny_held(session, list(request.held), tool)
        self.leases.grant(keys, session.agent_id, session.task_id, tool, kind=PERSON_KIND)
        return None

    def record_change(
        self, session_id: str, user: str, paths: list[str], tool: str, sha256: str | None = None
    ) -> None:
        """Ledger rows from the person's PostToolUse (`read` rows for a read); never vetoes."""
        keys, _, _ = self._keys(paths)
        if not keys:
            return
        now = self.clock()
        if tool in READ_RECORDED_TOOLS:
            self._record_reads(session_id, keys, tool, sha256, to_iso(now))
            return
        with self.transition():
            session = self._session(session_id, user, now)
            for key in keys:
                self.store.insert_change(session.task_id, session.agent_id, key, tool, to_iso(now))
                self.store.emit(
                    EventType.FILE_CHANGED,
                    task_id=session.task_id,
                    agent_id=session.agent_id,
                    path=key,
                    tool=tool,
                    kind=PERSON_KIND,
                )
            self._touch(session, now)

    def _record_reads(
        self, session_id: str, keys: list[str], tool: str, sha256: str | None, at: str
    ) -> None:
        """`read` rows, without starting the session of one that has not written yet."""
        session = self.by_session.get(session_id)
        task_id = session.task_id if session else f"{TASK_PREFIX}{session_id[:8]}"
        agent_id = session.agent_id if session else ""
        with self.transition():
            self.store.insert_reads([(task_id, agent_id, k, tool, at, None, sha256) for k in keys])

    def release(
        self, session_id: str | None, reason: ReleaseReason, every: bool = False
    ) -> list[Row]:
        """End one session's holding (or every active one): its leases go, in one transaction."""
        if every:
            targets = [h for h in self.by_session.values() if h.active]
        else:
            session = self.by_session.get(session_id or "")
            if session is None and reason is not ReleaseReason.SESSION_END:
                raise NotFound(f"no interactive session {session_id}", {"session_id": session_id})
            targets = [session] if session is not None and session.active else []
        now = self.clock()
        released = []
        with self.transition():
            for session in sorted(targets, key=lambda h: h.name):
                released.append(self._end(session, reason, now))
        if released:
            self.kick()
        return released

    def hold(self, session_id: str, user: str, names: list[str]) -> LeaseAnswer:
        """A person takes named resources (`codefleet hold db`), all or nothing, like a write."""
        keys = sorted({resource_key(n) for n in names})
        now = self.clock()
        with self.transition():
            session = self._session(session_id, user, now)
            refused = self._take(session, keys, "hold")
            if refused is not None:
                return refused
            self._touch(session, now)
        ref = HolderRef(session.agent_id, session.name, session.task_id)
        return LeaseAnswer(True, granted=tuple(keys), holder=ref)

    def unhold(self, names: list[str]) -> dict[str, Any]:
        """Release named resources people hold (`codefleet release db`); a task's are refused."""
        released: list[str] = []
        refused: dict[str, str] = {}
        with self.transition():
            for name in sorted(set(names)):
                agent_id, task_id = self.leases.holders.get(resource_key(name), ("", ""))
                if agent_id in self.by_agent:
                    self.leases.drop(task_id, [resource_key(name)], ReleaseReason.OPERATOR)
                    released.append(name)
                else:
                    refused[name] = f"held by task {task_id}" if task_id else "not held"
        if released:
            self.kick()
        return {"released": released, "refused": refused}

    def expire_idle(self, now: datetime) -> list[Row]:
        """Release every active session that has not written for `idle_after`."""
        idle = [
            h
            for h in self.by_session.values()
            if h.active and now - h.last_write_at >= self.idle_after
        ]
        if not idle:
            return []
        with self.transition():
            released = [
                self._end(h, ReleaseReason.INTERACTIVE_IDLE, now)
                for h in sorted(idle, key=lambda h: h.name)
            ]
        self.kick()
        return released

    # -- internals ---------------------------------------------------------------------------

    def _keys(self, paths: list[str]) -> tuple[list[str], list[str], list[Denial]]:
        """(lease keys, raw paths the fleet can never lease, refusals of unusable paths)."""
        found = lease_keys(self.tree, paths, skip=NOT_LEASABLE)
        rejected = [denial(raw, err.reason, err.message) for raw, err in found.rejected]
        return found.keys, found.skipped, rejected

    def _session(self, session_id: str, user: str, now: datetime) -> PersonSession:
        """The person's session, created or brought back (caller's transaction)."""
        session = self.by_session.get(session_id)
        store = self.store
        if session is None:
            session = self._new_session(session_id, user, now)
            store.upsert_person_session(session.row())
            self._index(session)
            store.emit(
                EventType.AGENT_REGISTERED,
                agent_id=session.agent_id,
                name=session.name,
                epoch=0,
                pid=None,
                kind=PERSON_KIND,
                session_id=session_id,
                interactive_task=session.task_id,
            )
        elif not session.active:
            session.active = True
            session.ended_at = None
            session.end_reason = None
            session.last_write_at = now
            store.upsert_person_session(session.row())
            store.emit(
                EventType.AGENT_ONLINE,
                agent_id=session.agent_id,
                name=session.name,
                kind=PERSON_KIND,
                session_id=session_id,
            )
        return session

    def _new_session(self, session_id: str, user: str, now: datetime) -> PersonSession:
        person = USER_CHARS.sub("", user)[:32] or "you"
        taken = {h.task_id for h in self.by_session.values()} | {
            h.name for h in self.by_session.values()
        }
        short = next(
            s
            for s in _shorts(session_id)
            if f"{TASK_PREFIX}{s}" not in taken and f"{person}@{s}" not in taken
        )
        return PersonSession(
            session_id=session_id,
            agent_id=new_agent_id(),
            name=f"{person}@{short}",
            task_id=f"{TASK_PREFIX}{short}",
            title=f"{person}'s interactive Claude Code session",
            active=True,
            started_at=now,
            last_write_at=now,
        )

    def _touch(self, session: PersonSession, now: datetime) -> None:
        session.last_write_at = max(session.last_write_at, now)
        self.store.upsert_person_session(session.row())

    def _deny_held(
        self, session: PersonSession, held: list[tuple[str, tuple[str, str]]], tool: str
    ) -> LeaseAnswer:
        return self.leases.deny_held(
            session.agent_id,
            session.name,
            session.task_id,
            held,
            tool,
            title_of=self._holder_title,
            kind=PERSON_KIND,
        )

    def _holder_title(self, holder_agent: str, holder_task: str) -> str | None:
        other = self.by_agent.get(holder_agent)
        return other.title if other else self._title_of(holder_task)

    def _title_of(self, task_id: str) -> str | None:
        row = self.store.task(task_id)
        return str(row["title"]) if row else None

    def _end(self, session: PersonSession, reason: ReleaseReason, now: datetime) -> Row:
        paths = sorted(self.leases.paths_of(session.task_id))
        self.leases.drop(session.task_id, paths, reason)  # no pre-images: nothing to restore
        session.active = False
        session.ended_at = now
        session.end_reason = reason.value
        self.store.upsert_person_session(session.row())
        self.store.emit(
            EventType.AGENT_OFFLINE,
            agent_id=session.agent_id,
            name=session.name,
            reason=reason,
            kind=PERSON_KIND,
            session_id=session.session_id,
            paths=paths,
        )
        return {
            "session_id": session.session_id,
            "name": session.name,
            "task_id": session.task_id,
            "paths": paths,
            "reason": reason.value,
        }


def _shorts(session_id: str) -> Iterator[str]:
    """A session's short names, shortest first: a prefix, then the whole id, then numbered.

    Only a random id (hex and dashes: Claude Code's session ids) is cut to a prefix; a
    worded one (`hold-root`, from `codefleet hold`) is named whole, never cut mid-word.
    A short id can equal another session's prefix (`abcdefgh` beside `abcdefgh-…`), so
    the whole id alone is not always free; a numbered one always is, in time.
    """
    widths = (8, 16, len(session_id)) if RANDOM_ID.fullmatch(session_id) else (len(session_id),)
    yield from dict.fromkeys(session_id[:width] for width in widths)
    yield from (f"{session_id}~{n}" for n in itertools.count(2))
