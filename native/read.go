package native

import (
	"context"
	"database/sql"
	"errors"

	"github.com/agents-fleet/fleet/internal/sqlitefile"
	"github.com/agents-fleet/fleet/protocol"
)

// list returns the session's roots, the bound one first, then in the order
// they were opened.
func (c *Controller) list(ctx context.Context) ([]protocol.NativeRootInfo, error) {
	rows, err := c.st.r.QueryContext(ctx, `SELECT id, revision, intent, phase, previous_root_id
		FROM roots WHERE session_id = ? ORDER BY (id = ?) DESC, seq`, c.session, c.BoundRoot())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []protocol.NativeRootInfo{}
	for rows.Next() {
		var r protocol.NativeRootInfo
		if err := rows.Scan(&r.ID, &r.Revision, &r.Intent, &r.Phase, &r.PreviousRootID); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// targetPhase is the phase that fulfils a root-scoped intent receipt.
func targetPhaseReached(action, phase string) bool {
	switch action {
	case protocol.NativePause:
		return phase == "paused"
	case protocol.NativeResume:
		return phase == "running"
	case protocol.NativeStop, protocol.NativeAbandon:
		return phase == "stopped" || phase == "aborted"
	case protocol.NativeAbort:
		return phase == "aborted"
	}
	return true
}

// status reads one root in one read transaction (one WAL snapshot).
func (c *Controller) status(ctx context.Context, rootID string) (*protocol.NativeRootStatus, error) {
	tx, err := c.st.r.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	st := &protocol.NativeRootStatus{}
	err = tx.QueryRowContext(ctx, `SELECT id, revision, intent, phase, session_id, policy_version, granted_at, previous_root_id
		FROM roots WHERE id = ? AND session_id = ?`, rootID, c.session).Scan(
		&st.ID, &st.Revision, &st.Intent, &st.Phase, &st.Grant.SessionID, &st.Grant.PolicyVersion, &st.Grant.GrantedAt, &st.PreviousRootID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, refuse(CodeUnknownRoot, "no root %q in this session", rootID)
	}
	if err != nil {
		return nil, err
	}
	st.Tasks, st.Holds, st.Decisions, st.Effects, st.PendingReceipts =
		[]protocol.NativeTask{}, []protocol.NativeHold{}, []protocol.NativeDecision{}, []protocol.NativeEffect{}, []protocol.NativeReceipt{}

	err = each(ctx, tx, `SELECT t.id, t.subject, CASE WHEN h.seq IS NULL THEN t.state ELSE 'held' END, t.attempts,
		CASE WHEN t.needs_approval THEN t.evidence_hash ELSE '' END
		FROM tasks t LEFT JOIN holds h ON h.root_id = t.root_id AND h.task_id = t.id
		WHERE t.root_id = ? ORDER BY t.seq`, []any{rootID}, func(r *sql.Rows) error {
		var t protocol.NativeTask
		err := r.Scan(&t.ID, &t.Subject, &t.State, &t.Attempts, &t.EvidenceHash)
		st.Tasks = append(st.Tasks, t)
		return err
	})
	if err == nil {
		err = each(ctx, tx, `SELECT hold_hash, reason, created_at, task_id FROM holds WHERE root_id = ? ORDER BY seq`,
			[]any{rootID}, func(r *sql.Rows) error {
				var h protocol.NativeHold
				err := r.Scan(&h.HoldHash, &h.Reason, &h.CreatedAt, &h.TaskID)
				st.Holds = append(st.Holds, h)
				return err
			})
	}
	if err == nil {
		err = each(ctx, tx, `SELECT id, task_id, verdict, rationale, evidence_hash, consumed, created_at, supersedes
			FROM decisions WHERE root_id = ? ORDER BY seq`, []any{rootID}, func(r *sql.Rows) error {
			var d protocol.NativeDecision
			err := r.Scan(&d.ID, &d.TaskID, &d.Verdict, &d.Rationale, &d.EvidenceHash, &d.Consumed, &d.CreatedAt, &d.Supersedes)
			st.Decisions = append(st.Decisions, d)
			return err
		})
	}
	if err == nil {
		err = each(ctx, tx, `SELECT id, task_id, kind, state, started_at, settled_at, proof_id
			FROM effects WHERE root_id = ? ORDER BY seq`, []any{rootID}, func(r *sql.Rows) error {
			var e protocol.NativeEffect
			err := r.Scan(&e.ID, &e.TaskID, &e.Kind, &e.State, &e.StartedAt, &e.SettledAt, &e.ProofID)
			st.Effects = append(st.Effects, e)
			return err
		})
	}
	if err == nil {
		st.PendingReceipts, err = pendingReceipts(ctx, tx, st)
	}
	if err != nil {
		return nil, err
	}
	return st, nil
}

// pendingReceipts are the receipts whose intended effect the engine has not
// reported reached: the root's newest root-scoped intent receipt while the
// phase does not match it (older intents were overridden by it), and
// manual-start receipts whose task has still never been attempted.
func pendingReceipts(ctx context.Context, tx *sql.Tx, st *protocol.NativeRootStatus) ([]protocol.NativeReceipt, error) {
	out := []protocol.NativeReceipt{}
	scan := func(r *sql.Rows) (protocol.NativeReceipt, error) {
		var rc protocol.NativeReceipt
		err := r.Scan(&rc.OperationID, &rc.RequestHash, &rc.RootID, &rc.Action, &rc.Revision, &rc.Status, &rc.CreatedAt)
		return rc, err
	}
	const cols = `SELECT operation_id, request_hash, root_id, action, revision, status, created_at FROM receipts `
	err := each(ctx, tx, cols+`WHERE root_id = ? AND task_id = '' AND action IN ('pause', 'resume', 'stop', 'abort', 'abandon')
		ORDER BY revision DESC LIMIT 1`, []any{st.ID}, func(r *sql.Rows) error {
		rc, err := scan(r)
		if err == nil && !targetPhaseReached(rc.Action, st.Phase) {
			out = append(out, rc)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	err = each(ctx, tx, cols+`WHERE root_id = ? AND action = 'manual-start'
		AND EXISTS (SELECT 1 FROM tasks t WHERE t.root_id = receipts.root_id AND t.id = receipts.task_id AND t.attempts = 0)
		ORDER BY revision`, []any{st.ID}, func(r *sql.Rows) error {
		rc, err := scan(r)
		out = append(out, rc)
		return err
	})
	return out, err
}

// each runs q and calls fn for each row.
func each(ctx context.Context, tx *sql.Tx, q string, args []any, fn func(*sql.Rows) error) error {
	return sqlitefile.Each(ctx, tx, fn, q, args...)
}

// Intent returns the intent of rootID (the bound root when "") and the
// task-scoped intent of taskID in it ("" when none or taskID is ""). An
// unknown root reads as "".
func (c *Controller) Intent(rootID, taskID string) (root, task string) {
	if rootID == "" {
		rootID = c.BoundRoot()
	}
	ctx := context.Background()
	if err := c.st.r.QueryRowContext(ctx, `SELECT intent FROM roots WHERE id = ? AND session_id = ?`,
		rootID, c.session).Scan(&root); err != nil {
		return "", ""
	}
	if taskID != "" {
		c.st.r.QueryRowContext(ctx, `SELECT intent FROM tasks WHERE root_id = ? AND id = ?`, rootID, taskID).Scan(&task)
	}
	return root, task
}
