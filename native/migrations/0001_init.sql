-- 0001: native roots (DESIGN §7).
--
-- Every table has an INTEGER PRIMARY KEY seq, so "ORDER BY seq" is the order
-- rows were written in. A root's rows are keyed by its text id; a
-- reclassification never touches the previous root's rows.

-- bindings: a session's default root.
CREATE TABLE bindings (
    session_id TEXT PRIMARY KEY,
    root_id    TEXT NOT NULL
);

CREATE TABLE roots (
    seq              INTEGER PRIMARY KEY,
    id               TEXT    NOT NULL UNIQUE,
    session_id       TEXT    NOT NULL,
    revision         INTEGER NOT NULL CHECK (revision >= 1),
    intent           TEXT    NOT NULL CHECK (intent IN ('run', 'pause', 'stop', 'abort')),
    phase            TEXT    NOT NULL,
    policy_version   TEXT    NOT NULL,
    granted_at       INTEGER NOT NULL,
    previous_root_id TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX roots_by_session ON roots (session_id, seq);

-- tasks: reservations. intent is the task-scoped intent ('' when none).
CREATE TABLE tasks (
    seq            INTEGER PRIMARY KEY,
    root_id        TEXT    NOT NULL,
    id             TEXT    NOT NULL,
    subject        TEXT    NOT NULL,
    state          TEXT    NOT NULL,
    attempts       INTEGER NOT NULL DEFAULT 0,
    evidence_hash  TEXT    NOT NULL DEFAULT '',
    needs_approval INTEGER NOT NULL DEFAULT 0,
    planned        INTEGER NOT NULL DEFAULT 0,
    intent         TEXT    NOT NULL DEFAULT '',
    UNIQUE (root_id, id)
);
CREATE INDEX tasks_by_id ON tasks (id);

-- holds: at most one per task; hold_hash changes with every change (version).
CREATE TABLE holds (
    seq        INTEGER PRIMARY KEY,
    root_id    TEXT    NOT NULL,
    task_id    TEXT    NOT NULL,
    reason     TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    version    INTEGER NOT NULL,
    hold_hash  TEXT    NOT NULL UNIQUE,
    UNIQUE (root_id, task_id)
);

-- hold_hashes: every hash ever issued, so a stale hash is told apart from an
-- unknown one (hold_hash_mismatch vs hold_not_found).
CREATE TABLE hold_hashes (
    hash    TEXT PRIMARY KEY,
    root_id TEXT NOT NULL,
    task_id TEXT NOT NULL
);

CREATE TABLE decisions (
    seq           INTEGER PRIMARY KEY,
    id            TEXT    NOT NULL UNIQUE,
    root_id       TEXT    NOT NULL,
    task_id       TEXT    NOT NULL,
    verdict       TEXT    NOT NULL CHECK (verdict IN ('approve', 'deny')),
    rationale     TEXT    NOT NULL,
    evidence_hash TEXT    NOT NULL,
    consumed      INTEGER NOT NULL DEFAULT 0,
    created_at    INTEGER NOT NULL,
    supersedes    TEXT    NOT NULL DEFAULT '',
    superseded_by TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX decisions_by_task ON decisions (root_id, task_id, seq);

CREATE TABLE effects (
    seq        INTEGER PRIMARY KEY,
    id         TEXT    NOT NULL UNIQUE,
    root_id    TEXT    NOT NULL,
    task_id    TEXT    NOT NULL,
    kind       TEXT    NOT NULL,
    state      TEXT    NOT NULL,
    started_at INTEGER NOT NULL,
    settled_at INTEGER NOT NULL DEFAULT 0,
    proof_id   TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX effects_by_task ON effects (root_id, task_id, seq);

-- settlements: worker-settlement records; their id is a reconcile proofId.
CREATE TABLE settlements (
    seq         INTEGER PRIMARY KEY,
    id          TEXT    NOT NULL UNIQUE,
    root_id     TEXT    NOT NULL,
    task_id     TEXT    NOT NULL,
    worker_id   TEXT    NOT NULL,
    exit_code   INTEGER NOT NULL,
    failed      INTEGER NOT NULL,
    head_commit TEXT    NOT NULL,
    at          INTEGER NOT NULL
);

-- receipts: one per accepted mutation, written in the same transaction as
-- the change. root_id/revision are the root the revision belongs to (for a
-- reclassify, the new root at revision 1); subject_root_id is the request's.
CREATE TABLE receipts (
    seq             INTEGER PRIMARY KEY,
    session_id      TEXT    NOT NULL,
    operation_id    TEXT    NOT NULL,
    request_hash    TEXT    NOT NULL,
    root_id         TEXT    NOT NULL,
    subject_root_id TEXT    NOT NULL,
    action          TEXT    NOT NULL,
    task_id         TEXT    NOT NULL,
    revision        INTEGER NOT NULL,
    status          TEXT    NOT NULL,
    created_at      INTEGER NOT NULL,
    UNIQUE (session_id, operation_id)
);
CREATE INDEX receipts_by_root ON receipts (root_id, revision);
