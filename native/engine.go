package native

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// TaskSpec is a task the engine reserves in the bound root.
type TaskSpec struct {
	ID      string
	Subject string
	// Evidence is the hash an approval must pin (see Evidence); "" when
	// the task needs none.
	Evidence string
	// NeedsApproval: the task waits for a native approve/deny.
	NeedsApproval bool
	// Planned: the task waits for manual-start or ReleasePlanned (/go).
	Planned bool
}

// Admission is Admit's answer: exactly one of Start, Wait != "" and
// Refuse != "".
type Admission struct {
	Start  bool
	Wait   string // why the task waits (it may start later)
	Refuse string // why the task will never start
}

// Settlement is a worker's end, as the engine saw it.
type Settlement struct {
	TaskID     string
	WorkerID   string
	ExitCode   int
	Failed     bool
	HeadCommit string
	At         time.Time
}

// engineTask is a task found for the engine: the newest root of the
// session that holds taskID.
type engineTask struct {
	rootID     string
	rootIntent string
	taskRow
}

func (c *Controller) findTask(tx *sql.Tx, taskID string) (*engineTask, error) {
	var t engineTask
	err := tx.QueryRow(`SELECT t.root_id, r.intent, t.attempts, t.evidence_hash, t.needs_approval, t.planned, t.state, t.intent
		FROM tasks t JOIN roots r ON r.id = t.root_id
		WHERE r.session_id = ? AND t.id = ? ORDER BY r.seq DESC LIMIT 1`, c.session, taskID).Scan(
		&t.rootID, &t.rootIntent, &t.attempts, &t.evidence, &t.needsApproval, &t.planned, &t.state, &t.intent)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("native: task %q: %w", taskID, ErrUnknownTask)
	}
	return &t, err
}

// Reserve records t as a reservation (zero attempts) in the bound root. A
// task reserved again keeps its attempts and flags but takes the new
// subject and evidence.
func (c *Controller) Reserve(ctx context.Context, t TaskSpec) error {
	if t.ID == "" {
		return errors.New("native: reserve: empty task id")
	}
	_, err := c.st.do(ctx, func(tx *sql.Tx) (any, error) {
		var root string
		if err := tx.QueryRow(`SELECT root_id FROM bindings WHERE session_id = ?`, c.session).Scan(&root); err != nil {
			return nil, err
		}
		_, err := tx.Exec(`INSERT INTO tasks (root_id, id, subject, state, evidence_hash, needs_approval, planned)
			VALUES (?, ?, ?, 'reserved', ?, ?, ?)
			ON CONFLICT (root_id, id) DO UPDATE SET subject = excluded.subject,
				evidence_hash = excluded.evidence_hash, needs_approval = excluded.needs_approval`,
			root, t.ID, t.Subject, t.Evidence, t.NeedsApproval, t.Planned)
		return nil, err
	}, nil)
	return wrap("reserve", err)
}

func wrap(op string, err error) error {
	if err == nil || errors.Is(err, ErrUnknownTask) || errors.Is(err, ErrUnknownRoot) {
		return err
	}
	return fmt.Errorf("native: %s: %w", op, err)
}

// Admit decides whether the engine may start taskID now. Refusals come
// first (root or task stop/abort, a live denial, a settled task), then
// waits (pause, hold, planned, running, awaiting a decision). Start
// consumes the matching approval, counts the attempt and records a started
// effect, durably, before it returns.
func (c *Controller) Admit(ctx context.Context, taskID string) (Admission, error) {
	now := c.now().UnixMilli()
	v, err := c.st.do(ctx, func(tx *sql.Tx) (any, error) {
		t, err := c.findTask(tx, taskID)
		if err != nil {
			return nil, err
		}
		switch {
		case t.rootIntent == "stop" || t.rootIntent == "abort":
			return Admission{Refuse: "root intent is " + t.rootIntent}, nil
		case t.intent == "stop" || t.intent == "abort":
			return Admission{Refuse: "task intent is " + t.intent}, nil
		case t.state == "settled":
			return Admission{Refuse: "task already settled"}, nil
		}
		var decision, verdict string
		if t.needsApproval {
			if decision, verdict, _, err = liveDecision(tx, t.rootID, taskID, t.evidence); err != nil {
				return nil, err
			}
			if verdict == "deny" {
				return Admission{Refuse: "denied by decision " + decision}, nil
			}
		}
		var held int
		if err := tx.QueryRow(`SELECT count(*) FROM holds WHERE root_id = ? AND task_id = ?`, t.rootID, taskID).Scan(&held); err != nil {
			return nil, err
		}
		switch {
		case t.rootIntent == "pause":
			return Admission{Wait: "root intent is pause"}, nil
		case t.intent == "pause":
			return Admission{Wait: "task intent is pause"}, nil
		case held > 0:
			return Admission{Wait: "task is held"}, nil
		case t.planned:
			return Admission{Wait: "planned: waiting for manual-start or /go"}, nil
		case t.state == "running":
			return Admission{Wait: "task is running"}, nil
		case t.needsApproval && decision == "":
			return Admission{Wait: "awaiting an approve/deny decision"}, nil
		}
		if decision != "" {
			if _, err := tx.Exec(`UPDATE decisions SET consumed = 1 WHERE id = ?`, decision); err != nil {
				return nil, err
			}
		}
		if _, err := tx.Exec(`UPDATE tasks SET attempts = attempts + 1, state = 'running' WHERE root_id = ? AND id = ?`,
			t.rootID, taskID); err != nil {
			return nil, err
		}
		_, err = tx.Exec(`INSERT INTO effects (id, root_id, task_id, kind, state, started_at) VALUES (?, ?, ?, 'worker', 'started', ?)`,
			newID("eff-"), t.rootID, taskID, now)
		return Admission{Start: true}, err
	}, nil)
	if err != nil {
		return Admission{}, wrap("admit", err)
	}
	return v.(Admission), nil
}

// ReleasePlanned is the operator's /go for one task: the planned flag goes,
// without a receipt or a revision change.
func (c *Controller) ReleasePlanned(ctx context.Context, taskID string) error {
	_, err := c.st.do(ctx, func(tx *sql.Tx) (any, error) {
		t, err := c.findTask(tx, taskID)
		if err != nil {
			return nil, err
		}
		_, err = tx.Exec(`UPDATE tasks SET planned = 0 WHERE root_id = ? AND id = ?`, t.rootID, taskID)
		return nil, err
	}, nil)
	return wrap("release planned", err)
}

// Settle writes a worker-settlement record and returns its id, the proofId
// reconcile accepts. The task's started effect is settled with it (an
// uncertain one stays uncertain until an operator reconciles); a failed
// settlement puts a hold on the task.
func (c *Controller) Settle(ctx context.Context, s Settlement) (string, error) {
	at := s.At
	if at.IsZero() {
		at = c.now()
	}
	v, err := c.st.do(ctx, func(tx *sql.Tx) (any, error) {
		t, err := c.findTask(tx, s.TaskID)
		if err != nil {
			return nil, err
		}
		id := newID("ws-")
		if _, err := tx.Exec(`INSERT INTO settlements (id, root_id, task_id, worker_id, exit_code, failed, head_commit, at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, id, t.rootID, s.TaskID, s.WorkerID, s.ExitCode, s.Failed, s.HeadCommit, at.UnixMilli()); err != nil {
			return nil, err
		}
		state := "settled"
		if s.Failed {
			state = "failed"
		}
		if _, err := tx.Exec(`UPDATE effects SET state = ?, settled_at = ?, proof_id = ? WHERE root_id = ? AND task_id = ? AND state = 'started'`,
			state, at.UnixMilli(), id, t.rootID, s.TaskID); err != nil {
			return nil, err
		}
		if _, err := tx.Exec(`UPDATE tasks SET state = ? WHERE root_id = ? AND id = ?`, state, t.rootID, s.TaskID); err != nil {
			return nil, err
		}
		if s.Failed {
			reason := fmt.Sprintf("worker %s failed (exit %d)", s.WorkerID, s.ExitCode)
			if _, err := putHold(tx, t.rootID, s.TaskID, reason, at.UnixMilli()); err != nil {
				return nil, err
			}
		}
		return id, nil
	}, nil)
	if err != nil {
		return "", wrap("settle", err)
	}
	return v.(string), nil
}

// MarkUncertain marks taskID's started effects uncertain: the engine lost
// track of the worker (a crash, a lost connection). Only reconcile with a
// settlement record settles them.
func (c *Controller) MarkUncertain(ctx context.Context, taskID string) error {
	_, err := c.st.do(ctx, func(tx *sql.Tx) (any, error) {
		t, err := c.findTask(tx, taskID)
		if err != nil {
			return nil, err
		}
		_, err = tx.Exec(`UPDATE effects SET state = 'uncertain' WHERE root_id = ? AND task_id = ? AND state = 'started'`, t.rootID, taskID)
		return nil, err
	}, nil)
	return wrap("mark uncertain", err)
}

// Hold puts (or updates) the hold on taskID (/hold) and returns its new
// holdHash; any earlier hash of that hold stops working.
func (c *Controller) Hold(ctx context.Context, taskID, reason string) (string, error) {
	now := c.now().UnixMilli()
	v, err := c.st.do(ctx, func(tx *sql.Tx) (any, error) {
		t, err := c.findTask(tx, taskID)
		if err != nil {
			return nil, err
		}
		return putHold(tx, t.rootID, taskID, reason, now)
	}, nil)
	if err != nil {
		return "", wrap("hold", err)
	}
	return v.(string), nil
}

// putHold creates the task's hold or bumps its version, so the hash changes.
func putHold(tx *sql.Tx, rootID, taskID, reason string, now int64) (string, error) {
	var version, created int64
	err := tx.QueryRow(`SELECT version, created_at FROM holds WHERE root_id = ? AND task_id = ?`, rootID, taskID).Scan(&version, &created)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		created = now
		var prev int64 // a re-created hold continues its version, so no hash repeats
		if err := tx.QueryRow(`SELECT count(*) FROM hold_hashes WHERE root_id = ? AND task_id = ?`, rootID, taskID).Scan(&prev); err != nil {
			return "", err
		}
		version = prev + 1
	case err != nil:
		return "", err
	default:
		version++
	}
	h := holdHash(rootID, taskID, reason, created, version)
	if _, err := tx.Exec(`INSERT INTO holds (root_id, task_id, reason, created_at, version, hold_hash) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (root_id, task_id) DO UPDATE SET reason = excluded.reason, version = excluded.version, hold_hash = excluded.hold_hash`,
		rootID, taskID, reason, created, version, h); err != nil {
		return "", err
	}
	_, err = tx.Exec(`INSERT INTO hold_hashes (hash, root_id, task_id) VALUES (?, ?, ?)`, h, rootID, taskID)
	return h, err
}

// phases are the phases the engine may report.
var phases = map[string]bool{"running": true, "paused": true, "stopping": true, "stopped": true, "aborted": true}

// ReportPhase records the phase the engine reached for rootID (the bound
// root when ""), durably, without a receipt or a revision change.
func (c *Controller) ReportPhase(ctx context.Context, rootID, phase string) error {
	if !phases[phase] {
		return fmt.Errorf("native: report phase: unknown phase %q", phase)
	}
	if rootID == "" {
		rootID = c.BoundRoot()
	}
	_, err := c.st.do(ctx, func(tx *sql.Tx) (any, error) {
		res, err := tx.Exec(`UPDATE roots SET phase = ? WHERE id = ? AND session_id = ?`, phase, rootID, c.session)
		if err != nil {
			return nil, err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil, fmt.Errorf("native: root %q: %w", rootID, ErrUnknownRoot)
		}
		return nil, nil
	}, nil)
	return wrap("report phase", err)
}
