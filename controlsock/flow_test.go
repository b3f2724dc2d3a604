package controlsock

import (
	"bytes"
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

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
