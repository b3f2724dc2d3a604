package engine

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/provider"
	"github.com/agents-fleet/fleet/provider/local"
)

// confirmSink publishes nothing but hands confirm requests to the
// benchmark, so that the snapshot and output traffic of busy workers costs
// what it costs without a recorder growing.
type confirmSink struct{ confirms chan string }

func (s confirmSink) Broadcast(m protocol.Message) {
	if c, ok := m.(*protocol.ConfirmRequest); ok {
		s.confirms <- c.ID
	}
}
func (s confirmSink) BroadcastBatch([]protocol.Message) {}

// askingProvider's sessions ask permission over and over; each answer's
// arrival time goes to answered.
type askingProvider struct{ answered chan time.Time }

func (p *askingProvider) Name() string { return "asking" }
func (p *askingProvider) Start(ctx context.Context, spec provider.Spec, h provider.Host) (provider.Session, error) {
	s := &askingSession{p: p, h: h, done: make(chan struct{})}
	return s, nil
}

type askingSession struct {
	p    *askingProvider
	h    provider.Host
	once sync.Once
	done chan struct{}
	wg   sync.WaitGroup
}

func (s *askingSession) Send(ctx context.Context, t provider.Turn) error {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			_, err := s.h.Permission(context.Background(), provider.PermissionRequest{Tool: "Bash", Input: map[string]any{"command": "true"}})
			if err != nil {
				s.h.Event(provider.TurnEnded{Err: err})
				return
			}
			select {
			case s.p.answered <- time.Now():
			case <-s.done:
				s.h.Event(provider.TurnEnded{})
				return
			}
		}
	}()
	return nil
}
func (s *askingSession) Interrupt(context.Context) error {
	s.once.Do(func() { close(s.done) })
	return nil
}
func (s *askingSession) ResumeID() string { return "" }
func (s *askingSession) Close() error {
	s.once.Do(func() { close(s.done) })
	s.wg.Wait()
	return nil
}
func (s *askingSession) Done() <-chan struct{} { return s.done }
func (s *askingSession) Err() error            { return nil }

// BenchmarkPermissionRoundTrip: the operator's answer reaching the engine
// (what the control server calls on a confirmResponse) → the provider's
// Permission call returning with it (what the adapter then writes to the
// CLI in one write), while 8 local workers stream output. Reports p50 and
// p99 in µs.
func BenchmarkPermissionRoundTrip(b *testing.B) {
	sink := confirmSink{confirms: make(chan string, 16)}
	asking := &askingProvider{answered: make(chan time.Time, 1)}
	e := New(Config{
		SessionID: "bench", Cwd: b.TempDir(), Provider: &local.Provider{}, Publisher: sink, Workers: 16,
		Providers: map[string]provider.Provider{"asking": asking}, StatusInterval: 100 * time.Millisecond,
	})
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan struct{})
	go func() { defer close(runDone); e.Run(ctx) }()
	for range 8 {
		e.Prompt("bench", "$ while :; do seq 1 1000; done")
	}
	e.Prompt("bench", "/spawn --provider asking ask")
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		id := <-sink.confirms
		t0 := time.Now()
		if err := e.AnswerConfirm(id, true, "answered"); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, (<-asking.answered).Sub(t0))
	}
	b.StopTimer()
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		for range sink.confirms { // the last request, until Shutdown cancels it
		}
	}()
	sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer scancel()
	if err := e.Shutdown(sctx); err != nil {
		b.Fatal(err)
	}
	close(sink.confirms)
	<-drained
	cancel()
	<-runDone
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
