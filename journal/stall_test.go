package journal

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/history"
	"github.com/agents-fleet/fleet/internal/testwait"
	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/store"
)

// TestStalledStoreNeverBlocks: while another connection holds the
// database's write lock, 10,000 single events and state rows from one
// goroutine all return at once, and the queue stays within its bound:
// transcript lines past it are dropped, rows coalesce per id, snapshots per
// type, other events are kept up to the hard bound and requests always.
// Nothing is forwarded while the first batch waits to be saved. Once the
// lock is released, what was kept is saved and forwarded in the order it
// was sent, the latest row of each task is what the store holds (at its
// creation position), and one system line says how many lines were
// dropped.
func TestStalledStoreNeverBlocks(t *testing.T) {
	st := openStore(t)
	defer st.Close()
	pub := &waitingPublisher{}
	lim := limits{queueLen: 256, overLen: 1024, overBytes: 1 << 20, hardLen: 1536, hardBytes: 4 << 20}
	j := New(st, "s1", pub, nil, withLimits(lim))
	defer j.Close()

	release := stallStore(t, st)
	const calls, tasks = 10000, 50
	var (
		sent       []string // every event sent, by key, in order
		lastStatus string
		latest     = map[string]string{} // task id → status of its last row
		requests   int
		maxCall    time.Duration
	)
	start := time.Now()
	for i := range calls {
		at := time.Now()
		switch k := fmt.Sprint(i); {
		case i%10 == 0:
			id := fmt.Sprint("t", i/10%tasks)
			latest[id] = "s" + k
			j.SaveTask(history.Task{ID: id, Command: "$ make", Status: "s" + k, CreatedAt: int64(i)})
		case i%10 == 1:
			j.SaveCounter("task", int64(i))
		case i%10 == 2:
			j.Broadcast(&protocol.HubEvent{From: "w1", Kind: "note", Text: "h" + k, Ts: int64(i)})
			sent = append(sent, "h"+k)
		case i%10 == 3:
			j.Broadcast(&protocol.Status{Processing: true, Model: "m" + k})
			sent, lastStatus = append(sent, "m"+k), "m"+k
		case i%100 == 4:
			j.Broadcast(&protocol.ConfirmRequest{ID: "c" + k, Summary: "ok?", Ts: int64(i)})
			sent, requests = append(sent, "c"+k), requests+1
		default:
			j.Broadcast(&protocol.Transcript{Role: protocol.RoleTool, Agent: "w1", Text: "l" + k, Ts: int64(i)})
			sent = append(sent, "l"+k)
		}
		maxCall = max(maxCall, time.Since(at))
	}
	total := time.Since(start)
	t.Logf("%d calls in %v, slowest %v", calls, total, maxCall)
	if total > 2*time.Second {
		t.Fatalf("%d calls took %v while saving was stalled (slowest %v): the hand-off blocks", calls, total, maxCall)
	}

	// Still stalled: the first batch (it has a task row) cannot commit,
	// and nothing may overtake it.
	j.mu.Lock()
	live, qBytes, over := j.live, j.qBytes, j.over != nil
	j.mu.Unlock()
	if n := len(pub.messages()); n != 0 {
		t.Fatalf("%d events forwarded while their batch could not be saved", n)
	}
	if !over {
		t.Fatal("the queue is past its bound but the journal is not overloaded")
	}
	// Past the hard bound only rows (one per id) and requests are added.
	if bound := lim.hardLen + MaxBatch + tasks + 1 + requests; live > bound {
		t.Fatalf("%d events queued, bound %d", live, bound)
	}
	if qBytes > lim.hardBytes+(tasks+1+requests)*256 {
		t.Fatalf("%d bytes queued, bound %d", qBytes, lim.hardBytes)
	}

	release()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	j.Sync(ctx)
	if ctx.Err() != nil {
		t.Fatal("the journal did not catch up within 30 s of the lock's release")
	}
	got := pub.messages()
	if notSavedNotice(got) {
		t.Fatal("saving failed: the stall outlasted the store's busy timeout (a very slow machine?)")
	}

	// Forwarded: a subsequence of what was sent, in order, with every
	// request and the last snapshot, and the notice once.
	var fwd []string
	var notices []string
	lines, hubs := 0, 0
	for _, m := range got {
		switch m := m.(type) {
		case *protocol.Transcript:
			if m.Role == protocol.RoleSystem {
				notices = append(notices, m.Text)
				continue
			}
			fwd = append(fwd, m.Text)
			lines++
		case *protocol.HubEvent:
			fwd = append(fwd, m.Text)
			hubs++
		case *protocol.Status:
			fwd = append(fwd, m.Model)
		case *protocol.ConfirmRequest:
			fwd = append(fwd, m.ID)
		default:
			t.Fatalf("forwarded a %T", m)
		}
	}
	if !isSubsequence(fwd, sent) {
		t.Fatal("forwarded events are not in the order they were sent")
	}
	if n := countPrefix(fwd, "c"); n != requests {
		t.Errorf("%d of %d requests forwarded", n, requests)
	}
	if !slices.Contains(fwd, lastStatus) {
		t.Errorf("the last status snapshot %s was not forwarded", lastStatus)
	}
	if countPrefix(fwd, "m") >= countPrefix(sent, "m") {
		t.Error("no status snapshot was coalesced")
	}
	droppedLines := countPrefix(sent, "l") - lines
	t.Logf("forwarded %d of %d lines, %d of %d hub events, %d of %d snapshots; notice %q", lines, countPrefix(sent, "l"),
		hubs, countPrefix(sent, "h"), countPrefix(fwd, "m"), countPrefix(sent, "m"), notices)
	if droppedLines == 0 {
		t.Fatal("no transcript line was dropped past the bound")
	}
	// One notice per overload: usually one, two when run was slow to take
	// its first batch (the queue passed the bound, drained into that
	// batch, and passed it again).
	saidLines, saidEvents := 0, 0
	for _, n := range notices {
		var d string
		var bound, mib, k int
		if _, err := fmt.Sscanf(n, "Saving the session fell behind for %s (more than %d events or %d MiB waited to be saved): %d transcript lines were dropped",
			&d, &bound, &mib, &k); err != nil {
			t.Fatalf("notice %q: %v", n, err)
		}
		saidLines += k
		if _, after, ok := strings.Cut(n, "neither saved nor shown, and "); ok {
			if _, err := fmt.Sscanf(after, "%d other events", &k); err != nil {
				t.Fatalf("notice %q: %v", n, err)
			}
			saidEvents += k
		}
	}
	if len(notices) == 0 || len(notices) > 2 || saidLines != droppedLines {
		t.Fatalf("notices %q, want one (or two) saying %d lines were dropped in all", notices, droppedLines)
	}
	if droppedHubs := countPrefix(sent, "h") - hubs; saidEvents != droppedHubs {
		t.Errorf("notices %q count %d dropped events, want %d", notices, saidEvents, droppedHubs)
	}

	// Saved: what was forwarded (and only that), rows at their latest.
	l, err := st.Load(context.Background(), "s1", store.Limits{TranscriptPerAgent: calls, TranscriptAgents: 4, Hub: calls})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Hub) != hubs || len(l.Transcripts["w1"]) != lines || len(l.Transcripts[""]) != len(notices) {
		t.Errorf("saved %d hub events and %d+%d lines; forwarded %d and %d+%d", len(l.Hub), len(l.Transcripts["w1"]),
			len(l.Transcripts[""]), hubs, lines, len(notices))
	}
	if len(l.Tasks) != tasks {
		t.Fatalf("%d tasks saved, want %d", len(l.Tasks), tasks)
	}
	for i, tk := range l.Tasks {
		if id := fmt.Sprint("t", i); tk.ID != id || tk.Status != latest[id] {
			t.Errorf("task %d saved as %s %s, want %s %s", i, tk.ID, tk.Status, id, latest[id])
		}
	}
	if l.Counters["task"] != calls-9 {
		t.Errorf("counter task = %d, want %d", l.Counters["task"], calls-9)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.live != 0 || j.qBytes != 0 || j.over != nil || j.queued.Load() != 0 {
		t.Errorf("after catching up: %d queued, %d bytes, overloaded %v, account %d", j.live, j.qBytes, j.over != nil, j.queued.Load())
	}
}

// TestStalledStoreBatchWaits: BroadcastBatch (task output) waits for room
// while saving is stalled, without holding up single events, and its lines
// are never dropped.
func TestStalledStoreBatchWaits(t *testing.T) {
	st := openStore(t)
	defer st.Close()
	pub := &waitingPublisher{}
	lim := limits{queueLen: 64, overLen: 256, overBytes: 1 << 20, hardLen: 1024, hardBytes: 4 << 20}
	j := New(st, "s1", pub, nil, withLimits(lim))
	defer j.Close()

	release := stallStore(t, st)
	j.SaveTask(history.Task{ID: "t1", Status: "running"}) // the batch that stalls
	batches := make(chan int, 1)
	go func() {
		n := 0
		for g := range 10 {
			ms := make([]protocol.Message, 32)
			for i := range ms {
				ms[i] = &protocol.Transcript{Role: protocol.RoleTool, Agent: "w1", Text: fmt.Sprint("g", g, ".", i)}
			}
			j.BroadcastBatch(ms)
			n++
		}
		batches <- n
	}()
	// The producer fills the queue to QueueLen and waits there.
	testwait.For(t, testwait.Bound, "the batch producer to reach the queue bound", func() bool {
		j.mu.Lock()
		defer j.mu.Unlock()
		return j.live+32 > lim.queueLen
	})
	select {
	case n := <-batches:
		t.Fatalf("all %d batches queued while saving was stalled", n)
	default:
	}
	start := time.Now()
	for i := range 1000 {
		j.Broadcast(&protocol.HubEvent{From: "w1", Kind: "note", Text: fmt.Sprint("h", i)})
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("single events took %v behind a waiting batch", d)
	}
	release()
	select {
	case <-batches:
	case <-time.After(30 * time.Second):
		t.Fatal("the batch producer was not let go after the stall")
	}
	j.Sync(context.Background())
	lines := 0
	for _, m := range pub.messages() {
		if tr, ok := m.(*protocol.Transcript); ok && tr.Role == protocol.RoleTool {
			lines++
		}
	}
	if lines != 320 {
		t.Fatalf("%d of 320 batch lines forwarded", lines)
	}
}
