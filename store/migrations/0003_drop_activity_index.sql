-- 0003: transcript_agents_by_activity is dropped. Every commit that saves
-- transcript lines updates its agent's last_seq, and the index made that a
-- second page write per commit (an index entry moves on every update).
-- Load orders a session's agents by last_seq itself: a session has one row
-- per worker, found through the UNIQUE (sid, agent) index.
DROP INDEX transcript_agents_by_activity;
