-- 0001: the intelligence store.
--
-- The record tables (sessions, runs, run_tools, steering) hold what fleets
-- recorded; the *_stats tables and totals are running aggregates of runs kept
-- by the triggers at the end of this file, so that no snapshot ever scans the
-- runs. A run is replaced by DELETE then INSERT (never UPDATE), and Prune
-- deletes runs before their sessions, so the two triggers are all the
-- bookkeeping there is. Times are epoch ms.

CREATE TABLE sessions (
    sid        INTEGER PRIMARY KEY,
    id         TEXT    NOT NULL UNIQUE,
    name       TEXT    NOT NULL DEFAULT '',
    cwd        TEXT    NOT NULL DEFAULT '',
    repo       TEXT    NOT NULL DEFAULT '',
    provider   TEXT    NOT NULL DEFAULT '',
    model      TEXT    NOT NULL DEFAULT '',
    mode       TEXT    NOT NULL DEFAULT '',
    started_at INTEGER NOT NULL DEFAULT 0,
    ended_at   INTEGER NOT NULL DEFAULT 0, -- 0 while it runs
    -- Kept by the runs triggers.
    runs       INTEGER NOT NULL DEFAULT 0,
    failed     INTEGER NOT NULL DEFAULT 0, -- outcome != completed
    tokens     INTEGER NOT NULL DEFAULT 0  -- input + output
);
CREATE INDEX sessions_by_tokens ON sessions (tokens);

CREATE TABLE runs (
    rid                INTEGER PRIMARY KEY,
    id                 TEXT    NOT NULL UNIQUE,
    sid                INTEGER NOT NULL REFERENCES sessions (sid),
    worker             TEXT    NOT NULL,
    task_id            TEXT    NOT NULL,
    provider           TEXT    NOT NULL,
    model              TEXT    NOT NULL,
    task               TEXT    NOT NULL,
    -- kind is the skill name when the run used one, else the task's first
    -- word (taskKind in classify.go).
    kind               TEXT    NOT NULL,
    skill              TEXT    NOT NULL,
    skill_version      INTEGER NOT NULL,
    shadow             TEXT    NOT NULL,
    repo               TEXT    NOT NULL,
    worktree           TEXT    NOT NULL,
    started_at         INTEGER NOT NULL,
    ended_at           INTEGER NOT NULL,
    at                 INTEGER NOT NULL, -- ended_at, else started_at
    outcome            TEXT    NOT NULL,
    exit_code          INTEGER NOT NULL,
    error              TEXT    NOT NULL,
    cause              TEXT    NOT NULL,
    class              TEXT    NOT NULL, -- Classify; '' when completed
    error_key          TEXT    NOT NULL, -- errorKey; '' when completed
    ok                 INTEGER NOT NULL, -- 1 when outcome = completed
    judged             INTEGER NOT NULL, -- 0 for the classes cancelled and shutdown
    input_tokens       INTEGER NOT NULL,
    output_tokens      INTEGER NOT NULL,
    cache_read_tokens  INTEGER NOT NULL,
    cache_write_tokens INTEGER NOT NULL
);
CREATE INDEX runs_by_session ON runs (sid);
-- The windowed rules (recurring-error, budget-stops, stalls) read recent
-- failures only, from this index alone.
CREATE INDEX runs_failures ON runs (at, class, error_key, provider, kind) WHERE ok = 0;
-- SkillFailures.
CREATE INDEX runs_skill_failures ON runs (skill, at) WHERE ok = 0 AND judged = 1;

CREATE TABLE run_tools (
    rid   INTEGER NOT NULL REFERENCES runs (rid) ON DELETE CASCADE,
    tool  TEXT    NOT NULL,
    count INTEGER NOT NULL,
    PRIMARY KEY (rid, tool)
) WITHOUT ROWID;

CREATE TABLE steering (
    id         INTEGER PRIMARY KEY,
    sid        INTEGER NOT NULL REFERENCES sessions (sid),
    source     TEXT    NOT NULL,
    text       TEXT    NOT NULL,
    target     TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    deny_key   TEXT    NOT NULL -- normalised text of a 'deny'; '' otherwise
);
CREATE INDEX steering_by_session ON steering (sid);
CREATE INDEX steering_by_time ON steering (created_at);
CREATE INDEX steering_denials ON steering (deny_key, created_at) WHERE deny_key != '';

-- Skill versions by content: version n+1 is the n+1-th distinct content.
CREATE TABLE skills (
    name       TEXT    NOT NULL,
    version    INTEGER NOT NULL,
    hash       TEXT    NOT NULL, -- sha256 of the content, hex
    content    TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (name, version),
    UNIQUE (name, hash)
);

-- Candidate skill patches; id is 'sh-' || n.
CREATE TABLE shadows (
    n            INTEGER PRIMARY KEY AUTOINCREMENT,
    skill        TEXT    NOT NULL,
    base_version INTEGER NOT NULL,
    content      TEXT    NOT NULL,
    summary      TEXT    NOT NULL,
    author       TEXT    NOT NULL,
    status       TEXT    NOT NULL CHECK (status IN ('evaluating', 'applied', 'rejected')),
    created_at   INTEGER NOT NULL,
    decided_at   INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX shadows_by_status ON shadows (status);

-- Applied shadows; id is 'ev-' || n.
CREATE TABLE evolutions (
    n           INTEGER PRIMARY KEY AUTOINCREMENT,
    skill       TEXT    NOT NULL,
    shadow      TEXT    NOT NULL,
    summary     TEXT    NOT NULL,
    version     INTEGER NOT NULL,
    applied_at  INTEGER NOT NULL,
    rate_before REAL,   -- NULL when the base version had no judged runs
    rate_after  REAL,   -- NULL when the shadow had no judged runs
    runs_before INTEGER NOT NULL,
    runs_after  INTEGER NOT NULL
);
CREATE INDEX evolutions_by_time ON evolutions (applied_at);
CREATE INDEX evolutions_by_skill ON evolutions (skill, applied_at);

CREATE TABLE experiments (
    id         TEXT    PRIMARY KEY,
    name       TEXT    NOT NULL,
    hypothesis TEXT    NOT NULL,
    variants   TEXT    NOT NULL, -- JSON array of names, the control first
    created_at INTEGER NOT NULL
);

CREATE TABLE experiment_runs (
    seq           INTEGER PRIMARY KEY,
    id            TEXT    NOT NULL UNIQUE,
    experiment_id TEXT    NOT NULL REFERENCES experiments (id) ON DELETE CASCADE,
    started_at    INTEGER NOT NULL,
    completed_at  INTEGER NOT NULL,
    winner        TEXT    NOT NULL,
    test          TEXT    NOT NULL,
    p_value       REAL
);
CREATE INDEX experiment_runs_by_experiment ON experiment_runs (experiment_id, started_at);

CREATE TABLE experiment_variants (
    run_seq          INTEGER NOT NULL REFERENCES experiment_runs (seq) ON DELETE CASCADE,
    idx              INTEGER NOT NULL,
    variant          TEXT    NOT NULL,
    samples          INTEGER NOT NULL,
    passed           INTEGER NOT NULL,
    mean_duration_ms REAL    NOT NULL,
    mean_tokens      REAL    NOT NULL,
    mean             REAL    NOT NULL,
    pass_rate        REAL    NOT NULL,
    lift             REAL,
    PRIMARY KEY (run_seq, idx)
) WITHOUT ROWID;

-- The operator's decision on a suggestion, and when it first fired.
CREATE TABLE suggestion_states (
    id         TEXT    PRIMARY KEY,
    rule       TEXT    NOT NULL,
    key        TEXT    NOT NULL,
    state      TEXT    NOT NULL CHECK (state IN ('pending', 'accepted', 'dismissed')),
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) WITHOUT ROWID;

-- Running aggregates of runs.

CREATE TABLE totals (
    one    INTEGER PRIMARY KEY CHECK (one = 1),
    runs   INTEGER NOT NULL,
    failed INTEGER NOT NULL,
    tokens INTEGER NOT NULL
);
INSERT INTO totals (one, runs, failed, tokens) VALUES (1, 0, 0, 0);

-- Judged runs (not cancelled, not shut down) by repository, task kind and
-- provider: the provider-failure-rate rule.
CREATE TABLE provider_stats (
    repo     TEXT    NOT NULL,
    kind     TEXT    NOT NULL,
    provider TEXT    NOT NULL,
    judged   INTEGER NOT NULL,
    failed   INTEGER NOT NULL,
    PRIMARY KEY (repo, kind, provider)
) WITHOUT ROWID;

-- Runs that used a skill, by skill, version and shadow ('' for the skill
-- itself): skills, shadows and the skill-regression rule.
CREATE TABLE skill_stats (
    skill     TEXT    NOT NULL,
    version   INTEGER NOT NULL,
    shadow    TEXT    NOT NULL,
    uses      INTEGER NOT NULL,
    judged    INTEGER NOT NULL,
    passed    INTEGER NOT NULL, -- judged and completed
    last_used INTEGER NOT NULL,
    PRIMARY KEY (skill, version, shadow)
) WITHOUT ROWID;

-- Judged failures by error key: topErrors.
CREATE TABLE error_stats (
    key   TEXT    PRIMARY KEY,
    count INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX error_stats_by_count ON error_stats (count DESC, key);

CREATE TRIGGER runs_added AFTER INSERT ON runs BEGIN
    UPDATE sessions SET runs = runs + 1, failed = failed + 1 - NEW.ok,
        tokens = tokens + NEW.input_tokens + NEW.output_tokens
        WHERE sid = NEW.sid;
    UPDATE totals SET runs = runs + 1, failed = failed + 1 - NEW.ok,
        tokens = tokens + NEW.input_tokens + NEW.output_tokens;
    INSERT INTO provider_stats (repo, kind, provider, judged, failed)
        SELECT NEW.repo, NEW.kind, NEW.provider, 1, 1 - NEW.ok WHERE NEW.judged = 1
        ON CONFLICT (repo, kind, provider) DO UPDATE SET
            judged = judged + 1, failed = failed + excluded.failed;
    INSERT INTO skill_stats (skill, version, shadow, uses, judged, passed, last_used)
        SELECT NEW.skill, NEW.skill_version, NEW.shadow, 1, NEW.judged, NEW.judged * NEW.ok, NEW.at
        WHERE NEW.skill != ''
        ON CONFLICT (skill, version, shadow) DO UPDATE SET
            uses = uses + 1, judged = judged + excluded.judged, passed = passed + excluded.passed,
            last_used = max(last_used, excluded.last_used);
    INSERT INTO error_stats (key, count)
        SELECT NEW.error_key, 1 WHERE NEW.ok = 0 AND NEW.judged = 1
        ON CONFLICT (key) DO UPDATE SET count = count + 1;
END;

-- last_used is not lowered when a run goes: it stays the last use known.
CREATE TRIGGER runs_removed AFTER DELETE ON runs BEGIN
    UPDATE sessions SET runs = runs - 1, failed = failed - 1 + OLD.ok,
        tokens = tokens - OLD.input_tokens - OLD.output_tokens
        WHERE sid = OLD.sid;
    UPDATE totals SET runs = runs - 1, failed = failed - 1 + OLD.ok,
        tokens = tokens - OLD.input_tokens - OLD.output_tokens;
    UPDATE provider_stats SET judged = judged - 1, failed = failed - 1 + OLD.ok
        WHERE OLD.judged = 1 AND repo = OLD.repo AND kind = OLD.kind AND provider = OLD.provider;
    DELETE FROM provider_stats
        WHERE OLD.judged = 1 AND repo = OLD.repo AND kind = OLD.kind AND provider = OLD.provider AND judged <= 0;
    UPDATE skill_stats SET uses = uses - 1, judged = judged - OLD.judged, passed = passed - OLD.judged * OLD.ok
        WHERE OLD.skill != '' AND skill = OLD.skill AND version = OLD.skill_version AND shadow = OLD.shadow;
    DELETE FROM skill_stats
        WHERE OLD.skill != '' AND skill = OLD.skill AND version = OLD.skill_version AND shadow = OLD.shadow
            AND uses <= 0;
    UPDATE error_stats SET count = count - 1 WHERE OLD.ok = 0 AND OLD.judged = 1 AND key = OLD.error_key;
    DELETE FROM error_stats WHERE OLD.ok = 0 AND OLD.judged = 1 AND key = OLD.error_key AND count <= 0;
END;
