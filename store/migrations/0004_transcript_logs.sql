-- 0004: transcript logs (store/tlog.go, docs/store.md). Append writes a
-- batch's transcript lines to an append-only file of the session with one
-- write, and the Store moves them into transcript_chunks later, many
-- batches per transaction. The files of session sid are numbered
-- generations, and this row says how far the move got: every line of the
-- generations below gen, and of generation gen the bytes before off, is in
-- transcript_chunks. The transaction that inserts the chunks moves it, so a
-- line is never moved twice.
--
-- A batch that also has other records (a prompt, a task's state) writes
-- its lines to the log and then commits the rest here, with
-- (batch_gen, batch_off) set to its log record's position in the same
-- transaction: a record of such a batch past that position belongs to a
-- batch that never committed (the process died in between), and is not
-- moved.
CREATE TABLE transcript_logs (
    sid       INTEGER PRIMARY KEY REFERENCES sessions (sid),
    gen       INTEGER NOT NULL DEFAULT 0,
    off       INTEGER NOT NULL DEFAULT 0,
    batch_gen INTEGER NOT NULL DEFAULT 0,
    batch_off INTEGER NOT NULL DEFAULT 0
);
