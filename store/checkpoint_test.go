package store

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestCheckpointInBackground: commits never checkpoint (autocheckpoint is
// off on the write connection), the Store's goroutine does, soon after a
// commit, and the WAL file stays bounded under a steady stream of batches.
func TestCheckpointInBackground(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fleet.db")
	s := openT(t, path)
	if n := querySQL(t, s.w, `PRAGMA wal_autocheckpoint`); n != 0 {
		t.Errorf("write connection: wal_autocheckpoint = %d, want 0", n)
	}
	createT(t, s, newSession("s1", 1))
	if r := s.ck.runs.Load(); r != 0 {
		t.Errorf("%d checkpoints before any Append", r)
	}
	appendT(t, s, "s1", line("w", "x", 1))
	waitFor(t, 10*time.Second, func() bool { return s.ck.runs.Load() >= 1 })

	// ~80 MB of lines, back to back: the WAL is checkpointed and restarted
	// as it goes, so it stays far below what was written.
	recs := transcriptBatch(1024)
	batches := 800
	if raceEnabled {
		batches = 100
	}
	for range batches {
		appendT(t, s, "s1", recs...)
	}
	st, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d checkpoints (%d failed, %d catch-up passes under the write lock), WAL up to %d frames, WAL file %d KiB",
		s.ck.runs.Load(), s.ck.fails.Load(), s.ck.locked.Load(), s.ck.maxLog.Load(), st.Size()>>10)
	// Bounded: the catch-up threshold plus what piles up while a
	// checkpoint runs, well below the ~20,000 pages written.
	if s.ck.runs.Load() < 2 || st.Size() > 40<<20 {
		t.Errorf("%d checkpoints, WAL file %d bytes", s.ck.runs.Load(), st.Size())
	}
	if s.ck.fails.Load() != 0 {
		t.Errorf("%d checkpoints failed", s.ck.fails.Load())
	}
	if n, _ := s.TranscriptCount(t.Context(), "s1"); n != 1+int64(batches)*1024 {
		t.Errorf("TranscriptCount = %d", n)
	}
}

// TestCheckpointIdle: a Store nobody writes to does not checkpoint.
func TestCheckpointIdle(t *testing.T) {
	s := openT(t, filepath.Join(t.TempDir(), "fleet.db"))
	createT(t, s, newSession("s1", 1))
	loadT(t, s, "s1", Limits{})
	time.Sleep(ckInterval + 200*time.Millisecond)
	if r := s.ck.runs.Load(); r != 0 {
		t.Errorf("%d checkpoints without an Append", r)
	}
}

func waitFor(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
	}
}
