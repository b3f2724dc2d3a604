package controlsock

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/internal/testdir"
	"github.com/agents-fleet/fleet/protocol"
)

// BenchmarkFanout measures Broadcast → K attached clients over real Unix
// sockets (named pipes on Windows): each op is one ~200-byte transcript
// frame encoded once and delivered to every client. frames/s counts deliveries (one frame to 16
// clients counts 16), like the shared bench's loadgen.
func BenchmarkFanout(b *testing.B) {
	for _, k := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("clients=%d", k), func(b *testing.B) { benchFanout(b, k) })
	}
}

func benchFanout(b *testing.B, k int) {
	path := testdir.SocketPath(b)
	ln, err := Listen(path)
	if err != nil {
		b.Fatal(err)
	}
	// A queue bound large enough that a burst of b.N frames is never cut
	// short by eviction: this measures throughput, not the slow-consumer
	// policy.
	srv := New(Config{Token: testToken, Backend: &fakeBackend{}, MaxQueueBytes: 1 << 30})
	go srv.Serve(ln)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	}()

	text := strings.Repeat("x", 130)
	m := &protocol.Transcript{Role: protocol.RoleTool, Text: text, Agent: "w1", Ts: time.Now().UnixMilli()}
	frame, _ := protocol.Encode(m)

	conns := make([]net.Conn, k)
	for i := range conns {
		c, err := dialAndAttach(path, fmt.Sprint("b", i))
		if err != nil {
			b.Fatal(err)
		}
		conns[i] = c.conn
		defer c.conn.Close()
	}
	var wg sync.WaitGroup
	b.SetBytes(int64(len(frame) * k))
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			countFrames(c, b.N, []byte(`"transcript"`))
		}()
	}
	for range b.N {
		srv.Broadcast(m)
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N*k)/elapsed.Seconds(), "frames/s")
}

// countFrames reads until n frames containing marker have arrived. It scans
// raw bytes (newline-delimited) so the client costs as little as possible.
func countFrames(c net.Conn, n int, marker []byte) {
	buf := make([]byte, 256<<10)
	var carry []byte
	got := 0
	for got < n {
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		nr, err := c.Read(buf)
		data := buf[:nr]
		if len(carry) > 0 {
			data = append(carry, data...)
			carry = nil
		}
		for {
			i := bytes.IndexByte(data, '\n')
			if i < 0 {
				carry = append(carry[:0], data...)
				break
			}
			if bytes.Contains(data[:i], marker) {
				got++
			}
			data = data[i+1:]
		}
		if err != nil {
			if err != io.EOF {
				return
			}
			return
		}
	}
}

// BenchmarkAttachFullWindow measures connect + hello → replayEnd with a full
// replay window: 200 conversation entries, 64 agents × 200 transcript lines,
// 500 hub events, pending requests and every snapshot cached.
// "quiet": nothing happened since the last attach (the hydrate frame is
// cached); "busy": a line arrived in between, so hydrate is rebuilt.
func BenchmarkAttachFullWindow(b *testing.B) {
	b.Run("quiet", func(b *testing.B) { benchAttach(b, false) })
	b.Run("busy", func(b *testing.B) { benchAttach(b, true) })
}

func benchAttach(b *testing.B, busy bool) {
	path := testdir.SocketPath(b)
	ln, err := Listen(path)
	if err != nil {
		b.Fatal(err)
	}
	srv := New(Config{Token: testToken, Backend: &fakeBackend{}})
	go srv.Serve(ln)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	}()
	line := strings.Repeat("t", 100)
	for i := range 200 {
		srv.Broadcast(&protocol.UserMessage{Source: "op", Text: fmt.Sprint("prompt ", i)})
	}
	for a := range 64 {
		for i := range 200 {
			srv.Broadcast(&protocol.Transcript{Role: protocol.RoleTool, Text: line, Agent: fmt.Sprint("w", a), Ts: int64(i)})
		}
	}
	for i := range 500 {
		srv.Broadcast(&protocol.HubEvent{From: "w1", Kind: "task.updated", Ts: int64(i), Text: "t1 running"})
	}
	for i := range 10 {
		srv.Broadcast(&protocol.ConfirmRequest{ID: fmt.Sprint("c", i), Summary: "ok?"})
	}
	srv.Broadcast(&protocol.CommandCatalog{Commands: []protocol.CommandCatalogEntry{{Name: "/help", Description: "help", Kind: "builtin", Category: "general"}}})
	srv.Broadcast(&protocol.FleetState{Ts: 1})
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if busy {
			srv.Broadcast(&protocol.Transcript{Role: protocol.RoleTool, Text: line, Agent: "w0", Ts: int64(1000 + i)})
		}
		c, err := dialAndAttach(path, "bench")
		if err != nil {
			b.Fatal(err)
		}
		c.conn.Close()
	}
}
