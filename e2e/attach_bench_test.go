package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/e2e/e2etest"
	"github.com/agents-fleet/fleet/registry"
	"github.com/agents-fleet/fleet/store"
)

// BenchmarkAttachWithHistory measures attach → replayEnd on a real
// `fleet run --resume` of sessions with 1k, 100k and 1M stored transcript
// lines (spread over 64 agents, so from 12,800 lines on the replay window
// is full: 64 agents × 200 lines, trimmed to its byte bound), plus 200
// conversation entries and 500 hub events. One op is one console: dial,
// hello, read through replayEnd, close. It reports the ops' p50, p99 and
// max (ms), and (raw) the bytes a console read. Two clients: "raw" reads the
// bytes into one reused buffer and only looks for replayEnd (the fleet's
// own time, with as little client as possible); "frames" reads frame by
// frame with protocol.Reader, as the Go client (and so every console of
// this repository) does.
//
//	go test ./e2e -run '^$' -bench AttachWithHistory -benchtime 2000x
//
// The history is written with the store before the fleet starts (saving a
// million lines through a task would take most of the run), as a fleet
// would have saved it.
func BenchmarkAttachWithHistory(b *testing.B) {
	for _, n := range []int{1_000, 100_000, 1_000_000} {
		e := e2etest.NewEnv(b)
		id := seedHistory(b, e, n)
		d := e.Start("--control-socket", "--resume", id)
		token, err := registry.ReadToken(d.Desc.TokenPath)
		if err != nil {
			b.Fatal(err)
		}
		raw := make([]byte, 2<<20)
		clients := []struct {
			name   string
			attach func(path, token string) (int64, error)
		}{
			{"raw", func(path, token string) (int64, error) { return attachRaw(path, token, raw) }},
			{"frames", func(path, token string) (int64, error) {
				c, _, err := rawAttach(path, token, "bench")
				if err != nil {
					return 0, err
				}
				return 0, c.Close() // raw reports the bytes
			}},
		}
		for _, c := range clients {
			b.Run(fmt.Sprintf("lines=%d/%s", n, c.name), func(b *testing.B) {
				took := make([]time.Duration, 0, b.N)
				var read int64
				for range b.N {
					start := time.Now()
					n, err := c.attach(d.Desc.SocketPath, token)
					if err != nil {
						b.Fatal(err)
					}
					took = append(took, time.Since(start))
					read = n
				}
				slices.Sort(took)
				ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
				b.ReportMetric(ms(took[len(took)/2]), "p50-ms")
				b.ReportMetric(ms(took[min(len(took)-1, len(took)*99/100)]), "p99-ms")
				b.ReportMetric(ms(took[len(took)-1]), "max-ms")
				if read > 0 {
					b.ReportMetric(float64(read), "bytes/attach")
				}
			})
		}
		d.Stop()
	}
}

// attachRaw reads into buf until the stream ends with the replayEnd frame
// (nothing follows it on a quiet fleet) and returns the bytes read.
func attachRaw(path, token string, buf []byte) (int64, error) {
	c, err := hello(path, token, "bench")
	if err != nil {
		return 0, err
	}
	defer c.Close()
	end := []byte(`{"type":"replayEnd"}` + "\n")
	have := 0
	for !bytes.HasSuffix(buf[:have], end) {
		if have == len(buf) {
			return int64(have), fmt.Errorf("no replayEnd in the first %d bytes", have)
		}
		n, err := c.Read(buf[have:])
		if err != nil {
			return int64(have), err
		}
		have += n
	}
	return int64(have), nil
}

// seedHistory saves a session with n transcript lines over 64 agents, 200
// conversation entries and 500 hub events in e's fleet home, and returns
// its id.
func seedHistory(b *testing.B, e *e2etest.Env, n int) string {
	b.Helper()
	dir := filepath.Join(e.Home, "state")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		b.Fatal(err)
	}
	st, err := store.Open(filepath.Join(dir, "fleet.db"))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	id := fmt.Sprintf("%016x", n)
	now := time.Now().UnixMilli()
	if err := st.CreateSession(ctx, store.Session{ID: id, Name: "history", Cwd: e.Dir, Provider: "local",
		Model: "local", Mode: store.ModeLegacy, StartedAt: now, LastActive: now}); err != nil {
		b.Fatal(err)
	}
	var recs []store.Record
	flush := func() {
		if err := st.Append(ctx, id, recs); err != nil {
			b.Fatal(err)
		}
		recs = recs[:0]
	}
	for i := range 200 {
		recs = append(recs, store.Record{Conversation: &store.ConversationEntry{Role: "user", Source: "op",
			Text: fmt.Sprint("prompt ", i), Ts: now}})
	}
	flush()
	pad := strings.Repeat("x", 90)
	for i := range n {
		recs = append(recs, store.Record{Transcript: &store.TranscriptLine{Agent: fmt.Sprint("w", 1+i%64),
			Role: "tool", Text: fmt.Sprintf("line %d %s", i, pad), Ts: now}})
		if len(recs) == 1000 {
			flush()
		}
	}
	flush()
	for i := range 500 {
		recs = append(recs, store.Record{Hub: &store.HubEvent{From: "w1", Kind: "task.updated", Text: fmt.Sprint("t", i), Ts: now}})
	}
	flush()
	if err := st.Close(); err != nil {
		b.Fatal(err)
	}
	return id
}
