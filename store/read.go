package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/agents-fleet/fleet/history"
)

// Limits bound what Load reads. A zero field means its DefaultLimits value,
// a negative one reads none.
type Limits struct {
	Conversation       int // last N conversation entries
	TranscriptPerAgent int // last N lines of each agent
	TranscriptAgents   int // the N most recently active agents
	Hub                int // last N hub events
}

// DefaultLimits are the hydrate windows (docs/decisions.md, Replay).
var DefaultLimits = Limits{Conversation: 200, TranscriptPerAgent: 200, TranscriptAgents: 64, Hub: 500}

func (l Limits) withDefaults() Limits {
	def := func(v *int, d int) {
		switch {
		case *v == 0:
			*v = d
		case *v < 0:
			*v = 0
		}
	}
	def(&l.Conversation, DefaultLimits.Conversation)
	def(&l.TranscriptPerAgent, DefaultLimits.TranscriptPerAgent)
	def(&l.TranscriptAgents, DefaultLimits.TranscriptAgents)
	def(&l.Hub, DefaultLimits.Hub)
	return l
}

// Loaded is what a resume and a hydrate need: the session, its history
// window (history.Hydrate makes the hydrate of it) and the engine's state
// (a resume hands it to the engine as is: engine.Restore is
// history.State).
type Loaded struct {
	Session Session
	// Window: Conversation is the last Limits.Conversation entries,
	// oldest first, and ConversationTotal counts all of them; Transcripts
	// maps each of the Limits.TranscriptAgents most recently active agents
	// to its last Limits.TranscriptPerAgent lines, oldest first; Hub is the
	// last Limits.Hub events, oldest first.
	history.Window
	// State: Tasks and Workers are all of them, in creation order;
	// Counters holds every counter by name; Coordinator is the session's
	// coordinator CLI session (zero when none was saved).
	history.State
}

// The windowed reads: each one walks an index backwards from its end and
// stops after LIMIT rows, so its cost does not depend on the history's
// length (TestWindowQueriesUseIndexes checks the plans).
const (
	qConversationWindow = `SELECT ts, role, source, text, request_id FROM conversation WHERE sid = ? ORDER BY seq DESC LIMIT ?`
	qHubWindow          = `SELECT ts, from_agent, kind, to_agent, text FROM hub WHERE sid = ? ORDER BY seq DESC LIMIT ?`
	qRecentAgents       = `SELECT aid, agent, lines FROM transcript_agents WHERE sid = ? ORDER BY last_seq DESC LIMIT ?`
	// An agent's chunks, newest first: Load reads until it has its window
	// (at most one chunk per line of the window).
	qAgentChunks = `SELECT first_line, lines, data FROM transcript_chunks WHERE aid = ? ORDER BY seq DESC LIMIT ?`
	// Lines written before migration 0002, one row each: older than every
	// chunk of their agent.
	qAgentWindow = `SELECT ts, role, stream, text FROM transcript WHERE aid = ? ORDER BY seq DESC LIMIT ?`
	qPrefix      = `SELECT id FROM sessions WHERE id >= ? ORDER BY id LIMIT ?`
)

const sessionCols = `sid, id, name, cwd, provider, model, mode, repo_root, started_at, last_active`

// workerCols are the columns of a history.Worker, in scanWorker's order.
const workerCols = `id, task_id, status, worktree_path, branch, base_commit, started_at, ended_at, last_activity_at,
	tool_uses, provider, model, agent_session_id, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, prompt, host`

func scanWorker(r rowScanner, w *Worker) error {
	return r.Scan(&w.ID, &w.TaskID, &w.Status, &w.WorktreePath, &w.Branch, &w.BaseCommit, &w.StartedAt, &w.EndedAt,
		&w.LastActivityAt, &w.ToolUses, &w.Provider, &w.Model, &w.AgentSessionID, &w.InputTokens, &w.OutputTokens,
		&w.CacheReadTokens, &w.CacheWriteTokens, &w.Prompt, &w.Host)
}

type rowScanner interface{ Scan(...any) error }

func scanSession(r rowScanner, sid *int64, s *Session) error {
	return r.Scan(sid, &s.ID, &s.Name, &s.Cwd, &s.Provider, &s.Model, &s.Mode, &s.RepoRoot, &s.StartedAt, &s.LastActive)
}

// readTx runs f in one read transaction of the read pool, so that every
// query in f sees the same committed state.
func (s *Store) readTx(ctx context.Context, f func(tx *sql.Tx) error) error {
	if s.rclosed.Load() {
		return ErrClosed
	}
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		if s.rclosed.Load() {
			return ErrClosed
		}
		return err
	}
	defer tx.Rollback()
	return f(tx)
}

// Sessions lists every session, the most recently active first, with its
// task counts.
func (s *Store) Sessions(ctx context.Context) ([]Session, error) {
	var out []Session
	err := s.readTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT `+sessionCols+` FROM sessions ORDER BY last_active DESC, sid DESC`)
		if err != nil {
			return err
		}
		defer rows.Close()
		bySid := make(map[int64]int)
		for rows.Next() {
			var sid int64
			var sess Session
			if err := scanSession(rows, &sid, &sess); err != nil {
				return err
			}
			bySid[sid] = len(out)
			out = append(out, sess)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		rows, err = tx.QueryContext(ctx, `SELECT sid, status, count(*) FROM tasks GROUP BY sid, status`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var sid int64
			var status string
			var n int
			if err := rows.Scan(&sid, &status, &n); err != nil {
				return err
			}
			if i, ok := bySid[sid]; ok {
				out[i].Tasks.add(status, n)
			}
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	return out, nil
}

func (c *TaskCounts) add(status string, n int) {
	switch status {
	case "pending":
		c.Pending += n
	case "running":
		c.Running += n
	case "blocked":
		c.Blocked += n
	case "done":
		c.Done += n
	case "failed":
		c.Failed += n
	}
	c.Total += n
}

// maxAmbiguous is how many matching ids an ambiguity error lists.
const maxAmbiguous = 10

// GetSession finds a session by exact id or by a unique id prefix, with its
// task counts. No match wraps ErrNotFound; several wrap ErrAmbiguous and
// list them.
func (s *Store) GetSession(ctx context.Context, idOrPrefix string) (Session, error) {
	if idOrPrefix == "" {
		return Session{}, fmt.Errorf("get session: empty id: %w", ErrNotFound)
	}
	var sess Session
	err := s.readTx(ctx, func(tx *sql.Tx) error {
		sid, err := getSessionTx(ctx, tx, idOrPrefix, &sess)
		if errors.Is(err, ErrNotFound) {
			var id string
			if id, err = uniquePrefixTx(ctx, tx, idOrPrefix); err == nil {
				sid, err = getSessionTx(ctx, tx, id, &sess)
			}
		}
		if err != nil {
			return err
		}
		sess.Tasks, err = taskCountsTx(ctx, tx, sid)
		return err
	})
	if err != nil {
		return Session{}, fmt.Errorf("get session %s: %w", idOrPrefix, err)
	}
	return sess, nil
}

// uniquePrefixTx returns the one session id that starts with prefix.
func uniquePrefixTx(ctx context.Context, tx *sql.Tx, prefix string) (string, error) {
	// Ids compare bytewise, so the ids with this prefix are the first ones
	// at or after it: an index range read, not a scan.
	rows, err := tx.QueryContext(ctx, qPrefix, prefix, maxAmbiguous+1)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return "", err
		}
		if !strings.HasPrefix(id, prefix) {
			break
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return "", err
	}
	switch len(ids) {
	case 0:
		return "", ErrNotFound
	case 1:
		return ids[0], nil
	}
	more := ""
	if len(ids) > maxAmbiguous {
		ids, more = ids[:maxAmbiguous], ", …"
	}
	return "", fmt.Errorf("%w: %q matches %s%s", ErrAmbiguous, prefix, strings.Join(ids, ", "), more)
}

func getSessionTx(ctx context.Context, tx *sql.Tx, id string, sess *Session) (int64, error) {
	var sid int64
	err := scanSession(tx.QueryRowContext(ctx, `SELECT `+sessionCols+` FROM sessions WHERE id = ?`, id), &sid, sess)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, ErrNotFound
	}
	return sid, err
}

func taskCountsTx(ctx context.Context, tx *sql.Tx, sid int64) (TaskCounts, error) {
	var c TaskCounts
	rows, err := tx.QueryContext(ctx, `SELECT status, count(*) FROM tasks WHERE sid = ? GROUP BY status`, sid)
	if err != nil {
		return c, err
	}
	defer rows.Close()
	for rows.Next() {
		var status string
		var n int
		if err := rows.Scan(&status, &n); err != nil {
			return c, err
		}
		c.add(status, n)
	}
	return c, rows.Err()
}

// Load reads session sessionID (an exact id) for a resume and a hydrate, in
// one read transaction. Its cost is bounded by lim, not by the length of
// the session's history: every window is an index range read backwards from
// its end.
func (s *Store) Load(ctx context.Context, sessionID string, lim Limits) (*Loaded, error) {
	lim = lim.withDefaults()
	if err := s.settle(ctx, sessionID); err != nil {
		return nil, fmt.Errorf("load session %s: %w", sessionID, err)
	}
	var l *Loaded
	err := s.readTx(ctx, func(tx *sql.Tx) error {
		var err error
		l, err = loadTx(ctx, tx, sessionID, lim)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("load session %s: %w", sessionID, err)
	}
	return l, nil
}

func loadTx(ctx context.Context, tx *sql.Tx, id string, lim Limits) (*Loaded, error) {
	l := &Loaded{Window: history.Window{Transcripts: make(map[string][]TranscriptLine)},
		State: history.State{Counters: make(map[string]int64)}}
	var sid int64
	co := &l.Coordinator
	err := tx.QueryRowContext(ctx, `SELECT `+sessionCols+`, conversation_count,
		coordinator_provider, coordinator_model, coordinator_session_id FROM sessions WHERE id = ?`, id).Scan(
		&sid, &l.Session.ID, &l.Session.Name, &l.Session.Cwd, &l.Session.Provider, &l.Session.Model, &l.Session.Mode,
		&l.Session.RepoRoot, &l.Session.StartedAt, &l.Session.LastActive, &l.ConversationTotal,
		&co.Provider, &co.Model, &co.SessionID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	if l.Session.Tasks, err = taskCountsTx(ctx, tx, sid); err != nil {
		return nil, err
	}

	// Conversation and hub: newest N by (sid, seq) descending, reversed.
	err = queryEach(ctx, tx, func(r rowScanner) error {
		var c ConversationEntry
		if err := r.Scan(&c.Ts, (*string)(&c.Role), &c.Source, &c.Text, &c.RequestID); err != nil {
			return err
		}
		l.Conversation = append(l.Conversation, c)
		return nil
	}, qConversationWindow, sid, lim.Conversation)
	if err != nil {
		return nil, err
	}
	slices.Reverse(l.Conversation)
	err = queryEach(ctx, tx, func(r rowScanner) error {
		var h HubEvent
		if err := r.Scan(&h.Ts, &h.From, &h.Kind, &h.To, &h.Text); err != nil {
			return err
		}
		l.Hub = append(l.Hub, h)
		return nil
	}, qHubWindow, sid, lim.Hub)
	if err != nil {
		return nil, err
	}
	slices.Reverse(l.Hub)

	// Transcripts: the most recently active agents, then each one's window.
	var agents []agentRow
	err = queryEach(ctx, tx, func(r rowScanner) error {
		var a agentRow
		if err := r.Scan(&a.aid, &a.name, &a.lines); err != nil {
			return err
		}
		agents = append(agents, a)
		return nil
	}, qRecentAgents, sid, lim.TranscriptAgents)
	if err != nil {
		return nil, err
	}
	if len(agents) > 0 && lim.TranscriptPerAgent > 0 {
		chunks, err := tx.PrepareContext(ctx, qAgentChunks)
		if err != nil {
			return nil, err
		}
		defer chunks.Close()
		var old *sql.Stmt // prepared on first use: only old databases need it
		defer func() {
			if old != nil {
				old.Close()
			}
		}()
		for _, a := range agents {
			lines, more, err := agentWindow(ctx, chunks, a, lim.TranscriptPerAgent)
			if err != nil {
				return nil, fmt.Errorf("transcript of agent %q: %w", a.name, err)
			}
			if more > 0 {
				if old == nil {
					if old, err = tx.PrepareContext(ctx, qAgentWindow); err != nil {
						return nil, err
					}
				}
				if lines, err = oldAgentWindow(ctx, old, a, lines, more); err != nil {
					return nil, fmt.Errorf("transcript of agent %q: %w", a.name, err)
				}
			}
			l.Transcripts[a.name] = lines
		}
	}

	err = queryEach(ctx, tx, func(r rowScanner) error {
		var t Task
		if err := r.Scan(&t.ID, &t.Command, &t.Status, &t.Worker, &t.Reason, &t.CreatedAt, &t.UpdatedAt, &t.Attempt,
			&t.LoopID, &t.Planned); err != nil {
			return err
		}
		l.Tasks = append(l.Tasks, t)
		return nil
	}, `SELECT id, command, status, worker, reason, created_at, updated_at, attempts, loop_id, planned
		FROM tasks WHERE sid = ? ORDER BY seq`, sid)
	if err != nil {
		return nil, err
	}
	err = queryEach(ctx, tx, func(r rowScanner) error {
		var w Worker
		if err := scanWorker(r, &w); err != nil {
			return err
		}
		l.Workers = append(l.Workers, w)
		return nil
	}, `SELECT `+workerCols+` FROM workers WHERE sid = ? ORDER BY seq`, sid)
	if err != nil {
		return nil, err
	}
	err = queryEach(ctx, tx, func(r rowScanner) error {
		var name string
		var v int64
		if err := r.Scan(&name, &v); err != nil {
			return err
		}
		l.Counters[name] = v
		return nil
	}, `SELECT name, value FROM counters WHERE sid = ?`, sid)
	if err != nil {
		return nil, err
	}
	return l, nil
}

type agentRow struct {
	aid   int64
	name  string
	lines int64 // the agent's line count
}

// agentWindow reads the last n lines of agent a from its chunks, newest
// chunk first, and returns them oldest first. more > 0 says that the
// window wants more lines than the chunks hold and that the agent has
// older lines in the old transcript table: the returned slice then has
// room for them before its first element (see oldAgentWindow).
func agentWindow(ctx context.Context, chunks *sql.Stmt, a agentRow, n int) (lines []TranscriptLine, more int, err error) {
	want := int(min(int64(n), a.lines))
	lines = make([]TranscriptLine, want)
	pos := want // lines[pos:] are filled
	if want == 0 {
		return lines, 0, nil
	}
	rows, err := chunks.QueryContext(ctx, a.aid, want)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	oldest := int64(-1) // first_line of the oldest chunk read; -1: none
	for pos > 0 && rows.Next() {
		var first, cnt int64
		var data sql.RawBytes
		if err := rows.Scan(&first, &cnt, &data); err != nil {
			return nil, 0, err
		}
		k := int(min(int64(pos), cnt))
		if err := decodeChunkTail(data, int(cnt), a.name, lines[pos-k:pos]); err != nil {
			return nil, 0, err
		}
		pos -= k
		oldest = first
	}
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	if pos > 0 && oldest != 0 {
		// The agent's first lines predate the chunks (migration 0002).
		return lines, pos, nil
	}
	return lines[pos:], 0, nil
}

// oldAgentWindow fills lines[:more] from the old transcript table, newest
// row last, and returns the filled part.
func oldAgentWindow(ctx context.Context, old *sql.Stmt, a agentRow, lines []TranscriptLine, more int) ([]TranscriptLine, error) {
	rows, err := old.QueryContext(ctx, a.aid, more)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	pos := more
	for pos > 0 && rows.Next() {
		t := TranscriptLine{Agent: a.name}
		if err := rows.Scan(&t.Ts, (*string)(&t.Role), (*string)(&t.Stream), &t.Text); err != nil {
			return nil, err
		}
		pos--
		lines[pos] = t
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return lines[pos:], nil
}

// queryEach runs q in tx and calls f for every row.
func queryEach(ctx context.Context, tx *sql.Tx, f func(rowScanner) error, q string, args ...any) error {
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := f(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// TranscriptCount returns how many transcript lines session sessionID has.
func (s *Store) TranscriptCount(ctx context.Context, sessionID string) (int64, error) {
	var n int64
	if err := s.settle(ctx, sessionID); err != nil && !errors.Is(err, ErrNotFound) {
		return 0, fmt.Errorf("count transcript of session %s: %w", sessionID, err)
	}
	err := s.readTx(ctx, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `SELECT coalesce(sum(a.lines), 0) FROM transcript_agents a
			JOIN sessions s ON s.sid = a.sid WHERE s.id = ?`, sessionID).Scan(&n)
	})
	if err != nil {
		return 0, fmt.Errorf("count transcript of session %s: %w", sessionID, err)
	}
	return n, nil
}
