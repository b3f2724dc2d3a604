package engine

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/agents-fleet/fleet/internal/testwait"
	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/provider"
)

// fakeGovernor is an in-memory native root.
type fakeGovernor struct {
	mu       sync.Mutex
	reserved map[string]Reservation
	admit    map[string]Admission // per task; default Start
	intent   string
	taskInt  map[string]string
	settled  []Settlement
	phases   []string
	released []string
}

func newFakeGovernor() *fakeGovernor {
	return &fakeGovernor{reserved: map[string]Reservation{}, admit: map[string]Admission{}, taskInt: map[string]string{}, intent: intentRun}
}

func (g *fakeGovernor) Reserve(ctx context.Context, r Reservation) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.reserved[r.ID] = r
	return nil
}
func (g *fakeGovernor) Admit(ctx context.Context, id string) (Admission, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.reserved[id]; !ok {
		return Admission{}, context.DeadlineExceeded
	}
	if a, ok := g.admit[id]; ok {
		return a, nil
	}
	return Admission{Start: true}, nil
}
func (g *fakeGovernor) ReleasePlanned(ctx context.Context, id string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.released = append(g.released, id)
	delete(g.admit, id)
	return nil
}
func (g *fakeGovernor) Settle(ctx context.Context, s Settlement) (string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.settled = append(g.settled, s)
	return "settlement-" + s.TaskID, nil
}
func (g *fakeGovernor) MarkUncertain(ctx context.Context, id string) error { return nil }

func (g *fakeGovernor) Hold(ctx context.Context, id, reason string) (string, error) {
	return "hold-" + id, nil
}
func (g *fakeGovernor) Intent(id string) (string, string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.intent, g.taskInt[id]
}
func (g *fakeGovernor) ReportPhase(ctx context.Context, phase string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.phases = append(g.phases, phase)
	return nil
}
func (g *fakeGovernor) set(f func(g *fakeGovernor)) { g.mu.Lock(); f(g); g.mu.Unlock() }

func TestNativeRootGovernsDispatch(t *testing.T) {
	g := newFakeGovernor()
	g.admit["t1"] = Admission{Wait: "awaiting an approval"}
	policy, _ := provider.NewPolicy([]string{`^echo guarded`})
	e, rec := newEngine(t, func(c *Config) { c.Governor = g; c.Policy = policy })
	e.Prompt("test", "$ echo guarded-one\n$ echo plain-two")
	rec.waitFor("t2 ran", transcript("plain-two"))
	g.mu.Lock()
	r1 := g.reserved["t1"]
	g.mu.Unlock()
	if !r1.NeedsApproval || r1.Command != "echo guarded-one" {
		t.Fatalf("reservation %+v", r1)
	}
	// No legacy confirm in a native session: the root's approval gates it.
	for _, m := range rec.all() {
		if _, ok := m.(*protocol.ConfirmRequest); ok {
			t.Fatal("legacy confirmRequest in a native session")
		}
	}
	e.Prompt("test", "/tasks")
	rec.waitFor("wait reason shown", reply("waits: awaiting an approval"))
	g.set(func(g *fakeGovernor) { delete(g.admit, "t1") })
	e.GovernorChanged()
	rec.waitFor("t1 ran once approved", transcript("guarded-one"))

	// A refusal fails the task.
	g.set(func(g *fakeGovernor) { g.admit["t3"] = Admission{Refuse: "denied by the operator"} })
	e.Prompt("test", "$ echo never")
	rec.waitFor("refused", activity("task.updated", "t3 failed: denied by the operator"))

	// Settlements are recorded, failures included.
	e.Prompt("test", "$ exit 4")
	testwait.For(t, testwait.Bound, "settlements", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(g.settled) == 3
	})
	// Settlements are written asynchronously: find t4's.
	var last Settlement
	g.mu.Lock()
	for _, st := range g.settled {
		if st.TaskID == "t4" {
			last = st
		}
	}
	g.mu.Unlock()
	if !last.Failed || last.ExitCode != 4 || last.WorkerID != "w3" {
		t.Fatalf("settlement %+v", last)
	}
	rec.waitFor("settlement announced", activity("message", "settlement-t4"))
}

func TestNativeStopIntentStopsRunningWork(t *testing.T) {
	g := newFakeGovernor()
	e, rec := newEngine(t, func(c *Config) { c.Governor = g })
	e.Prompt("test", "$ echo up; sleep 30")
	rec.waitFor("running", transcript("up"))
	g.set(func(g *fakeGovernor) { g.intent = intentStop; g.admit["t2"] = Admission{Wait: "root intent stop"} })
	e.GovernorChanged()
	rec.waitFor("stopped", activity("failed", "stop intent of the native root"))
	testwait.For(t, testwait.Bound, "phase stopped", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(g.phases) > 0 && g.phases[len(g.phases)-1] == phaseStopped
	})
	// Planned tasks are released through the root.
	e.Prompt("test", "/plan on")
	e.Prompt("test", "$ echo later")
	e.Prompt("test", "/go")
	testwait.For(t, testwait.Bound, "released", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return strings.Join(g.released, ",") == "t2"
	})
}
