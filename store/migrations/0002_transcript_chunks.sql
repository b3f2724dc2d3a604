-- 0002: transcript lines are stored in chunks, one row per agent per Append
-- (docs/store.md, Persistence). A row per line cost ~3 µs a line; a chunk
-- costs a row per agent per batch.
--
-- data holds the chunk's lines in order, in the binary encoding of
-- store/chunk.go: a format byte, then per line the ts (zigzag varint, as a
-- delta from the previous line's), and role, stream and text, each a
-- uvarint length and the bytes (the caller's bytes exactly).
--
-- first_line is the agent's line number (0-based, counting every line the
-- agent ever wrote, old-layout rows included) of the chunk's first line;
-- lines is how many the chunk holds; last_ts is the ts of its last line.

CREATE TABLE transcript_chunks (
    seq        INTEGER PRIMARY KEY,
    aid        INTEGER NOT NULL REFERENCES transcript_agents (aid),
    first_line INTEGER NOT NULL,
    lines      INTEGER NOT NULL CHECK (lines > 0),
    last_ts    INTEGER NOT NULL,
    data       BLOB    NOT NULL
);
CREATE INDEX transcript_chunks_by_agent ON transcript_chunks (aid, seq);

-- transcript_agents.last_seq now holds the seq of the agent's newest chunk.
-- The seqs of the old transcript table are a different sequence, so the
-- existing values are shifted below every chunk seq (≤ -1), which keeps the
-- activity order of the old agents and puts every agent that writes a chunk
-- after them. The old transcript table is kept and still read (an agent's
-- lines older than its first chunk are there); nothing writes it any more.
UPDATE transcript_agents
   SET last_seq = last_seq - (SELECT coalesce(max(last_seq), 0) + 1 FROM transcript_agents);
