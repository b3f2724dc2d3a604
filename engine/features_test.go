package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/history"
	"github.com/agents-fleet/fleet/internal/testwait"
	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/provider"
	"github.com/agents-fleet/fleet/provider/local"
)

func reply(part string) func(protocol.Message) bool {
	return func(m protocol.Message) bool {
		r, ok := m.(*protocol.Reply)
		return ok && strings.Contains(r.Text, part)
	}
}

func TestPlanModeAndGo(t *testing.T) {
	e, rec := newEngine(t, nil)
	e.Prompt("test", "/plan on")
	e.Prompt("test", "$ echo planned-1\n$ echo planned-2")
	rec.waitFor("plan state", func(m protocol.Message) bool {
		fs, ok := m.(*protocol.FleetState)
		return ok && fs.Coordinator.PlanMode && fs.Tasks.Pending == 2 && fs.Tasks.Running == 0
	})
	e.Prompt("test", "/go t9")
	rec.waitFor("bad id", reply("t9 is not a planned task"))
	e.Prompt("test", "/go t2")
	rec.waitFor("t2 ran", transcript("planned-2"))
	e.Prompt("test", "/plan off")
	rec.waitFor("still planned", reply("1 planned task(s) still wait"))
	e.Prompt("test", "/go")
	rec.waitFor("t1 ran", transcript("planned-1"))
}

func TestLoopUntilSuccess(t *testing.T) {
	dir := t.TempDir()
	e, rec := newEngine(t, func(c *Config) { c.Cwd = dir })
	// Fails twice, then succeeds: a counter in a file.
	e.Prompt("test", `/loop 5 n=$(cat n 2>/dev/null || echo 0); n=$((n+1)); echo $n > n; echo attempt-$n; [ $n -ge 3 ]`)
	rec.waitFor("succeeded", reply("Loop L1 succeeded on attempt 3/5"))
	fs := rec.waitFor("loop in fleetState", func(m protocol.Message) bool {
		fs, ok := m.(*protocol.FleetState)
		return ok && len(fs.Loops) == 1 && fs.Loops[0].Status == "succeeded"
	}).(*protocol.FleetState)
	if l := fs.Loops[0]; l.ID != "L1" || l.Iteration != 3 || l.Max != 5 || !strings.Contains(l.Goal, "attempt-$n") {
		t.Fatalf("%+v", l)
	}
	if fs.Tasks.Total != 3 || fs.Tasks.Done != 1 {
		t.Fatalf("%+v", fs.Tasks)
	}
}

func TestLoopGivesUpAndCancel(t *testing.T) {
	e, rec := newEngine(t, nil)
	e.Prompt("test", "/loop 2 false")
	rec.waitFor("failed", reply("Loop L1 failed: 2 attempts"))
	e.Prompt("test", "/loop 0 true")
	rec.waitFor("bad cap", reply("between 1 and 100"))
	e.Prompt("test", "/loop 3 echo looping; sleep 30")
	rec.waitFor("running", transcript("looping"))
	e.Prompt("test", "/cancel L2")
	rec.waitFor("cancelled", func(m protocol.Message) bool {
		fs, ok := m.(*protocol.FleetState)
		return ok && len(fs.Loops) == 2 && fs.Loops[1].Status == "cancelled" && fs.Tasks.Running == 0
	})
}

func TestConfirmPolicy(t *testing.T) {
	policy, err := provider.NewPolicy(provider.DefaultConfirmPatterns)
	if err != nil {
		t.Fatal(err)
	}
	for cmd, want := range map[string]bool{
		"git push origin main": true, "rm -rf build": true, "rm -fr /": true, "sudo ls": true,
		"rm -r -f x": true, "git status": false, "echo rm": false, "go test ./...": false, "git pushd": false,
	} {
		if got := policy.Match(cmd) != ""; got != want {
			t.Errorf("%q: match %v, want %v", cmd, got, want)
		}
	}
	if _, err := provider.NewPolicy([]string{"("}); err == nil {
		t.Fatal("bad pattern accepted")
	}
	custom, _ := provider.NewPolicy([]string{`^echo guarded`})
	// The local provider asks before a matching command (its policy).
	e, rec := newEngine(t, func(c *Config) { c.Provider = &local.Provider{Policy: custom} })
	e.Prompt("test", "$ echo guarded-run")
	c := rec.waitFor("confirm", func(m protocol.Message) bool { _, ok := m.(*protocol.ConfirmRequest); return ok }).(*protocol.ConfirmRequest)
	if !strings.Contains(c.Summary, "echo guarded-run") || !strings.Contains(c.Summary, "confirm policy") {
		t.Fatal(c.Summary)
	}
	for _, m := range rec.all() {
		if tc, ok := m.(*protocol.ToolCall); ok {
			t.Fatalf("started before the confirm: %+v", tc)
		}
	}
	if err := e.AnswerConfirm(c.ID, true, "answered"); err != nil {
		t.Fatal(err)
	}
	rec.waitFor("ran", transcript("guarded-run"))
	e.Prompt("test", "$ echo guarded-denied")
	c2 := rec.waitFor("confirm 2", func(m protocol.Message) bool {
		c, ok := m.(*protocol.ConfirmRequest)
		return ok && strings.Contains(c.Summary, "guarded-denied")
	}).(*protocol.ConfirmRequest)
	e.AnswerConfirm(c2.ID, false, "answered")
	rec.waitFor("denied", activity("failed", "denied by the operator"))
}

// fakeWorkspaces gives each worker a directory and reports every file the
// command left in it as created.
type fakeWorkspaces struct {
	root string
	mu   sync.Mutex
	made []string
}

func (f *fakeWorkspaces) Prepare(ctx context.Context, worker string) (Workspace, error) {
	dir := filepath.Join(f.root, worker)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return Workspace{}, err
	}
	f.mu.Lock()
	f.made = append(f.made, worker)
	f.mu.Unlock()
	return Workspace{
		Dir: dir, WorktreePath: dir, Branch: "fleet/s/" + worker, Warnings: []string{"a warning for " + worker},
		Track: func(ctx context.Context) (func(context.Context) ([]FileChange, error), error) {
			return func(ctx context.Context) ([]FileChange, error) {
				entries, _ := os.ReadDir(dir)
				var out []FileChange
				for _, en := range entries {
					out = append(out, FileChange{Path: en.Name(), AbsolutePath: filepath.Join(dir, en.Name()), Type: protocol.ChangeCreated})
				}
				return out, nil
			}, nil
		},
	}, nil
}

func (f *fakeWorkspaces) Remove(ctx context.Context, worker string, opts RemoveOptions) error {
	dir := filepath.Join(f.root, worker)
	if _, err := os.Stat(filepath.Join(dir, "dirty")); err == nil && !opts.Force {
		return errors.New("uncommitted changes")
	}
	return os.RemoveAll(dir)
}

func TestCleanRemovesFinishedWorkspaces(t *testing.T) {
	ws := &fakeWorkspaces{root: t.TempDir()}
	e, rec := newEngine(t, func(c *Config) { c.Workspaces = ws })
	e.Prompt("test", "$ touch dirty\n$ true")
	rec.waitFor("t2 done", activity("completed", "t2"))
	rec.waitFor("t1 done", activity("completed", "t1"))
	e.Prompt("test", "/clean w9")
	rec.waitFor("unknown", reply(`No worker "w9"`))
	e.Prompt("test", "/clean")
	r := rec.waitFor("clean result", reply("Removed 1 worktree(s)")).(*protocol.Reply)
	if !strings.Contains(r.Text, "Kept 1") || !strings.Contains(r.Text, "--force") {
		t.Fatal(r.Text)
	}
	e.Prompt("test", "/clean --force")
	rec.waitFor("forced", reply("Removed 1 worktree(s): w1"))
	if entries, _ := os.ReadDir(ws.root); len(entries) != 0 {
		t.Fatalf("left: %v", entries)
	}
	e.Prompt("test", "/clean")
	rec.waitFor("nothing left", reply("No finished worker has a worktree left"))
}

func TestWorkspacesAndFileChanges(t *testing.T) {
	ws := &fakeWorkspaces{root: t.TempDir()}
	e, rec := newEngine(t, func(c *Config) { c.Workspaces = ws })
	e.Prompt("test", "$ pwd; echo x > made.txt")
	fc := rec.waitFor("fileChange", func(m protocol.Message) bool { _, ok := m.(*protocol.FileChange); return ok }).(*protocol.FileChange)
	want := filepath.Join(ws.root, "w1", "made.txt")
	if len(fc.Changes) != 1 || fc.Changes[0].Path != "made.txt" || fc.Changes[0].AbsolutePath != want ||
		fc.Changes[0].Agent != "w1" || fc.Changes[0].Tool != "shell" || fc.Changes[0].ChangeType != protocol.ChangeCreated {
		t.Fatalf("%+v", fc.Changes)
	}
	rec.waitFor("ran in its workspace", transcript(filepath.Join(ws.root, "w1")))
	rec.waitFor("warning shown", transcript("a warning for w1"))
	rec.waitFor("worktreePath", func(m protocol.Message) bool {
		fs, ok := m.(*protocol.FleetState)
		return ok && len(fs.Workers) == 1 && fs.Workers[0].WorktreePath == filepath.Join(ws.root, "w1")
	})
}

// memPersister records what the engine saves.
type memPersister struct {
	mu       sync.Mutex
	tasks    map[string]TaskRecord
	workers  map[string]WorkerRecord
	counters map[string]int64
}

func newMemPersister() *memPersister {
	return &memPersister{tasks: map[string]TaskRecord{}, workers: map[string]WorkerRecord{}, counters: map[string]int64{}}
}
func (p *memPersister) SaveTask(r TaskRecord)               { p.mu.Lock(); p.tasks[r.ID] = r; p.mu.Unlock() }
func (p *memPersister) SaveWorker(r WorkerRecord)           { p.mu.Lock(); p.workers[r.ID] = r; p.mu.Unlock() }
func (p *memPersister) SaveCoordinator(history.Coordinator) {}
func (p *memPersister) SaveCounter(n string, v int64) {
	p.mu.Lock()
	p.counters[n] = v
	p.mu.Unlock()
}

func TestRestoreInterruptsRunningAndRequeuesPending(t *testing.T) {
	saved := &Restore{
		Tasks: []TaskRecord{
			{ID: "t1", Command: "echo one", Status: taskDone, Worker: "w1"},
			{ID: "t2", Command: "sleep 100", Status: taskRunning, Worker: "w2"},
			{ID: "t3", Command: "echo waiting", Status: taskBlocked, Worker: "w3"},
			{ID: "t4", Command: "echo requeued", Status: taskPending},
		},
		Workers: []WorkerRecord{
			{ID: "w1", TaskID: "t1", Status: workerCompleted, StartedAt: 1, EndedAt: 2},
			{ID: "w2", TaskID: "t2", Status: workerRunning, StartedAt: 1, WorktreePath: "/wt/w2"},
			{ID: "w3", TaskID: "t3", Status: workerIdle, StartedAt: 1},
		},
		Counters: map[string]int64{counterTask: 4, counterWorker: 3, counterRequest: 7},
	}
	p := newMemPersister()
	e, rec := newEngine(t, func(c *Config) { c.Restore = saved; c.Persister = p })
	rec.waitFor("t4 ran on a new worker", func(m protocol.Message) bool {
		tr, ok := m.(*protocol.Transcript)
		return ok && tr.Text == "requeued" && tr.Agent == "w4"
	})
	e.Prompt("test", "$ echo fresh")
	rec.waitFor("t5 created", activity("task.created", "t5: echo fresh"))
	fs := rec.waitFor("snapshot", func(m protocol.Message) bool {
		fs, ok := m.(*protocol.FleetState)
		return ok && fs.Tasks.Done == 3
	}).(*protocol.FleetState)
	if fs.Tasks.Total != 5 || fs.WorkerStatusCounts.Failed != 2 {
		t.Fatalf("tasks %+v counts %+v", fs.Tasks, fs.WorkerStatusCounts)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, id := range []string{"t2", "t3"} {
		if r := p.tasks[id]; r.Status != taskFailed || r.Reason != reasonInterrupted {
			t.Errorf("%s saved as %+v", id, r)
		}
	}
	if p.workers["w2"].Status != workerFailed || p.workers["w2"].WorktreePath != "/wt/w2" {
		t.Errorf("w2 saved as %+v", p.workers["w2"])
	}
	if p.counters[counterTask] != 5 || p.counters[counterWorker] != 5 {
		t.Errorf("counters %v", p.counters)
	}
}

// permProvider's sessions ask one permission and report the decision.
type permProvider struct {
	req provider.PermissionRequest
	got chan provider.Decision
}

func (p *permProvider) Name() string { return "perm" }
func (p *permProvider) Start(ctx context.Context, spec provider.Spec, h provider.Host) (provider.Session, error) {
	return &permSession{p: p, h: h, done: make(chan struct{})}, nil
}

type permSession struct {
	p    *permProvider
	h    provider.Host
	done chan struct{}
	once sync.Once
}

func (s *permSession) Send(ctx context.Context, t provider.Turn) error {
	go func() {
		d, _ := s.h.Permission(context.Background(), s.p.req)
		s.p.got <- d
		s.h.Event(provider.TurnEnded{})
	}()
	return nil
}
func (s *permSession) Interrupt(context.Context) error { return nil }
func (s *permSession) ResumeID() string                { return "" }
func (s *permSession) Close() error                    { s.once.Do(func() { close(s.done) }); return nil }
func (s *permSession) Done() <-chan struct{}           { return s.done }
func (s *permSession) Err() error                      { return nil }

// A permission request the confirm policy names is a plain confirm (allow
// once or deny) that says so: the CLI's "allow for this session" is not
// offered for it. Others keep the CLI's choices.
func TestPolicyOnAgentPermissions(t *testing.T) {
	policy, _ := provider.NewPolicy(provider.DefaultConfirmPatterns)
	opts := []provider.PermissionOption{{ID: "once", Label: "Allow once", Kind: provider.AllowOnce},
		{ID: "always", Label: "Allow for this session", Kind: provider.AllowAlways}, {ID: "no", Label: "Deny", Kind: provider.Reject}}
	for _, c := range []struct {
		command string
		policy  bool
	}{{"git push origin main", true}, {"go test ./...", false}} {
		p := &permProvider{req: provider.PermissionRequest{Tool: "Bash", Input: map[string]any{"command": c.command}, Options: opts},
			got: make(chan provider.Decision, 1)}
		e, rec := newEngine(t, func(cfg *Config) { cfg.Provider = p; cfg.Policy = policy })
		e.Prompt("test", "/spawn do it")
		if c.policy {
			cr := rec.waitFor("confirm", isConfirm).(*protocol.ConfirmRequest)
			if !strings.Contains(cr.Summary, c.command) || !strings.Contains(cr.Summary, "confirm policy") {
				t.Fatalf("summary %q", cr.Summary)
			}
			e.AnswerConfirm(cr.ID, true, "answered")
			if d := <-p.got; !d.Allow || d.OptionID != "once" {
				t.Fatalf("decision %+v", d)
			}
			continue
		}
		ask := rec.waitFor("ask", func(m protocol.Message) bool { _, ok := m.(*protocol.AskRequest); return ok }).(*protocol.AskRequest)
		if len(ask.Choices) != 3 || strings.Contains(ask.Question, "confirm policy") {
			t.Fatalf("ask %+v", ask)
		}
		e.AnswerAsk(ask.ID, "always", "answered")
		if d := <-p.got; !d.Allow || d.OptionID != "always" {
			t.Fatalf("decision %+v", d)
		}
	}
}

func isConfirm(m protocol.Message) bool { _, ok := m.(*protocol.ConfirmRequest); return ok }

// A permission ask with the CLI's choices also takes a plain confirm: yes
// picks allow once, no picks deny, and confirmResolved says which.
func TestPermissionAskTakesAConfirm(t *testing.T) {
	opts := []provider.PermissionOption{{ID: "once", Label: "Allow once", Kind: provider.AllowOnce},
		{ID: "always", Label: "Allow for this session", Kind: provider.AllowAlways}, {ID: "no", Label: "Deny", Kind: provider.Reject}}
	for _, approve := range []bool{true, false} {
		p := &permProvider{req: provider.PermissionRequest{Tool: "Bash", Input: map[string]any{"command": "make"}, Options: opts},
			got: make(chan provider.Decision, 1)}
		e, rec := newEngine(t, func(cfg *Config) { cfg.Provider = p })
		e.Prompt("test", "/spawn do it")
		ask := rec.waitFor("ask", func(m protocol.Message) bool { _, ok := m.(*protocol.AskRequest); return ok }).(*protocol.AskRequest)
		if err := e.AnswerConfirm(ask.ID, approve, "answered"); err != nil {
			t.Fatal(err)
		}
		d := <-p.got
		want := "no"
		if approve {
			want = "once"
		}
		if d.Allow != approve || d.OptionID != want {
			t.Fatalf("confirm %v: decision %+v", approve, d)
		}
		res := rec.waitFor("resolved", func(m protocol.Message) bool { _, ok := m.(*protocol.ConfirmResolved); return ok }).(*protocol.ConfirmResolved)
		if res.Approved != approve {
			t.Fatalf("confirm %v: resolved %+v", approve, res)
		}
	}
}

// gatedWorkspaces holds the first turn's file-change collection until
// release is closed, and says on collecting when it has begun: the window
// after an agent's last turn, while its work is committed, in which the
// worker still shows as running.
type gatedWorkspaces struct {
	fakeWorkspaces
	collecting chan struct{}
	release    chan struct{}
	once       sync.Once
}

func (g *gatedWorkspaces) Prepare(ctx context.Context, worker string) (Workspace, error) {
	ws, err := g.fakeWorkspaces.Prepare(ctx, worker)
	if err != nil {
		return ws, err
	}
	track := ws.Track
	ws.Track = func(ctx context.Context) (func(context.Context) ([]FileChange, error), error) {
		done, err := track(ctx)
		return func(ctx context.Context) ([]FileChange, error) {
			g.once.Do(func() { close(g.collecting); <-g.release })
			return done(ctx)
		}, err
	}
	return ws, nil
}

// A /tell that arrives after the agent's last turn ended, while its work is
// still being collected, is not lost: the worker is resumed with it once it
// settles. A cancelled worker's late follow-ups are dropped, visibly.
func TestTellWhileTheWorkerIsEnding(t *testing.T) {
	for _, cancel := range []bool{false, true} {
		p := &usageProvider{}
		ws := &gatedWorkspaces{fakeWorkspaces: fakeWorkspaces{root: t.TempDir()}, collecting: make(chan struct{}), release: make(chan struct{})}
		e, rec := newEngine(t, func(c *Config) { c.Provider = p; c.Workspaces = ws })
		e.Prompt("test", "/spawn use 5")
		select {
		case <-ws.collecting:
		case <-time.After(time.Minute):
			t.Fatal("the first turn never ended")
		}
		e.Prompt("test", "/tell w1 use 7")
		rec.waitFor("told", isReply("Sent to w1."))
		if cancel {
			e.Prompt("test", "/cancel w1")
			rec.waitFor("cancelling", reply("Cancelling t1 (worker w1)"))
		}
		close(ws.release)
		rec.waitFor("t1 settles", activity("task.updated", "t1"))
		if cancel {
			rec.waitFor("the dropped follow-up is shown", transcript("Dropped 1 follow-up(s) told while w1 was ending; /tell it again."))
			testwait.For(t, testwait.Bound, "w1 settled", func() bool { return e.workerStatus("w1") != workerRunning })
			if got := p.texts(); len(got) != 1 {
				t.Fatalf("turns after a cancel: %q", got)
			}
			continue
		}
		rec.waitFor("w1 resumed with the follow-up", activity("resumed", "t2: use 7"))
		rec.waitFor("t2 done", activity("task.updated", "t2 done"))
		if got := p.texts(); !slices.Equal(got, []string{"use 5", "use 7"}) {
			t.Fatalf("turns %q; want the task, then the follow-up", got)
		}
	}
}
