package native

import (
	"database/sql"
	"errors"

	"github.com/agents-fleet/fleet/protocol"
)

// intentOf maps an intent action to the intent it records (resume clears a
// task-scoped intent, see setIntent).
var intentOf = map[string]string{
	protocol.NativePause:   "pause",
	protocol.NativeResume:  "run",
	protocol.NativeStop:    "stop",
	protocol.NativeAbort:   "abort",
	protocol.NativeAbandon: "stop",
}

// applyTx applies one validated mutation inside the writer's transaction:
// the idempotency check, the root and revision checks, the action, the
// revision bump and the receipt, all or (on error) nothing.
func (c *Controller) applyTx(tx *sql.Tx, req *protocol.NativeRequest, hash string, now int64) (*mutated, error) {
	var (
		m       mutated
		stored  string
		subject string
	)
	err := tx.QueryRow(`SELECT request_hash, root_id, subject_root_id, action, revision, status, created_at
		FROM receipts WHERE session_id = ? AND operation_id = ?`, c.session, req.OperationID).Scan(
		&stored, &m.receipt.RootID, &subject, &m.receipt.Action, &m.receipt.Revision, &m.receipt.Status, &m.receipt.CreatedAt)
	switch {
	case err == nil:
		if stored != hash {
			return nil, refuse(CodeOperationIDReused, "operationId was already used with a different request")
		}
		m.receipt.OperationID, m.receipt.RequestHash, m.replay = req.OperationID, stored, true
		if m.receipt.Action == protocol.NativeReclassify {
			m.prev = subject
		}
		return &m, nil
	case !errors.Is(err, sql.ErrNoRows):
		return nil, err
	}

	var rev int64
	err = tx.QueryRow(`SELECT revision FROM roots WHERE id = ? AND session_id = ?`, req.RootID, c.session).Scan(&rev)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, refuse(CodeUnknownRoot, "no root %q in this session", req.RootID)
	}
	if err != nil {
		return nil, err
	}
	if rev != *req.ExpectedRevision {
		return nil, refuse(CodeRevisionConflict, "root is at revision %d, not %d", rev, *req.ExpectedRevision)
	}

	receiptRoot, newRev := req.RootID, rev+1
	switch req.Action {
	case protocol.NativePause, protocol.NativeResume, protocol.NativeStop, protocol.NativeAbort, protocol.NativeAbandon:
		err = setIntent(tx, req)
	case protocol.NativeRelease:
		err = release(tx, req)
	case protocol.NativeApprove, protocol.NativeDeny:
		err = decide(tx, req, now)
	case protocol.NativeManualStart:
		err = manualStart(tx, req)
	case protocol.NativeReconcile:
		err = reconcile(tx, req, now)
	case protocol.NativeReclassify:
		// A fresh empty root; the previous root's rows are not touched
		// (its revision included), and the receipt belongs to the new
		// root at revision 1.
		receiptRoot, newRev = newID("root-"), 1
		if err = insertRoot(tx, receiptRoot, c.session, c.policy, now, req.RootID); err == nil {
			_, err = tx.Exec(`INSERT INTO bindings (session_id, root_id) VALUES (?, ?)
				ON CONFLICT (session_id) DO UPDATE SET root_id = excluded.root_id`, c.session, receiptRoot)
		}
		m.prev = req.RootID
	default:
		return nil, refuse(CodeInvalidRequest, "unknown action")
	}
	if err != nil {
		return nil, err
	}
	if req.Action != protocol.NativeReclassify {
		if _, err := tx.Exec(`UPDATE roots SET revision = ? WHERE id = ?`, newRev, req.RootID); err != nil {
			return nil, err
		}
	}
	m.receipt = protocol.NativeReceipt{
		OperationID: req.OperationID,
		RequestHash: hash,
		RootID:      receiptRoot,
		Action:      req.Action,
		Revision:    newRev,
		Status:      ReceiptPersisted,
		CreatedAt:   now,
	}
	_, err = tx.Exec(`INSERT INTO receipts (session_id, operation_id, request_hash, root_id, subject_root_id, action, task_id, revision, status, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, c.session, req.OperationID, hash, receiptRoot, req.RootID,
		req.Action, req.TaskID, newRev, ReceiptPersisted, now)
	if err != nil {
		return nil, err
	}
	return &m, nil
}

// taskRow is the part of a task the checks need.
type taskRow struct {
	attempts      int64
	evidence      string
	needsApproval bool
	planned       bool
	state         string
	intent        string
}

func loadTask(tx *sql.Tx, rootID, taskID string) (*taskRow, error) {
	var t taskRow
	err := tx.QueryRow(`SELECT attempts, evidence_hash, needs_approval, planned, state, intent
		FROM tasks WHERE root_id = ? AND id = ?`, rootID, taskID).Scan(
		&t.attempts, &t.evidence, &t.needsApproval, &t.planned, &t.state, &t.intent)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, refuse(CodeUnknownTask, "no task %q in root %q", taskID, rootID)
	}
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// setIntent records a root intent, or with a taskId a task-scoped one
// (resume clears it).
func setIntent(tx *sql.Tx, req *protocol.NativeRequest) error {
	intent := intentOf[req.Action]
	if req.TaskID == "" {
		_, err := tx.Exec(`UPDATE roots SET intent = ? WHERE id = ?`, intent, req.RootID)
		return err
	}
	if _, err := loadTask(tx, req.RootID, req.TaskID); err != nil {
		return err
	}
	if intent == "run" {
		intent = ""
	}
	_, err := tx.Exec(`UPDATE tasks SET intent = ? WHERE root_id = ? AND id = ?`, intent, req.RootID, req.TaskID)
	return err
}

// release removes the hold whose current hash is req.HoldHash.
func release(tx *sql.Tx, req *protocol.NativeRequest) error {
	res, err := tx.Exec(`DELETE FROM holds WHERE root_id = ? AND hold_hash = ?`, req.RootID, req.HoldHash)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return nil
	}
	var n int
	err = tx.QueryRow(`SELECT count(*) FROM hold_hashes hh JOIN holds h ON h.root_id = hh.root_id AND h.task_id = hh.task_id
		WHERE hh.hash = ? AND hh.root_id = ?`, req.HoldHash, req.RootID).Scan(&n)
	if err != nil {
		return err
	}
	if n > 0 {
		return refuse(CodeHoldHashMismatch, "the hold changed since that holdHash; read status for the current one")
	}
	return refuse(CodeHoldNotFound, "no hold with that holdHash in this root")
}

// liveDecision returns the task's newest decision that is not superseded
// and pins evidence ("" id when none). A decision pinning older evidence is
// stale: it no longer decides anything.
func liveDecision(tx *sql.Tx, rootID, taskID, evidence string) (id, verdict string, consumed bool, err error) {
	err = tx.QueryRow(`SELECT id, verdict, consumed FROM decisions
		WHERE root_id = ? AND task_id = ? AND evidence_hash = ? AND superseded_by = ''
		ORDER BY seq DESC LIMIT 1`, rootID, taskID, evidence).Scan(&id, &verdict, &consumed)
	if errors.Is(err, sql.ErrNoRows) {
		return "", "", false, nil
	}
	return id, verdict, consumed, err
}

// decide records an evidence-pinned approve or deny.
func decide(tx *sql.Tx, req *protocol.NativeRequest, now int64) error {
	t, err := loadTask(tx, req.RootID, req.TaskID)
	if err != nil {
		return err
	}
	if !t.needsApproval || t.evidence == "" {
		return refuse(CodeNoDecisionNeeded, "task %q is not waiting for a decision", req.TaskID)
	}
	live, _, consumed, err := liveDecision(tx, req.RootID, req.TaskID, t.evidence)
	if err != nil {
		return err
	}
	switch {
	case live != "" && consumed:
		return refuse(CodeDecisionConsumed, "decision %q was consumed and cannot be rewritten", live)
	case live != "" && req.Supersedes == "":
		return refuse(CodeSupersedesReq, "task %q already has decision %q; name it in supersedes", req.TaskID, live)
	case req.Supersedes != live:
		return refuse(CodeSupersedesMis, "supersedes does not name the task's current decision")
	}
	verdict := "approve"
	if req.Action == protocol.NativeDeny {
		verdict = "deny"
	}
	id := newID("dec-")
	if _, err := tx.Exec(`INSERT INTO decisions (id, root_id, task_id, verdict, rationale, evidence_hash, created_at, supersedes)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, id, req.RootID, req.TaskID, verdict, req.Rationale, t.evidence, now, req.Supersedes); err != nil {
		return err
	}
	if live != "" {
		_, err = tx.Exec(`UPDATE decisions SET superseded_by = ? WHERE id = ?`, id, live)
	}
	return err
}

// manualStart releases a reservation that was never attempted.
func manualStart(tx *sql.Tx, req *protocol.NativeRequest) error {
	t, err := loadTask(tx, req.RootID, req.TaskID)
	if err != nil {
		return err
	}
	if t.attempts != 0 {
		return refuse(CodeAlreadyAttempted, "task %q was already attempted %d time(s)", req.TaskID, t.attempts)
	}
	_, err = tx.Exec(`UPDATE tasks SET planned = 0 WHERE root_id = ? AND id = ?`, req.RootID, req.TaskID)
	return err
}

// reconcile settles a task's open effects per a worker-settlement record of
// this root (and task, when given). Nothing else is proof.
func reconcile(tx *sql.Tx, req *protocol.NativeRequest, now int64) error {
	var (
		taskID string
		failed bool
	)
	err := tx.QueryRow(`SELECT task_id, failed FROM settlements WHERE id = ? AND root_id = ?`,
		req.ProofID, req.RootID).Scan(&taskID, &failed)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && req.TaskID != "" && req.TaskID != taskID) {
		return refuse(CodeInvalidProof, "proofId is not a worker-settlement record of this root%s", map[bool]string{true: " and task", false: ""}[req.TaskID != ""])
	}
	if err != nil {
		return err
	}
	state := "settled"
	if failed {
		state = "failed"
	}
	if _, err := tx.Exec(`UPDATE effects SET state = ?, settled_at = ?, proof_id = ?
		WHERE root_id = ? AND task_id = ? AND state IN ('uncertain', 'started')`,
		state, now, req.ProofID, req.RootID, taskID); err != nil {
		return err
	}
	_, err = tx.Exec(`UPDATE tasks SET state = ? WHERE root_id = ? AND id = ? AND state = 'running'`, state, req.RootID, taskID)
	return err
}
