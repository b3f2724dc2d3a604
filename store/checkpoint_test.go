package store

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/internal/testwait"
)

// TestCheckpointInBackground: commits never checkpoint (autocheckpoint is
// off on the write connection), the Store's goroutine does, soon after the
// commits pause, and the WAL file stays bounded under a stream of batches
// that never pauses.
func TestCheckpointInBackground(t *testing.T) {
	// Limits a sixteenth of the defaults, so that a test-sized stream
	// crosses them many times.
	defer func(d ckLimits) { ckDefaults = d }(ckDefaults)
	ckDefaults.bytes /= 16
	ckDefaults.streamBytes /= 16
	ckDefaults.hardFrames /= 64
	ckDefaults.lockFrames /= 16
	path := filepath.Join(t.TempDir(), "fleet.db")
	s := openDirectT(t, path)
	if n := querySQL(t, s.w, `PRAGMA wal_autocheckpoint`); n != 0 {
		t.Errorf("write connection: wal_autocheckpoint = %d, want 0", n)
	}
	createT(t, s, newSession("s1", 1))
	if r := s.ck.runs.Load(); r != 0 {
		t.Errorf("%d checkpoints before any Append", r)
	}
	appendT(t, s, "s1", line("w", "x", 1))
	testwait.For(t, testwait.Bound, "the first checkpoint", func() bool { return s.ck.runs.Load() >= 1 })

	// ~150 MB of lines, back to back: the WAL is checkpointed and
	// restarted as it goes, so it stays below what was written.
	recs := transcriptBatch(1024)
	batches := 1500
	if raceEnabled {
		batches = 100
	}
	for range batches {
		appendT(t, s, "s1", recs...)
	}
	// The pause after the stream: the database gets the rest.
	runs := s.ck.runs.Load()
	testwait.For(t, testwait.Bound, "the checkpoint after the stream", func() bool { return s.ck.runs.Load() > runs })
	st, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	db, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("database %d KiB; %d checkpoints (%d failed, %d catch-up passes under the write lock, longest %v), WAL up to %d frames, WAL file %d KiB",
		db.Size()>>10, s.ck.runs.Load(), s.ck.fails.Load(), s.ck.locked.Load(), time.Duration(s.ck.lockedMax.Load()), s.ck.maxLog.Load(), st.Size()>>10)
	// Bounded by the threshold plus what piles up while the passes run.
	// This writer never waits for anything and writes at memory speed,
	// about as fast as checkpoints copy and fsync on this disk, so that
	// part varies (38–147 MB seen); but the WAL restarted (the catch-up
	// pass), so it stayed below what the database holds (a WAL that never
	// restarts holds every page written, and more).
	if !raceEnabled && (s.ck.runs.Load() < 2 || s.ck.locked.Load() < 1 || st.Size() >= db.Size()) {
		t.Errorf("%d checkpoints, WAL file %d bytes", s.ck.runs.Load(), st.Size())
	}
	if s.ck.fails.Load() != 0 {
		t.Errorf("%d checkpoints failed", s.ck.fails.Load())
	}
	if n, _ := s.TranscriptCount(t.Context(), "s1"); n != 1+int64(batches)*1024 {
		t.Errorf("TranscriptCount = %d", n)
	}
}

// TestCheckpointIdle: a Store nobody writes to does not checkpoint. A round
// begins only after a commit told the pacer of a write (pacer.wait waits
// for one first), so what is checked is that creating and loading a
// session told it of none; then that the first Append does, and its
// checkpoint follows.
func TestCheckpointIdle(t *testing.T) {
	s := openDirectT(t, filepath.Join(t.TempDir(), "fleet.db"))
	createT(t, s, newSession("s1", 1))
	loadT(t, s, "s1", Limits{})
	if last, r := s.ck.pace.last.Load(), s.ck.runs.Load(); last != 0 || r != 0 {
		t.Errorf("without an Append: a write told to the checkpointer at %d, %d checkpoints", last, r)
	}
	appendT(t, s, "s1", line("w", "x", 1))
	if s.ck.pace.last.Load() == 0 {
		t.Error("the Append was not told to the checkpointer")
	}
	testwait.For(t, testwait.Bound, "the checkpoint after the first Append", func() bool { return s.ck.runs.Load() >= 1 })
}

// TestCheckpointWaitsForPause: while commits keep coming closer together
// than the idle limit, nothing is checkpointed (a burst is not slowed by
// copying its pages a second time); once they stop, the checkpoint follows.
// What is checked holds on a loaded machine too: every round became due
// at least the idle limit after the last commit before it (a stalled test
// goroutine is a real pause, and a round in it is right).
func TestCheckpointWaitsForPause(t *testing.T) {
	defer func(d ckLimits) { ckDefaults = d }(ckDefaults)
	ckDefaults.maxAge = time.Hour // only a pause (or a full WAL) makes a round due
	s := openDirectT(t, filepath.Join(t.TempDir(), "fleet.db"))
	createT(t, s, newSession("s1", 1))
	for i := range 40 {
		appendT(t, s, "s1", line("w", "x", int64(i+1)))
		time.Sleep(5 * time.Millisecond) // the stream's pace, well under the idle limit
	}
	// commits is reset when a round begins: one began after the last commit.
	testwait.For(t, testwait.Bound, "a checkpoint round after the last commit", func() bool {
		return s.ck.commits.Load() == 0 && s.ck.pace.quietMin.Load() != 0
	})
	if q := time.Duration(s.ck.pace.quietMin.Load()); q < ckDefaults.idle {
		t.Errorf("a checkpoint round became due %v after a commit, want at least the idle limit (%v)", q, ckDefaults.idle)
	}
}

// TestCheckpointKeepsUpWithAStream: commits of a line or two, back to
// back, never pause; their WAL is copied in rounds of about streamBytes as
// it grows, not all at once at the end.
func TestCheckpointKeepsUpWithAStream(t *testing.T) {
	defer func(d ckLimits) { ckDefaults = d }(ckDefaults)
	ckDefaults.streamBytes = 256 << 10
	s := openDirectT(t, filepath.Join(t.TempDir(), "fleet.db"))
	createT(t, s, newSession("s1", 1))
	// The checkpointer runs on a goroutine of its own, which a loaded
	// machine may not schedule during a short burst; the stream goes on
	// (bounded) until it has had its rounds, and what is checked is that
	// they came during the stream, while commits kept their pace.
	var maxGap time.Duration
	prev := time.Now()
	deadline := prev.Add(30 * time.Second)
	n := 0
	for ; n < 600 || s.ck.runs.Load() < 2 && time.Now().Before(deadline); n++ { // ~600 × 12 KiB estimated: about 28 rounds' worth
		appendT(t, s, "s1", line("w", fmt.Sprint("line ", n), int64(n+1)))
		now := time.Now()
		maxGap = max(maxGap, now.Sub(prev))
		prev = now
	}
	runs := s.ck.runs.Load()
	t.Logf("%d checkpoints during a stream of %d commits (longest gap between commits %v)", runs, n, maxGap)
	if runs < 2 {
		t.Errorf("%d checkpoints during a stream of %d small commits", runs, n)
	}
	if s.ck.locked.Load() != 0 {
		t.Errorf("%d catch-up passes under the write lock for a small WAL", s.ck.locked.Load())
	}
}
