-- 0005: what agent providers need to resume (issue 12; history.Worker,
-- history.Coordinator). A worker keeps the provider and model that ran it,
-- the agent CLI's own session/thread id (a follow-up turn resumes it), the
-- token counts the model endpoint reported and the prompt it was given. A
-- session keeps its coordinator agent's CLI session, saved by Append as a
-- Coordinator record, so `fleet run --resume` continues its conversation;
-- the provider is saved with the id because the id means nothing to
-- another provider. Rows written before this migration get the defaults:
-- a shell task has no agent session and no tokens.

ALTER TABLE workers ADD COLUMN provider           TEXT    NOT NULL DEFAULT '';
ALTER TABLE workers ADD COLUMN model              TEXT    NOT NULL DEFAULT '';
ALTER TABLE workers ADD COLUMN agent_session_id   TEXT    NOT NULL DEFAULT '';
ALTER TABLE workers ADD COLUMN input_tokens       INTEGER NOT NULL DEFAULT 0;
ALTER TABLE workers ADD COLUMN output_tokens      INTEGER NOT NULL DEFAULT 0;
ALTER TABLE workers ADD COLUMN cache_read_tokens  INTEGER NOT NULL DEFAULT 0;
ALTER TABLE workers ADD COLUMN cache_write_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE workers ADD COLUMN prompt             TEXT    NOT NULL DEFAULT '';

ALTER TABLE sessions ADD COLUMN coordinator_provider   TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN coordinator_model      TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN coordinator_session_id TEXT NOT NULL DEFAULT '';
