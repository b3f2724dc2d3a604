package engine

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/provider"
)

// slowStartProvider's Start takes at least startTook; its session records,
// when a turn is sent, when the engine last saw activity from it.
type slowStartProvider struct {
	startTook time.Duration
	mu        sync.Mutex
	started   int64 // epoch ms when Start returned
	seen      int64 // the host's last activity when the turn was sent
}

func (p *slowStartProvider) Name() string { return "slow-start" }
func (p *slowStartProvider) Start(ctx context.Context, spec provider.Spec, h provider.Host) (provider.Session, error) {
	time.Sleep(p.startTook) // a lower bound: a loaded machine only makes it longer
	p.mu.Lock()
	p.started = nowMs()
	p.mu.Unlock()
	return &slowStartSession{p: p, h: h, done: make(chan struct{})}, nil
}

type slowStartSession struct {
	p    *slowStartProvider
	h    provider.Host
	done chan struct{}
	once sync.Once
}

func (s *slowStartSession) Send(ctx context.Context, t provider.Turn) error {
	s.p.mu.Lock()
	s.p.seen = s.h.(*host).lastActivity()
	s.p.mu.Unlock()
	go s.h.Event(provider.TurnEnded{Result: "done"})
	return nil
}
func (s *slowStartSession) Interrupt(context.Context) error { return nil }
func (s *slowStartSession) Close() error                    { s.once.Do(func() { close(s.done) }); return nil }
func (s *slowStartSession) Done() <-chan struct{}           { return s.done }
func (s *slowStartSession) Err() error                      { return nil }
func (s *slowStartSession) ResumeID() string                { return "" }

// A CLI's start-up does not count as silence in its first turn: the stall
// clock starts when the turn is sent. Under load a Claude Code worker took
// longer to start than the stall timeout and was failed as stalled the
// moment its turn began.
func TestStallClockStartsWithTheTurn(t *testing.T) {
	p := &slowStartProvider{startTook: 300 * time.Millisecond}
	e, rec := newEngine(t, func(c *Config) { c.Provider = p; c.StallTimeout = time.Hour })
	e.Prompt("test", "/spawn work")
	rec.waitFor("t1 done", activity("task.updated", "t1 done"))
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.seen < p.started {
		t.Fatalf("the turn was sent with the last activity %d ms before Start returned: start-up counts as silence", p.started-p.seen)
	}
}
