"""The named SQL statements of `store`, and the column sets its updates accept.

Only `store` imports this module: it is the text of every query CodeFleet
runs, one named constant each, so a grep for a statement's name finds its one
caller. The schema itself is `schema.sql`; `MIGRATIONS` adds the columns an
older database lacks.
"""

from __future__ import annotations

from typing import Final

TASK_COLUMNS: Final = frozenset(
    [
        "title",
        "description",
        "status",
        "priority",
        "file_scope",
        "resources",
        "assigned_agent_id",
        "attempts",
        "uncharged_attempts",
        "retried_attempts",
        "max_attempts",
        "verify",
        "agent",
        "on_stale_read",
        "lease_granularity",
        "ask",
        "shell",
        "backoff_until",
        "result_summary",
        "error",
        "error_kind",
        "blocked_on_path",
        "input_tokens",
        "output_tokens",
        "cost_usd",
        "duration_ms",
        "session_id",
        "updated_at",
        "assigned_at",
        "started_at",
        "completed_at",
        "landing_seq",
        "landed_order",
        "repair_session",
        "repairs",
    ]
)
AGENT_COLUMNS: Final = frozenset(
    [
        "status",
        "epoch",
        "fenced",
        "current_task_id",
        "workdir",
        "pid",
        "host",
        "agent",
        "workspace",
        "last_heartbeat_at",
        "last_assigned_at",
        "idle_since",
        "tasks_succeeded",
        "tasks_failed",
        "input_tokens",
        "output_tokens",
        "cost_usd",
        "updated_at",
    ]
)

INSERT_TASK_COLUMNS: Final = (
    "id",
    "seq",
    "title",
    "description",
    "status",
    "priority",
    "file_scope",
    "max_attempts",
    "verify",
    "agent",
    "on_stale_read",
    "lease_granularity",
    "ask",
    "shell",
    "created_at",
    "updated_at",
    "resources",
)
INSERT_TASK: Final = (  # positional: executemany binds tuples faster than dicts
    f"INSERT INTO tasks ({', '.join(INSERT_TASK_COLUMNS)})"
    f" VALUES ({', '.join('?' * len(INSERT_TASK_COLUMNS))})"
)
TABLE_COLUMNS: Final = "SELECT name FROM pragma_table_info(?)"
# Columns added after a table first shipped: (table, column, statement) for older databases.
MIGRATIONS: Final = (
    ("tasks", "verify", "ALTER TABLE tasks ADD COLUMN verify TEXT"),
    ("tasks", "on_stale_read", "ALTER TABLE tasks ADD COLUMN on_stale_read TEXT"),
    ("tasks", "ask", "ALTER TABLE tasks ADD COLUMN ask INTEGER"),
    ("tasks", "shell", "ALTER TABLE tasks ADD COLUMN shell TEXT"),
    ("file_changes", "attempt", "ALTER TABLE file_changes ADD COLUMN attempt INTEGER"),
    ("file_changes", "sha256", "ALTER TABLE file_changes ADD COLUMN sha256 TEXT"),
    (
        "file_changes",
        "kind",
        "ALTER TABLE file_changes ADD COLUMN kind TEXT NOT NULL DEFAULT 'write'",
    ),
    ("agents", "fenced", "ALTER TABLE agents ADD COLUMN fenced INTEGER NOT NULL DEFAULT 0"),
    ("agents", "host", "ALTER TABLE agents ADD COLUMN host TEXT"),
    ("tasks", "agent", "ALTER TABLE tasks ADD COLUMN agent TEXT"),
    ("agents", "agent", "ALTER TABLE agents ADD COLUMN agent TEXT NOT NULL DEFAULT 'claude'"),
    ("checks", "reuse", "ALTER TABLE checks ADD COLUMN reuse INTEGER NOT NULL DEFAULT 1"),
    (
        "agents",
        "workspace",
        "ALTER TABLE agents ADD COLUMN workspace TEXT NOT NULL DEFAULT 'tree'",
    ),
    (
        "tasks",
        "uncharged_attempts",
        "ALTER TABLE tasks ADD COLUMN uncharged_attempts INTEGER NOT NULL DEFAULT 0",
    ),
    ("tasks", "resources", "ALTER TABLE tasks ADD COLUMN resources TEXT NOT NULL DEFAULT '[]'"),
    ("checks", "resources", "ALTER TABLE checks ADD COLUMN resources TEXT NOT NULL DEFAULT '[]'"),
    ("tasks", "landing_seq", "ALTER TABLE tasks ADD COLUMN landing_seq INTEGER"),
    ("tasks", "landed_order", "ALTER TABLE tasks ADD COLUMN landed_order INTEGER"),
    ("tasks", "lease_granularity", "ALTER TABLE tasks ADD COLUMN lease_granularity TEXT"),
    ("tasks", "repair_session", "ALTER TABLE tasks ADD COLUMN repair_session TEXT"),
    ("tasks", "repairs", "ALTER TABLE tasks ADD COLUMN repairs INTEGER NOT NULL DEFAULT 0"),
    (
        "tasks",
        "retried_attempts",
        "ALTER TABLE tasks ADD COLUMN retried_attempts INTEGER NOT NULL DEFAULT 0",
    ),
)
INSERT_DEPENDENCY: Final = "INSERT INTO task_dependencies (task_id, depends_on_id) VALUES (?, ?)"
SELECT_TASK: Final = "SELECT * FROM tasks WHERE id = ?"
SELECT_TASKS_PAGE: Final = "SELECT * FROM tasks ORDER BY seq LIMIT ? OFFSET ?"
SELECT_TASKS_OF_IDS: Final = (
    "SELECT * FROM tasks WHERE id IN (SELECT value FROM json_each(?)) ORDER BY seq"
)
SELECT_TASKS_BY_STATUS: Final = "SELECT * FROM tasks WHERE status = ? ORDER BY seq LIMIT ? OFFSET ?"
SELECT_LIVE_TASKS: Final = (
    "SELECT * FROM tasks WHERE status IN ('pending', 'assigned', 'running', 'landing') ORDER BY seq"
)
SELECT_LANDING_QUEUE: Final = "SELECT id FROM tasks WHERE status = 'landing' ORDER BY landing_seq"
SELECT_LANDING_COUNTERS: Final = (
    "SELECT COALESCE(MAX(landed_order), 0), COALESCE(MAX(landing_seq), 0) FROM tasks"
)
SELECT_LANDED_SINCE: Final = """SELECT id, title, landed_order FROM tasks
    WHERE landed_order IS NOT NULL AND completed_at >= ? ORDER BY landed_order"""
SELECT_TASK_STATUSES: Final = "SELECT id, status FROM tasks"
SELECT_MAX_SEQ: Final = "SELECT COALESCE(MAX(seq), 0) FROM tasks"
SELECT_ALL_EDGES: Final = "SELECT task_id, depends_on_id FROM task_dependencies"
SELECT_PARENTS: Final = "SELECT depends_on_id FROM task_dependencies WHERE task_id = ?"
DELETE_PARENTS: Final = "DELETE FROM task_dependencies WHERE task_id = ?"
COUNT_TASKS_BY_STATUS: Final = "SELECT status, COUNT(*) FROM tasks GROUP BY status"
SUM_TASK_USAGE: Final = """SELECT COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0),
    COALESCE(SUM(cost_usd), 0) FROM tasks"""

INSERT_AGENT: Final = """INSERT INTO agents (id, name, status, epoch, workdir, pid, host,
    last_heartbeat_at, idle_since, registered_at, updated_at)
    VALUES (:id, :name, :status, :epoch, :workdir, :pid, :host, :last_heartbeat_at,
    :idle_since, :registered_at, :updated_at)"""
SELECT_AGENT: Final = "SELECT * FROM agents WHERE id = ?"
SELECT_AGENTS: Final = "SELECT * FROM agents ORDER BY name"

INSERT_LEASE: Final = """INSERT OR IGNORE INTO file_leases (path, agent_id, task_id, acquired_at)
    VALUES (?, ?, ?, ?)"""
SELECT_LEASES: Final = "SELECT * FROM file_leases ORDER BY path"
SELECT_LEASES_OF_TASK: Final = "SELECT * FROM file_leases WHERE task_id = ? ORDER BY path"
DELETE_LEASE: Final = "DELETE FROM file_leases WHERE path = ? AND task_id = ?"

INSERT_CHANGE: Final = """INSERT INTO file_changes (task_id, agent_id, path, tool, at, attempt,
    sha256) VALUES (?, ?, ?, ?, ?, ?, ?)"""
SELECT_CHANGES_OF_TASK: Final = """SELECT id, task_id, agent_id, path, tool, at, attempt, sha256
    FROM file_changes WHERE task_id = ? AND kind = 'write' ORDER BY id"""
INSERT_READ: Final = """INSERT INTO file_changes (task_id, agent_id, path, tool, at, attempt,
    sha256, kind) VALUES (?, ?, ?, ?, ?, ?, ?, 'read')"""
SELECT_READS_OF_TASK: Final = """SELECT id, task_id, agent_id, path, tool, at, attempt, sha256
    FROM file_changes WHERE task_id = ? AND kind = 'read' ORDER BY id"""
# Other tasks' writes of one path at or after a moment: who changed what an attempt read.
SELECT_WRITES_SINCE: Final = """SELECT task_id, at, sha256 FROM file_changes
    WHERE path = ? AND at >= ? AND task_id != ? AND kind = 'write' ORDER BY id"""

INSERT_EVENT: Final = """INSERT INTO events (at, type, task_id, agent_id, payload)
    VALUES (?, ?, ?, ?, ?)"""
SELECT_EVENTS: Final = "SELECT * FROM events WHERE id > ? ORDER BY id LIMIT ?"
SELECT_EVENTS_OF_TYPE: Final = "SELECT * FROM events WHERE id > ? AND type = ? ORDER BY id LIMIT ?"
SELECT_LAST_EVENT_ID: Final = "SELECT COALESCE(MAX(id), 0) FROM events"
LAST_ROWID: Final = "SELECT last_insert_rowid()"
SELECT_LAST_EVENT_OF_TYPES: Final = (
    "SELECT * FROM events WHERE type IN (SELECT value FROM json_each(?)) ORDER BY id DESC LIMIT 1"
)

INSERT_PREIMAGE: Final = """INSERT OR IGNORE INTO preimages (task_id, path, existed, content,
    mode, created_dirs, captured_at) VALUES (?, ?, ?, ?, ?, ?, ?)"""
SELECT_PREIMAGES_OF_TASK: Final = "SELECT * FROM preimages WHERE task_id = ? ORDER BY path"
UPDATE_PREIMAGE: Final = """UPDATE preimages SET content = ?, mode = ?
    WHERE task_id = ? AND path = ? AND existed = 1"""
SELECT_PREIMAGE_PATHS_OF_TASK: Final = "SELECT path FROM preimages WHERE task_id = ? ORDER BY path"
DELETE_PREIMAGE: Final = "DELETE FROM preimages WHERE task_id = ? AND path = ?"
DELETE_PREIMAGES_OF_TASK: Final = "DELETE FROM preimages WHERE task_id = ?"
INSERT_PATCH: Final = """INSERT OR REPLACE INTO patches (task_id, path, diff, added, removed, binary)
    VALUES (?, ?, ?, ?, ?, ?)"""
SELECT_PATCHES_OF_TASK: Final = "SELECT * FROM patches WHERE task_id = ? ORDER BY path"
# A lease on a file's part (`path::name`) holds the file's pre-image like a lease on the file.
_LEASE_ON_PREIMAGE = """l.task_id = p.task_id
    AND (l.path = p.path OR substr(l.path, 1, length(p.path) + 2) = p.path || '::')"""
# Every pre-image is of a file its task holds, or of one it passed on while waiting to land
# (`policy.stacks`): a file's rows come bottom of its stack first.
SELECT_FOREIGN_PREIMAGES: Final = """SELECT p.* FROM preimages p
    WHERE p.task_id <> ? ORDER BY p.path, p.captured_at, p.rowid"""
SELECT_PREIMAGES_EXCEPT: Final = """SELECT p.* FROM preimages p
    WHERE p.task_id NOT IN (SELECT value FROM json_each(?)) ORDER BY p.path, p.captured_at, p.rowid"""
# The tasks under a file's holder: a pre-image with no lease of its task on the file.
SELECT_STACKED_UNDER: Final = f"""SELECT p.path, p.task_id, coalesce(t.assigned_agent_id, '')
    FROM preimages p LEFT JOIN tasks t ON t.id = p.task_id
    WHERE NOT EXISTS (SELECT 1 FROM file_leases l WHERE {_LEASE_ON_PREIMAGE})
    ORDER BY p.path, p.captured_at, p.rowid"""
SELECT_PREIMAGE: Final = "SELECT * FROM preimages WHERE task_id = ? AND path = ?"

INSERT_RESTORE: Final = """INSERT OR IGNORE INTO restores (task_id, path, reason, requested_at)
    VALUES (?, ?, ?, ?)"""
SELECT_RESTORES: Final = "SELECT * FROM restores ORDER BY task_id, path"
SELECT_RESTORES_OF_TASK: Final = "SELECT * FROM restores WHERE task_id = ? ORDER BY path"
DELETE_RESTORE: Final = "DELETE FROM restores WHERE task_id = ? AND path = ?"
FAIL_RESTORE: Final = "UPDATE restores SET error = ? WHERE task_id = ? AND path = ?"

UPSERT_META: Final = """INSERT INTO server_meta (key, value) VALUES (?, ?)
    ON CONFLICT (key) DO UPDATE SET value = excluded.value"""
SELECT_META: Final = "SELECT value FROM server_meta WHERE key = ?"

UPSERT_SEQUENCE: Final = """INSERT INTO sequences (name, last_value, defined_at) VALUES (?, ?, ?)
    ON CONFLICT (name) DO UPDATE SET last_value = MAX(last_value, excluded.last_value)"""
SELECT_SEQUENCES: Final = "SELECT * FROM sequences ORDER BY name"
# Bounded by the largest INTEGER (a parameter): past it SQLite's `+ 1` would turn into a float
# and hand out one value for ever. No row: no such counter, or it is exhausted.
NEXT_IN_SEQUENCE: Final = """UPDATE sequences SET last_value = last_value + 1
    WHERE name = ? AND last_value < ? RETURNING last_value"""

UPSERT_CHECK: Final = """INSERT INTO checks (name, command, defined_at) VALUES (?, ?, ?)
    ON CONFLICT (name) DO UPDATE SET command = excluded.command, defined_at = excluded.defined_at"""
SET_CHECK_RESOURCES: Final = "UPDATE checks SET resources = ? WHERE name = ?"
SET_CHECK_REUSE: Final = "UPDATE checks SET reuse = ? WHERE name = ?"
SELECT_CHECKS: Final = "SELECT * FROM checks ORDER BY name"

UPSERT_INTERACTIVE: Final = """INSERT INTO interactive_sessions (session_id, agent_id, name,
    task_id, title, active, started_at, last_write_at, ended_at, end_reason)
    VALUES (:session_id, :agent_id, :name, :task_id, :title, :active, :started_at,
    :last_write_at, :ended_at, :end_reason)
    ON CONFLICT (session_id) DO UPDATE SET active = excluded.active,
    last_write_at = excluded.last_write_at, ended_at = excluded.ended_at,
    end_reason = excluded.end_reason"""
SELECT_INTERACTIVE: Final = "SELECT * FROM interactive_sessions ORDER BY name"

RESET_TABLES: Final = (
    "interactive_sessions",
    "checks",
    "restores",
    "patches",
    "preimages",
    "file_changes",
    "file_leases",
    "task_dependencies",
    "tasks",
    "agents",
    "events",
)
