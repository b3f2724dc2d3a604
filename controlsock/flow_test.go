package controlsock

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/internal/testwait"
	"github.com/agents-fleet/fleet/protocol"
)

// A producer that throttles delivers every frame to a client that reads
// slower than the producer writes, where unthrottled it would be evicted.
func TestThrottleKeepsSlowButHealthyClient(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxQueueBytes = 512 << 10; c.SoftQueueBytes = 64 << 10 })
	slow, _ := h.attach("slow")
	const n = 20000 // ~4 MB: eight times the hard bound
	var got atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for got.Load() < n {
			slow.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			f, err := slow.r.ReadFrame()
			if err != nil {
				return
			}
			if bytes.Contains(f, []byte(`"transcript"`)) {
				if got.Add(1)%2000 == 0 {
					time.Sleep(20 * time.Millisecond) // a reader slower than the producer
				}
			}
		}
	}()
	text := strings.Repeat("s", 180)
	for range n {
		h.srv.Throttle(t.Context())
		h.srv.Broadcast(&protocol.Transcript{Role: protocol.RoleTool, Text: text, Agent: "w1"})
	}
	<-done
	if got.Load() != n || h.srv.Stats().SlowQueue != 0 {
		t.Fatalf("got %d of %d, evictions %+v", got.Load(), n, h.srv.Stats())
	}
}

// A stalled client holds a throttling producer back for about StallGrace
// once, then is left to the byte bound; healthy clients get everything.
func TestThrottleIgnoresStalledClient(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.MaxQueueBytes = 1 << 20
		c.SoftQueueBytes = 64 << 10
		c.StallGrace = 100 * time.Millisecond
	})
	stalled, _ := h.attach("stalled")
	fast, _ := h.attach("fast")
	const n = 20000
	var got atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for got.Load() < n {
			fast.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			f, err := fast.r.ReadFrame()
			if err != nil {
				return
			}
			if bytes.Contains(f, []byte(`"transcript"`)) {
				got.Add(1)
			}
		}
	}()
	text := strings.Repeat("f", 180)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for range n {
		h.srv.Throttle(ctx)
		h.srv.Broadcast(&protocol.Transcript{Role: protocol.RoleTool, Text: text, Agent: "w1"})
	}
	elapsed := time.Since(start)
	<-done
	if got.Load() != n {
		t.Fatalf("healthy client got %d of %d", got.Load(), n)
	}
	st := h.srv.Stats()
	if st.SlowQueue != 1 || st.Stalls < 1 {
		t.Fatalf("stats %+v", st)
	}
	// Far below what waiting on the stalled client would take (forever);
	// a generous bound, not a performance assertion.
	if elapsed > 10*time.Second {
		t.Fatalf("producer held back %s by a stalled client", elapsed)
	}
	stalled.expectClosedAfterReading()
}

// A client's progress is seen every writeChunk bytes it takes, however
// much is queued for it: a backlog is not one write that completes only
// once the client has taken all of it. Before, a console steadily reading
// a few MB/s during a flood completed no write for the stall grace, was
// taken for stalled and evicted by the byte bound. Entries larger than a
// chunk (here 130 KiB batches) are cut across writes and arrive whole.
func TestProgressIsSeenPerChunkOfABacklog(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.MaxQueueBytes = 64 << 20
		c.SoftQueueBytes = 32 << 20
		c.SendBufferBytes = 16 << 10
	})
	slow, _ := h.attach("slow")
	var cl *client
	h.srv.mu.Lock()
	for c := range h.srv.clients {
		cl = c
	}
	h.srv.mu.Unlock()
	backlog := func() int {
		cl.mu.Lock()
		defer cl.mu.Unlock()
		return cl.queued + cl.writing
	}

	// 4 MiB queued while the client reads nothing.
	const batches, perBatch = 32, 128
	text := strings.Repeat("p", 1000)
	for b := range batches {
		ms := make([]protocol.Message, perBatch)
		for i := range ms {
			ms[i] = &protocol.Transcript{Role: protocol.RoleTool, Agent: "w1", Text: fmt.Sprintf("%d %s", b*perBatch+i, text)}
		}
		h.srv.BroadcastBatch(ms)
	}
	total := backlog() // what the writer could not hand to the kernel yet
	if total < 3<<20 {
		t.Fatalf("backlog %d bytes; want the 4 MiB still queued", total)
	}

	// The client takes 1 MiB of it, then stops.
	slow.conn.SetReadDeadline(time.Now().Add(time.Minute))
	next, took := 0, 0
	check := func(f []byte) {
		t.Helper()
		if !bytes.Contains(f, []byte(`"transcript"`)) {
			return
		}
		want := fmt.Sprintf(`"text":"%d `, next)
		if !bytes.Contains(f, []byte(want)) {
			t.Fatalf("frame %d: got %.80q", next, f)
		}
		next++
	}
	for took < 1<<20 {
		f, err := slow.r.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		took += len(f) + 1
		check(f)
	}
	// The fleet sees that progress: all but the socket buffer and one
	// chunk of what the client took is off its backlog.
	if !testwait.Until(testwait.Bound, func() bool { return backlog() <= total-(1<<20)+(256<<10) }) {
		t.Fatalf("the client took %d bytes of a %d-byte backlog; the fleet still counts %d bytes as unwritten", took, total, backlog())
	}
	for next < batches*perBatch {
		f, err := slow.r.ReadFrame()
		if err != nil {
			t.Fatalf("after %d frames: %v", next, err)
		}
		check(f)
	}
	if st := h.srv.Stats(); st.SlowQueue+st.SlowDeadline != 0 {
		t.Fatalf("evicted: %+v", st)
	}
}
