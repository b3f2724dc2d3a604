package engine

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agents-fleet/fleet/internal/testwait"
	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/provider/local"
	"github.com/agents-fleet/fleet/registry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder is a Publisher that keeps every message and encodes each one, so
// a message the codec would refuse fails the test.
type recorder struct {
	t    *testing.T
	mu   sync.Mutex
	msgs []protocol.Message
}

func newRecorder(t *testing.T) *recorder { return &recorder{t: t} }

func (r *recorder) Broadcast(m protocol.Message) {
	if _, err := protocol.Encode(m); err != nil {
		r.t.Errorf("engine published a message that does not encode: %T: %v", m, err)
	}
	r.mu.Lock()
	r.msgs = append(r.msgs, m)
	r.mu.Unlock()
}

// waitFor waits until a message matching pred has been published and
// returns the first one. The bound (a minute) is reached only when the
// message never comes, also on a loaded machine under the race detector.
func (r *recorder) waitFor(what string, pred func(protocol.Message) bool) protocol.Message {
	r.t.Helper()
	var found protocol.Message
	if !testwait.Until(time.Minute, func() bool { found = r.first(pred); return found != nil }) {
		var types []string
		for _, m := range r.all() {
			types = append(types, m.MessageType())
		}
		r.t.Fatalf("timed out waiting for %s; saw %v", what, types)
	}
	return found
}

// first returns the first message published that matches pred, or nil.
func (r *recorder) first(pred func(protocol.Message) bool) protocol.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range r.msgs {
		if pred(m) {
			return m
		}
	}
	return nil
}

func (r *recorder) all() []protocol.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]protocol.Message(nil), r.msgs...)
}

// activity matches an activity event (hubEvent) of kind whose text
// contains textPart.
func activity(kind, textPart string) func(protocol.Message) bool {
	return func(m protocol.Message) bool {
		h, ok := m.(*protocol.HubEvent)
		return ok && h.Kind == kind && strings.Contains(h.Text, textPart)
	}
}

func transcript(text string) func(protocol.Message) bool {
	return func(m protocol.Message) bool {
		tr, ok := m.(*protocol.Transcript)
		return ok && tr.Text == text
	}
}

func newEngine(t *testing.T, mod func(*Config)) (*Engine, *recorder) {
	t.Helper()
	rec := newRecorder(t)
	cfg := Config{
		SessionID: "abcdef123", SessionName: "test", Cwd: t.TempDir(),
		Provider: &local.Provider{}, Publisher: rec, Workers: 2,
		StatusInterval: 20 * time.Millisecond,
	}
	if mod != nil {
		mod(&cfg)
	}
	e := New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.Run(ctx) }()
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		if err := e.Shutdown(sctx); err != nil {
			t.Error(err)
		}
		cancel()
		<-done
	})
	return e, rec
}

func TestShellTaskLifecycle(t *testing.T) {
	e, rec := newEngine(t, nil)
	e.Prompt("test", "$ echo hello; echo oops >&2")
	rec.waitFor("t1 done", activity("task.updated", "t1 done"))
	msgs := rec.all()

	var order []string
	var start, complete *protocol.ToolCall
	for _, m := range msgs {
		switch m := m.(type) {
		case *protocol.HubEvent:
			order = append(order, m.Kind)
		case *protocol.ToolCall:
			if m.Phase == protocol.PhaseStart {
				start = m
			} else {
				complete = m
			}
		}
	}
	if got := strings.Join(order, ","); got != "task.created,spawned,task.updated,completed,task.updated" {
		t.Fatalf("activity events %s", got)
	}
	if start == nil || start.Tool != "shell" || start.Agent != "w1" || start.Input["command"] != "echo hello; echo oops >&2" {
		t.Fatalf("toolCall start %+v", start)
	}
	if complete == nil || complete.IsError == nil || *complete.IsError || complete.DurationMs == nil || !strings.Contains(complete.Result, "hello") {
		t.Fatalf("toolCall complete %+v", complete)
	}
	out := rec.waitFor("stdout line", transcript("hello")).(*protocol.Transcript)
	if out.Role != protocol.RoleTool || out.Agent != "w1" || out.Stream == protocol.StreamStderr {
		t.Fatalf("stdout transcript %+v", out)
	}
	errLine := rec.waitFor("stderr line", transcript("oops")).(*protocol.Transcript)
	if errLine.Stream != protocol.StreamStderr {
		t.Fatalf("stderr transcript %+v", errLine)
	}
	reply := rec.waitFor("reply", func(m protocol.Message) bool { _, ok := m.(*protocol.Reply); return ok }).(*protocol.Reply)
	if !strings.Contains(reply.Text, "Queued t1") {
		t.Fatal(reply.Text)
	}
	// Snapshots reflect the finished task.
	fs := rec.waitFor("fleetState with t1 done", func(m protocol.Message) bool {
		fs, ok := m.(*protocol.FleetState)
		return ok && fs.Tasks.Done == 1
	}).(*protocol.FleetState)
	if fs.Tasks.Total != 1 || fs.WorkerTotal != 1 || fs.WorkerActive != 0 || fs.WorkerStatusCounts.Completed != 1 ||
		fs.Workers[0].ToolUseCount != 1 || fs.Tokens == nil || fs.Tokens.TotalTokens == nil || *fs.Tokens.TotalTokens != 0 ||
		fs.WorkerMax == nil || *fs.WorkerMax != 2 {
		t.Fatalf("fleetState %+v", fs)
	}
	an := rec.waitFor("analytics", func(m protocol.Message) bool {
		a, ok := m.(*protocol.FleetAnalytics)
		return ok && len(a.WorkerTimeline) == 1 && a.WorkerTimeline[0].Status == "completed"
	}).(*protocol.FleetAnalytics)
	if len(an.ToolUsage) != 1 || an.ToolUsage[0].Count != 1 || an.WorkerTimeline[0].CompletedAt == 0 {
		t.Fatalf("analytics %+v", an)
	}
}

func TestMissingCommandFails(t *testing.T) {
	e, rec := newEngine(t, nil)
	e.Prompt("test", "$ definitely-not-a-command-xyz")
	rec.waitFor("failed", activity("failed", "command not found"))
	complete := rec.waitFor("complete", func(m protocol.Message) bool {
		tc, ok := m.(*protocol.ToolCall)
		return ok && tc.Phase == protocol.PhaseComplete
	}).(*protocol.ToolCall)
	if !*complete.IsError || !strings.Contains(complete.Result, "not found") {
		t.Fatalf("%+v", complete)
	}
}

func TestConcurrencyCapQueuesTasks(t *testing.T) {
	dir := t.TempDir()
	e, rec := newEngine(t, func(c *Config) { c.Workers = 1; c.Cwd = dir })
	// Each task fails if another one is running at the same time.
	cmd := `$ mkdir lock || exit 9; sleep 0.05; rmdir lock`
	e.Prompt("test", cmd+"\n"+cmd+"\n"+cmd)
	fs := rec.waitFor("pending tasks", func(m protocol.Message) bool {
		fs, ok := m.(*protocol.FleetState)
		return ok && fs.Tasks.Pending == 2
	}).(*protocol.FleetState)
	if fs.Tasks.Running != 1 {
		t.Fatalf("%+v", fs.Tasks)
	}
	rec.waitFor("t3 done", activity("completed", "t3"))
	for _, m := range rec.all() {
		if h, ok := m.(*protocol.HubEvent); ok && h.Kind == "failed" {
			t.Fatalf("tasks overlapped: %s", h.Text)
		}
	}
}

func TestAskAnswerReachesStdin(t *testing.T) {
	e, rec := newEngine(t, nil)
	e.Prompt("test", `$ echo '::ask::{"question":"Which env?","choices":["staging",{"label":"Production","value":"prod"}]}'; read answer; echo "got $answer"`)
	ask := rec.waitFor("ask", func(m protocol.Message) bool { _, ok := m.(*protocol.AskRequest); return ok }).(*protocol.AskRequest)
	if ask.Question != "Which env?" || ask.Kind != "choice" || len(ask.Choices) != 2 || ask.Choices[1].Value != "prod" || ask.Ts == 0 {
		t.Fatalf("%+v", ask)
	}
	rec.waitFor("task blocked", activity("task.updated", "t1 blocked"))
	if err := e.AnswerAsk(ask.ID, "dev", "answered"); err == nil || !strings.Contains(err.Error(), "one of: staging, prod") {
		t.Fatalf("choice outside choices: %v", err)
	}
	if err := e.AnswerConfirm(ask.ID, true, "answered"); err == nil {
		t.Fatal("confirmResponse accepted for an ask")
	}
	if err := e.AnswerAsk(ask.ID, "prod", "answered"); err != nil {
		t.Fatal(err)
	}
	rec.waitFor("answer echoed", transcript("got prod"))
	res := rec.waitFor("resolved", func(m protocol.Message) bool { _, ok := m.(*protocol.ConfirmResolved); return ok }).(*protocol.ConfirmResolved)
	if res.ID != ask.ID || !res.Approved || res.Kind != protocol.KindAsk || res.Reason != protocol.ReasonAnswered {
		t.Fatalf("%+v", res)
	}
	if err := e.AnswerAsk(ask.ID, "prod", "answered"); err == nil || !strings.Contains(err.Error(), "already resolved") {
		t.Fatalf("second answer: %v", err)
	}
	if err := e.AnswerAsk("ask-nope", "x", "answered"); err == nil || !strings.Contains(err.Error(), "no pending request") {
		t.Fatalf("unknown id: %v", err)
	}
	rec.waitFor("completed", activity("completed", "t1"))
}

func TestConfirmFromTerminalIsSuperseded(t *testing.T) {
	e, rec := newEngine(t, nil)
	e.Prompt("test", `$ echo '::confirm::Deploy now?'; read ok; echo "answer=$ok"`)
	c := rec.waitFor("confirm", func(m protocol.Message) bool { _, ok := m.(*protocol.ConfirmRequest); return ok }).(*protocol.ConfirmRequest)
	if c.Summary != "Deploy now?" {
		t.Fatal(c.Summary)
	}
	if err := e.AnswerConfirm(c.ID, false, "superseded"); err != nil {
		t.Fatal(err)
	}
	rec.waitFor("no", transcript("answer=no"))
	res := rec.waitFor("resolved", func(m protocol.Message) bool { _, ok := m.(*protocol.ConfirmResolved); return ok }).(*protocol.ConfirmResolved)
	if res.Approved || res.Reason != protocol.ReasonSuperseded || res.Kind != protocol.KindConfirm {
		t.Fatalf("%+v", res)
	}
}

func TestRequestsExpire(t *testing.T) {
	e, rec := newEngine(t, func(c *Config) { c.RequestTTL = 100 * time.Millisecond })
	e.Prompt("test", `$ echo '::ask::{"question":"name?"}'; if read x; then echo "read $x"; else echo "stdin closed"; fi`)
	rec.waitFor("stdin closed", transcript("stdin closed"))
	res := rec.waitFor("expired", func(m protocol.Message) bool { _, ok := m.(*protocol.ConfirmResolved); return ok }).(*protocol.ConfirmResolved)
	if res.Reason != protocol.ReasonExpired || res.Approved {
		t.Fatalf("%+v", res)
	}
}

// TestCancelKillsProcessGroup: cancelling a task kills its whole process
// group, so a background child of the command does not outlive it. The
// child's pid is printed; the test waits until that process is gone (on
// its own it would live five minutes, past the bound).
func TestCancelKillsProcessGroup(t *testing.T) {
	e, rec := newEngine(t, nil)
	e.Prompt("test", `$ sleep 300 & echo "child $!"; sleep 300`)
	m := rec.waitFor("the child's pid", func(m protocol.Message) bool {
		tr, ok := m.(*protocol.Transcript)
		return ok && strings.HasPrefix(tr.Text, "child ")
	}).(*protocol.Transcript)
	pid, err := strconv.Atoi(strings.TrimPrefix(m.Text, "child "))
	if err != nil {
		t.Fatalf("child pid %q: %v", m.Text, err)
	}
	t.Cleanup(func() {
		if p, err := os.FindProcess(pid); err == nil && t.Failed() && registry.PidAlive(pid) {
			_ = p.Kill() // the survivor this test found
		}
	})
	// The observation must see the child alive before it can see it gone.
	if !registry.PidAlive(pid) {
		t.Fatalf("the background child %d is not running before the cancel", pid)
	}
	e.Prompt("test", "/cancel t1")
	rec.waitFor("failed", activity("failed", "cancelled by the operator"))
	testwait.For(t, testwait.Bound, fmt.Sprintf("the background child %d to die with its cancelled task", pid), func() bool { return !registry.PidAlive(pid) })
}

func TestShutdownCancelsPendingRequests(t *testing.T) {
	rec := newRecorder(t)
	e := New(Config{SessionID: "s", Cwd: t.TempDir(), Provider: &local.Provider{}, Publisher: rec})
	e.Prompt("test", `$ echo '::confirm::ok?'; read x; sleep 30`)
	rec.waitFor("confirm", func(m protocol.Message) bool { _, ok := m.(*protocol.ConfirmRequest); return ok })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	res := rec.waitFor("cancelled", func(m protocol.Message) bool { _, ok := m.(*protocol.ConfirmResolved); return ok }).(*protocol.ConfirmResolved)
	if res.Reason != protocol.ReasonCancelled {
		t.Fatalf("%+v", res)
	}
	rec.waitFor("failed", activity("failed", "shutting down"))
	// New prompts are ignored after shutdown.
	e.Prompt("test", "$ echo late")
	for _, m := range rec.all() {
		if h, ok := m.(*protocol.HubEvent); ok && strings.Contains(h.Text, "echo late") {
			t.Fatal("task created after shutdown")
		}
	}
}

func TestHugeLineIsTruncated(t *testing.T) {
	e, rec := newEngine(t, nil)
	e.Prompt("test", `$ head -c 10000000 /dev/zero | tr '\0' 'x'; echo; echo after`)
	rec.waitFor("after", transcript("after"))
	for _, m := range rec.all() {
		if tr, ok := m.(*protocol.Transcript); ok && strings.HasPrefix(tr.Text, "xxx") {
			if len(tr.Text) > local.MaxLine+100 || !strings.Contains(tr.Text, "line truncated") {
				t.Fatalf("line of %d bytes, suffix %q", len(tr.Text), tr.Text[len(tr.Text)-60:])
			}
			return
		}
	}
	t.Fatal("no truncated line")
}

func TestSlashCommands(t *testing.T) {
	e, rec := newEngine(t, nil)
	cat := rec.waitFor("catalog", func(m protocol.Message) bool { _, ok := m.(*protocol.CommandCatalog); return ok }).(*protocol.CommandCatalog)
	if len(cat.Commands) != len(commands) || cat.Commands[0].Name != "/help" {
		t.Fatalf("%+v", cat)
	}
	for _, tc := range []struct{ prompt, want string }{
		{"/help", "/cancel"},
		{"/tasks", "No tasks"},
		{"/pause", "paused"},
		{"/nope", "Unknown command"},
		{"make it work", "local provider"},
	} {
		e.Prompt("test", tc.prompt)
		rec.waitFor(tc.prompt, func(m protocol.Message) bool {
			r, ok := m.(*protocol.Reply)
			return ok && strings.Contains(r.Text, tc.want)
		})
	}
	e.Prompt("test", "$ echo queued")
	rec.waitFor("paused fleetState", func(m protocol.Message) bool {
		fs, ok := m.(*protocol.FleetState)
		return ok && fs.Coordinator.DispatchPaused && fs.Tasks.Pending == 1
	})
	e.Prompt("test", "/resume")
	rec.waitFor("queued ran", transcript("queued"))
}

// A long session keeps its snapshots bounded: one worker per task must not
// grow fleetState past the frame cap.
func TestSnapshotsStayBounded(t *testing.T) {
	e, rec := newEngine(t, func(c *Config) { c.Workers = 8 })
	const n = 300 // in prompts of maxTasksPerPrompt tasks at most
	for left := n; left > 0; left -= maxTasksPerPrompt {
		e.Prompt("test", strings.Repeat("$ true\n", min(left, maxTasksPerPrompt)))
	}
	fs := rec.waitFor("all done", func(m protocol.Message) bool {
		fs, ok := m.(*protocol.FleetState)
		return ok && fs.Tasks.Done == n
	}).(*protocol.FleetState)
	if fs.WorkerTotal != n || fs.WorkerStatusCounts.Completed != n || len(fs.Workers) != maxShownSettled || len(fs.Tasks.Items) != maxTaskItems {
		t.Fatalf("total %d completed %d shown %d items %d", fs.WorkerTotal, fs.WorkerStatusCounts.Completed, len(fs.Workers), len(fs.Tasks.Items))
	}
	if fs.Workers[len(fs.Workers)-1].ID != fmt.Sprintf("w%d", n) {
		t.Fatalf("newest worker not shown: %s", fs.Workers[len(fs.Workers)-1].ID)
	}
}

// batchRecorder is a recorder that also takes batches, like the journal.
type batchRecorder struct {
	*recorder
	sizes []int // guarded by recorder.mu
}

func (r *batchRecorder) BroadcastBatch(ms []protocol.Message) {
	r.mu.Lock()
	r.sizes = append(r.sizes, len(ms))
	r.mu.Unlock()
	for _, m := range ms {
		r.Broadcast(m)
	}
}

// TestOutputGroupsAreThrottled checks a read full of short lines reaches
// the publisher in bounded groups, each after a Throttle call, so
// backpressure still applies every 128 lines.
func TestOutputGroupsAreThrottled(t *testing.T) {
	rec := &batchRecorder{recorder: newRecorder(t)}
	var throttles atomic.Int64
	e := New(Config{SessionID: "s", Cwd: t.TempDir(), Provider: &local.Provider{}, Publisher: rec,
		Throttle: func(context.Context) { throttles.Add(1) }})
	defer e.Shutdown(context.Background())
	e.Prompt("test", `$ i=0; while [ $i -lt 3000 ]; do echo "l$i"; i=$((i+1)); done > out; cat out`)
	rec.waitFor("last line", func(m protocol.Message) bool {
		tr, ok := m.(*protocol.Transcript)
		return ok && tr.Text == "l2999"
	})
	rec.mu.Lock()
	defer rec.mu.Unlock()
	next := 0
	for _, m := range rec.msgs {
		if tr, ok := m.(*protocol.Transcript); ok && tr.Role == protocol.RoleTool && strings.HasPrefix(tr.Text, "l") {
			if tr.Text != fmt.Sprintf("l%d", next) {
				t.Fatalf("line %d is %q", next, tr.Text)
			}
			next++
		}
	}
	batches := 0
	for _, n := range rec.sizes {
		if n > 128 {
			t.Fatalf("a group of %d lines", n)
		}
		batches++
	}
	if batches < 3000/128 || throttles.Load() < int64(batches) {
		t.Fatalf("%d groups, %d throttle calls for 3000 lines", batches, throttles.Load())
	}
}
