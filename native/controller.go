package native

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agents-fleet/fleet/protocol"
)

// Stable error codes of kind:error results.
const (
	CodeUnknownRoot       = "unknown_root"
	CodeUnknownTask       = "unknown_task"
	CodeRevisionConflict  = "revision_conflict"
	CodeOperationIDReused = "operation_id_reused"
	CodeHoldNotFound      = "hold_not_found"
	CodeHoldHashMismatch  = "hold_hash_mismatch"
	CodeNoDecisionNeeded  = "no_decision_needed"
	CodeSupersedesReq     = "supersedes_required"
	CodeSupersedesMis     = "supersedes_mismatch"
	CodeDecisionConsumed  = "decision_consumed"
	CodeAlreadyAttempted  = "already_attempted"
	CodeInvalidProof      = "invalid_proof"
	CodeInvalidRequest    = "invalid_request"
	CodeInternal          = "internal"
)

// ReceiptPersisted is every stored receipt's status: the mutation is
// durable, which says nothing about whether the engine acted on it yet.
const ReceiptPersisted = "persisted"

// refusal is a mutation refused with a stable code and a safe message; it
// writes nothing.
type refusal struct{ code, msg string }

func (r *refusal) Error() string { return r.code + ": " + r.msg }

func refuse(code, format string, args ...any) error {
	return &refusal{code: code, msg: fmt.Sprintf(format, args...)}
}

// Options configure a Controller. Both fields are optional.
type Options struct {
	// PolicyVersion is recorded in the grant of every root this
	// controller opens.
	PolicyVersion string
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Controller serves one native session's roots. It is safe for concurrent
// use.
type Controller struct {
	st      *Store
	session string
	policy  string
	now     func() time.Time

	// mu guards bound and onChange. It is never held while calling out.
	mu       sync.Mutex
	bound    string
	onChange []func()
}

// New loads the session's bound root, creating it on first use (revision 1,
// intent run, phase running).
func New(ctx context.Context, st *Store, sessionID string, opts Options) (*Controller, error) {
	if sessionID == "" {
		return nil, errors.New("native: empty session id")
	}
	c := &Controller{st: st, session: sessionID, policy: opts.PolicyVersion, now: opts.Now}
	if c.now == nil {
		c.now = time.Now
	}
	now := c.now().UnixMilli()
	v, err := st.do(ctx, func(tx *sql.Tx) (any, error) {
		var id string
		err := tx.QueryRow(`SELECT root_id FROM bindings WHERE session_id = ?`, sessionID).Scan(&id)
		if err == nil {
			return id, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return nil, err
		}
		id = newID("root-")
		if err := insertRoot(tx, id, sessionID, c.policy, now, ""); err != nil {
			return nil, err
		}
		_, err = tx.Exec(`INSERT INTO bindings (session_id, root_id) VALUES (?, ?)`, sessionID, id)
		return id, err
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("native: load session %s: %w", sessionID, err)
	}
	c.bound = v.(string)
	return c, nil
}

func insertRoot(tx *sql.Tx, id, session, policy string, now int64, prev string) error {
	_, err := tx.Exec(`INSERT INTO roots (id, session_id, revision, intent, phase, policy_version, granted_at, previous_root_id)
		VALUES (?, ?, 1, 'run', 'running', ?, ?, ?)`, id, session, policy, now, prev)
	return err
}

// SessionID returns the session the controller serves.
func (c *Controller) SessionID() string { return c.session }

// BoundRoot returns the session's default root id.
func (c *Controller) BoundRoot() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bound
}

// OnChange registers fn, run on its own goroutine after every committed
// operator mutation (never for an idempotent replay), so the engine can
// re-read intents.
func (c *Controller) OnChange(fn func()) {
	c.mu.Lock()
	c.onChange = append(c.onChange, fn)
	c.mu.Unlock()
}

// notify starts the OnChange callbacks. It runs on the writer goroutine
// right after the commit, so it must not block.
func (c *Controller) notify() {
	c.mu.Lock()
	fns := append([]func(){}, c.onChange...)
	c.mu.Unlock()
	for _, fn := range fns {
		go fn()
	}
}

// Handle answers one request. The server has shape-checked it with
// protocol.ParseNativeRequest; Handle applies Validate itself.
func (c *Controller) Handle(ctx context.Context, req *protocol.NativeRequest) protocol.NativeResult {
	if req == nil {
		return errResult(CodeInvalidRequest, "missing request")
	}
	if err := req.Validate(); err != nil {
		var de *protocol.DecodeError
		if errors.As(err, &de) {
			return errResult(CodeInvalidRequest, de.Msg)
		}
		return errResult(CodeInvalidRequest, "invalid request")
	}
	switch req.Action {
	case protocol.NativeList:
		roots, err := c.list(ctx)
		if err != nil {
			return internalResult()
		}
		return protocol.NativeResult{Kind: protocol.NativeKindRoots, Roots: roots}
	case protocol.NativeStatus:
		st, err := c.status(ctx, req.RootID)
		if err != nil {
			return resultFromErr(err)
		}
		return protocol.NativeResult{Kind: protocol.NativeKindStatus, Root: st}
	}
	return c.mutate(ctx, req)
}

func errResult(code, msg string) protocol.NativeResult {
	return protocol.NativeResult{Kind: protocol.NativeKindError, Code: code, Message: msg}
}

func internalResult() protocol.NativeResult {
	return errResult(CodeInternal, "internal error; the request may be retried with the same operationId")
}

func resultFromErr(err error) protocol.NativeResult {
	var r *refusal
	if errors.As(err, &r) {
		return errResult(r.code, r.msg)
	}
	return internalResult()
}

// mutated is what a mutation job returns.
type mutated struct {
	receipt protocol.NativeReceipt
	replay  bool   // the stored receipt of an earlier, identical request
	prev    string // reclassify: the previous root
}

func (c *Controller) mutate(ctx context.Context, req *protocol.NativeRequest) protocol.NativeResult {
	hash := requestHash(req)
	now := c.now().UnixMilli()
	v, err := c.st.do(ctx, func(tx *sql.Tx) (any, error) {
		return c.applyTx(tx, req, hash, now)
	}, func(v any) {
		m := v.(*mutated)
		if m.replay {
			return
		}
		if m.prev != "" {
			c.mu.Lock()
			c.bound = m.receipt.RootID
			c.mu.Unlock()
		}
		c.notify()
	})
	if err != nil {
		return resultFromErr(err)
	}
	m := v.(*mutated)
	rc := m.receipt
	yes := true
	if req.Action != protocol.NativeReclassify {
		return protocol.NativeResult{Kind: protocol.NativeKindReceipt, Receipt: &rc, AcknowledgmentOnly: &yes}
	}
	// sessionRebound: the open committed (we are past the commit) and the
	// binding, read back from the database, resolves to the new root.
	var got string
	rerr := c.st.r.QueryRowContext(context.WithoutCancel(ctx),
		`SELECT root_id FROM bindings WHERE session_id = ?`, c.session).Scan(&got)
	rebound := rerr == nil && got == rc.RootID
	return protocol.NativeResult{
		Kind:                  protocol.NativeKindPolicyAdmission,
		RootID:                rc.RootID,
		PreviousRootID:        m.prev,
		PreviousRootUnchanged: &yes,
		Receipt:               &rc,
		SessionRebound:        &rebound,
	}
}
