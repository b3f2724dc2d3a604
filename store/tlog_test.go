//go:build unix

package store

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/internal/testwait"
)

// logFiles lists the generation files in the store's transcript log
// directory (lock files left out).
func logFiles(t *testing.T, s *Store) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(tlogDir(s.path), "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestLogMovedWhenOutputPauses: lines appended through the log reach
// transcript_chunks by themselves once appends pause, without a read
// asking for them, and the moved generations are deleted.
func TestLogMovedWhenOutputPauses(t *testing.T) {
	s := openT(t, filepath.Join(t.TempDir(), "fleet.db"))
	createT(t, s, newSession("s1", 1))
	for i := range 50 {
		appendT(t, s, "s1", line(fmt.Sprint("w", i%3), fmt.Sprint("line ", i), int64(i)))
	}
	if got := logFiles(t, s); len(got) != 1 {
		t.Fatalf("log files %v, want the one generation being written", got)
	}
	if !testwait.Until(testwait.Bound, func() bool {
		return querySQL(t, s.r, `SELECT coalesce(sum(lines), 0) FROM transcript_agents`) == 50
	}) {
		t.Fatalf("lines not moved into SQLite within %v after the writes paused (%d ingests)", testwait.Bound, s.ing.runs.Load())
	}
	// Three agents, one chunk each: the 50 batches became one transaction.
	if c := querySQL(t, s.r, `SELECT count(*) FROM transcript_chunks`); c != 3 {
		t.Errorf("%d chunks, want 3", c)
	}
	got := agentLines(t, s, "s1", 100)
	if len(got["w0"]) != 17 || got["w0"][16].Text != "line 48" || len(got["w2"]) != 16 {
		t.Errorf("lines after the move: %v", got)
	}
	if s.ing.fails.Load() != 0 {
		t.Errorf("ingest failed: %v", *s.ing.lastErr.Load())
	}
}

// TestLogModesAndCleanClose: the log directory is 0700 and its files 0600;
// Close moves everything and deletes the generation files, and a reopened
// store has every line, in order.
func TestLogModesAndCleanClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fleet.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	createT(t, s, newSession("s1", 1))
	var want []string
	for i := range 300 {
		want = append(want, fmt.Sprint("line ", i))
		appendT(t, s, "s1", line("w", want[i], int64(i)))
	}
	if fi, err := os.Stat(tlogDir(path)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("log directory: %v, %v; want 0700", fi.Mode(), err)
	}
	files, _ := filepath.Glob(filepath.Join(tlogDir(path), "*"))
	for _, f := range files {
		if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, %v; want 0600", f, fi.Mode(), err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(tlogDir(path), "*")); len(left) != 0 {
		t.Errorf("Close left %v (no generation, no lock file)", left)
	}
	s = openT(t, path)
	var got []string
	for _, l := range agentLines(t, s, "s1", 1000)["w"] {
		got = append(got, l.Text)
	}
	if !slices.Equal(got, want) {
		t.Errorf("after reopen: %d lines, want %d", len(got), len(want))
	}
}

// TestLogOwnedByOneStore: a second Store on the same database does not
// touch a session's log while the first holds it, and saves its own lines
// straight to SQLite; the first Store's lines are there once it closes.
func TestLogOwnedByOneStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fleet.db")
	a := openT(t, path)
	createT(t, a, newSession("s1", 1))
	appendT(t, a, "s1", line("a", "from a", 1))
	b := openT(t, path)
	appendT(t, b, "s1", line("b", "from b", 2))
	if l, err := b.logFor(t.Context(), "s1"); err != nil || l != nil {
		t.Fatalf("second store got log %v, %v; want none", l, err)
	}
	if n := querySQL(t, b.r, `SELECT count(*) FROM transcript_chunks`); n != 1 {
		t.Errorf("%d chunks in SQLite, want b's line only (a's is in a's log)", n)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	// b takes the log over once it is free (it tries again after
	// tlogRetry), moving a's lines first.
	defer func(d time.Duration) { tlogRetry = d }(tlogRetry)
	tlogRetry = 0
	appendT(t, b, "s1", line("b", "b again", 3))
	if l, err := b.logFor(t.Context(), "s1"); err != nil || l == nil {
		t.Errorf("second store did not take the free log: %v, %v", l, err)
	}
	got := agentLines(t, b, "s1", 10)
	if len(got["a"]) != 1 || len(got["b"]) != 2 || got["b"][1].Text != "b again" {
		t.Errorf("after a closed: %v", got)
	}
}

// TestLogTornTail: a generation that ends in a partial record (the process
// died inside the write) or a record whose checksum fails is read up to
// there; the next owner moves the whole records and carries on.
func TestLogTornTail(t *testing.T) {
	for _, tc := range []struct {
		name string
		tail func(rec []byte) []byte
	}{
		{"short header", func(rec []byte) []byte { return rec[:5] }},
		{"short body", func(rec []byte) []byte { return rec[:len(rec)-3] }},
		{"bad checksum", func(rec []byte) []byte {
			rec = slices.Clone(rec)
			rec[len(rec)-1] ^= 1
			return rec
		}},
		{"huge length", func(rec []byte) []byte { return []byte{0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0} }},
		{"zeros", func(rec []byte) []byte { return make([]byte, 4096) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "fleet.db")
			s := openT(t, path)
			createT(t, s, newSession("s1", 1))
			l, err := s.logFor(t.Context(), "s1")
			if err != nil || l == nil {
				t.Fatalf("log: %v", err)
			}
			appendT(t, s, "s1", line("w", "one", 1))
			appendT(t, s, "s1", line("w", "two", 2))
			gen := l.path(l.gen)
			before := fileBytes(t, gen)
			appendT(t, s, "s1", line("w", "three", 3))
			rec := fileBytes(t, gen)[len(before):]
			// Simulate the dead owner: drop this Store's hold without
			// moving anything, and leave the damaged file behind.
			l.mu.Lock()
			l.closed = true
			l.f.Close()
			l.mu.Unlock()
			l.lock.Release()
			s.lmu.Lock()
			delete(s.logs, "s1")
			s.lmu.Unlock()
			if err := os.WriteFile(gen, append(before, tc.tail(rec)...), 0o600); err != nil {
				t.Fatal(err)
			}

			s2 := openT(t, path)
			appendT(t, s2, "s1", line("w", "four", 4))
			var got []string
			for _, ln := range agentLines(t, s2, "s1", 10)["w"] {
				got = append(got, ln.Text)
			}
			if want := []string{"one", "two", "four"}; !slices.Equal(got, want) {
				t.Errorf("lines %q, want %q", got, want)
			}
			if _, err := os.Stat(gen); !os.IsNotExist(err) {
				t.Errorf("damaged generation still there: %v", err)
			}
		})
	}
}

// TestLogBigBatchGoesDirect: a batch with more transcript text than a log
// record may hold is committed to SQLite, after what the log holds.
func TestLogBigBatchGoesDirect(t *testing.T) {
	s := openT(t, filepath.Join(t.TempDir(), "fleet.db"))
	createT(t, s, newSession("s1", 1))
	appendT(t, s, "s1", line("w", "small", 1))
	big := make([]byte, maxTlogRecord+1)
	for i := range big {
		big[i] = 'x'
	}
	appendT(t, s, "s1", line("w", string(big), 2))
	appendT(t, s, "s1", line("w", "after", 3))
	got := agentLines(t, s, "s1", 10)["w"]
	if len(got) != 3 || got[0].Text != "small" || len(got[1].Text) != len(big) || got[2].Text != "after" {
		t.Errorf("%d lines", len(got))
	}
}

// TestLinesDoNotWaitForTheWriter: a batch of transcript lines only is saved
// while the SQLite writer is busy (an ingest, another batch), even when the
// session's last_active is due to move; a later batch moves it.
func TestLinesDoNotWaitForTheWriter(t *testing.T) {
	s := openT(t, filepath.Join(t.TempDir(), "fleet.db"))
	createT(t, s, newSession("s1", 1))
	appendT(t, s, "s1", line("w", "one", 1))
	s.now = func() int64 { return 50_000 } // last_active is due
	s.wmu.Lock()
	done := make(chan error, 1)
	go func() { done <- s.Append(t.Context(), "s1", []Record{line("w", "two", 2)}) }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Append: %v", err)
		}
	case <-time.After(5 * time.Second):
		s.wmu.Unlock()
		<-done
		t.Fatal("a batch of lines waited for the busy writer")
	}
	s.wmu.Unlock()
	if got, _ := s.GetSession(t.Context(), "s1"); got.LastActive == 50_000 {
		t.Errorf("last_active moved while the writer was busy")
	}
	appendT(t, s, "s1", line("w", "three", 3))
	got := agentLines(t, s, "s1", 10)["w"]
	if len(got) != 3 || got[1].Text != "two" {
		t.Errorf("lines %v", got)
	}
	if got, _ := s.GetSession(t.Context(), "s1"); got.LastActive != 50_000 {
		t.Errorf("last_active %d after the writer was free again, want 50000", got.LastActive)
	}
}
