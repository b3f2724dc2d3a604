package native

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agents-fleet/fleet/protocol"
)

// helperEnv names the role a test binary started as a helper process plays
// (TestHelperCrashWriter in crash_test.go); TestMain reads it on every
// platform, so it lives here rather than in the Unix-only file.
const helperEnv = "FLEET_NATIVE_TEST_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(m.Run()) // the crash helper is killed; no leak check
	}
	goleak.VerifyTestMain(m)
}

type harness struct {
	t    *testing.T
	path string
	st   *Store
	c    *Controller
	op   int
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{t: t, path: filepath.Join(t.TempDir(), "state", "native.db")}
	h.open()
	t.Cleanup(func() { h.st.Close() })
	return h
}

func (h *harness) open() {
	h.t.Helper()
	st, err := Open(h.path)
	if err != nil {
		h.t.Fatal(err)
	}
	c, err := New(h.t.Context(), st, "sess-1", Options{PolicyVersion: "p1"})
	if err != nil {
		h.t.Fatal(err)
	}
	h.st, h.c = st, c
}

func (h *harness) reopen() {
	h.t.Helper()
	if err := h.st.Close(); err != nil {
		h.t.Fatal(err)
	}
	h.open()
}

func rev(n int64) *int64 { return &n }

// req builds a mutation of action on root at revision r with a fresh
// operationId; mod adjusts it.
func (h *harness) req(action, root string, r int64, mod func(*protocol.NativeRequest)) *protocol.NativeRequest {
	h.op++
	q := &protocol.NativeRequest{Action: action, RootID: root, OperationID: fmt.Sprintf("op-%d", h.op), ExpectedRevision: rev(r)}
	if mod != nil {
		mod(q)
	}
	return q
}

func (h *harness) status(root string) *protocol.NativeRootStatus {
	h.t.Helper()
	res := h.c.Handle(h.t.Context(), &protocol.NativeRequest{Action: protocol.NativeStatus, RootID: root})
	if res.Kind != protocol.NativeKindStatus {
		h.t.Fatalf("status: %+v", res)
	}
	return res.Root
}

func (h *harness) revision(root string) int64 { return h.status(root).Revision }

// ok sends a mutation at the root's current revision and wants a receipt.
func (h *harness) ok(action, root string, mod func(*protocol.NativeRequest)) protocol.NativeResult {
	h.t.Helper()
	res := h.c.Handle(h.t.Context(), h.req(action, root, h.revision(root), mod))
	if res.Kind == protocol.NativeKindError {
		h.t.Fatalf("%s: %s %s", action, res.Code, res.Message)
	}
	return res
}

// fail sends a mutation at the current revision and wants error code.
func (h *harness) fail(code, action, root string, mod func(*protocol.NativeRequest)) {
	h.t.Helper()
	before := int64(1) // an unknown root has no revision to read
	if s := h.c.Handle(h.t.Context(), &protocol.NativeRequest{Action: protocol.NativeStatus, RootID: root}); s.Root != nil {
		before = s.Root.Revision
	}
	res := h.c.Handle(h.t.Context(), h.req(action, root, before, mod))
	if res.Kind != protocol.NativeKindError || res.Code != code {
		h.t.Fatalf("%s: got %+v, want error %s", action, res, code)
	}
	if strings.Contains(strings.ToLower(res.Message), "sql") {
		h.t.Fatalf("message leaks internals: %q", res.Message)
	}
	if s := h.c.Handle(h.t.Context(), &protocol.NativeRequest{Action: protocol.NativeStatus, RootID: root}); s.Root != nil && s.Root.Revision != before {
		h.t.Fatalf("%s refused but revision moved %d -> %d", action, before, s.Root.Revision)
	}
}

func task(id string) func(*protocol.NativeRequest) {
	return func(q *protocol.NativeRequest) { q.TaskID = id }
}

func TestNewCreatesBoundRoot(t *testing.T) {
	h := newHarness(t)
	root := h.c.BoundRoot()
	st := h.status(root)
	if st.Revision != 1 || st.Intent != "run" || st.Phase != "running" || st.Grant.SessionID != "sess-1" || st.Grant.PolicyVersion != "p1" {
		t.Fatalf("new root: %+v", st)
	}
	h.reopen()
	if h.c.BoundRoot() != root {
		t.Fatalf("bound root changed across reopen: %s vs %s", h.c.BoundRoot(), root)
	}
	res := h.c.Handle(t.Context(), &protocol.NativeRequest{Action: protocol.NativeList})
	if res.Kind != protocol.NativeKindRoots || len(res.Roots) != 1 || res.Roots[0].ID != root {
		t.Fatalf("list: %+v", res)
	}
	info, err := os.Stat(h.path)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("db mode: %v %v", info.Mode(), err)
	}
	if info, _ := os.Stat(filepath.Dir(h.path)); info.Mode().Perm() != 0o700 {
		t.Fatalf("dir mode: %v", info.Mode())
	}
}

func TestIntentActions(t *testing.T) {
	h := newHarness(t)
	root := h.c.BoundRoot()
	ctx := t.Context()
	if err := h.c.Reserve(ctx, TaskSpec{ID: "t1", Subject: "s"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ action, intent string }{
		{protocol.NativePause, "pause"}, {protocol.NativeResume, "run"}, {protocol.NativeStop, "stop"},
		{protocol.NativeResume, "run"}, {protocol.NativeAbort, "abort"}, {protocol.NativeResume, "run"}, {protocol.NativeAbandon, "stop"},
	} {
		before := h.revision(root)
		res := h.ok(tc.action, root, nil)
		if res.Kind != protocol.NativeKindReceipt || res.AcknowledgmentOnly == nil || !*res.AcknowledgmentOnly ||
			res.Receipt.Revision != before+1 || res.Receipt.Action != tc.action || res.Receipt.Status != ReceiptPersisted {
			t.Fatalf("%s: %+v", tc.action, res)
		}
		if got, _ := h.c.Intent(root, ""); got != tc.intent {
			t.Fatalf("%s: intent %q want %q", tc.action, got, tc.intent)
		}
	}
	// abandon does not claim the process is gone: phase stays as reported.
	if st := h.status(root); st.Phase != "running" || len(st.PendingReceipts) != 1 || st.PendingReceipts[0].Action != protocol.NativeAbandon {
		t.Fatalf("after abandon: phase %q pending %+v", st.Phase, st.PendingReceipts)
	}
	if err := h.c.ReportPhase(ctx, root, "stopped"); err != nil {
		t.Fatal(err)
	}
	if st := h.status(root); len(st.PendingReceipts) != 0 {
		t.Fatalf("pending after stopped: %+v", st.PendingReceipts)
	}
	h.ok(protocol.NativeResume, root, nil)
	// task-scoped
	for _, tc := range []struct{ action, intent string }{
		{protocol.NativePause, "pause"}, {protocol.NativeResume, ""}, {protocol.NativeStop, "stop"}, {protocol.NativeAbort, "abort"}, {protocol.NativeAbandon, "stop"},
	} {
		h.ok(tc.action, root, task("t1"))
		if r, tk := h.c.Intent(root, "t1"); r != "run" || tk != tc.intent {
			t.Fatalf("task %s: %q/%q", tc.action, r, tk)
		}
	}
	h.fail(CodeUnknownTask, protocol.NativePause, root, task("nope"))
	h.fail(CodeUnknownRoot, protocol.NativePause, "root-nope", nil)
	res := h.c.Handle(ctx, h.req(protocol.NativePause, root, 1, nil))
	if res.Code != CodeRevisionConflict {
		t.Fatalf("stale revision: %+v", res)
	}
	res = h.c.Handle(ctx, &protocol.NativeRequest{Action: protocol.NativePause, RootID: root})
	if res.Code != CodeInvalidRequest {
		t.Fatalf("no operationId: %+v", res)
	}
	res = h.c.Handle(ctx, &protocol.NativeRequest{Action: "explode"})
	if res.Code != CodeInvalidRequest {
		t.Fatalf("unknown action: %+v", res)
	}
	res = h.c.Handle(ctx, &protocol.NativeRequest{Action: protocol.NativeStatus, RootID: "root-nope"})
	if res.Code != CodeUnknownRoot {
		t.Fatalf("status unknown: %+v", res)
	}
}

func TestIdempotentRetry(t *testing.T) {
	h := newHarness(t)
	root := h.c.BoundRoot()
	ctx := t.Context()
	q := h.req(protocol.NativeStop, root, 1, nil)
	first := h.c.Handle(ctx, q)
	if first.Kind != protocol.NativeKindReceipt {
		t.Fatal(first)
	}
	h.ok(protocol.NativeResume, root, nil) // the revision moves on
	h.ok(protocol.NativePause, root, nil)
	again := *q
	second := h.c.Handle(ctx, &again)
	if !reflect.DeepEqual(first, second) {
		t.Fatalf("retry: %+v != %+v", second.Receipt, first.Receipt)
	}
	if st := h.status(root); st.Revision != 4 || st.Intent != "pause" {
		t.Fatalf("retry changed state: %+v", st)
	}
	h.reopen()
	if third := h.c.Handle(ctx, &again); !reflect.DeepEqual(first, third) {
		t.Fatalf("retry after reopen: %+v", third)
	}
	other := *q
	other.Action = protocol.NativeAbort
	if res := h.c.Handle(ctx, &other); res.Code != CodeOperationIDReused {
		t.Fatalf("reused: %+v", res)
	}
	other = *q
	other.ExpectedRevision = rev(4)
	if res := h.c.Handle(ctx, &other); res.Code != CodeOperationIDReused {
		t.Fatalf("reused with new revision: %+v", res)
	}
	if st := h.status(root); st.Revision != 4 {
		t.Fatalf("revision %d", st.Revision)
	}
}

func TestRacingPauseThenChain(t *testing.T) {
	h := newHarness(t)
	root := h.c.BoundRoot()
	ctx := t.Context()
	var changes sync.WaitGroup
	var mu sync.Mutex
	notified := 0
	h.c.OnChange(func() { mu.Lock(); notified++; mu.Unlock(); changes.Done() })
	changes.Add(1)
	results := make([]protocol.NativeResult, 50)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i] = h.c.Handle(ctx, &protocol.NativeRequest{Action: protocol.NativePause, RootID: root,
				OperationID: fmt.Sprint("race-", i), ExpectedRevision: rev(1)})
		}()
	}
	close(start)
	wg.Wait()
	receipts, conflicts := 0, 0
	for _, r := range results {
		switch {
		case r.Kind == protocol.NativeKindReceipt && r.Receipt.Revision == 2:
			receipts++
		case r.Code == CodeRevisionConflict:
			conflicts++
		default:
			t.Fatalf("unexpected %+v", r)
		}
	}
	if receipts != 1 || conflicts != 49 {
		t.Fatalf("receipts %d conflicts %d", receipts, conflicts)
	}
	changes.Wait()
	// A chain of N mutations: revisions 3..N+2, no gap (stored receipts too).
	const n = 30
	for i := range n {
		action := protocol.NativeResume
		if i%2 == 1 {
			action = protocol.NativePause
		}
		changes.Add(1)
		res := h.ok(action, root, nil)
		if res.Receipt.Revision != int64(i+3) {
			t.Fatalf("chain %d: revision %d", i, res.Receipt.Revision)
		}
	}
	changes.Wait()
	var revs []int64
	rows, err := h.st.r.Query(`SELECT revision FROM receipts WHERE root_id = ? ORDER BY revision`, root)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var r int64
		rows.Scan(&r)
		revs = append(revs, r)
	}
	rows.Close()
	for i, r := range revs {
		if r != int64(i+2) {
			t.Fatalf("revisions %v have a gap", revs)
		}
	}
	if len(revs) != n+1 || notified != n+1 {
		t.Fatalf("%d receipts, %d notifications", len(revs), notified)
	}
}

func TestReleaseHolds(t *testing.T) {
	h := newHarness(t)
	root := h.c.BoundRoot()
	ctx := t.Context()
	h.c.Reserve(ctx, TaskSpec{ID: "t1"})
	h1, err := h.c.Hold(ctx, "t1", "look first")
	if err != nil {
		t.Fatal(err)
	}
	h2, err := h.c.Hold(ctx, "t1", "look harder")
	if err != nil || h2 == h1 {
		t.Fatalf("hold hash did not change: %v", err)
	}
	if ad, _ := h.c.Admit(ctx, "t1"); ad.Wait == "" {
		t.Fatalf("held: %+v", ad)
	}
	h.fail(CodeHoldHashMismatch, protocol.NativeRelease, root, func(q *protocol.NativeRequest) { q.HoldHash = h1 })
	h.fail(CodeHoldNotFound, protocol.NativeRelease, root, func(q *protocol.NativeRequest) { q.HoldHash = "deadbeef" })
	if st := h.status(root); len(st.Holds) != 1 || st.Holds[0].HoldHash != h2 || st.Tasks[0].State != "held" {
		t.Fatalf("status: %+v", st)
	}
	h.ok(protocol.NativeRelease, root, func(q *protocol.NativeRequest) { q.HoldHash = h2 })
	if st := h.status(root); len(st.Holds) != 0 {
		t.Fatalf("hold survived release: %+v", st.Holds)
	}
	h.fail(CodeHoldNotFound, protocol.NativeRelease, root, func(q *protocol.NativeRequest) { q.HoldHash = h2 })
	if ad, _ := h.c.Admit(ctx, "t1"); !ad.Start {
		t.Fatalf("released: %+v", ad)
	}
}

func TestDecisions(t *testing.T) {
	h := newHarness(t)
	root := h.c.BoundRoot()
	ctx := t.Context()
	ev := Evidence("rm -rf build", "abc123", "p1")
	h.c.Reserve(ctx, TaskSpec{ID: "t1", Evidence: ev, NeedsApproval: true})
	h.c.Reserve(ctx, TaskSpec{ID: "plain"})
	decide := func(verdict, sup string) func(*protocol.NativeRequest) {
		return func(q *protocol.NativeRequest) { q.TaskID, q.Rationale, q.Supersedes = "t1", "because", sup }
	}
	h.fail(CodeNoDecisionNeeded, protocol.NativeApprove, root, func(q *protocol.NativeRequest) { q.TaskID, q.Rationale = "plain", "x" })
	h.fail(CodeUnknownTask, protocol.NativeApprove, root, func(q *protocol.NativeRequest) { q.TaskID, q.Rationale = "nope", "x" })
	if res := h.c.Handle(ctx, h.req(protocol.NativeApprove, root, h.revision(root), func(q *protocol.NativeRequest) { q.TaskID, q.Rationale = "t1", "  " })); res.Code != CodeInvalidRequest {
		t.Fatalf("blank rationale: %+v", res)
	}
	if ad, _ := h.c.Admit(ctx, "t1"); ad.Wait == "" {
		t.Fatalf("no decision: %+v", ad)
	}
	h.fail(CodeSupersedesMis, protocol.NativeApprove, root, decide("approve", "dec-nope"))
	h.ok(protocol.NativeApprove, root, decide("approve", ""))
	d1 := h.status(root).Decisions[0]
	if d1.EvidenceHash != ev || d1.Verdict != "approve" {
		t.Fatalf("decision: %+v", d1)
	}
	h.fail(CodeSupersedesReq, protocol.NativeDeny, root, decide("deny", ""))
	h.fail(CodeSupersedesMis, protocol.NativeDeny, root, decide("deny", "dec-other"))
	h.ok(protocol.NativeDeny, root, decide("deny", d1.ID))
	d2 := h.status(root).Decisions[1]
	if d2.Supersedes != d1.ID || d2.Verdict != "deny" {
		t.Fatalf("deny: %+v", d2)
	}
	if ad, _ := h.c.Admit(ctx, "t1"); ad.Refuse == "" {
		t.Fatalf("denied: %+v", ad)
	}
	h.fail(CodeSupersedesMis, protocol.NativeApprove, root, decide("approve", d1.ID)) // d1 is no longer live
	h.ok(protocol.NativeApprove, root, decide("approve", d2.ID))
	d3 := h.status(root).Decisions[2]
	if ad, err := h.c.Admit(ctx, "t1"); err != nil || !ad.Start {
		t.Fatalf("approved: %+v %v", ad, err)
	}
	st := h.status(root)
	if !st.Decisions[2].Consumed || st.Tasks[0].Attempts != 1 || st.Tasks[0].State != "running" || len(st.Effects) != 1 {
		t.Fatalf("after start: %+v", st)
	}
	h.fail(CodeDecisionConsumed, protocol.NativeDeny, root, decide("deny", d3.ID))
	h.fail(CodeDecisionConsumed, protocol.NativeApprove, root, decide("approve", ""))
}

func TestManualStartAndPlanned(t *testing.T) {
	h := newHarness(t)
	root := h.c.BoundRoot()
	ctx := t.Context()
	h.c.Reserve(ctx, TaskSpec{ID: "p1", Planned: true})
	h.c.Reserve(ctx, TaskSpec{ID: "p2", Planned: true})
	if ad, _ := h.c.Admit(ctx, "p1"); ad.Wait == "" {
		t.Fatalf("planned: %+v", ad)
	}
	h.ok(protocol.NativeManualStart, root, task("p1"))
	if st := h.status(root); len(st.PendingReceipts) != 1 || st.PendingReceipts[0].Action != protocol.NativeManualStart {
		t.Fatalf("pending: %+v", st.PendingReceipts)
	}
	if ad, _ := h.c.Admit(ctx, "p1"); !ad.Start {
		t.Fatalf("manual-started: %+v", ad)
	}
	if st := h.status(root); len(st.PendingReceipts) != 0 {
		t.Fatalf("pending: %+v", st.PendingReceipts)
	}
	h.fail(CodeAlreadyAttempted, protocol.NativeManualStart, root, task("p1"))
	h.fail(CodeUnknownTask, protocol.NativeManualStart, root, task("nope"))
	if err := h.c.ReleasePlanned(ctx, "p2"); err != nil {
		t.Fatal(err)
	}
	if ad, _ := h.c.Admit(ctx, "p2"); !ad.Start {
		t.Fatalf("/go: %+v", ad)
	}
}

func TestAdmitIntents(t *testing.T) {
	h := newHarness(t)
	root := h.c.BoundRoot()
	ctx := t.Context()
	h.c.Reserve(ctx, TaskSpec{ID: "t1"})
	h.ok(protocol.NativePause, root, nil)
	if ad, _ := h.c.Admit(ctx, "t1"); ad.Wait == "" {
		t.Fatalf("paused root: %+v", ad)
	}
	h.ok(protocol.NativeResume, root, nil)
	h.ok(protocol.NativePause, root, task("t1"))
	if ad, _ := h.c.Admit(ctx, "t1"); ad.Wait == "" {
		t.Fatalf("paused task: %+v", ad)
	}
	h.ok(protocol.NativeStop, root, task("t1"))
	if ad, _ := h.c.Admit(ctx, "t1"); ad.Refuse == "" {
		t.Fatalf("stopped task: %+v", ad)
	}
	h.ok(protocol.NativeResume, root, task("t1"))
	h.ok(protocol.NativeAbort, root, nil)
	if ad, _ := h.c.Admit(ctx, "t1"); ad.Refuse == "" {
		t.Fatalf("aborted root: %+v", ad)
	}
	h.ok(protocol.NativeResume, root, nil)
	if ad, _ := h.c.Admit(ctx, "t1"); !ad.Start {
		t.Fatalf("resumed: %+v", ad)
	}
	if _, err := h.c.Admit(ctx, "nope"); err == nil {
		t.Fatal("unknown task admitted")
	}
}

func TestSettleHoldAndReconcile(t *testing.T) {
	h := newHarness(t)
	root := h.c.BoundRoot()
	ctx := t.Context()
	h.c.Reserve(ctx, TaskSpec{ID: "t1"})
	h.c.Reserve(ctx, TaskSpec{ID: "t2"})
	if ad, _ := h.c.Admit(ctx, "t1"); !ad.Start {
		t.Fatal(ad)
	}
	proof, err := h.c.Settle(ctx, Settlement{TaskID: "t1", WorkerID: "w1", ExitCode: 2, Failed: true, HeadCommit: "abc"})
	if err != nil {
		t.Fatal(err)
	}
	st := h.status(root)
	if len(st.Holds) != 1 || st.Effects[0].State != "failed" || st.Effects[0].ProofID != proof {
		t.Fatalf("after failed settle: %+v", st)
	}
	if ad, _ := h.c.Admit(ctx, "t1"); ad.Wait == "" {
		t.Fatalf("failed task must be held: %+v", ad)
	}
	h.ok(protocol.NativeRelease, root, func(q *protocol.NativeRequest) { q.HoldHash = st.Holds[0].HoldHash })
	if ad, _ := h.c.Admit(ctx, "t1"); !ad.Start {
		t.Fatalf("after release: %+v", ad)
	}
	// The engine loses track of the retry; the worker's record arrives.
	if err := h.c.MarkUncertain(ctx, "t1"); err != nil {
		t.Fatal(err)
	}
	proof2, err := h.c.Settle(ctx, Settlement{TaskID: "t1", WorkerID: "w2"})
	if err != nil {
		t.Fatal(err)
	}
	if e := h.status(root).Effects[1]; e.State != "uncertain" {
		t.Fatalf("uncertain effect settled without reconcile: %+v", e)
	}
	for _, bad := range []string{"ws-0123456789abcdef", "/tmp/proof.json", "3f786850e387550fdab836ed7e6dc881de23001b", proof + "x"} {
		h.fail(CodeInvalidProof, protocol.NativeReconcile, root, func(q *protocol.NativeRequest) { q.ProofID = bad })
	}
	h.fail(CodeInvalidProof, protocol.NativeReconcile, root, func(q *protocol.NativeRequest) { q.ProofID, q.TaskID = proof2, "t2" })
	h.ok(protocol.NativeReconcile, root, func(q *protocol.NativeRequest) { q.ProofID, q.TaskID = proof2, "t1" })
	st = h.status(root)
	if e := st.Effects[1]; e.State != "settled" || e.ProofID != proof2 || st.Tasks[0].State != "settled" {
		t.Fatalf("after reconcile: %+v", st)
	}
	if ad, _ := h.c.Admit(ctx, "t1"); ad.Refuse == "" {
		t.Fatalf("settled task: %+v", ad)
	}
}

// dumpRoot returns every row that belongs to root, in a stable text form.
func dumpRoot(t *testing.T, db *sql.DB, root string) string {
	t.Helper()
	var out []string
	for _, q := range []string{
		`SELECT * FROM roots WHERE id = ?`, `SELECT * FROM tasks WHERE root_id = ?`, `SELECT * FROM holds WHERE root_id = ?`,
		`SELECT * FROM hold_hashes WHERE root_id = ?`, `SELECT * FROM decisions WHERE root_id = ?`, `SELECT * FROM effects WHERE root_id = ?`,
		`SELECT * FROM settlements WHERE root_id = ?`, `SELECT * FROM receipts WHERE root_id = ?`,
	} {
		rows, err := db.Query(q, root)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			rows.Scan(ptrs...)
			out = append(out, fmt.Sprintf("%s %q", q, vals))
		}
		rows.Close()
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

func TestReclassify(t *testing.T) {
	h := newHarness(t)
	old := h.c.BoundRoot()
	ctx := t.Context()
	ev := Evidence("c", "b", "p1")
	h.c.Reserve(ctx, TaskSpec{ID: "t1", Evidence: ev, NeedsApproval: true})
	h.c.Hold(ctx, "t1", "wait")
	h.ok(protocol.NativeApprove, old, func(q *protocol.NativeRequest) { q.TaskID, q.Rationale = "t1", "ok" })
	h.ok(protocol.NativePause, old, nil)
	before := dumpRoot(t, h.st.r, old)
	if !strings.Contains(before, "t1") {
		t.Fatal("dump is empty")
	}
	res := h.ok(protocol.NativeReclassify, old, nil)
	if res.Kind != protocol.NativeKindPolicyAdmission || res.PreviousRootID != old || res.RootID == old ||
		!*res.PreviousRootUnchanged || !*res.SessionRebound || res.Receipt.RootID != res.RootID || res.Receipt.Revision != 1 {
		t.Fatalf("reclassify: %+v", res)
	}
	if after := dumpRoot(t, h.st.r, old); after != before {
		t.Fatalf("old root changed:\n%s\n---\n%s", before, after)
	}
	if h.c.BoundRoot() != res.RootID {
		t.Fatal("not rebound")
	}
	st := h.status(res.RootID)
	if st.Revision != 1 || st.Intent != "run" || st.PreviousRootID != old || len(st.Tasks)+len(st.Holds)+len(st.Decisions) != 0 {
		t.Fatalf("new root: %+v", st)
	}
	if h.status(old).Intent != "pause" {
		t.Fatal("old root not addressable")
	}
	list := h.c.Handle(ctx, &protocol.NativeRequest{Action: protocol.NativeList})
	if len(list.Roots) != 2 || list.Roots[0].ID != res.RootID {
		t.Fatalf("list: %+v", list.Roots)
	}
	h.reopen()
	if h.c.BoundRoot() != res.RootID {
		t.Fatal("binding lost on reopen")
	}
}

func TestDurableAcrossReopen(t *testing.T) {
	h := newHarness(t)
	root := h.c.BoundRoot()
	ctx := t.Context()
	h.c.Reserve(ctx, TaskSpec{ID: "t1", Planned: true})
	var receipts []protocol.NativeReceipt
	for _, a := range []string{protocol.NativePause, protocol.NativeResume, protocol.NativeStop} {
		receipts = append(receipts, *h.ok(a, root, nil).Receipt)
	}
	h.reopen()
	st := h.status(root)
	if st.Revision != 4 || st.Intent != "stop" || len(st.Tasks) != 1 {
		t.Fatalf("after reopen: %+v", st)
	}
	for i, r := range receipts {
		res := h.c.Handle(ctx, &protocol.NativeRequest{Action: r.Action, RootID: root, OperationID: r.OperationID, ExpectedRevision: rev(int64(i + 1))})
		if *res.Receipt != r {
			t.Fatalf("stored receipt %d: %+v vs %+v", i, res.Receipt, r)
		}
	}
}

func TestOtherSessionIsolated(t *testing.T) {
	h := newHarness(t)
	c2, err := New(t.Context(), h.st, "sess-2", Options{Now: func() time.Time { return time.Unix(1, 0) }})
	if err != nil {
		t.Fatal(err)
	}
	if res := h.c.Handle(t.Context(), h.req(protocol.NativePause, c2.BoundRoot(), 1, nil)); res.Code != CodeUnknownRoot {
		t.Fatalf("cross-session pause: %+v", res)
	}
	if res := c2.Handle(t.Context(), &protocol.NativeRequest{Action: protocol.NativeStatus, RootID: h.c.BoundRoot()}); res.Code != CodeUnknownRoot {
		t.Fatalf("cross-session status: %+v", res)
	}
}

func TestPragmas(t *testing.T) {
	h := newHarness(t)
	var sync int
	var mode string
	if err := h.st.w.QueryRow(`PRAGMA synchronous`).Scan(&sync); err != nil || sync != 2 {
		t.Fatalf("synchronous = %d (%v), want 2 (FULL)", sync, err)
	}
	if err := h.st.w.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q (%v)", mode, err)
	}
}
