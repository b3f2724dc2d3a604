package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Prepared write statements, indexes into stmts.
const (
	stConversation = iota
	stChunk
	stHub
	stTask
	stWorker
	stCounter
	stCoordinator
	stAgentGet
	stAgentAdd
	stAgentTouch
	stSessionTouch
	stMark
	stBatchMark
	nStmts
)

var stmtSQL = [nStmts]string{
	stConversation: `INSERT INTO conversation (sid, ts, role, source, text, request_id) VALUES (?, ?, ?, ?, ?, ?)`,
	// first_line is the agent's line count before this chunk: a primary
	// key lookup.
	stChunk: `INSERT INTO transcript_chunks (aid, first_line, lines, last_ts, data)
		VALUES (?1, (SELECT lines FROM transcript_agents WHERE aid = ?1), ?2, ?3, ?4)`,
	stHub: `INSERT INTO hub (sid, ts, from_agent, kind, to_agent, text) VALUES (?, ?, ?, ?, ?, ?)`,
	stTask: `INSERT INTO tasks (sid, id, command, status, worker, reason, created_at, updated_at, attempts, loop_id, planned)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (sid, id) DO UPDATE SET command = excluded.command, status = excluded.status,
			worker = excluded.worker, reason = excluded.reason, created_at = excluded.created_at,
			updated_at = excluded.updated_at, attempts = excluded.attempts, loop_id = excluded.loop_id,
			planned = excluded.planned`,
	stWorker: `INSERT INTO workers (sid, id, task_id, status, worktree_path, branch, base_commit, started_at, ended_at,
			last_activity_at, tool_uses, provider, model, agent_session_id, input_tokens, output_tokens,
			cache_read_tokens, cache_write_tokens, prompt, host)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (sid, id) DO UPDATE SET task_id = excluded.task_id, status = excluded.status,
			worktree_path = excluded.worktree_path, branch = excluded.branch, base_commit = excluded.base_commit,
			started_at = excluded.started_at, ended_at = excluded.ended_at,
			last_activity_at = excluded.last_activity_at, tool_uses = excluded.tool_uses,
			provider = excluded.provider, model = excluded.model, agent_session_id = excluded.agent_session_id,
			input_tokens = excluded.input_tokens, output_tokens = excluded.output_tokens,
			cache_read_tokens = excluded.cache_read_tokens, cache_write_tokens = excluded.cache_write_tokens,
			prompt = excluded.prompt, host = excluded.host`,
	stCounter: `INSERT INTO counters (sid, name, value) VALUES (?, ?, ?)
		ON CONFLICT (sid, name) DO UPDATE SET value = excluded.value`,
	stCoordinator: `UPDATE sessions SET coordinator_provider = ?, coordinator_model = ?, coordinator_session_id = ?
		WHERE sid = ?`,
	stAgentGet:     `SELECT aid FROM transcript_agents WHERE sid = ? AND agent = ?`,
	stAgentAdd:     `INSERT INTO transcript_agents (sid, agent) VALUES (?, ?)`,
	stAgentTouch:   `UPDATE transcript_agents SET last_seq = ?2, lines = lines + ?3 WHERE aid = ?1`,
	stSessionTouch: `UPDATE sessions SET last_active = ?, conversation_count = conversation_count + ?, hub_count = hub_count + ? WHERE sid = ?`,
	stMark: `INSERT INTO transcript_logs (sid, gen, off) VALUES (?1, ?2, ?3)
		ON CONFLICT (sid) DO UPDATE SET gen = excluded.gen, off = excluded.off`,
	stBatchMark: `INSERT INTO transcript_logs (sid, batch_gen, batch_off) VALUES (?1, ?2, ?3)
		ON CONFLICT (sid) DO UPDATE SET batch_gen = excluded.batch_gen, batch_off = excluded.batch_off`,
}

// stmts are the write statements, prepared once on the write connection and
// bound to each batch's transaction with tx.Stmt (which reuses the prepared
// statement, since the pool has only that connection).
type stmts [nStmts]*sql.Stmt

func (st *stmts) prepare(ctx context.Context, db *sql.DB) error {
	for i, q := range stmtSQL {
		p, err := db.PrepareContext(ctx, q)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", q, err)
		}
		st[i] = p
	}
	return nil
}

func (st *stmts) close() {
	for i, p := range st {
		if p != nil {
			p.Close()
			st[i] = nil
		}
	}
}

type agentKey struct {
	sid   int64
	agent string
}

// batch is Append's scratch space, reused across calls (guarded by wmu).
type batch struct {
	tx      [nStmts]*sql.Stmt // statements bound to the current transaction
	touched []agentChunk      // agents that got lines in this batch
	added   []agentKey        // aids cached by this batch, forgotten on rollback
}

// agentChunk is the chunk of one agent's lines that the batch is building.
type agentChunk struct {
	aid    int64
	lines  int64
	last   int    // index in the batch of the agent's last line
	lastTs int64  // its ts
	buf    []byte // the encoded chunk (chunk.go)
}

// maxKeptChunkBuf: a chunk buffer larger than this is not kept for the next
// batch.
const maxKeptChunkBuf = 1 << 20

func (b *batch) reset() {
	b.tx = [nStmts]*sql.Stmt{}
	all := b.touched[:cap(b.touched)]
	for i := range all {
		if cap(all[i].buf) > maxKeptChunkBuf {
			all[i].buf = nil
		}
	}
	b.touched = b.touched[:0]
	b.added = b.added[:0]
}

// stmt returns statement i bound to tx, binding it on first use in the batch.
func (b *batch) stmt(s *Store, tx *sql.Tx, i int) *sql.Stmt {
	if b.tx[i] == nil {
		b.tx[i] = tx.Stmt(s.stmts[i])
	}
	return b.tx[i]
}

// touch returns the index of aid's chunk in b.touched, starting one (and
// reusing a buffer of an earlier batch) for an agent new to the batch.
func (b *batch) touch(aid int64) int {
	for i := range b.touched {
		if b.touched[i].aid == aid {
			return i
		}
	}
	n := len(b.touched)
	if n < cap(b.touched) {
		b.touched = b.touched[:n+1]
	} else {
		b.touched = append(b.touched, agentChunk{})
	}
	c := &b.touched[n]
	*c = agentChunk{aid: aid, buf: append(c.buf[:0], chunkFormat)}
	return n
}

// CreateSession records a new session. Mode must be ModeLegacy or
// ModeNative; a LastActive of zero is set to StartedAt. An existing id is an
// error wrapping ErrExists.
func (s *Store) CreateSession(ctx context.Context, sess Session) error {
	switch {
	case sess.ID == "":
		return errors.New("create session: empty id")
	case sess.Mode != ModeLegacy && sess.Mode != ModeNative:
		return fmt.Errorf("create session %s: mode %q is neither %q nor %q", sess.ID, sess.Mode, ModeLegacy, ModeNative)
	}
	if sess.LastActive == 0 {
		sess.LastActive = sess.StartedAt
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed {
		return ErrClosed
	}
	res, err := s.w.ExecContext(ctx, `INSERT INTO sessions (id, name, cwd, provider, model, mode, repo_root, started_at, last_active)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		sess.ID, sess.Name, sess.Cwd, sess.Provider, sess.Model, sess.Mode, sess.RepoRoot, sess.StartedAt, sess.LastActive)
	if err != nil {
		var se *sqlite.Error
		if errors.As(err, &se) && se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE {
			return fmt.Errorf("create session %s: %w", sess.ID, ErrExists)
		}
		return fmt.Errorf("create session %s: %w", sess.ID, err)
	}
	if sid, err := res.LastInsertId(); err == nil {
		s.sids[sess.ID] = sid
	}
	return nil
}

// Append writes recs in one transaction: when it returns nil they are
// committed and survive a kill -9 of the process; when it returns an error
// none of them was written. Tasks, workers and counters are upserted; the
// other kinds are appended in order. The session's LastActive moves to the
// wall clock (at most once a second for batches of transcript lines and
// state). An empty batch writes nothing.
//
// Transcript lines go to the session's transcript log (tlog.go) when this
// Store holds it, and reach transcript_chunks when output pauses; the other
// records are committed to SQLite before Append returns.
func (s *Store) Append(ctx context.Context, sessionID string, recs []Record) error {
	if len(recs) == 0 {
		return nil
	}
	for i := range recs {
		if err := recs[i].Validate(); err != nil {
			return fmt.Errorf("append to session %s: record %d: %w", sessionID, i, err)
		}
	}
	var l *tlog
	tn, others := transcriptBytes(recs)
	if tn > 0 {
		var err error
		if l, err = s.logFor(ctx, sessionID); err != nil {
			return s.appendErr(sessionID, err)
		}
		if l != nil && tn > maxTlogRecord {
			// Too large for one record: committed straight to SQLite,
			// after what the log holds.
			if err := s.flush(ctx, l); err != nil {
				return s.appendErr(sessionID, err)
			}
			l = nil
		}
	}
	if l == nil {
		s.wmu.Lock()
		defer s.wmu.Unlock()
		if s.closed {
			return ErrClosed
		}
		return s.appendErr(sessionID, s.appendLocked(ctx, sessionID, recs))
	}

	if err := ctx.Err(); err != nil {
		return s.appendErr(sessionID, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	// The other records commit to SQLite, after the lines' record. So
	// does the session's last_active, at most once a second (touchEvery),
	// but only when the writer is free: a batch of lines never waits
	// behind an ingest for it, a later one moves it instead.
	now := s.now()
	sqlHalf := others
	if others {
		s.wmu.Lock()
	} else if now-l.touchedAt >= touchEvery || now < l.touchedAt {
		sqlHalf = s.wmu.TryLock()
	}
	if sqlHalf {
		defer s.wmu.Unlock()
	}
	at := tlogMark{l.gen, l.size}
	if err := l.write(recs, sqlHalf); err != nil {
		return s.appendErr(sessionID, err)
	}
	s.ing.wrote(l.size - at.off)
	if !sqlHalf {
		return nil
	}
	err := ErrClosed
	if !s.closed {
		var sid int64
		if sid, err = s.sidLocked(ctx, sessionID); err == nil {
			err = s.writeLocked(ctx, sid, recs, writeOpts{logged: &at})
		}
	}
	if err != nil {
		if uerr := l.unwrite(l.size - at.off); uerr != nil {
			err = fmt.Errorf("%w (and taking its transcript lines back: %v)", err, uerr)
		}
		return s.appendErr(sessionID, err)
	}
	l.touchedAt = now
	return nil
}

// appendErr wraps an error of Append, with a hint when it concerns the
// database file.
func (s *Store) appendErr(sessionID string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrClosed):
		return ErrClosed
	}
	if hint := fileHint(s.path, err); hint != "" {
		return fmt.Errorf("append to session %s: %s: %s: %w", sessionID, s.path, hint, err)
	}
	return fmt.Errorf("append to session %s: %w", sessionID, err)
}

// appendLocked is Append without the transcript log. s.wmu must be held.
func (s *Store) appendLocked(ctx context.Context, sessionID string, recs []Record) error {
	sid, err := s.sidLocked(ctx, sessionID)
	if err != nil {
		return err
	}
	return s.writeLocked(ctx, sid, recs, writeOpts{})
}

// writeOpts say how writeLocked treats a batch that involves the
// transcript log.
type writeOpts struct {
	// logged: the batch's transcript lines are in the log, in the record
	// at this position; they are skipped here and the session's batch
	// mark moves to it.
	logged *tlogMark
	// ingested: the batch is lines moved from the log, up to here (the
	// session's mark moves to it).
	ingested *tlogMark
	// lines, when set, passes the lines of an ingest to add, in order,
	// after recs.
	lines func(add func(*rawLine) error) error
}

// writeLocked writes recs of session sid in one transaction (see
// writeOpts). s.wmu must be held.
func (s *Store) writeLocked(ctx context.Context, sid int64, recs []Record, o writeOpts) (err error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	b := &s.scratch
	b.reset()
	defer func() {
		if err != nil {
			tx.Rollback()
			for _, k := range b.added {
				delete(s.aids, k)
			}
		}
		b.reset()
	}()

	// Rows are executed without ctx: a cancellable ctx costs the driver a
	// goroutine per statement. Cancellation still aborts the batch, since
	// database/sql rolls the transaction back when ctx is done.
	var convN, hubN int64
	walBytes := int64(0) // estimated WAL growth, for the checkpointer
	var agent string
	ti := -1 // index in b.touched of agent's aid
	for i := range recs {
		if s.testHookRecord != nil {
			if err := s.testHookRecord(i); err != nil {
				return err
			}
		}
		r := &recs[i]
		switch {
		case r.Transcript != nil:
			if o.logged != nil {
				continue
			}
			l := r.Transcript
			if ti < 0 || l.Agent != agent {
				aid, err := s.aidLocked(tx, sid, l.Agent)
				if err != nil {
					return err
				}
				agent, ti = l.Agent, b.touch(aid)
			}
			c := &b.touched[ti]
			c.buf = appendChunkLine(c.buf, c.lastTs, l)
			c.lines++
			c.last, c.lastTs = i, l.Ts
		case r.Conversation != nil:
			c := r.Conversation
			if _, err := b.stmt(s, tx, stConversation).Exec(sid, c.Ts, string(c.Role), c.Source, c.Text, c.RequestID); err != nil {
				return err
			}
			convN++
			walBytes += int64(len(c.Text)+len(c.Source)+len(c.RequestID)) + walRow
		case r.Hub != nil:
			h := r.Hub
			if _, err := b.stmt(s, tx, stHub).Exec(sid, h.Ts, h.From, h.Kind, h.To, h.Text); err != nil {
				return err
			}
			hubN++
			walBytes += int64(len(h.Text)+len(h.From)+len(h.To)) + walRow
		case r.Task != nil:
			t := r.Task
			_, err := b.stmt(s, tx, stTask).Exec(sid, t.ID, t.Command, t.Status, t.Worker, t.Reason,
				t.CreatedAt, t.UpdatedAt, t.Attempt, t.LoopID, t.Planned)
			if err != nil {
				return err
			}
			walBytes += walRow
		case r.Worker != nil:
			w := r.Worker
			_, err := b.stmt(s, tx, stWorker).Exec(sid, w.ID, w.TaskID, w.Status, w.WorktreePath, w.Branch,
				w.BaseCommit, w.StartedAt, w.EndedAt, w.LastActivityAt, w.ToolUses, w.Provider, w.Model,
				w.AgentSessionID, w.InputTokens, w.OutputTokens, w.CacheReadTokens, w.CacheWriteTokens, w.Prompt, w.Host)
			if err != nil {
				return err
			}
			walBytes += int64(len(w.Prompt)) + walRow
		case r.Counter != nil:
			if _, err := b.stmt(s, tx, stCounter).Exec(sid, r.Counter.Name, r.Counter.Value); err != nil {
				return err
			}
			walBytes += walRow
		case r.Coordinator != nil:
			c := r.Coordinator
			if _, err := b.stmt(s, tx, stCoordinator).Exec(c.Provider, c.Model, c.SessionID, sid); err != nil {
				return err
			}
			walBytes += walFrame
		}
	}
	if o.lines != nil {
		// An ingest: lines straight from the log's records, copied into
		// the chunks. Its many lines are cut into chunks of about
		// ingestChunkBytes, so that Load reads little.
		i := len(recs)
		err := o.lines(func(l *rawLine) error {
			if ti < 0 || string(l.agent) != agent {
				agent = string(l.agent)
				aid, err := s.aidLocked(tx, sid, agent)
				if err != nil {
					return err
				}
				ti = b.touch(aid)
			}
			c := &b.touched[ti]
			c.buf = appendChunkFields(c.buf, l.ts-c.lastTs, l.role, l.stream, l.text)
			c.lines++
			c.last, c.lastTs = i, l.ts
			i++
			if len(c.buf) >= ingestChunkBytes {
				n, err := s.insertChunk(tx, c)
				walBytes += n
				return err
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	// One chunk per agent (the rest of it, after a cut), in the order of
	// the agents' last lines, so that last_seq orders the agents by their
	// newest line.
	slices.SortFunc(b.touched, func(x, y agentChunk) int { return cmp.Compare(x.last, y.last) })
	for i := range b.touched {
		if b.touched[i].lines == 0 {
			continue
		}
		n, err := s.insertChunk(tx, &b.touched[i])
		if err != nil {
			return err
		}
		walBytes += n
	}
	if m := o.ingested; m != nil {
		if _, err := b.stmt(s, tx, stMark).Exec(sid, m.gen, m.off); err != nil {
			return err
		}
		walBytes += walFrame
	}
	if m := o.logged; m != nil {
		if _, err := b.stmt(s, tx, stBatchMark).Exec(sid, m.gen, m.off); err != nil {
			return err
		}
		walBytes += walFrame
	}
	now := s.now()
	prev, seen := s.activeAt[sid]
	touch := len(recs) > 0 && (!seen || convN > 0 || hubN > 0 || now-prev >= touchEvery || now < prev)
	if touch {
		if _, err := b.stmt(s, tx, stSessionTouch).Exec(now, convN, hubN, sid); err != nil {
			return err
		}
		walBytes += walFrame
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	if touch {
		s.activeAt[sid] = now
	}
	s.ck.committed(walBytes)
	return nil
}

// insertChunk inserts the chunk c holds, moves its agent's line count and
// last_seq, and empties c for the agent's next lines. It returns about what
// that added to the WAL.
func (s *Store) insertChunk(tx *sql.Tx, c *agentChunk) (int64, error) {
	b := &s.scratch
	res, err := b.stmt(s, tx, stChunk).Exec(c.aid, c.lines, c.lastTs, c.buf)
	if err != nil {
		return 0, err
	}
	seq, err := res.LastInsertId()
	if err != nil {
		return 0, err
	}
	if _, err := b.stmt(s, tx, stAgentTouch).Exec(c.aid, seq, c.lines); err != nil {
		return 0, err
	}
	// The chunk's leaf (and overflow pages), its index entry's leaf and
	// the agent's row: three pages for a small chunk.
	n := int64(len(c.buf)) + 3*walFrame
	c.buf, c.lines, c.lastTs = append(c.buf[:0], chunkFormat), 0, 0
	return n, nil
}

// touchEvery: a batch of only transcript lines and state moves the
// session's last_active when it is at least this old (ms). It is what
// `fleet sessions` sorts by; rewriting its page with every small batch was
// a fifth of a small commit's writes.
const touchEvery = 1000

// sidLocked returns the integer key of session id. s.wmu must be held.
func (s *Store) sidLocked(ctx context.Context, id string) (int64, error) {
	if sid, ok := s.sids[id]; ok {
		return sid, nil
	}
	var sid int64
	err := s.w.QueryRowContext(ctx, `SELECT sid FROM sessions WHERE id = ?`, id).Scan(&sid)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, ErrNotFound
	}
	if err != nil {
		return 0, err
	}
	s.sids[id] = sid
	return sid, nil
}

// aidLocked returns the transcript_agents key of (sid, agent), creating the
// row in tx. s.wmu must be held; a key created here is remembered in
// s.scratch.added so that a rollback forgets it.
func (s *Store) aidLocked(tx *sql.Tx, sid int64, agent string) (int64, error) {
	k := agentKey{sid, agent}
	if aid, ok := s.aids[k]; ok {
		return aid, nil
	}
	b := &s.scratch
	var aid int64
	err := b.stmt(s, tx, stAgentGet).QueryRow(sid, agent).Scan(&aid)
	if errors.Is(err, sql.ErrNoRows) {
		var res sql.Result
		if res, err = b.stmt(s, tx, stAgentAdd).Exec(sid, agent); err == nil {
			aid, err = res.LastInsertId()
		}
	}
	if err != nil {
		return 0, err
	}
	s.aids[k] = aid
	b.added = append(b.added, k)
	return aid, nil
}
