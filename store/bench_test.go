package store

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// transcriptBatch returns size transcript lines of about 100 bytes from 4
// agents, in runs of 16 lines per agent as a busy fleet would write them.
func transcriptBatch(size int) []Record {
	recs := make([]Record, size)
	pad := strings.Repeat("x", 80)
	for i := range recs {
		recs[i] = Record{Transcript: &TranscriptLine{Agent: fmt.Sprint("w", i/16%4), Role: "tool", Stream: "stdout",
			Text: fmt.Sprintf("line %06d %s", i, pad), Ts: time.Now().UnixMilli()}}
	}
	return recs
}

// storeModes are the two ways Append saves transcript lines: to the
// session's transcript log (the Store that serves a session), or straight
// to SQLite (another Store holds the log).
var storeModes = []struct {
	name string
	open func(testing.TB, string) *Store
}{{"log", openT}, {"direct", openDirectT}}

// BenchmarkAppendTranscript measures Append of transcript lines (the hot
// path: task output) at four batch sizes, one op being one batch. With the
// log the lines are moved into SQLite when the writes pause, outside the
// timing (BenchmarkIngest measures that).
func BenchmarkAppendTranscript(b *testing.B) {
	for _, mode := range storeModes {
		for _, size := range []int{1, 64, 256, 1024} {
			b.Run(fmt.Sprint(mode.name, "/batch=", size), func(b *testing.B) {
				s := mode.open(b, filepath.Join(b.TempDir(), "fleet.db"))
				createT(b, s, newSession("bench", 1))
				recs := transcriptBatch(size)
				ctx := b.Context()
				b.ResetTimer()
				for b.Loop() {
					if err := s.Append(ctx, "bench", recs); err != nil {
						b.Fatal(err)
					}
				}
				perRecord := float64(b.Elapsed().Nanoseconds()) / float64(b.N*size)
				b.ReportMetric(perRecord, "ns/record")
				b.ReportMetric(1e9/perRecord, "records/s")
			})
		}
	}
}

// BenchmarkIngest measures moving a transcript log into SQLite: a burst of
// 200,000 lines of 200 bytes in batches of 64 (about what the fleet's
// journal makes of `loadgen emit 200000 200`), then one flush. One op is
// the flush of the whole burst.
func BenchmarkIngest(b *testing.B) {
	s := openT(b, filepath.Join(b.TempDir(), "fleet.db"))
	createT(b, s, newSession("bench", 1))
	recs := transcriptBatch(64)
	pad := strings.Repeat("y", 100)
	for i := range recs {
		recs[i].Transcript.Text += pad
	}
	ctx := b.Context()
	l, err := s.logFor(ctx, "bench")
	if err != nil || l == nil {
		b.Fatalf("no transcript log: %v", err)
	}
	const lines = 200_000
	for b.Loop() {
		b.StopTimer()
		for range lines / len(recs) {
			if err := s.Append(ctx, "bench", recs); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		if err := s.flush(ctx, l); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*lines), "ns/line")
}

// BenchmarkLoad measures Load with default limits on a session holding 1k,
// 100k and 1M transcript lines (100 agents), a tenth as many conversation
// entries and hub events, and 100 tasks and workers. Its time must not grow
// with the history.
func BenchmarkLoad(b *testing.B) {
	dir := b.TempDir()
	for _, n := range []int{1_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprint("lines=", n), func(b *testing.B) {
			// The fixture is built on the first call only (the benchmark
			// function runs again for every b.N it tries).
			path := filepath.Join(dir, fmt.Sprint(n, ".db"))
			s, err := Open(path)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			if c, _ := s.TranscriptCount(b.Context(), "bench"); c != int64(n) {
				buildLoadFixture(b, s, n)
			}
			// Move the fixture's transcript log into SQLite first: that
			// is the resume's one-off cost (BenchmarkIngest), not Load's.
			if _, err := s.TranscriptCount(b.Context(), "bench"); err != nil {
				b.Fatal(err)
			}
			ctx := b.Context()
			var rows int
			b.ResetTimer()
			for b.Loop() {
				l, err := s.Load(ctx, "bench", Limits{})
				if err != nil {
					b.Fatal(err)
				}
				rows = len(l.Conversation) + len(l.Hub) + len(l.Tasks) + len(l.Workers)
				for _, lines := range l.Transcripts {
					rows += len(lines)
				}
			}
			b.ReportMetric(float64(rows), "rows/op")
		})
	}
}

func buildLoadFixture(b *testing.B, s *Store, n int) {
	b.Helper()
	start := time.Now()
	ctx := b.Context()
	if err := s.CreateSession(ctx, newSession("bench", 1)); err != nil {
		b.Fatal(err)
	}
	pad := strings.Repeat("x", 80)
	recs := make([]Record, 0, 1100)
	flush := func() {
		if err := s.Append(ctx, "bench", recs); err != nil {
			b.Fatal(err)
		}
		recs = recs[:0]
	}
	for i := range n {
		recs = append(recs, line(fmt.Sprint("w", i/32%100), fmt.Sprintf("line %07d %s", i, pad), int64(i)))
		if i%10 == 0 {
			recs = append(recs, Record{Conversation: &ConversationEntry{Role: "assistant", Text: fmt.Sprint("reply ", i), Ts: int64(i)}},
				Record{Hub: &HubEvent{From: "coordinator", Kind: "message", Text: fmt.Sprint("hub ", i), Ts: int64(i)}})
		}
		if i%(n/100) == 0 {
			id := fmt.Sprint("t", i/(n/100))
			recs = append(recs, Record{Task: &Task{ID: id, Command: "$ make", Status: "done"}},
				Record{Worker: &Worker{ID: "w" + id, TaskID: id, Status: "completed"}})
		}
		if len(recs) >= 1024 {
			flush()
		}
	}
	flush()
	b.Logf("fixture: %d transcript lines in %v", n, time.Since(start).Round(time.Millisecond))
}

// BenchmarkAppendLatency measures the latency of single-record Appends (a
// quiet fleet: one transcript line per batch) and reports its p50, p99 and
// max, where a WAL checkpoint or an ingest paid by an Append would show.
func BenchmarkAppendLatency(b *testing.B) {
	for _, mode := range storeModes {
		b.Run(mode.name, func(b *testing.B) {
			s := mode.open(b, filepath.Join(b.TempDir(), "fleet.db"))
			createT(b, s, newSession("bench", 1))
			recs := transcriptBatch(1)
			ctx := b.Context()
			lat := make([]time.Duration, 0, 1<<16)
			b.ResetTimer()
			for b.Loop() {
				t0 := time.Now()
				if err := s.Append(ctx, "bench", recs); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			slices.Sort(lat)
			q := func(p float64) float64 { return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) }
			b.ReportMetric(q(0.50), "p50-µs")
			b.ReportMetric(q(0.99), "p99-µs")
			b.ReportMetric(q(0.999), "p99.9-µs")
			b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "max-µs")
			b.Logf("n=%d: %d checkpoints, %d catch-up passes under the write lock (longest %v), WAL up to %d frames; %d ingests",
				len(lat), s.ck.runs.Load(), s.ck.locked.Load(), time.Duration(s.ck.lockedMax.Load()), s.ck.maxLog.Load(), s.ing.runs.Load())
		})
	}
}
