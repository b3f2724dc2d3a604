package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agents-fleet/fleet/intel/record"
	"github.com/agents-fleet/fleet/internal/testwait"
	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/provider"
	"github.com/agents-fleet/fleet/provider/local"
)

// testHosts are worker hosts for the placement tests. Every host runs its
// workers with the real local provider, so a worker placed on a host
// really runs; Provider records who asked for which, which shows that a
// remote worker's turns went through its host.
type testHosts struct {
	mu    sync.Mutex
	up    []testHost
	asked []string // "host/provider", in order
}

type testHost struct {
	name   string
	slots  int
	labels []string
}

func newTestHosts(up ...testHost) *testHosts { return &testHosts{up: up} }

func (h *testHosts) Candidates(prov, host, label string) ([]HostSlots, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []HostSlots
	for _, x := range h.up {
		if (host == "" || x.name == host) && (label == "" || slices.Contains(x.labels, label)) {
			out = append(out, HostSlots{Name: x.name, Slots: x.slots})
		}
	}
	switch {
	case len(out) > 0:
		return out, ""
	case host != "":
		return nil, "waiting for host " + host
	case label != "":
		return nil, "waiting for a host with label " + label
	}
	return nil, "no worker host is up"
}

func (h *testHosts) Provider(host, prov string) provider.Provider {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.asked = append(h.asked, host+"/"+prov)
	return &local.Provider{}
}

func (h *testHosts) add(x testHost) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.up = append(h.up, x)
}

func (h *testHosts) providersAsked() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.asked)
}

// gated is a task that runs until the file "go" appears in dir.
const gated = "$ while [ ! -e go ]; do sleep 0.02; done"

func release(t *testing.T, dir string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// waitPlaced waits until each task of want has started on its host ("" is
// this machine).
func waitPlaced(t *testing.T, e *Engine, want map[string]string) {
	t.Helper()
	got := func() map[string]string {
		e.mu.Lock()
		defer e.mu.Unlock()
		out := map[string]string{}
		for id := range want {
			if tk := e.taskByID[id]; tk != nil && tk.worker != "" {
				out[id] = e.workerByID[tk.worker].hostName
			}
		}
		return out
	}
	if !testwait.Until(testwait.Bound, func() bool { return maps.Equal(got(), want) }) {
		t.Fatalf("tasks started on %v, want %v", got(), want)
	}
}

// waiting returns task id's status and why it waits.
func waiting(e *Engine, id string) (status, why string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	tk := e.taskByID[id]
	return tk.status, tk.waitReason
}

// Local-first fills the local slots, then the hosts'; a task none has a
// slot for waits for one, with no reason of its own (as under the cap).
// The snapshot says where each worker runs.
func TestPlacementLocalFirst(t *testing.T) {
	hs := newTestHosts(testHost{name: "h1", slots: 1})
	dir := t.TempDir()
	e, rec := newEngine(t, func(c *Config) { c.Workers = 1; c.Cwd = dir; c.Hosts = hs })
	e.Prompt("test", gated+"\n"+gated+"\n"+gated)
	waitPlaced(t, e, map[string]string{"t1": "", "t2": "h1"})
	if st, why := waiting(e, "t3"); st != taskPending || why != "" {
		t.Fatalf("t3 is %s (%q), want pending with no reason", st, why)
	}
	rec.waitFor("w2 on h1 in fleetState", func(m protocol.Message) bool {
		fs, ok := m.(*protocol.FleetState)
		return ok && len(fs.Workers) == 2 && fs.Workers[0].Host == "" && fs.Workers[1].Host == "h1"
	})
	if r := replyTo(t, e, rec, "/workers"); !strings.Contains(r.Text, "t2     @h1") || strings.Contains(r.Text, "t1     @") {
		t.Errorf("/workers:\n%s", r.Text)
	}
	rec.waitFor("w2 spawned on h1", activity("spawned", "t2 on h1: "))
	release(t, dir)
	rec.waitFor("t3 done", activity("task.updated", "t3 done"))
	rec.waitFor("t1 done", activity("task.updated", "t1 done"))
	rec.waitFor("t2 done", activity("task.updated", "t2 done"))
	if asked := hs.providersAsked(); len(asked) == 0 || asked[0] != "h1/local" {
		t.Errorf("host providers asked for %v, want h1/local first", asked)
	}
}

// Hosts-only starts nothing here; with every host full a task waits and
// /tasks says for what; with no host up it says that.
func TestPlacementHostsOnly(t *testing.T) {
	hs := newTestHosts(testHost{name: "h1", slots: 1})
	dir := t.TempDir()
	e, rec := newEngine(t, func(c *Config) { c.Workers = 2; c.Cwd = dir; c.Hosts = hs; c.Placement = PlacementHostsOnly })
	e.Prompt("test", gated+"\n"+gated)
	waitPlaced(t, e, map[string]string{"t1": "h1"})
	if st, why := waiting(e, "t2"); st != taskPending || why != "waiting for a free slot on h1" {
		t.Fatalf("t2 is %s (%q)", st, why)
	}
	if r := replyTo(t, e, rec, "/tasks"); !strings.Contains(r.Text, "(waits: waiting for a free slot on h1)") {
		t.Errorf("/tasks:\n%s", r.Text)
	}
	release(t, dir)
	waitPlaced(t, e, map[string]string{"t1": "h1", "t2": "h1"})
	rec.waitFor("t2 done", activity("task.updated", "t2 done"))
	if r := replyTo(t, e, rec, "/tasks"); strings.Contains(r.Text, "waits") {
		t.Errorf("/tasks after t2 ran:\n%s", r.Text)
	}

	none := newTestHosts()
	e2, rec2 := newEngine(t, func(c *Config) { c.Hosts = none; c.Placement = PlacementHostsOnly })
	e2.Prompt("test", "$ echo never")
	if st, why := waiting(e2, "t1"); st != taskPending || why != "no worker host is up" {
		t.Fatalf("with no host up t1 is %s (%q)", st, why)
	}
	if r := replyTo(t, e2, rec2, "/tasks"); !strings.Contains(r.Text, "(waits: no worker host is up)") {
		t.Errorf("/tasks:\n%s", r.Text)
	}
}

// Spread starts each worker where the load (running over slots) is lowest;
// a tie stays on this machine.
func TestPlacementSpread(t *testing.T) {
	hs := newTestHosts(testHost{name: "h1", slots: 4})
	dir := t.TempDir()
	e, rec := newEngine(t, func(c *Config) { c.Workers = 2; c.Cwd = dir; c.Hosts = hs; c.Placement = PlacementSpread })
	e.Prompt("test", strings.Repeat(gated+"\n", 6))
	// local 0/2 = h1 0/4 → here; 1/2 > 0/4 → h1; 1/2 > 1/4 → h1;
	// 1/2 = 2/4 → here; here full → h1; then 2/2, 3/4 → h1.
	waitPlaced(t, e, map[string]string{"t1": "", "t2": "h1", "t3": "h1", "t4": "", "t5": "h1", "t6": "h1"})
	release(t, dir)
	for _, id := range []string{"t1", "t2", "t3", "t4", "t5", "t6"} {
		rec.waitFor(id+" done", activity("task.updated", id+" done"))
	}
}

// A task pinned to a host runs there even with local slots free; a second
// one waits for that host's slot.
func TestPlacementPinnedToHost(t *testing.T) {
	hs := newTestHosts(testHost{name: "h1", slots: 1}, testHost{name: "h2", slots: 1})
	dir := t.TempDir()
	e, rec := newEngine(t, func(c *Config) { c.Workers = 2; c.Cwd = dir; c.Hosts = hs })
	cmd := strings.TrimPrefix(gated, "$ ")
	if r := replyTo(t, e, rec, "/spawn --host h2 "+cmd); r.IsError != nil || !strings.Contains(r.Text, "Queued t1 for a local worker on host h2") {
		t.Fatalf("reply %+v", r)
	}
	waitPlaced(t, e, map[string]string{"t1": "h2"})
	r := replyTo(t, e, rec, "/spawn --host h2 "+cmd)
	if !strings.Contains(r.Text, "(waits: waiting for a free slot on h2)") {
		t.Errorf("second spawn's reply: %s", r.Text)
	}
	release(t, dir)
	waitPlaced(t, e, map[string]string{"t1": "h2", "t2": "h2"})
	rec.waitFor("t2 done", activity("task.updated", "t2 done"))
	if asked := hs.providersAsked(); !slices.Equal(asked, []string{"h2/local", "h2/local"}) {
		t.Errorf("host providers asked for %v", asked)
	}
}

// A task pinned to a label no host has waits, saying so; when a host with
// it comes up, HostsChanged starts it there.
func TestPlacementWaitsForALabel(t *testing.T) {
	hs := newTestHosts(testHost{name: "h1", slots: 2})
	e, rec := newEngine(t, func(c *Config) { c.Hosts = hs })
	r := replyTo(t, e, rec, "/spawn --label gpu echo on-gpu")
	if !strings.Contains(r.Text, "Queued t1 for a local worker on a host with label gpu: echo on-gpu (waits: waiting for a host with label gpu)") {
		t.Fatalf("reply: %s", r.Text)
	}
	if r := replyTo(t, e, rec, "/tasks"); !strings.Contains(r.Text, "(waits: waiting for a host with label gpu)") {
		t.Errorf("/tasks:\n%s", r.Text)
	}
	rec.waitFor("the task item saying why t1 waits", func(m protocol.Message) bool {
		fs, ok := m.(*protocol.FleetState)
		return ok && len(fs.Tasks.Items) == 1 && fs.Tasks.Items[0].WaitReason == "waiting for a host with label gpu"
	})
	e.HostsChanged() // nothing changed: it still waits
	if st, why := waiting(e, "t1"); st != taskPending || why != "waiting for a host with label gpu" {
		t.Fatalf("t1 is %s (%q)", st, why)
	}
	hs.add(testHost{name: "g1", slots: 1, labels: []string{"gpu"}})
	e.HostsChanged()
	waitPlaced(t, e, map[string]string{"t1": "g1"})
	rec.waitFor("on-gpu printed by w1", func(m protocol.Message) bool {
		tr, ok := m.(*protocol.Transcript)
		return ok && tr.Text == "on-gpu" && tr.Agent == "w1"
	})
	if _, why := waiting(e, "t1"); why != "" {
		t.Errorf("t1 still says it waits: %q", why)
	}
}

// /spawn's pins are checked: a bad host name or label, both at once, or a
// pin in a fleet without hosts is a usage error, and nothing is queued.
func TestSpawnPinErrors(t *testing.T) {
	e, rec := newEngine(t, func(c *Config) { c.Hosts = newTestHosts() })
	for _, c := range []struct{ prompt, want string }{
		{"/spawn --host Big_Box echo x", `host name "Big_Box"`},
		{"/spawn --label -gpu echo x", `label "-gpu"`},
		{"/spawn --host h1 --label gpu echo x", "not both"},
		{"/spawn --host h1", "nothing to do"},
	} {
		r := replyTo(t, e, rec, c.prompt)
		if r.IsError == nil || !*r.IsError || !strings.Contains(r.Text, c.want) || !strings.Contains(r.Text, "Usage: "+spawnUsage) {
			t.Errorf("%s: %+v", c.prompt, r)
		}
	}
	if _, _, err := e.SpawnWorker(t.Context(), "coordinator", Spawn{Text: "echo x", Host: "h1", Label: "gpu"}); err == nil || !strings.Contains(err.Error(), "not both") {
		t.Errorf("SpawnWorker with host and label: %v", err)
	}
	if _, _, err := e.SpawnWorker(t.Context(), "coordinator", Spawn{Text: "echo x", Host: "no way"}); err == nil || !strings.Contains(err.Error(), "host name") {
		t.Errorf("SpawnWorker with a bad host name: %v", err)
	}
	if r := replyTo(t, e, rec, "/tasks"); !strings.Contains(r.Text, "No tasks yet") {
		t.Errorf("something was queued:\n%s", r.Text)
	}

	plain, prec := newEngine(t, nil)
	r := replyTo(t, plain, prec, "/spawn --host h1 echo x")
	if r.IsError == nil || !strings.Contains(r.Text, "this fleet has no worker hosts") {
		t.Errorf("a pin without hosts: %+v", r)
	}
}

// runsIntel keeps the runs the engine records.
type runsIntel struct {
	mu   sync.Mutex
	runs []record.Run
}

func (r *runsIntel) Record(x record.Run)   { r.mu.Lock(); r.runs = append(r.runs, x); r.mu.Unlock() }
func (r *runsIntel) Steer(record.Steering) {}
func (r *runsIntel) Skill(context.Context, string) (record.SkillUse, error) {
	return record.SkillUse{}, errors.New("no skills here")
}
func (r *runsIntel) Command(context.Context, string, string) (string, error) { return "", nil }

// spawn_worker's host and label reach the task as /spawn's do, and the
// intel store is told where the run ran.
func TestSpawnWorkerPins(t *testing.T) {
	hs := newTestHosts(testHost{name: "h1", slots: 1, labels: []string{"gpu"}})
	in := &runsIntel{}
	e, rec := newEngine(t, func(c *Config) { c.Hosts = hs; c.Intel = in })
	task, _, err := e.SpawnWorker(t.Context(), "coordinator", Spawn{Text: "echo labelled", Label: "gpu"})
	if err != nil {
		t.Fatal(err)
	}
	waitPlaced(t, e, map[string]string{task: "h1"})
	rec.waitFor(task+" done", activity("task.updated", task+" done"))
	if ws := e.Workers(); len(ws) != 1 || ws[0].Host != "h1" {
		t.Errorf("Workers() = %+v", ws)
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if len(in.runs) != 1 || in.runs[0].Host != "h1" || in.runs[0].Outcome != record.OutcomeCompleted {
		t.Errorf("recorded runs %+v", in.runs)
	}
}

// A remote worker's host is saved with it, and a resumed session runs its
// follow-up turn on the same host; a session resumed without hosts fails
// that turn, saying why.
func TestPlacementHostSurvivesRestore(t *testing.T) {
	p := newMemPersister()
	hs := newTestHosts(testHost{name: "h1", slots: 1})
	e, rec := newEngine(t, func(c *Config) { c.Persister = p; c.Hosts = hs; c.Placement = PlacementHostsOnly })
	e.Prompt("test", "$ echo first")
	rec.waitFor("t1 done", activity("task.updated", "t1 done"))
	p.mu.Lock()
	w1 := p.workers["w1"]
	saved := &Restore{Tasks: []TaskRecord{p.tasks["t1"]}, Workers: []WorkerRecord{w1}, Counters: maps.Clone(p.counters)}
	p.mu.Unlock()
	if w1.Host != "h1" {
		t.Fatalf("w1 saved as %+v", w1)
	}

	hs2 := newTestHosts(testHost{name: "h1", slots: 1})
	e2, rec2 := newEngine(t, func(c *Config) { c.Restore = saved; c.Hosts = hs2 })
	rec2.waitFor("restored w1 on h1 in fleetState", func(m protocol.Message) bool {
		fs, ok := m.(*protocol.FleetState)
		return ok && len(fs.Workers) == 1 && fs.Workers[0].Host == "h1"
	})
	e2.Prompt("test", "/tell w1 echo again")
	rec2.waitFor("the follow-up ran on w1", func(m protocol.Message) bool {
		tr, ok := m.(*protocol.Transcript)
		return ok && tr.Text == "again" && tr.Agent == "w1"
	})
	if asked := hs2.providersAsked(); !slices.Equal(asked, []string{"h1/local"}) {
		t.Errorf("host providers asked for %v, want h1/local", asked)
	}

	e3, rec3 := newEngine(t, func(c *Config) { c.Restore = saved })
	e3.Prompt("test", "/tell w1 echo again")
	rec3.waitFor("the follow-up failed for want of hosts", activity("failed", "this fleet has no worker hosts"))
}

// The reasons a task waits, from placeLocked itself: the hosts' own reason
// when none matches, the full ones (a few named) when all are busy, none
// for an unpinned task that waits for a local slot.
func TestPlaceReasons(t *testing.T) {
	full := newTestHosts(testHost{name: "a", slots: 1, labels: []string{"gpu"}}, testHost{name: "b", slots: 1, labels: []string{"gpu"}},
		testHost{name: "c", slots: 1, labels: []string{"gpu"}}, testHost{name: "d", slots: 1, labels: []string{"gpu"}},
		testHost{name: "e", slots: 0, labels: []string{"gpu"}})
	for _, c := range []struct {
		name      string
		placement string
		tk        task
		want      string
	}{
		{"pinned to a label, all busy", PlacementLocalFirst, task{pinLabel: "gpu"}, "waiting for a free slot on a, b, c, 2 more"},
		{"pinned to a label none has", PlacementLocalFirst, task{pinLabel: "tpu"}, "waiting for a host with label tpu"},
		{"pinned to a host", PlacementSpread, task{pinHost: "b"}, "waiting for a free slot on b"},
		{"unpinned, local-first", PlacementLocalFirst, task{}, ""},
		{"unpinned, spread", PlacementSpread, task{}, ""},
		{"unpinned, hosts-only", PlacementHostsOnly, task{}, "waiting for a free slot on a, b, c, 2 more"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := &Engine{cfg: Config{Provider: &local.Provider{}, Hosts: full, Placement: c.placement, Workers: 1}}
			l := &load{local: 1, onHost: map[string]int{"a": 1, "b": 1, "c": 1, "d": 1}, cands: map[[3]string]candidates{}}
			host, ok, why := e.placeLocked(&c.tk, l)
			if ok || host != "" || why != c.want {
				t.Errorf("placed on %q (%v), why %q; want it to wait, why %q", host, ok, why, c.want)
			}
		})
	}
}

// notStarted is a host provider whose first Start says the host was lost
// before it took the claim; later ones run the real local provider.
type notStarted struct {
	mu    sync.Mutex
	calls int
}

func (p *notStarted) Name() string { return "local" }

func (p *notStarted) Start(ctx context.Context, spec provider.Spec, h provider.Host) (provider.Session, error) {
	p.mu.Lock()
	p.calls++
	first := p.calls == 1
	p.mu.Unlock()
	if first {
		return nil, fmt.Errorf("host h1 lost: not heard from for 15s: %w", ErrNotStarted)
	}
	return (&local.Provider{}).Start(ctx, spec, h)
}

type oneProviderHosts struct {
	*testHosts
	p provider.Provider
}

func (h oneProviderHosts) Provider(host, prov string) provider.Provider { return h.p }

// A worker that never started on its host (the claim was taken back)
// does not fail its task: the task goes back to the queue and starts on a
// new worker.
func TestNotStartedGoesBackToTheQueue(t *testing.T) {
	hs := oneProviderHosts{newTestHosts(testHost{name: "h1", slots: 1}), &notStarted{}}
	e, rec := newEngine(t, func(c *Config) { c.Workers = 1; c.Cwd = t.TempDir(); c.Hosts = hs; c.Placement = PlacementHostsOnly })
	e.Prompt("test", "$ echo ran")
	rec.waitFor("t1 back in the queue", activity("task.updated", "t1 pending: back in the queue: start local: host h1 lost"))
	rec.waitFor("t1 done on w2", activity("task.updated", "t1 done"))
	e.mu.Lock()
	defer e.mu.Unlock()
	if w1, t1 := e.workerByID["w1"], e.taskByID["t1"]; w1.status != workerFailed || t1.worker != "w2" {
		t.Fatalf("w1 %s, t1 on %q; want w1 failed and t1 on w2", w1.status, t1.worker)
	}
}

// /retry starts a failed task again as a new task on the same worker,
// placed afresh: the host it failed on is gone, another takes it.
func TestRetryRunsOnTheFailedWorkerPlacedAfresh(t *testing.T) {
	hs := newTestHosts(testHost{name: "h1", slots: 1})
	dir := t.TempDir()
	e, rec := newEngine(t, func(c *Config) { c.Workers = 1; c.Cwd = dir; c.Hosts = hs; c.Placement = PlacementHostsOnly })
	e.Prompt("test", "$ test -e fixed || exit 3")
	rec.waitFor("t1 failed", activity("task.updated", "t1 failed"))
	if r := replyTo(t, e, rec, "/retry t9"); !strings.Contains(r.Text, `No task "t9"`) {
		t.Fatalf("/retry t9: %q", r.Text)
	}
	hs.mu.Lock()
	hs.up = []testHost{{name: "h2", slots: 1}}
	hs.mu.Unlock()
	os.WriteFile(filepath.Join(dir, "fixed"), nil, 0o644)
	if r := replyTo(t, e, rec, "/retry t1"); !strings.HasPrefix(r.Text, "t2 retries t1") {
		t.Fatalf("/retry t1: %q", r.Text)
	}
	rec.waitFor("t2 done", activity("task.updated", "t2 done"))
	e.mu.Lock()
	t2, w1, n := e.taskByID["t2"], e.workerByID["w1"], len(e.workers)
	ranOn, host := t2.worker, w1.hostName
	e.mu.Unlock()
	if ranOn != "w1" || host != "h2" || n != 1 {
		t.Fatalf("t2 ran on %q, w1 on %q, %d workers; want t2 on w1 on h2, one worker", ranOn, host, n)
	}
	if r := replyTo(t, e, rec, "/retry t2"); !strings.Contains(r.Text, "t2 is done") {
		t.Fatalf("/retry t2: %q", r.Text)
	}
}

// adopting is a host provider that can take up a worker after a restart:
// the taken-up session is a real local one, already running a turn (as
// the worker on the host still is).
type adopting struct{ local.Provider }

func (a *adopting) Adopt(ctx context.Context, spec provider.Spec, h provider.Host) (provider.Session, error) {
	sess, err := a.Start(ctx, spec, h)
	if err != nil {
		return nil, err
	}
	return sess, sess.Send(ctx, provider.Turn{Text: "echo still running on the host"})
}

// A worker that was running on a host when the fleet stopped is taken up
// again on --resume, with its task: it ends as it ends on the host, not
// as interrupted. A provider that cannot take it up fails it as before.
func TestRunningHostWorkerIsAdoptedOnRestore(t *testing.T) {
	saved := &Restore{
		Tasks:    []TaskRecord{{ID: "t1", Command: "$ sleep 600", Status: taskRunning, Worker: "w1"}},
		Workers:  []WorkerRecord{{ID: "w1", Status: workerRunning, TaskID: "t1", Host: "h1", StartedAt: nowMs()}},
		Counters: map[string]int64{counterTask: 1, counterWorker: 1},
	}
	hs := oneProviderHosts{newTestHosts(testHost{name: "h1", slots: 1}), &adopting{}}
	_, rec := newEngine(t, func(c *Config) { c.Restore = saved; c.Hosts = hs; c.Cwd = t.TempDir() })
	rec.waitFor("w1 adopted", activity("adopted", "t1: "))
	rec.waitFor("its output", func(m protocol.Message) bool {
		tr, ok := m.(*protocol.Transcript)
		return ok && tr.Text == "still running on the host" && tr.Agent == "w1"
	})
	rec.waitFor("t1 done", activity("task.updated", "t1 done"))

	plain := oneProviderHosts{newTestHosts(testHost{name: "h1", slots: 1}), &local.Provider{}}
	_, rec2 := newEngine(t, func(c *Config) { c.Restore = saved; c.Hosts = plain; c.Cwd = t.TempDir() })
	rec2.waitFor("t1 failed as interrupted", activity("task.updated", "t1 failed: interrupted"))
}
