-- CodeFleet schema. Invariants live here: lease exclusion is the primary key
-- of file_leases; the graph exists only as task_dependencies; events are
-- append-only and their id is the stream cursor.

CREATE TABLE IF NOT EXISTS tasks (
    id               TEXT PRIMARY KEY,
    seq              INTEGER NOT NULL UNIQUE,
    title            TEXT NOT NULL,
    description      TEXT NOT NULL DEFAULT '',
    status           TEXT NOT NULL,
    priority         INTEGER NOT NULL DEFAULT 3 CHECK (priority BETWEEN 1 AND 5),
    file_scope       TEXT NOT NULL DEFAULT '[]',
    assigned_agent_id TEXT,
    attempts         INTEGER NOT NULL DEFAULT 0,  -- the attempt number: +1 per assignment
    uncharged_attempts INTEGER NOT NULL DEFAULT 0,  -- attempts a usage limit ended: not charged
    retried_attempts INTEGER NOT NULL DEFAULT 0,  -- of those, the attempts before the last retry
    max_attempts     INTEGER NOT NULL DEFAULT 3,
    backoff_until    TEXT,
    result_summary   TEXT,
    error            TEXT,
    error_kind       TEXT,
    blocked_on_path  TEXT,
    input_tokens     INTEGER NOT NULL DEFAULT 0,
    output_tokens    INTEGER NOT NULL DEFAULT 0,
    cost_usd         REAL NOT NULL DEFAULT 0,
    duration_ms      INTEGER,
    session_id       TEXT,
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL,
    assigned_at      TEXT,
    started_at       TEXT,
    completed_at     TEXT,
    verify           TEXT, -- the name of the check that verifies a finished session
    agent            TEXT, -- the agent kind the task needs (claude, codex); NULL: any
    on_stale_read    TEXT, -- the task's policy for stale reads (NULL: reconcile)
    lease_granularity TEXT, -- what its writes lease: part | file (NULL: the runner's)
    ask              INTEGER, -- 0: its sessions cannot ask the operator (NULL: they can)
    shell            TEXT, -- run_command: off | on | network; NULL: the fleet's default
    resources        TEXT NOT NULL DEFAULT '[]',  -- named resources held for each attempt
    landing_seq      INTEGER, -- its place in the landing queue (set when it finished)
    landed_order     INTEGER, -- 1, 2, ...: the order it landed in (NULL: not landed)
    repair_session   TEXT,    -- the session its next attempt resumes to repair its change
    repairs          INTEGER NOT NULL DEFAULT 0  -- repair attempts since its last fresh one
);
CREATE INDEX IF NOT EXISTS tasks_by_status ON tasks(status);

CREATE TABLE IF NOT EXISTS task_dependencies (
    task_id       TEXT NOT NULL REFERENCES tasks(id),
    depends_on_id TEXT NOT NULL REFERENCES tasks(id),
    PRIMARY KEY (task_id, depends_on_id),
    CHECK (task_id <> depends_on_id)
);
CREATE INDEX IF NOT EXISTS deps_by_parent ON task_dependencies(depends_on_id);

CREATE TABLE IF NOT EXISTS agents (
    id                TEXT PRIMARY KEY,
    name              TEXT NOT NULL UNIQUE,
    status            TEXT NOT NULL,
    epoch             INTEGER NOT NULL,
    current_task_id   TEXT,
    workdir           TEXT,
    pid               INTEGER,
    host              TEXT,
    agent             TEXT NOT NULL DEFAULT 'claude',  -- the agent kind the runner drives
    workspace         TEXT NOT NULL DEFAULT 'tree',  -- where it works: the tree, or a clone of the landed line
    last_heartbeat_at TEXT NOT NULL,
    fenced            INTEGER NOT NULL DEFAULT 0,  -- taken back: no new work until it registers
    last_assigned_at  TEXT,
    idle_since        TEXT NOT NULL,
    tasks_succeeded   INTEGER NOT NULL DEFAULT 0,
    tasks_failed      INTEGER NOT NULL DEFAULT 0,
    input_tokens      INTEGER NOT NULL DEFAULT 0,
    output_tokens     INTEGER NOT NULL DEFAULT 0,
    cost_usd          REAL NOT NULL DEFAULT 0,
    registered_at     TEXT NOT NULL,
    updated_at        TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS file_leases (
    path        TEXT PRIMARY KEY,
    agent_id    TEXT NOT NULL,
    task_id     TEXT NOT NULL,
    acquired_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS leases_by_task ON file_leases(task_id);

CREATE TABLE IF NOT EXISTS file_changes (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id  TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    path     TEXT NOT NULL,
    tool     TEXT NOT NULL,
    at       TEXT NOT NULL,
    attempt  INTEGER,  -- the task's attempt that wrote (NULL: reported by a non-owner)
    sha256   TEXT,     -- the file's content right after the write (a read: as the agent saw it)
    kind     TEXT NOT NULL DEFAULT 'write'  -- 'write', or 'read' (an attempt's read set)
);
CREATE INDEX IF NOT EXISTS changes_by_task ON file_changes(task_id);
CREATE INDEX IF NOT EXISTS changes_by_path ON file_changes(path, at);

CREATE TABLE IF NOT EXISTS events (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    at       TEXT NOT NULL,
    type     TEXT NOT NULL,
    task_id  TEXT,
    agent_id TEXT,
    payload  TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX IF NOT EXISTS events_by_type ON events(type);

-- The state of each path when it was first granted to the current attempt of
-- a task; restored if the attempt fails, turned into a patch if it succeeds,
-- deleted in the same transaction that releases the lease.
CREATE TABLE IF NOT EXISTS preimages (
    task_id      TEXT NOT NULL,
    path         TEXT NOT NULL,
    existed      INTEGER NOT NULL,
    content      BLOB,
    mode         INTEGER,
    created_dirs TEXT NOT NULL DEFAULT '[]',
    captured_at  TEXT NOT NULL,
    PRIMARY KEY (task_id, path)
);

-- A failed attempt's files to put back before their leases are released: written
-- in the transaction that ends the attempt (with the fence), so the file I/O
-- happens after that COMMIT and a restart can finish it; each row is deleted,
-- with its pre-image and its lease, once its file is restored. `error` is set
-- when the file could not be restored: the lease then stays held.
CREATE TABLE IF NOT EXISTS restores (
    task_id      TEXT NOT NULL,
    path         TEXT NOT NULL,
    reason       TEXT NOT NULL,
    error        TEXT,
    requested_at TEXT NOT NULL,
    PRIMARY KEY (task_id, path)
);

-- Each succeeded task's change, per file, as a git-style unified diff.
CREATE TABLE IF NOT EXISTS patches (
    task_id  TEXT NOT NULL,
    path     TEXT NOT NULL,
    diff     TEXT NOT NULL,
    added    INTEGER NOT NULL,
    removed  INTEGER NOT NULL,
    binary   INTEGER NOT NULL,
    PRIMARY KEY (task_id, path)
);

-- The operator's named checks. Agents only ever name one; runners run its
-- command in an isolated copy of the tree (see docs/decisions/0022-isolated-checks-named-by-the-operator-run-by-runners.md).
CREATE TABLE IF NOT EXISTS checks (
    name       TEXT PRIMARY KEY,
    command    TEXT NOT NULL,
    defined_at TEXT NOT NULL,
    resources  TEXT NOT NULL DEFAULT '[]',  -- resources a run of it must hold (waited for)
    reuse      INTEGER NOT NULL DEFAULT 1  -- 0: a passing result is never reused for its content
);

-- A person's own Claude Code session that joined the lock (`codefleet join`): an
-- interactive holder with an open-ended task that is never scheduled, fenced or
-- rolled back. Its leases are file_leases rows under task_id like any other.
CREATE TABLE IF NOT EXISTS interactive_sessions (
    session_id    TEXT PRIMARY KEY,
    agent_id      TEXT NOT NULL UNIQUE,
    name          TEXT NOT NULL,
    task_id       TEXT NOT NULL UNIQUE,
    title         TEXT NOT NULL,
    active        INTEGER NOT NULL,
    started_at    TEXT NOT NULL,
    last_write_at TEXT NOT NULL,
    ended_at      TEXT,
    end_reason    TEXT
);

-- Fleet-wide counters (`sequences:` in the graph, the `next_number` tool): each value is
-- committed before it is answered, so none is ever handed out twice (not after a rollback,
-- a crash or a restart; gaps are fine). Not cleared by a reset.
CREATE TABLE IF NOT EXISTS sequences (
    name       TEXT PRIMARY KEY,
    last_value INTEGER NOT NULL,  -- the last value handed out (the start minus one at first)
    defined_at TEXT NOT NULL
);

-- What the server knows about itself across restarts: `alive_at`, the last time
-- the running server said it was up (so a restart can tell how long it was down).
CREATE TABLE IF NOT EXISTS server_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
