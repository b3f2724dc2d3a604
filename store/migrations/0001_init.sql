-- 0001: sessions and everything a resume and a hydrate need.
--
-- Rows that belong to a session are keyed by the session's integer key (sid)
-- and by seq, the table's INTEGER PRIMARY KEY (SQLite's rowid): seq only grows
-- within a table, so "ORDER BY seq" is exactly the order Append wrote them in.
-- Text columns hold the caller's bytes exactly (invalid UTF-8 included).

CREATE TABLE sessions (
    sid                INTEGER PRIMARY KEY,
    id                 TEXT    NOT NULL UNIQUE,
    name               TEXT    NOT NULL,
    cwd                TEXT    NOT NULL,
    provider           TEXT    NOT NULL,
    model              TEXT    NOT NULL,
    mode               TEXT    NOT NULL CHECK (mode IN ('legacy', 'native')),
    repo_root          TEXT    NOT NULL,
    started_at         INTEGER NOT NULL,
    last_active        INTEGER NOT NULL,
    -- Running totals kept by Append, so Load never counts a long history.
    conversation_count INTEGER NOT NULL DEFAULT 0,
    hub_count          INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX sessions_by_last_active ON sessions (last_active);

CREATE TABLE conversation (
    seq        INTEGER PRIMARY KEY,
    sid        INTEGER NOT NULL REFERENCES sessions (sid),
    ts         INTEGER NOT NULL,
    role       TEXT    NOT NULL,
    source     TEXT    NOT NULL,
    text       TEXT    NOT NULL,
    request_id TEXT    NOT NULL
);
CREATE INDEX conversation_by_session ON conversation (sid, seq);

-- One row per (session, agent) that wrote transcript lines. last_seq is the
-- seq of the agent's newest line, so "the N most recently active agents" is
-- an index walk; lines is the agent's line count.
CREATE TABLE transcript_agents (
    aid      INTEGER PRIMARY KEY,
    sid      INTEGER NOT NULL REFERENCES sessions (sid),
    agent    TEXT    NOT NULL,
    last_seq INTEGER NOT NULL DEFAULT 0,
    lines    INTEGER NOT NULL DEFAULT 0,
    UNIQUE (sid, agent)
);
CREATE INDEX transcript_agents_by_activity ON transcript_agents (sid, last_seq);

CREATE TABLE transcript (
    seq    INTEGER PRIMARY KEY,
    aid    INTEGER NOT NULL REFERENCES transcript_agents (aid),
    ts     INTEGER NOT NULL,
    role   TEXT    NOT NULL,
    stream TEXT    NOT NULL,
    text   TEXT    NOT NULL
);
CREATE INDEX transcript_by_agent ON transcript (aid, seq);

CREATE TABLE hub (
    seq        INTEGER PRIMARY KEY,
    sid        INTEGER NOT NULL REFERENCES sessions (sid),
    ts         INTEGER NOT NULL,
    from_agent TEXT    NOT NULL,
    kind       TEXT    NOT NULL,
    to_agent   TEXT    NOT NULL,
    text       TEXT    NOT NULL
);
CREATE INDEX hub_by_session ON hub (sid, seq);

-- Tasks and workers are upserted by (sid, id); seq is kept on update, so
-- "ORDER BY seq" is creation order.
CREATE TABLE tasks (
    seq        INTEGER PRIMARY KEY,
    sid        INTEGER NOT NULL REFERENCES sessions (sid),
    id         TEXT    NOT NULL,
    command    TEXT    NOT NULL,
    status     TEXT    NOT NULL,
    worker     TEXT    NOT NULL,
    reason     TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    attempts   INTEGER NOT NULL,
    loop_id    TEXT    NOT NULL,
    planned    INTEGER NOT NULL, -- 0 or 1
    UNIQUE (sid, id)
);

CREATE TABLE workers (
    seq           INTEGER PRIMARY KEY,
    sid           INTEGER NOT NULL REFERENCES sessions (sid),
    id            TEXT    NOT NULL,
    task_id       TEXT    NOT NULL,
    status        TEXT    NOT NULL,
    worktree_path TEXT    NOT NULL,
    branch        TEXT    NOT NULL,
    base_commit   TEXT    NOT NULL,
    started_at    INTEGER NOT NULL,
    ended_at      INTEGER NOT NULL,
    last_activity_at INTEGER NOT NULL,
    tool_uses     INTEGER NOT NULL,
    UNIQUE (sid, id)
);

CREATE TABLE counters (
    sid   INTEGER NOT NULL REFERENCES sessions (sid),
    name  TEXT    NOT NULL,
    value INTEGER NOT NULL,
    PRIMARY KEY (sid, name)
) WITHOUT ROWID;
