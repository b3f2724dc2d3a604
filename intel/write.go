package intel

import (
	"context"
	"database/sql"
	"errors"

	"github.com/agents-fleet/fleet/intel/record"
)

// stmts are the Recorder's statements, prepared once on the writer
// connection (database/sql reuses them inside a transaction on it).
type stmts struct {
	session, sessionRef, runDelete, runInsert, tool, steering *sql.Stmt
}

func (st *stmts) prepare(ctx context.Context, db *sql.DB) error {
	for _, p := range []struct {
		s **sql.Stmt
		q string
	}{
		// A text field or a time of a later record wins unless it is
		// empty: a session's closing record may carry only its end.
		{&st.session, `INSERT INTO sessions (id, name, cwd, repo, provider, model, mode, started_at, ended_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (id) DO UPDATE SET
				name = CASE WHEN excluded.name != '' THEN excluded.name ELSE name END,
				cwd = CASE WHEN excluded.cwd != '' THEN excluded.cwd ELSE cwd END,
				repo = CASE WHEN excluded.repo != '' THEN excluded.repo ELSE repo END,
				provider = CASE WHEN excluded.provider != '' THEN excluded.provider ELSE provider END,
				model = CASE WHEN excluded.model != '' THEN excluded.model ELSE model END,
				mode = CASE WHEN excluded.mode != '' THEN excluded.mode ELSE mode END,
				started_at = CASE WHEN excluded.started_at != 0 THEN excluded.started_at ELSE started_at END,
				ended_at = CASE WHEN excluded.ended_at != 0 THEN excluded.ended_at ELSE ended_at END
			RETURNING sid`},
		// The session a run or a steering entry belongs to, created (as a
		// placeholder its Session record fills in) when it is not known yet.
		{&st.sessionRef, `INSERT INTO sessions (id, repo, started_at) VALUES (?, ?, ?)
			ON CONFLICT (id) DO UPDATE SET
				started_at = CASE WHEN started_at = 0 THEN excluded.started_at ELSE started_at END
			RETURNING sid`},
		{&st.runDelete, `DELETE FROM runs WHERE id = ?`},
		{&st.runInsert, `INSERT INTO runs (id, sid, worker, task_id, provider, model, task, kind, skill, skill_version,
			shadow, repo, worktree, started_at, ended_at, at, outcome, exit_code, error, cause, class, error_key, ok, judged,
			input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, host)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`},
		{&st.tool, `INSERT INTO run_tools (rid, tool, count) VALUES (?, ?, ?)
			ON CONFLICT (rid, tool) DO UPDATE SET count = count + excluded.count`},
		{&st.steering, `INSERT INTO steering (sid, source, text, target, created_at, deny_key) VALUES (?, ?, ?, ?, ?, ?)`},
	} {
		s, err := db.PrepareContext(ctx, p.q)
		if err != nil {
			return err
		}
		*p.s = s
	}
	return nil
}

func (st *stmts) close() {
	for _, s := range []*sql.Stmt{st.session, st.sessionRef, st.runDelete, st.runInsert, st.tool, st.steering} {
		if s != nil {
			s.Close()
		}
	}
}

// itemKind says which record an item holds.
type itemKind uint8

const (
	itemSession itemKind = iota + 1
	itemRun
	itemSteering
)

// item is one queued record, held by value so that enqueueing allocates
// nothing.
type item struct {
	kind  itemKind
	sess  record.Session
	run   record.Run
	steer record.Steering
}

// writeItems writes items in one transaction.
func (s *Store) writeItems(ctx context.Context, items []item) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	b := batch{tx: tx, st: &s.st, sids: make(map[string]int64)}
	for i := range items {
		if err := b.write(ctx, &items[i]); err != nil {
			tx.Rollback()
			return err
		}
	}
	return tx.Commit()
}

// batch writes the records of one transaction.
type batch struct {
	tx *sql.Tx
	st *stmts
	// sids caches session id → sid for this transaction only (Prune may
	// delete sessions between two).
	sids map[string]int64
}

func (b *batch) write(ctx context.Context, it *item) error {
	switch it.kind {
	case itemSession:
		return b.session(ctx, &it.sess)
	case itemRun:
		return b.run(ctx, &it.run)
	case itemSteering:
		return b.steering(ctx, &it.steer)
	}
	return errors.New("intel: unknown record kind")
}

func (b *batch) session(ctx context.Context, x *record.Session) error {
	var sid int64
	err := b.tx.StmtContext(ctx, b.st.session).QueryRowContext(ctx, clip(x.ID, record.MaxText),
		clip(x.Name, record.MaxText), clip(x.Cwd, record.MaxText), clip(x.Repo, record.MaxText), clip(x.Provider, record.MaxText),
		clip(x.Model, record.MaxText), clip(x.Mode, record.MaxText), x.StartedAt, x.EndedAt).Scan(&sid)
	if err != nil {
		return err
	}
	b.sids[clip(x.ID, record.MaxText)] = sid
	return nil
}

// sessionRef returns the sid of session id, creating a placeholder row.
func (b *batch) sessionRef(ctx context.Context, id, repo string, at int64) (int64, error) {
	id = clip(id, record.MaxText)
	if sid, ok := b.sids[id]; ok {
		return sid, nil
	}
	var sid int64
	err := b.tx.StmtContext(ctx, b.st.sessionRef).QueryRowContext(ctx, id, clip(repo, record.MaxText), at).Scan(&sid)
	if err != nil {
		return 0, err
	}
	b.sids[id] = sid
	return sid, nil
}

// toolNameMax bounds a tool name, in bytes.
const toolNameMax = 256

func (b *batch) run(ctx context.Context, r *record.Run) error {
	sid, err := b.sessionRef(ctx, r.SessionID, r.Repo, r.StartedAt)
	if err != nil {
		return err
	}
	id := clip(r.ID, record.MaxText)
	// Replace, by DELETE then INSERT, so that the triggers keep the
	// aggregates right (and run_tools goes by cascade).
	if _, err := b.tx.StmtContext(ctx, b.st.runDelete).ExecContext(ctx, id); err != nil {
		return err
	}
	class := Classify(*r)
	outcome := r.Outcome
	if outcome != record.OutcomeCompleted && outcome != record.OutcomeCancelled {
		outcome = record.OutcomeFailed
	}
	ok, judged := 0, 1
	if outcome == record.OutcomeCompleted {
		ok = 1
	}
	if class == ClassCancelled || class == ClassShutdown {
		judged = 0
	}
	at := r.EndedAt
	if at == 0 {
		at = r.StartedAt
	}
	skill := clip(r.Skill, record.MaxText)
	res, err := b.tx.StmtContext(ctx, b.st.runInsert).ExecContext(ctx, id, sid,
		clip(r.Worker, record.MaxText), clip(r.TaskID, record.MaxText), clip(r.Provider, record.MaxText), clip(r.Model, record.MaxText),
		clip(r.Task, record.MaxText), taskKind(r.Task, skill), skill, r.SkillVersion, clip(r.Shadow, record.MaxText),
		clip(r.Repo, record.MaxText), clip(r.Worktree, record.MaxText), r.StartedAt, r.EndedAt, at, outcome, r.ExitCode,
		clip(r.Error, record.MaxText), clip(r.Cause, record.MaxText), class, errorKey(*r, class), ok, judged,
		r.InputTokens, r.OutputTokens, r.CacheReadTokens, r.CacheWriteTokens, clip(r.Host, record.MaxText))
	if err != nil {
		return err
	}
	if len(r.Tools) == 0 {
		return nil
	}
	rid, err := res.LastInsertId()
	if err != nil {
		return err
	}
	tool := b.tx.StmtContext(ctx, b.st.tool)
	for name, n := range r.Tools {
		if _, err := tool.ExecContext(ctx, rid, clip(name, toolNameMax), n); err != nil {
			return err
		}
	}
	return nil
}

// sourceDeny is the steering source of a denied confirm or permission.
const sourceDeny = "deny"

func (b *batch) steering(ctx context.Context, x *record.Steering) error {
	sid, err := b.sessionRef(ctx, x.SessionID, "", x.CreatedAt)
	if err != nil {
		return err
	}
	text := clip(x.Text, record.MaxText)
	key := ""
	if x.Source == sourceDeny {
		key = denyKey(text)
	}
	_, err = b.tx.StmtContext(ctx, b.st.steering).ExecContext(ctx, sid, clip(x.Source, record.MaxText), text,
		clip(x.Target, record.MaxText), x.CreatedAt, key)
	return err
}

// denyKey is how denials of the same tool or command are grouped: the
// normalised text, or "(no text)".
func denyKey(text string) string {
	if k := normalise(text); k != "" {
		return k
	}
	return "(no text)"
}
