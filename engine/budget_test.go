package engine

import (
	"context"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/internal/testwait"
	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/provider"
)

// usageProvider is an agent provider whose turns are scripted by their
// text: each number is a Usage of that many input tokens, reported in
// order; "wait" then keeps the turn running until it is interrupted.
// Every other turn (the budget's continuation) reports 10 tokens and ends.
type usageProvider struct {
	mu          sync.Mutex
	sent        []string // every turn's text, in order
	interrupted int
}

func (p *usageProvider) Name() string { return "usage" }
func (p *usageProvider) Start(ctx context.Context, spec provider.Spec, h provider.Host) (provider.Session, error) {
	return &usageSession{p: p, h: h, done: make(chan struct{})}, nil
}

func (p *usageProvider) texts() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.sent)
}

func (p *usageProvider) interrupts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.interrupted
}

type usageSession struct {
	p    *usageProvider
	h    provider.Host
	done chan struct{}
	once sync.Once
	mu   sync.Mutex
	intr chan struct{} // the running turn's; closed by Interrupt
}

func (s *usageSession) Send(ctx context.Context, t provider.Turn) error {
	s.p.mu.Lock()
	s.p.sent = append(s.p.sent, t.Text)
	s.p.mu.Unlock()
	intr := make(chan struct{})
	if strings.HasSuffix(t.Text, " wait") { // only a waiting turn can be interrupted
		s.mu.Lock()
		s.intr = intr
		s.mu.Unlock()
	}
	go func() {
		s.h.Event(provider.SessionStarted{ID: "sess-1", Model: "m1"})
		f := strings.Fields(t.Text)
		if len(f) == 0 || f[0] != "use" {
			s.h.Event(provider.Usage{InputTokens: 10})
			s.h.Event(provider.TurnEnded{Result: "continued"})
			return
		}
		wait := false
		for _, x := range f[1:] {
			if n, err := strconv.ParseInt(x, 10, 64); err == nil {
				s.h.Event(provider.Usage{InputTokens: n})
			}
			wait = wait || x == "wait"
		}
		if wait {
			select {
			case <-intr:
				s.h.Event(provider.TurnEnded{Interrupted: true})
			case <-s.done:
			}
			return
		}
		s.h.Event(provider.TurnEnded{Result: "done"})
	}()
	return nil
}

func (s *usageSession) Interrupt(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.intr != nil {
		close(s.intr)
		s.intr = nil
		s.p.mu.Lock()
		s.p.interrupted++
		s.p.mu.Unlock()
	}
	return nil
}
func (s *usageSession) ResumeID() string      { return "sess-1" }
func (s *usageSession) Close() error          { s.once.Do(func() { close(s.done) }); return nil }
func (s *usageSession) Done() <-chan struct{} { return s.done }
func (s *usageSession) Err() error            { return nil }

func isReply(text string) func(protocol.Message) bool {
	return func(m protocol.Message) bool {
		r, ok := m.(*protocol.Reply)
		return ok && r.Text == text
	}
}

func confirmWith(part string) func(protocol.Message) bool {
	return func(m protocol.Message) bool {
		c, ok := m.(*protocol.ConfirmRequest)
		return ok && strings.Contains(c.Summary, part)
	}
}

func (e *Engine) workerStatus(id string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if w := e.workerByID[id]; w != nil {
		return w.status
	}
	return ""
}

// A worker at 80% of its budget is announced once; at 100% its turn is
// interrupted and a confirm asks to raise the budget: approved, the worker
// goes on in the same session; denied, its task fails with the reason.
func TestWorkerBudget(t *testing.T) {
	for _, approve := range []bool{true, false} {
		p := &usageProvider{}
		e, rec := newEngine(t, func(c *Config) { c.Provider = p; c.Budgets = Budgets{WorkerTokens: 500} })
		e.Prompt("test", "/spawn use 400 150 wait")
		warn := "w1 used 80% of its token budget (400 of 500 tokens)"
		rec.waitFor("the 80% notice", activity(activityBudget, warn))
		rec.waitFor("the 80% reply", isReply(warn))
		cr := rec.waitFor("the budget confirm", isConfirm).(*protocol.ConfirmRequest)
		if want := "w1 reached its token budget (550 of 500 tokens). Continue with the budget raised to 1,000?"; cr.Summary != want {
			t.Fatalf("summary %q, want %q", cr.Summary, want)
		}
		if p.interrupts() != 1 {
			t.Fatalf("%d interrupts of the turn at the budget", p.interrupts())
		}
		testwait.For(t, testwait.Bound, "w1 idle while it waits", func() bool { return e.workerStatus("w1") == workerIdle })
		if err := e.AnswerConfirm(cr.ID, approve, "answered"); err != nil {
			t.Fatal(err)
		}
		if !approve {
			f := rec.waitFor("t1 fails", activity("failed", "t1")).(*protocol.HubEvent)
			if !strings.Contains(f.Text, "token budget exhausted (550 of 500 tokens)") {
				t.Fatalf("failure %q", f.Text)
			}
			if got := p.texts(); len(got) != 1 {
				t.Fatalf("turns after a deny: %q", got)
			}
			continue
		}
		rec.waitFor("t1 done", activity("task.updated", "t1 done"))
		rec.waitFor("the raise", activity(activityBudget, "w1's token budget was raised to 1,000 tokens"))
		if got := p.texts(); len(got) != 2 || got[1] != budgetContinue {
			t.Fatalf("turns %q; want the task, then the continuation in the same session", got)
		}
		var warnings int
		for _, m := range rec.all() {
			if h, ok := m.(*protocol.HubEvent); ok && h.Kind == activityBudget && strings.Contains(h.Text, "% of its token budget") {
				warnings++
			}
		}
		if warnings != 1 {
			t.Fatalf("%d 80%% notices for one level", warnings)
		}
	}
}

// The session budget pauses every running agent worker on one confirm;
// new tasks wait meanwhile; approved, all go on.
func TestSessionBudget(t *testing.T) {
	p := &usageProvider{}
	e, rec := newEngine(t, func(c *Config) { c.Provider = p; c.Workers = 4; c.Budgets = Budgets{SessionTokens: 1000} })
	e.Prompt("test", "/spawn use 300 wait")
	e.Prompt("test", "/spawn use 300 wait")
	testwait.For(t, testwait.Bound, "600 tokens used", func() bool { e.mu.Lock(); defer e.mu.Unlock(); return e.sessionTokens.total() == 600 })
	e.Prompt("test", "/spawn use 500")
	cr := rec.waitFor("the session confirm", confirmWith("The session reached its token budget (1,100 of 1,000 tokens). Continue with the budget raised to 2,000?")).(*protocol.ConfirmRequest)
	testwait.For(t, testwait.Bound, "w1 and w2 wait", func() bool { return e.workerStatus("w1") == workerIdle && e.workerStatus("w2") == workerIdle })
	rec.waitFor("t3 done", activity("task.updated", "t3 done"))
	e.Prompt("test", "/spawn use 1")
	e.Prompt("test", "/tasks")
	rec.waitFor("t4 waits", func(m protocol.Message) bool {
		r, ok := m.(*protocol.Reply)
		return ok && strings.Contains(r.Text, "waits for the decision on the session's token budget")
	})
	confirms := 0
	for _, m := range rec.all() {
		if isConfirm(m) {
			confirms++
		}
	}
	if confirms != 1 || p.interrupts() != 2 {
		t.Fatalf("%d confirms, %d interrupts; want one confirm for both workers", confirms, p.interrupts())
	}
	e.AnswerConfirm(cr.ID, true, "answered")
	for _, id := range []string{"t1", "t2", "t4"} {
		rec.waitFor(id+" done", activity("task.updated", id+" done"))
	}
	if n := slices.Index(p.texts(), budgetContinue); n < 0 || strings.Count(strings.Join(p.texts(), "\n"), budgetContinue) != 2 {
		t.Fatalf("turns %q; want both workers continued", p.texts())
	}
	e.mu.Lock()
	if e.budget.session != 2000 {
		t.Errorf("session budget %d after the approval", e.budget.session)
	}
	e.mu.Unlock()
}

// holdingGovernor is fakeGovernor with holds that keep a reservation
// waiting until release.
type holdingGovernor struct {
	*fakeGovernor
	held map[string]string // id → reason
}

func (g *holdingGovernor) Hold(ctx context.Context, id, reason string) (string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.held[id] = reason
	return "hold-" + id, nil
}

func (g *holdingGovernor) Admit(ctx context.Context, id string) (Admission, error) {
	g.mu.Lock()
	_, held := g.held[id]
	g.mu.Unlock()
	if held {
		return Admission{Wait: "task is held"}, nil
	}
	return g.fakeGovernor.Admit(ctx, id)
}

func (g *holdingGovernor) holds() map[string]string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := map[string]string{}
	for k, v := range g.held {
		out[k] = v
	}
	return out
}

// In a native session an exhausted budget is a hold, not a confirm: the
// worker waits until it is released (then goes on) or the root stops it.
func TestNativeBudgetHold(t *testing.T) {
	for _, release := range []bool{true, false} {
		g := &holdingGovernor{fakeGovernor: newFakeGovernor(), held: map[string]string{}}
		p := &usageProvider{}
		e, rec := newEngine(t, func(c *Config) { c.Provider = p; c.Governor = g; c.Budgets = Budgets{WorkerTokens: 500} })
		e.Prompt("test", "/spawn use 550 wait")
		rec.waitFor("the hold reply", func(m protocol.Message) bool {
			r, ok := m.(*protocol.Reply)
			return ok && strings.Contains(r.Text, "held in the native root") && strings.Contains(r.Text, "t1.b1")
		})
		if why := g.holds()["t1.b1"]; !strings.Contains(why, "token budget exhausted (550 of 500 tokens)") {
			t.Fatalf("holds %v", g.holds())
		}
		testwait.For(t, testwait.Bound, "w1 idle while held", func() bool { return e.workerStatus("w1") == workerIdle })
		for _, m := range rec.all() {
			if isConfirm(m) {
				t.Fatal("a confirmRequest in a native session")
			}
		}
		if !release {
			g.set(func(g *fakeGovernor) { g.intent = intentStop })
			e.GovernorChanged()
			rec.waitFor("t1 fails", activity("failed", "t1"))
			continue
		}
		g.mu.Lock()
		delete(g.held, "t1.b1")
		g.mu.Unlock()
		e.GovernorChanged()
		rec.waitFor("t1 done", activity("task.updated", "t1 done"))
		if got := p.texts(); len(got) != 2 || got[1] != budgetContinue {
			t.Fatalf("turns %q", got)
		}
		testwait.For(t, testwait.Bound, "the hold's reservation settled", func() bool {
			g.mu.Lock()
			defer g.mu.Unlock()
			for _, s := range g.settled {
				if s.TaskID == "t1.b1" {
					return true
				}
			}
			return false
		})
	}
}

// The local shell reports no tokens: the smallest budgets never hold it.
func TestBudgetsNeverHoldTheLocalShell(t *testing.T) {
	e, rec := newEngine(t, func(c *Config) { c.Budgets = Budgets{WorkerTokens: 1, SessionTokens: 1} })
	e.Prompt("test", "$ echo hi")
	rec.waitFor("t1 done", activity("task.updated", "t1 done"))
	for _, m := range rec.all() {
		if h, ok := m.(*protocol.HubEvent); (ok && h.Kind == activityBudget) || isConfirm(m) {
			t.Fatalf("a budget event for the local shell: %+v", m)
		}
	}
}

// /budget shows use and cost, sets budgets, and a raise by /budget ends
// the confirm it made moot.
func TestBudgetCommand(t *testing.T) {
	p := &usageProvider{}
	e, rec := newEngine(t, func(c *Config) {
		c.Provider = p
		c.Budgets = Budgets{WorkerTokens: 500}
		c.Prices = map[string]Price{"m1": {InputPerMTok: 3, OutputPerMTok: 15}}
	})
	reply := func(cmd string) string {
		e.mu.Lock()
		defer e.mu.Unlock()
		r, err := e.cmdBudget(strings.TrimSpace(strings.TrimPrefix(cmd, "/budget")))
		if err != nil {
			return "error: " + err.Error()
		}
		return r
	}
	for _, bad := range []string{"/budget session", "/budget session lots", "/budget w9 10", "/budget a b c"} {
		if got := reply(bad); !strings.HasPrefix(got, "error: ") || !strings.Contains(got, "Usage: /budget") {
			t.Errorf("%s: %q", bad, got)
		}
	}
	if got := reply("/budget session 10_000"); got != "The session's token budget is 10,000 tokens (0 used)." {
		t.Errorf("set session: %q", got)
	}
	e.Prompt("test", "/spawn use 600 wait")
	cr := rec.waitFor("the budget confirm", isConfirm).(*protocol.ConfirmRequest)
	got := reply("/budget")
	for _, want := range []string{"session  600 of 10,000 tokens (6%)  $0.0018", "workers' default budget: 500 tokens",
		"w1    idle     600 of 500 tokens (120%)  m1  $0.0018  — paused at its budget"} {
		if !strings.Contains(got, want) {
			t.Errorf("/budget:\n%s\nwant a line with %q", got, want)
		}
	}
	if got := reply("/budget w1 2,000"); got != "w1's token budget is 2,000 tokens (600 used)." {
		t.Errorf("set w1: %q", got)
	}
	res := rec.waitFor("the moot confirm resolved", func(m protocol.Message) bool {
		r, ok := m.(*protocol.ConfirmResolved)
		return ok && r.ID == cr.ID
	}).(*protocol.ConfirmResolved)
	if !res.Approved || res.Reason != protocol.ReasonSuperseded {
		t.Fatalf("resolved %+v", res)
	}
	rec.waitFor("t1 done", activity("task.updated", "t1 done"))
	e.mu.Lock()
	limit := e.workerLimitLocked(e.workerByID["w1"])
	e.mu.Unlock()
	if limit != 2000 {
		t.Fatalf("w1's budget %d; the operator's 2,000 must stand", limit)
	}
	if got := reply("/budget worker off"); got != "The workers' default token budget is off (w1 keeps its own)." {
		t.Errorf("worker off: %q", got)
	}
}

func TestCostAndFormatting(t *testing.T) {
	e := &Engine{cfg: Config{Prices: map[string]Price{"m": {InputPerMTok: 3, OutputPerMTok: 15, CacheReadPerMTok: 0.3, CacheWritePerMTok: 3.75}}}}
	usd, ok := e.costLocked("m", tokens{input: 1_000_000, output: 100_000, cacheRead: 2_000_000, cacheWrite: 400_000})
	if !ok || math.Abs(usd-(3+1.5+0.6+1.5)) > 1e-9 {
		t.Fatalf("cost %v %v", usd, ok)
	}
	if _, ok := e.costLocked("other", tokens{input: 1}); ok {
		t.Fatal("a cost for a model without a price")
	}
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 10240: "10,240", 1234567: "1,234,567", -4500: "-4,500"} {
		if got := commas(n); got != want {
			t.Errorf("commas(%d) = %q", n, got)
		}
	}
	for _, c := range [][4]int64{{10000, 10000, 10240, 20000}, {10000, 10000, 35000, 40000}, {500, 0, 500, 1000}, {500, 500, 499, 1000}} {
		if got := raiseTo(c[0], c[1], c[2]); got != c[3] {
			t.Errorf("raiseTo(%d, %d, %d) = %d, want %d", c[0], c[1], c[2], got, c[3])
		}
	}
}

// The session budget in a native session is one hold (budget.N) that the
// paused workers wait on; released, they go on.
func TestNativeSessionBudgetHold(t *testing.T) {
	g := &holdingGovernor{fakeGovernor: newFakeGovernor(), held: map[string]string{}}
	p := &usageProvider{}
	e, rec := newEngine(t, func(c *Config) { c.Provider = p; c.Governor = g; c.Budgets = Budgets{SessionTokens: 500} })
	e.Prompt("test", "/spawn use 550 wait")
	rec.waitFor("the hold reply", func(m protocol.Message) bool {
		r, ok := m.(*protocol.Reply)
		return ok && strings.HasPrefix(r.Text, "The session is held in the native root")
	})
	var id string
	testwait.For(t, testwait.Bound, "the session's hold", func() bool {
		for k, why := range g.holds() {
			if strings.HasPrefix(k, "budget.") && strings.Contains(why, "session token budget exhausted (550 of 500 tokens)") {
				id = k
			}
		}
		return id != ""
	})
	testwait.For(t, testwait.Bound, "w1 idle while held", func() bool { return e.workerStatus("w1") == workerIdle })
	g.mu.Lock()
	delete(g.held, id)
	g.mu.Unlock()
	e.GovernorChanged()
	rec.waitFor("t1 done", activity("task.updated", "t1 done"))
	if got := p.texts(); len(got) != 2 || got[1] != budgetContinue {
		t.Fatalf("turns %q", got)
	}
}

// fleetState carries the budgets (an extension), so consoles can show how
// much of it is used; without budgets it is absent.
func TestFleetStateBudget(t *testing.T) {
	p := &usageProvider{}
	e, _ := newEngine(t, func(c *Config) { c.Provider = p; c.Budgets = Budgets{SessionTokens: 1000, WorkerTokens: 400} })
	e.Prompt("test", "/spawn use 300")
	testwait.For(t, testwait.Bound, "300 tokens used", func() bool { e.mu.Lock(); defer e.mu.Unlock(); return e.sessionTokens.total() == 300 })
	e.mu.Lock()
	b := e.fleetStateLocked(time.Now()).Budget
	e.mu.Unlock()
	if b == nil || *b != (protocol.FleetBudget{SessionTokens: 1000, SessionUsed: 300, WorkerTokens: 400}) {
		t.Errorf("fleetState.budget = %+v", b)
	}
	e2, _ := newEngine(t, func(c *Config) { c.Provider = p })
	e2.mu.Lock()
	defer e2.mu.Unlock()
	if b := e2.fleetStateLocked(time.Now()).Budget; b != nil {
		t.Errorf("no budgets, but fleetState.budget = %+v", b)
	}
}
