package journal

import (
	"context"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/store"
)

// countingPublisher takes batches like the control server and only counts.
type countingPublisher struct{ n atomic.Int64 }

func (p *countingPublisher) Broadcast(protocol.Message)           { p.n.Add(1) }
func (p *countingPublisher) BroadcastBatch(ms []protocol.Message) { p.n.Add(int64(len(ms))) }

// BenchmarkJournalTranscripts measures the journal's cost per task output
// line (queueing, batching, saving to the store's transcript log, handing
// the batch on), as in a burst: one op is one 200-byte line, from
// Broadcast to forwarded.
func BenchmarkJournalTranscripts(b *testing.B) {
	j, pub := benchJournal(b)
	text := strings.Repeat("x", 200)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		j.Throttle(context.Background())
		j.Broadcast(&protocol.Transcript{Role: protocol.RoleTool, Agent: "w1", Text: text, Ts: 1})
	}
	j.Sync(context.Background())
	b.StopTimer()
	if got := pub.n.Load(); got != int64(b.N) {
		b.Fatalf("%d forwarded, want %d", got, b.N)
	}
}

// BenchmarkJournalTranscriptBatches is the same as task output reaches the
// journal now: BroadcastBatch with the lines of one read (here 128, one
// engine group), one op still being one line.
func BenchmarkJournalTranscriptBatches(b *testing.B) {
	j, pub := benchJournal(b)
	text := strings.Repeat("x", 200)
	const group = 128
	b.ReportAllocs()
	b.ResetTimer()
	for sent := 0; sent < b.N; sent += group {
		n := min(group, b.N-sent)
		ts := make([]protocol.Transcript, n)
		ms := make([]protocol.Message, n)
		for i := range ts {
			ts[i] = protocol.Transcript{Role: protocol.RoleTool, Agent: "w1", Text: text, Ts: 1}
			ms[i] = &ts[i]
		}
		j.Throttle(context.Background())
		j.BroadcastBatch(ms)
	}
	j.Sync(context.Background())
	b.StopTimer()
	if got := pub.n.Load(); got != int64(b.N) {
		b.Fatalf("%d forwarded, want %d", got, b.N)
	}
}

// benchJournal is a journal on a fresh store, forwarding to a counter;
// both are closed when the benchmark ends.
func benchJournal(b *testing.B) (*Journal, *countingPublisher) {
	st, err := store.Open(filepath.Join(b.TempDir(), "fleet.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	if err := st.CreateSession(context.Background(), store.Session{ID: "s1", Name: "n", Cwd: "/", Mode: store.ModeLegacy}); err != nil {
		b.Fatal(err)
	}
	pub := &countingPublisher{}
	j := New(st, "s1", pub, nil)
	b.Cleanup(j.Close)
	return j, pub
}
