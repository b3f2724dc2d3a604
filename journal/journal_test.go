package journal

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agents-fleet/fleet/history"
	"github.com/agents-fleet/fleet/internal/testwait"
	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// checkingPublisher asserts, for every transcript it is handed, that the
// line is already in the database: told implies stored.
type checkingPublisher struct {
	t       *testing.T
	st      *store.Store
	session string
	mu      sync.Mutex
	got     []protocol.Message
}

func (p *checkingPublisher) Broadcast(m protocol.Message) {
	if _, ok := m.(*protocol.Transcript); ok {
		n, err := p.st.TranscriptCount(context.Background(), p.session)
		p.mu.Lock()
		seen := 0
		for _, g := range p.got {
			if tr, ok := g.(*protocol.Transcript); ok && tr.Role == protocol.RoleTool {
				seen++
			}
		}
		p.mu.Unlock()
		if err != nil || n < int64(seen+1) {
			p.t.Errorf("transcript %d forwarded before it was saved (%d saved, err %v)", seen+1, n, err)
		}
	}
	p.mu.Lock()
	p.got = append(p.got, m)
	p.mu.Unlock()
}

func openStore(t *testing.T) *store.Store {
	st, err := store.Open(filepath.Join(t.TempDir(), "state", "fleet.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateSession(context.Background(), store.Session{ID: "s1", Name: "n", Cwd: "/", Mode: store.ModeLegacy}); err != nil {
		t.Fatal(err)
	}
	return st
}

func TestSaveThenForwardInOrder(t *testing.T) {
	st := openStore(t)
	defer st.Close()
	pub := &checkingPublisher{t: t, st: st, session: "s1"}
	j := New(st, "s1", pub, nil)
	j.Broadcast(&protocol.UserMessage{Source: "alice", Text: "$ make", RequestID: "r1"})
	j.SaveTask(history.Task{ID: "t1", Command: "make", Status: "running", Worker: "w1", Planned: true})
	j.SaveWorker(history.Worker{ID: "w1", TaskID: "t1", Status: "running", LastActivityAt: 42})
	j.SaveCounter("task", 1)
	const n = 5000
	for i := range n {
		j.Broadcast(&protocol.Transcript{Role: protocol.RoleTool, Text: "line", Agent: "w1", Ts: int64(i)})
	}
	j.Broadcast(&protocol.HubEvent{From: "w1", Kind: "completed", Ts: 7})
	j.Broadcast(&protocol.Status{Processing: false}) // forwarded, not saved
	j.Close()
	j.Broadcast(&protocol.Reply{Text: "after close"}) // dropped

	if len(pub.got) != n+3 {
		t.Fatalf("forwarded %d, want %d", len(pub.got), n+3)
	}
	if pub.got[0].MessageType() != protocol.TypeUserMessage || pub.got[n+1].MessageType() != protocol.TypeHubEvent {
		t.Fatal("order changed")
	}
	for i := 1; i <= n; i++ {
		if tr := pub.got[i].(*protocol.Transcript); tr.Ts != int64(i-1) {
			t.Fatalf("transcript %d out of order", i)
		}
	}
	l, err := st.Load(context.Background(), "s1", store.Limits{Conversation: 10, TranscriptPerAgent: 10, TranscriptAgents: 4, Hub: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Conversation) != 1 || l.Conversation[0].RequestID != "r1" || l.Conversation[0].Source != "alice" ||
		len(l.Hub) != 1 || len(l.Transcripts["w1"]) != 10 || l.Counters["task"] != 1 ||
		len(l.Tasks) != 1 || !l.Tasks[0].Planned || len(l.Workers) != 1 || l.Workers[0].LastActivityAt != 42 {
		t.Fatalf("loaded %+v", l)
	}
	if c, _ := st.TranscriptCount(context.Background(), "s1"); c != n {
		t.Fatalf("saved %d lines", c)
	}
}

func TestStoreFailureKeepsTellingAndSaysSo(t *testing.T) {
	st := openStore(t)
	pub := &recorder{}
	j := New(st, "s1", pub, nil)
	st.Close() // every Append fails from now on
	j.Broadcast(&protocol.Reply{Text: "one"})
	j.Broadcast(&protocol.Reply{Text: "two"})
	j.Close()
	var texts []string
	for _, m := range pub.got {
		switch m := m.(type) {
		case *protocol.Reply:
			texts = append(texts, m.Text)
		case *protocol.Transcript:
			texts = append(texts, "note")
		}
	}
	// One note, however many batches fail, and nothing is withheld.
	if strings.Join(texts, ",") != "note,one,two" {
		t.Fatalf("forwarded %v", texts)
	}
}

type recorder struct{ got []protocol.Message }

func (r *recorder) Broadcast(m protocol.Message) { r.got = append(r.got, m) }

// recordingPublisher keeps what it is handed, in order.
type recordingPublisher struct {
	mu  sync.Mutex
	got []protocol.Message
}

func (p *recordingPublisher) Broadcast(m protocol.Message) {
	p.mu.Lock()
	p.got = append(p.got, m)
	p.mu.Unlock()
}

// TestSaveFailureSaidOnceBeforeItsEvents: when the store refuses a batch,
// clients still get the events, preceded once by a system line saying the
// session is not being saved (not once per batch, and not after events
// that were not saved).
func TestSaveFailureSaidOnceBeforeItsEvents(t *testing.T) {
	st := openStore(t)
	pub := &recordingPublisher{}
	j := New(st, "s1", pub, nil)
	j.Broadcast(&protocol.Transcript{Role: protocol.RoleTool, Agent: "w1", Text: "saved", Ts: 1})
	j.Close()
	if err := st.Close(); err != nil { // every Append from now on fails
		t.Fatal(err)
	}
	j = New(st, "s1", pub, nil)
	for i := range 3 {
		j.Broadcast(&protocol.Transcript{Role: protocol.RoleTool, Agent: "w1", Text: "unsaved " + string(rune('a'+i)), Ts: 2})
		// One batch each: wait until this one was forwarded.
		testwait.For(t, testwait.Bound, fmt.Sprintf("batch %d forwarded", i+1), func() bool {
			pub.mu.Lock()
			defer pub.mu.Unlock()
			return len(pub.got) >= 3+i
		})
	}
	j.Close()
	var texts []string
	for _, m := range pub.got {
		texts = append(texts, m.(*protocol.Transcript).Text)
	}
	if len(texts) != 5 || texts[0] != "saved" || !strings.HasPrefix(texts[1], "The session is not being saved: ") ||
		texts[2] != "unsaved a" || texts[4] != "unsaved c" {
		t.Fatalf("forwarded %q", texts)
	}
}

// TestSyncWaitsForEarlierEvents: Sync returns only after everything sent
// before it was saved and forwarded; on a closed journal it returns at once.
func TestSyncWaitsForEarlierEvents(t *testing.T) {
	st := openStore(t)
	defer st.Close()
	pub := &recordingPublisher{}
	j := New(st, "s1", pub, nil)
	for i := range 500 {
		j.Broadcast(&protocol.Transcript{Role: protocol.RoleTool, Agent: "w1", Text: fmt.Sprint("l", i), Ts: 1})
	}
	j.Sync(context.Background())
	pub.mu.Lock()
	n := len(pub.got)
	pub.mu.Unlock()
	if n != 500 {
		t.Fatalf("%d events forwarded when Sync returned, want 500", n)
	}
	if c, _ := st.TranscriptCount(context.Background(), "s1"); c != 500 {
		t.Fatalf("%d saved when Sync returned", c)
	}
	j.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	j.Sync(ctx)
	if ctx.Err() != nil {
		t.Fatal("Sync on a closed journal waited for its context")
	}
}

// TestBroadcastBatchKeepsOrderAndBounds sends runs of lines with
// BroadcastBatch (more than fill a batch), interleaved with single events:
// every event is saved before it is told, in the order sent, no batch
// goes past MaxBatch events, and the queue's byte account returns to 0.
func TestBroadcastBatchKeepsOrderAndBounds(t *testing.T) {
	st := openStore(t)
	defer st.Close()
	pub := &batchCheckingPublisher{checkingPublisher: checkingPublisher{t: t, st: st, session: "s1"}}
	j := New(st, "s1", pub, nil)
	var want []string
	ts := int64(0)
	group := func(n int) {
		ms := make([]protocol.Message, n)
		for i := range ms {
			ts++
			text := fmt.Sprint("g", ts)
			ms[i] = &protocol.Transcript{Role: protocol.RoleTool, Text: text, Agent: "w1", Ts: ts}
			want = append(want, text)
		}
		j.BroadcastBatch(ms)
	}
	for round := range 8 {
		group(1 + round*37%300)
		j.Broadcast(&protocol.HubEvent{From: "w1", Kind: "note", Ts: int64(round), Text: fmt.Sprint("hub", round)})
		want = append(want, fmt.Sprint("hub", round))
		group(MaxBatch + 5)
	}
	j.Close()
	var got []string
	for _, m := range pub.got {
		switch m := m.(type) {
		case *protocol.Transcript:
			got = append(got, m.Text)
		case *protocol.HubEvent:
			got = append(got, m.Text)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("forwarded %d events, want %d; first difference at %d", len(got), len(want), firstDiff(got, want))
	}
	if c, _ := st.TranscriptCount(context.Background(), "s1"); c != ts {
		t.Fatalf("saved %d lines, want %d", c, ts)
	}
	if j.queued.Load() != 0 {
		t.Fatalf("%d bytes still counted as queued", j.queued.Load())
	}
	if pub.largest > MaxBatch || pub.largest < 2 {
		t.Fatalf("largest batch forwarded: %d events", pub.largest)
	}
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// batchCheckingPublisher takes batches, like the control server, and
// checks each event as checkingPublisher does.
type batchCheckingPublisher struct {
	checkingPublisher
	largest int
}

func (p *batchCheckingPublisher) BroadcastBatch(ms []protocol.Message) {
	p.largest = max(p.largest, len(ms))
	for _, m := range ms {
		p.Broadcast(m)
	}
}

// TestSavedIsWhatHistoryRecords: the journal saves what history.RecordOf
// makes a record of, and coalesces and keeps by protocol.ClassOf; the two
// must agree on which frames are the session's history.
func TestSavedIsWhatHistoryRecords(t *testing.T) {
	for _, typ := range protocol.Types() {
		m := protocol.New(typ)
		_, saved := history.RecordOf(m)
		if c := protocol.ClassOf(m); saved != c.Saved() {
			t.Errorf("%s: history.RecordOf keeps it: %v; its class (%d) says saved: %v", typ, saved, c, c.Saved())
		}
	}
}
