package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/agents-fleet/fleet/controlsock"
	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/registry"
)

// nativeFleet is a Backend whose Native answers with handle and records
// every request it got.
type nativeFleet struct {
	handle func(req *protocol.NativeRequest) protocol.NativeResult

	mu   sync.Mutex
	reqs []protocol.NativeRequest
}

func (f *nativeFleet) Prompt(m *protocol.UserMessage)                        {}
func (f *nativeFleet) AnswerConfirm(id string, approve bool, r string) error { return nil }
func (f *nativeFleet) AnswerAsk(id, text, r string) error                    { return nil }

func (f *nativeFleet) Native(ctx context.Context, req *protocol.NativeRequest) protocol.NativeResult {
	f.mu.Lock()
	f.reqs = append(f.reqs, *req)
	f.mu.Unlock()
	return f.handle(req)
}

func (f *nativeFleet) requests() []protocol.NativeRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reqs)
}

// registerFleet writes a live descriptor for id (<pid>-<suffix>) in home
// and returns it with the fleet's token.
func registerFleet(t *testing.T, home, name, suffix string) (registry.Descriptor, string) {
	t.Helper()
	id := fmt.Sprintf("%d-%s", os.Getpid(), suffix)
	if err := registry.EnsurePrivateDir(registry.ControlDir(home)); err != nil {
		t.Fatal(err)
	}
	token, err := registry.WriteToken(registry.TokenPath(home, id))
	if err != nil {
		t.Fatal(err)
	}
	d := registry.Descriptor{
		SchemaVersion: registry.SchemaVersion, ID: id, PID: os.Getpid(), Name: name, Cwd: home,
		SocketPath: registry.SocketPath(home, id), TokenPath: registry.TokenPath(home, id),
		FleetHome: home, StartedAt: time.Now().UnixMilli(), ProtocolVersion: registry.ProtocolVersion,
	}
	if _, err := registry.Write(testRegistryDir(home), d); err != nil {
		t.Fatal(err)
	}
	return d, token
}

// startNativeFleet serves a real control socket in front of a nativeFleet.
func startNativeFleet(t *testing.T, home string, handle func(*protocol.NativeRequest) protocol.NativeResult) *nativeFleet {
	t.Helper()
	d, token := registerFleet(t, home, "native", "n1")
	f := &nativeFleet{handle: handle}
	srv := controlsock.New(controlsock.Config{Token: token, Backend: f, Welcome: protocol.Welcome{SessionID: "s-n1", Cwd: home}})
	ln, err := controlsock.Listen(d.SocketPath)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { srv.Serve(ln); close(served) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		<-served
	})
	return f
}

// runNativeRoot runs "fleet root args..." with newNativeRootCmd under a parent.
func runNativeRoot(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	parent := &cobra.Command{Use: "fleet"}
	parent.AddCommand(newNativeRootCmd())
	return runCmd(t, parent, nil, append([]string{"root"}, args...)...)
}

// exitCode is the code Execute would exit with for err.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exitError); ok {
		return ee.code
	}
	return 1
}

func wantExit(t *testing.T, err error, code int, contains string) {
	t.Helper()
	if got := exitCode(err); got != code {
		t.Fatalf("exit code %d (err %v), want %d", got, err, code)
	}
	if contains != "" && (err == nil || !strings.Contains(err.Error(), contains)) {
		t.Fatalf("error %v does not contain %q", err, contains)
	}
}

func receiptFor(req *protocol.NativeRequest) protocol.NativeResult {
	return protocol.NativeResult{
		Kind: protocol.NativeKindReceipt,
		Receipt: &protocol.NativeReceipt{
			OperationID: req.OperationID, RequestHash: "h", RootID: req.RootID, Action: req.Action,
			Revision: *req.ExpectedRevision + 1, Status: "persisted", CreatedAt: 1,
		},
		AcknowledgmentOnly: protocol.Bool(true),
	}
}

func oneRoot(ids ...string) func(*protocol.NativeRequest) protocol.NativeResult {
	return func(req *protocol.NativeRequest) protocol.NativeResult {
		if req.Action == protocol.NativeList {
			res := protocol.NativeResult{Kind: protocol.NativeKindRoots}
			for i, id := range ids {
				res.Roots = append(res.Roots, protocol.NativeRootInfo{ID: id, Revision: int64(i + 3), Intent: "run", Phase: "running"})
			}
			return res
		}
		return receiptFor(req)
	}
}

// TestNativeRootFrame checks the bytes on the wire with a scripted fleet: exactly
// type, id and request, and a numeric expectedRevision.
// serveByHand plays fleet d without a control server: on each connection
// it reads hello, sends welcome and replayEnd, reads one frame, passes it
// on the channel it returns and lets answer write to the connection (or
// not) before closing it.
func serveByHand(t *testing.T, d registry.Descriptor, answer func(conn int, c net.Conn, frame []byte)) <-chan []byte {
	t.Helper()
	ln, err := controlsock.Listen(d.SocketPath)
	if err != nil {
		t.Fatal(err)
	}
	frames := make(chan []byte, 4)
	served := make(chan struct{})
	go func() {
		defer close(served)
		for i := 0; ; i++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			r := protocol.NewReader(c, 0)
			if _, err := r.ReadFrame(); err == nil { // hello
				io.WriteString(c, `{"type":"welcome","protocolVersion":1,"capabilities":["replayEnd"]}`+"\n"+`{"type":"replayEnd"}`+"\n")
				if frame, err := r.ReadFrame(); err == nil {
					frame = append([]byte(nil), frame...)
					frames <- frame
					answer(i, c, frame)
				}
			}
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-served })
	return frames
}

// receiptTo writes a stop receipt for op-id at revision 4 in answer to frame.
func receiptTo(c net.Conn, frame []byte, op string) {
	var env struct{ ID string }
	json.Unmarshal(frame, &env)
	fmt.Fprintf(c, `{"type":"nativeRootResult","id":%q,"result":{"kind":"receipt","receipt":{"operationId":%q,"requestHash":"h","rootId":"r1","action":"stop","revision":4,"status":"persisted","createdAt":1},"acknowledgmentOnly":true}}`+"\n", env.ID, op)
	io.Copy(io.Discard, c) // until the command hangs up
}

func TestNativeRootFrame(t *testing.T) {
	home := testHome(t)
	d, _ := registerFleet(t, home, "raw", "r1")
	frames := serveByHand(t, d, func(_ int, c net.Conn, frame []byte) {
		// Noise first: a result for another id and an unrelated frame.
		io.WriteString(c, `{"type":"nativeRootResult","id":"other","result":{"kind":"error","code":"revision_conflict"}}`+"\n")
		io.WriteString(c, `{"type":"reply","text":"hi"}`+"\n")
		receiptTo(c, frame, "op-1")
	})

	out, _, err := runNativeRoot(t, "stop", "r1", "--operation-id", "op-1", "--revision", "3", "--task", "t1")
	if err != nil {
		t.Fatal(err)
	}
	frame := <-frames
	if err := protocol.CheckNativeFrame(frame); err != nil {
		t.Fatalf("frame %s: %v", frame, err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(frame, &top); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range top {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if strings.Join(keys, ",") != "id,request,type" {
		t.Fatalf("frame keys %q: %s", keys, frame)
	}
	if string(top["type"]) != `"nativeRoot"` || !regexp.MustCompile(`^"root-[0-9a-f]+"$`).Match(top["id"]) {
		t.Errorf("frame type/id: %s", frame)
	}
	var req map[string]json.RawMessage
	if err := json.Unmarshal(top["request"], &req); err != nil {
		t.Fatal(err)
	}
	if string(req["expectedRevision"]) != "3" {
		t.Errorf("expectedRevision = %s, want the number 3", req["expectedRevision"])
	}
	want := `{"action":"stop","rootId":"r1","operationId":"op-1","expectedRevision":3,"taskId":"t1"}`
	if string(top["request"]) != want {
		t.Errorf("request = %s, want %s", top["request"], want)
	}
	if !strings.Contains(out, "receipt persisted: stop on root r1, revision 4, operation op-1\n") {
		t.Errorf("output:\n%s", out)
	}
}

// The connection drops after the request was sent: fleet root sends the
// same operation again, on a new connection, and shows the answer.
func TestNativeRootRetriesAfterADroppedConnection(t *testing.T) {
	home := testHome(t)
	d, _ := registerFleet(t, home, "raw", "r2")
	frames := serveByHand(t, d, func(conn int, c net.Conn, frame []byte) {
		if conn > 0 { // the first time without an answer
			receiptTo(c, frame, "op-d")
		}
	})

	out, stderr, err := runNativeRoot(t, "stop", "r1", "--operation-id", "op-d", "--revision", "3")
	if err != nil {
		t.Fatalf("%v; stderr %q", err, stderr)
	}
	first, second := <-frames, <-frames
	var f1, f2 struct {
		ID      string
		Request json.RawMessage
	}
	if json.Unmarshal(first, &f1) != nil || json.Unmarshal(second, &f2) != nil ||
		string(f1.Request) != string(f2.Request) || f1.ID == f2.ID {
		t.Errorf("retry %s after %s: want the same request under a new id", second, first)
	}
	if !strings.Contains(stderr, "sending operation op-d again with revision 3") {
		t.Errorf("stderr %q does not tell of the retry", stderr)
	}
	if !strings.Contains(out, "receipt persisted: stop on root r1, revision 4, operation op-d\n") {
		t.Errorf("output:\n%s", out)
	}
}

func TestNativeRootBadRevision(t *testing.T) {
	home := testHome(t)
	f := startNativeFleet(t, home, oneRoot("r1"))
	for _, args := range [][]string{
		{"stop", "r1", "--revision", "abc"},
		{"stop", "r1", "--revision=-1"},
		{"stop", "r1", "--revision", "-1"},
		{"pause", "r1", "--revision", "1.5"},
		{"abort", "r1", "--revision", " 2"},
		{"resume", "r1", "--revision", "99999999999999999999"},
	} {
		_, _, err := runNativeRoot(t, args...)
		wantExit(t, err, exitUsage, "--revision")
	}
	// Missing --revision.
	_, _, err := runNativeRoot(t, "stop", "r1")
	wantExit(t, err, exitUsage, "--revision is required")
	if reqs := f.requests(); len(reqs) != 0 {
		t.Fatalf("the fleet got %v", reqs)
	}
}

func TestNativeRootUsageErrors(t *testing.T) {
	home := testHome(t)
	f := startNativeFleet(t, home, oneRoot("r1"))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"approve", "r1", "--revision", "1", "--task", "t1"}, "--rationale"},
		{[]string{"deny", "r1", "--revision", "1", "--task", "t1", "--rationale", "  "}, "--rationale"},
		{[]string{"approve", "r1", "--revision", "1", "--rationale", "ok"}, "--task"},
		{[]string{"release", "r1", "--revision", "1"}, "--hold-hash"},
		{[]string{"reconcile", "r1", "--revision", "1"}, "--proof"},
		{[]string{"manual-start", "r1", "--revision", "1"}, "--task"},
		{[]string{"stop", "r1", "--revision", "1", "--hold-hash", "h"}, "unknown flag"},
		{[]string{"reclassify", "r1", "--revision", "1", "--task", "t"}, "unknown flag"},
		{[]string{"status", "r1", "--revision", "1"}, "unknown flag"},
		{[]string{"list", "r1"}, "no arguments"},
		{[]string{"stop", "r1", "r2", "--revision", "1"}, "at most one ROOT"},
		{[]string{"stop", "r1", "--revision", "1", "--operation-id", strings.Repeat("x", 129)}, "operationId"},
		{[]string{"stop", "r1", "--revision", "1", "--timeout", "soon"}, "timeout"},
		{[]string{"frobnicate"}, "unknown root action"},
		{[]string{}, "missing root action"},
	} {
		_, _, err := runNativeRoot(t, c.args...)
		if exitCode(err) != exitUsage || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: exit %d, err %v; want exit 2 mentioning %q", c.args, exitCode(err), err, c.want)
		}
	}
	if reqs := f.requests(); len(reqs) != 0 {
		t.Fatalf("the fleet got %v", reqs)
	}
}

// TestNativeRootActionFlags checks that each action takes exactly its flags.
func TestNativeRootActionFlags(t *testing.T) {
	common := []string{"fleet", "help", "json", "timeout"}
	mut := append(slices.Clone(common), "operation-id", "revision")
	want := map[string][]string{
		"list":         common,
		"status":       common,
		"pause":        append(slices.Clone(mut), "task"),
		"resume":       append(slices.Clone(mut), "task"),
		"stop":         append(slices.Clone(mut), "task"),
		"abort":        append(slices.Clone(mut), "task"),
		"release":      append(slices.Clone(mut), "hold-hash"),
		"reclassify":   mut,
		"approve":      append(slices.Clone(mut), "task", "rationale", "supersedes"),
		"deny":         append(slices.Clone(mut), "task", "rationale", "supersedes"),
		"manual-start": append(slices.Clone(mut), "task"),
		"reconcile":    append(slices.Clone(mut), "proof", "task"),
		"abandon":      append(slices.Clone(mut), "task"),
	}
	root := newNativeRootCmd()
	if len(root.Commands()) != len(want) {
		t.Errorf("%d subcommands, want %d", len(root.Commands()), len(want))
	}
	for _, sub := range root.Commands() {
		sub.InitDefaultHelpFlag()
		var got []string
		sub.Flags().VisitAll(func(f *pflag.Flag) { got = append(got, f.Name) })
		sort.Strings(got)
		w := slices.Clone(want[sub.Name()])
		sort.Strings(w)
		if !slices.Equal(got, w) {
			t.Errorf("%s flags %q, want %q", sub.Name(), got, w)
		}
		if sub.Short == "" || sub.Long == "" || !strings.Contains(sub.Example, "fleet root "+sub.Name()) {
			t.Errorf("%s: incomplete help", sub.Name())
		}
	}
}

func TestNativeRootGeneratedOperationID(t *testing.T) {
	home := testHome(t)
	f := startNativeFleet(t, home, oneRoot("r1"))
	out, stderr, err := runNativeRoot(t, "pause", "r1", "--revision", "3")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`operation id (op-[0-9a-f]{16}); retry with --operation-id (op-[0-9a-f]{16}) --revision 3 if the result is uncertain`).FindStringSubmatch(stderr)
	if m == nil || m[1] != m[2] {
		t.Fatalf("no operation id on stderr: %q", stderr)
	}
	reqs := f.requests()
	if len(reqs) != 1 || reqs[0].OperationID != m[1] || *reqs[0].ExpectedRevision != 3 || reqs[0].RootID != "r1" || reqs[0].Action != "pause" {
		t.Fatalf("requests %+v, want pause r1 with %s", reqs, m[1])
	}
	wantOut := "receipt persisted: pause on root r1, revision 4, operation " + m[1] + "\n" +
		"acknowledged only: the change is recorded durably; follow 'fleet root status r1' for the phase the fleet actually reaches\n"
	if out != wantOut {
		t.Fatalf("output %q, want %q", out, wantOut)
	}

	// A given operation id is used as is and not announced.
	_, stderr, err = runNativeRoot(t, "approve", "r1", "--revision", "4", "--operation-id", "op-mine", "--task", "t2", "--rationale", "looks right", "--supersedes", "d1")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(stderr, "operation id") {
		t.Errorf("stderr %q", stderr)
	}
	got := f.requests()[1]
	if got.OperationID != "op-mine" || got.TaskID != "t2" || got.Rationale != "looks right" || got.Supersedes != "d1" {
		t.Errorf("approve request %+v", got)
	}
}

func TestNativeRootErrorCodes(t *testing.T) {
	home := testHome(t)
	code := "revision_conflict"
	var mu sync.Mutex
	startNativeFleet(t, home, func(req *protocol.NativeRequest) protocol.NativeResult {
		mu.Lock()
		defer mu.Unlock()
		return protocol.NativeResult{Kind: protocol.NativeKindError, Code: code, Message: "safe message"}
	})
	set := func(c string) { mu.Lock(); code = c; mu.Unlock() }

	_, _, err := runNativeRoot(t, "stop", "r1", "--revision", "3", "--operation-id", "op-1")
	wantExit(t, err, exitConflict, "revision conflict")

	set("operation_id_reused")
	_, _, err = runNativeRoot(t, "stop", "r1", "--revision", "3", "--operation-id", "op-1")
	wantExit(t, err, exitConflict, "operation id reused")

	set("native_mode_required")
	_, _, err = runNativeRoot(t, "list")
	wantExit(t, err, 1, "legacy session started without --native-root")
	_, _, err = runNativeRoot(t, "stop", "--revision", "1") // ROOT omitted: list refused first
	wantExit(t, err, 1, "legacy session started without --native-root")

	set("invalid_request")
	_, _, err = runNativeRoot(t, "status", "r1")
	wantExit(t, err, 1, "invalid_request: safe message")

	// --json still prints the result object.
	out, _, err := runNativeRoot(t, "status", "r1", "--json")
	wantExit(t, err, 1, "")
	if strings.TrimSpace(out) != `{"kind":"error","code":"invalid_request","message":"safe message"}` {
		t.Errorf("--json error output %q", out)
	}
}

func TestNativeRootLegacyEngine(t *testing.T) {
	// The real answer of a legacy session.
	home := testHome(t)
	startNativeFleet(t, home, func(req *protocol.NativeRequest) protocol.NativeResult {
		return protocol.NativeResult{Kind: protocol.NativeKindError, Code: "native_mode_required",
			Message: "native controls need a session started with --native-root; this session is legacy"}
	})
	_, _, err := runNativeRoot(t, "abandon", "r1", "--revision", "2")
	wantExit(t, err, 1, "the fleet is a legacy session started without --native-root")
}

func testStatus() *protocol.NativeRootStatus {
	return &protocol.NativeRootStatus{
		ID: "r1", Revision: 5, Intent: "stop", Phase: "running",
		Grant: protocol.NativeGrant{SessionID: "s-n1", PolicyVersion: "pv1", GrantedAt: 1},
		Tasks: []protocol.NativeTask{{ID: "t1", Subject: "build", State: "failed", Attempts: 2, EvidenceHash: "ev1"}},
		Holds: []protocol.NativeHold{{HoldHash: "hh1", Reason: "task failed", CreatedAt: 1, TaskID: "t1"}},
		Decisions: []protocol.NativeDecision{{ID: "d1", TaskID: "t1", Verdict: "approve", Rationale: "ok",
			EvidenceHash: "ev1", Consumed: true, CreatedAt: 1}},
		Effects:         []protocol.NativeEffect{{ID: "e1", TaskID: "t1", Kind: "worker", State: "uncertain", StartedAt: 1, ProofID: "p1"}},
		PendingReceipts: []protocol.NativeReceipt{{OperationID: "op-9", RootID: "r1", Action: "stop", Revision: 5, Status: "persisted"}},
	}
}

func TestNativeRootStatus(t *testing.T) {
	home := testHome(t)
	f := startNativeFleet(t, home, func(req *protocol.NativeRequest) protocol.NativeResult {
		if req.Action == protocol.NativeList {
			return oneRoot("r1")(req)
		}
		return protocol.NativeResult{Kind: protocol.NativeKindStatus, Root: testStatus()}
	})
	out, stderr, err := runNativeRoot(t, "status") // the only root
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr, "using root r1") {
		t.Errorf("stderr %q", stderr)
	}
	reqs := f.requests()
	if len(reqs) != 2 || reqs[0].Action != "list" || reqs[1].Action != "status" || reqs[1].RootID != "r1" {
		t.Fatalf("requests %+v", reqs)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^root r1, revision 5$`),
		regexp.MustCompile(`(?m)^intent stop, phase running \(not reached yet\)$`),
		regexp.MustCompile(`(?m)^holds \(1\):$`),
		regexp.MustCompile(`(?m)^  hh1 +t1 +task failed$`),
		regexp.MustCompile(`(?m)^  d1 +approve +t1 +yes `),
		regexp.MustCompile(`(?m)^  t1 +failed +2 +ev1 `),
		regexp.MustCompile(`(?m)^  e1 +t1 +worker +uncertain +p1$`),
		regexp.MustCompile(`(?m)^  op-9 +stop +5 +persisted$`),
	} {
		if !want.MatchString(out) {
			t.Errorf("status output lacks %s:\n%s", want, out)
		}
	}

	// --json prints the result object.
	out, _, err = runNativeRoot(t, "status", "r1", "--json")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(protocol.NativeResult{Kind: protocol.NativeKindStatus, Root: testStatus()})
	if out != string(want)+"\n" {
		t.Errorf("--json = %s\nwant %s", out, want)
	}
}

func TestNativeRootReached(t *testing.T) {
	if got := reachedNote("stop", "stopped"); got != " (reached)" {
		t.Errorf("stop/stopped: %q", got)
	}
	if got := reachedNote("abort", "stopping"); got != " (not reached yet)" {
		t.Errorf("abort/stopping: %q", got)
	}
}

func TestNativeRootOmittedRoot(t *testing.T) {
	home := testHome(t)
	f := startNativeFleet(t, home, oneRoot("r1", "r2"))
	_, _, err := runNativeRoot(t, "stop", "--revision", "3")
	wantExit(t, err, exitUsage, "r1 (revision 3), r2 (revision 4)")
	for _, r := range f.requests() {
		if r.Action != "list" {
			t.Errorf("sent %+v despite two roots", r)
		}
	}

	out, _, err := runNativeRoot(t, "list")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^ROOT +REVISION +INTENT +PHASE +PREVIOUS\nr1 +3 +run +running \(reached\) +-\nr2 +4 `).MatchString(out) {
		t.Errorf("list output:\n%s", out)
	}
}

func TestNativeRootReclassify(t *testing.T) {
	home := testHome(t)
	startNativeFleet(t, home, func(req *protocol.NativeRequest) protocol.NativeResult {
		r := receiptFor(req)
		return protocol.NativeResult{
			Kind: protocol.NativeKindPolicyAdmission, RootID: "r2", PreviousRootID: req.RootID,
			PreviousRootUnchanged: protocol.Bool(true), SessionRebound: protocol.Bool(true), Receipt: r.Receipt,
		}
	})
	out, _, err := runNativeRoot(t, "reclassify", "r1", "--revision", "7", "--operation-id", "op-r")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"new root r2, previous root r1 (previous root unchanged: yes)",
		"session rebound: yes",
		"receipt persisted: reclassify on root r1, revision 8, operation op-r",
		"acknowledged only: the change is recorded durably",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestNativeRootTimeout(t *testing.T) {
	home := testHome(t)
	block := make(chan struct{})
	defer close(block)
	startNativeFleet(t, home, func(req *protocol.NativeRequest) protocol.NativeResult {
		<-block
		return receiptFor(req)
	})
	_, _, err := runNativeRoot(t, "stop", "r1", "--revision", "3", "--operation-id", "op-t", "--timeout", "200ms")
	wantExit(t, err, 1, "retry with the same flags, ROOT r1, --operation-id op-t and --revision 3")
	if !strings.Contains(err.Error(), "timed out after 200ms") {
		t.Errorf("err %v", err)
	}
}
