"""The store: CodeFleet's rows, read and written through the one connection.

`Store` is the database (`database`: the connection, its transactions, held
row updates) with its event log (`eventlog`) and a method per query of every
other table: tasks and their edges, agents, leases and the change ledger,
pre-images and patches, restore intents, checks, sequences, people's
sessions and the server's own record. A write marks what it `Touched` (a
task, an agent, a task's leases or restores), so a rollback's re-read and the
projection's refresh find every changed row. Invariants held by the schema,
not by code: one lease row per path (primary key), no self-dependency, event
ids strictly increasing. Statements are named constants (`queries`) so a grep
finds every query; only the store's modules import sqlite3.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from operator import itemgetter
from typing import Any

from codefleet.coord.storage import queries as q
from codefleet.coord.storage.database import Row
from codefleet.coord.storage.eventlog import EventLog
from codefleet.coord.storage.jsontext import plain_json
from codefleet.coord.storage.rows import AgentRow, LeaseRow, RestoreRow
from codefleet.models import MAX_INT, ReleaseReason
from codefleet.rollback import PatchFile, PreImage

# One `read` row of the ledger: task, agent, path, tool, at, attempt, sha256.
ReadRow = tuple[str, str, str, str, str, int | None, str | None]

__all__ = ["Store"]

_INSERT_TASK_PARAMS = itemgetter(*q.INSERT_TASK_COLUMNS)


def _preimage(row: sqlite3.Row) -> PreImage:
    return PreImage(
        path=row["path"],
        existed=bool(row["existed"]),
        content=bytes(row["content"] or b""),
        mode=row["mode"],
        created_dirs=tuple(json.loads(row["created_dirs"])),
    )


def _task_params(task: Row) -> tuple[Any, ...]:
    """`INSERT_TASK`'s parameters, in order; `verify`, `agent`, `on_stale_read`,
    `lease_granularity`, `ask` and `shell` may be left out (NULL)."""
    row = {
        "verify": None,
        "agent": None,
        "on_stale_read": None,
        "lease_granularity": None,
        "ask": None,
        "shell": None,
        **task,
        "file_scope": plain_json(task["file_scope"]),
        "resources": plain_json(task.get("resources") or []),
    }
    params: tuple[Any, ...] = _INSERT_TASK_PARAMS(row)
    return params


def _decode_task(row: sqlite3.Row) -> Row:
    task = dict(row)
    task["file_scope"] = json.loads(task["file_scope"])
    task["resources"] = json.loads(task.get("resources") or "[]")
    return task


class Store(EventLog):
    """A SQLite database file with CodeFleet's schema: its events and its rows."""

    # -- tasks ----------------------------------------------------------------

    def insert_tasks(self, tasks: Iterable[Row], edges: Iterable[tuple[str, str]]) -> None:
        rows = [_task_params(t) for t in tasks]
        if not self._depth:
            raise RuntimeError("store writes must run inside transaction()")
        self.touched.tasks.update(str(row[0]) for row in rows)
        self._flush()
        self._db.executemany(q.INSERT_TASK, rows)
        self._db.executemany(q.INSERT_DEPENDENCY, list(edges))

    def replace_dependencies(self, task_id: str, parents: Iterable[str]) -> None:
        """The task now depends on `parents` only (a redefinition of a task not started)."""
        if not self._depth:
            raise RuntimeError("store writes must run inside transaction()")
        self.touched.tasks.add(task_id)
        self._flush()
        self._db.execute(q.DELETE_PARENTS, (task_id,))
        self._db.executemany(q.INSERT_DEPENDENCY, [(task_id, p) for p in parents])

    def update_task(self, task_id: str, **fields: Any) -> None:
        unknown = set(fields) - q.TASK_COLUMNS
        if unknown:
            raise ValueError(f"unknown task columns: {sorted(unknown)}")
        self.touched.tasks.add(task_id)
        for listed in ("file_scope", "resources"):
            if listed in fields:
                fields[listed] = plain_json(fields[listed])
        self._hold("tasks", task_id, fields)

    def add_usage(
        self,
        task_id: str,
        agent_id: str,
        tokens_in: int,
        tokens_out: int,
        cost: float,
        *,
        succeeded: bool,
    ) -> None:
        """Add one attempt's usage to the task's and the agent's running totals."""
        self.touched.tasks.add(task_id)
        self.touched.agents.add(agent_id)
        usage = {"input_tokens": tokens_in, "output_tokens": tokens_out, "cost_usd": cost}
        self._hold("tasks", task_id, {}, usage)
        done = {"tasks_succeeded": 1} if succeeded else {"tasks_failed": 1}
        self._hold("agents", agent_id, {}, {**usage, **done})

    def success_taken_back(self, agent_id: str) -> None:
        """An attempt counted a success at its report broke the tree as it landed: the agent's
        count moves from succeeded to failed (`coord.calls.landingqueue`)."""
        self.touched.agents.add(agent_id)
        self._hold("agents", agent_id, {}, {"tasks_succeeded": -1, "tasks_failed": 1})

    def task(self, task_id: str) -> Row | None:
        row = self._one(q.SELECT_TASK, (task_id,))
        return _decode_task(row) if row else None

    def tasks_of(self, task_ids: Iterable[str]) -> list[Row]:
        """The tasks among `task_ids` that exist, by seq."""
        rows = self._read(q.SELECT_TASKS_OF_IDS, (json.dumps(list(task_ids)),))
        return [_decode_task(r) for r in rows]

    def tasks(self, status: str | None = None, limit: int = 1000, offset: int = 0) -> list[Row]:
        if status:
            rows = self._read(q.SELECT_TASKS_BY_STATUS, (status, limit, offset))
        else:
            rows = self._read(q.SELECT_TASKS_PAGE, (limit, offset))
        return [_decode_task(r) for r in rows]

    def live_tasks(self) -> list[Row]:
        return [_decode_task(r) for r in self._read(q.SELECT_LIVE_TASKS)]

    def task_statuses(self) -> dict[str, str]:
        return {r[0]: r[1] for r in self._read(q.SELECT_TASK_STATUSES)}

    def max_seq(self) -> int:
        row = self._one(q.SELECT_MAX_SEQ)
        return int(row[0]) if row else 0

    def landing_queue(self) -> list[str]:
        """The tasks waiting to land, in the order they finished."""
        return [str(r[0]) for r in self._read(q.SELECT_LANDING_QUEUE)]

    def landing_counters(self) -> tuple[int, int]:
        """(the last landing order number, the last landing queue number) handed out."""
        row = self._one(q.SELECT_LANDING_COUNTERS)
        return (int(row[0]), int(row[1])) if row else (0, 0)

    def landed_since(self, at: str) -> list[Row]:
        """The tasks that landed at or after `at`, in landing order: id, title, order."""
        return [dict(r) for r in self._read(q.SELECT_LANDED_SINCE, (at,))]

    def edges(self) -> list[tuple[str, str]]:
        return [(r[0], r[1]) for r in self._read(q.SELECT_ALL_EDGES)]

    def parents(self, task_id: str) -> list[str]:
        """The tasks `task_id` depends on."""
        return [str(r[0]) for r in self._read(q.SELECT_PARENTS, (task_id,))]

    def task_counts(self) -> dict[str, int]:
        return {r[0]: r[1] for r in self._read(q.COUNT_TASKS_BY_STATUS)}

    def usage_totals(self) -> tuple[int, int, float]:
        row = self._one(q.SUM_TASK_USAGE)
        assert row is not None
        return int(row[0]), int(row[1]), float(row[2])

    # -- agents ---------------------------------------------------------------

    def insert_agent(self, agent: Row) -> None:
        self.touched.agents.add(str(agent["id"]))
        self._write(q.INSERT_AGENT, agent)

    def update_agent(self, agent_id: str, **fields: Any) -> None:
        unknown = set(fields) - q.AGENT_COLUMNS
        if unknown:
            raise ValueError(f"unknown agent columns: {sorted(unknown)}")
        self.touched.agents.add(agent_id)
        self._hold("agents", agent_id, fields)

    def agent(self, agent_id: str) -> Row | None:
        row = self._one(q.SELECT_AGENT, (agent_id,))
        return dict(row) if row else None

    def agents(self) -> list[Row]:
        return [dict(r) for r in self._read(q.SELECT_AGENTS)]

    def agent_row(self, agent_id: str) -> AgentRow | None:
        row = self._one(q.SELECT_AGENT, (agent_id,))
        return AgentRow.of(dict(row)) if row else None

    def agent_rows(self) -> list[AgentRow]:
        return [AgentRow.of(r) for r in self._read(q.SELECT_AGENTS)]

    # -- leases and the change ledger -------------------------------------------

    def insert_lease(self, path: str, agent_id: str, task_id: str, at: str) -> bool:
        """Insert-or-nothing; True when the row is now ours (the PK decides)."""
        self.touched.lease_tasks.add(task_id)
        cur = self._write(q.INSERT_LEASE, (path, agent_id, task_id, at))
        return cur.rowcount == 1

    def leases(self) -> list[Row]:
        return [dict(r) for r in self._read(q.SELECT_LEASES)]

    def leases_of_task(self, task_id: str) -> list[Row]:
        return [dict(r) for r in self._read(q.SELECT_LEASES_OF_TASK, (task_id,))]

    def lease_rows(self, task_id: str | None = None) -> list[LeaseRow]:
        """Every lease (or the task's), typed: what the engine's lease mirror is built from."""
        rows = (
            self._read(q.SELECT_LEASES)
            if task_id is None
            else self._read(q.SELECT_LEASES_OF_TASK, (task_id,))
        )
        return [LeaseRow.of(r) for r in rows]

    def delete_lease(self, path: str, task_id: str) -> None:
        self.touched.lease_tasks.add(task_id)
        self._write(q.DELETE_LEASE, (path, task_id))

    def insert_change(
        self,
        task_id: str,
        agent_id: str,
        path: str,
        tool: str,
        at: str,
        attempt: int | None = None,
        sha256: str | None = None,
    ) -> None:
        self._write(q.INSERT_CHANGE, (task_id, agent_id, path, tool, at, attempt, sha256))

    def changes_of_task(self, task_id: str) -> list[Row]:
        return [dict(r) for r in self._read(q.SELECT_CHANGES_OF_TASK, (task_id,))]

    def insert_reads(self, rows: Sequence[ReadRow]) -> None:
        """`read` rows of the ledger: (task, agent, path, tool, at, attempt, sha256) each."""
        if not self._depth:
            raise RuntimeError("store writes must run inside transaction()")
        if rows:
            self._db.executemany(q.INSERT_READ, rows)

    def reads_of_task(self, task_id: str) -> list[Row]:
        return [dict(r) for r in self._db.execute(q.SELECT_READS_OF_TASK, (task_id,))]

    def writes_since(self, path: str, at: str, other_than: str) -> list[Row]:
        """Writes of `path` at or after `at` by tasks other than `other_than`, in ledger order."""
        rows = self._db.execute(q.SELECT_WRITES_SINCE, (path, at, other_than))
        return [dict(r) for r in rows]

    # -- pre-images and patches ---------------------------------------------------------

    def insert_preimage(self, task_id: str, image: PreImage, at: str) -> None:
        """First capture wins: a re-grant within the attempt never overwrites it."""
        dirs = json.dumps(list(image.created_dirs))
        content = image.content if image.existed else None
        self._write(
            q.INSERT_PREIMAGE,
            (task_id, image.path, int(image.existed), content, image.mode, dirs, at),
        )

    def rebase_preimage(self, task_id: str, image: PreImage) -> None:
        """The task's pre-image of an existing file is now `image` (a part -> whole upgrade)."""
        self._write(q.UPDATE_PREIMAGE, (image.content, image.mode, task_id, image.path))

    def preimages_of_task(self, task_id: str) -> list[PreImage]:
        return [_preimage(r) for r in self._read(q.SELECT_PREIMAGES_OF_TASK, (task_id,))]

    def preimage_of(self, task_id: str, path: str) -> PreImage | None:
        row = self._read(q.SELECT_PREIMAGE, (task_id, path)).fetchone()
        return None if row is None else _preimage(row)

    def foreign_preimages(self, task_id: str) -> list[tuple[str, PreImage]]:
        """(holder task, pre-image) of every path leased by a task other than `task_id`."""
        rows = self._read(q.SELECT_FOREIGN_PREIMAGES, (task_id,))
        return [(r["task_id"], _preimage(r)) for r in rows]

    def preimages_except(self, task_ids: Iterable[str]) -> list[tuple[str, PreImage]]:
        """(holder task, pre-image) of every path leased by a task not in `task_ids`."""
        rows = self._read(q.SELECT_PREIMAGES_EXCEPT, (json.dumps(list(task_ids)),))
        return [(r["task_id"], _preimage(r)) for r in rows]

    def stacked_under(self) -> list[tuple[str, str, str]]:
        """(file, task, its agent) of each task under a file's holder, bottom first."""
        return [(r[0], r[1], r[2]) for r in self._read(q.SELECT_STACKED_UNDER)]

    def delete_preimages_of_task(self, task_id: str) -> None:
        self._write(q.DELETE_PREIMAGES_OF_TASK, (task_id,))

    def preimage_paths_of_task(self, task_id: str) -> list[str]:
        return [r[0] for r in self._read(q.SELECT_PREIMAGE_PATHS_OF_TASK, (task_id,))]

    # -- restores: the intent to put a failed attempt's files back ----------------------

    def insert_restores(
        self, task_id: str, paths: Iterable[str], reason: ReleaseReason, at: str
    ) -> None:
        self.touched.lease_tasks.add(task_id)
        for path in paths:
            self._write(q.INSERT_RESTORE, (task_id, path, reason, at))

    def restore_rows(self, task_id: str | None = None) -> list[RestoreRow]:
        """Every restore intent (or the task's), by task and path."""
        rows = (
            self._read(q.SELECT_RESTORES)
            if task_id is None
            else self._read(q.SELECT_RESTORES_OF_TASK, (task_id,))
        )
        return [RestoreRow.of(r) for r in rows]

    def delete_restored(self, task_id: str, path: str) -> None:
        """The file is back: its restore row, pre-image and lease go in one step."""
        self.touched.lease_tasks.add(task_id)
        self._write(q.DELETE_RESTORE, (task_id, path))
        self._write(q.DELETE_PREIMAGE, (task_id, path))
        self._write(q.DELETE_LEASE, (path, task_id))

    def fail_restore(self, task_id: str, path: str, error: str) -> None:
        self.touched.lease_tasks.add(task_id)
        self._write(q.FAIL_RESTORE, (error, task_id, path))

    def insert_patch(self, task_id: str, patch: PatchFile) -> None:
        self._write(
            q.INSERT_PATCH,
            (task_id, patch.path, patch.diff, patch.added, patch.removed, int(patch.binary)),
        )

    def patches_of_task(self, task_id: str) -> list[Row]:
        rows = [dict(r) for r in self._read(q.SELECT_PATCHES_OF_TASK, (task_id,))]
        for row in rows:
            row["binary"] = bool(row["binary"])
        return rows

    # -- checks ---------------------------------------------------------------------------

    def upsert_check(self, name: str, command: str, at: str) -> None:
        self._write(q.UPSERT_CHECK, (name, command, at))

    def checks(self) -> list[Row]:
        rows = [dict(r) for r in self._read(q.SELECT_CHECKS)]
        for row in rows:
            row["resources"] = json.loads(row.get("resources") or "[]")
            row["reuse"] = bool(row.get("reuse", 1))
        return rows

    def set_check_resources(self, name: str, resources: list[str]) -> None:
        self._write(q.SET_CHECK_RESOURCES, (plain_json(resources), name))

    def set_check_reuse(self, name: str, reuse: bool) -> None:
        self._write(q.SET_CHECK_REUSE, (int(reuse), name))

    # -- sequences (`next_number`) ---------------------------------------------------------

    def define_sequence(self, name: str, last_value: int, at: str) -> None:
        """Create the counter, or raise its last value to `last_value` (never lower it)."""
        self._write(q.UPSERT_SEQUENCE, (name, last_value, at))

    def next_in_sequence(self, name: str) -> int | None:
        """The counter's next value, taken (None: no such sequence, or it reached `MAX_INT`)."""
        row = self._write(q.NEXT_IN_SEQUENCE, (name, MAX_INT)).fetchone()
        return None if row is None else int(row[0])

    def sequences(self) -> list[Row]:
        return [dict(r) for r in self._read(q.SELECT_SEQUENCES)]

    # -- people's sessions (a person's own Claude Code session; table `interactive_sessions`) --

    def upsert_person_session(self, session: Row) -> None:
        self.touched.person_sessions = True
        self._write(q.UPSERT_INTERACTIVE, session)

    def person_sessions(self) -> list[Row]:
        return [dict(r) for r in self._read(q.SELECT_INTERACTIVE)]

    # -- the server's own record ------------------------------------------------------------

    def set_meta(self, key: str, value: str) -> None:
        self._write(q.UPSERT_META, (key, value))

    def meta(self, key: str) -> str | None:
        row = self._one(q.SELECT_META, (key,))
        return str(row[0]) if row else None

    def reset(self) -> None:
        self.touched.reset = True
        for table in q.RESET_TABLES:
            self._write(f"DELETE FROM {table}")  # event ids stay monotonic: cursors survive
