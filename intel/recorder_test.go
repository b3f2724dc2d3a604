package intel

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/intel/record"
)

func TestRecorderWrites(t *testing.T) {
	s := openT(t)
	rec := s.NewRecorder(nil)
	defer rec.Close(context.Background())
	rec.Session(record.Session{ID: "s1", Name: "fleet", StartedAt: ms(2 * hour)})
	r := okRun("s1", "claude", "fix it", hour)
	r.ID, r.Tools = "s1/w1/t1", map[string]int64{"shell": 2}
	rec.Run(r)
	rec.Steering(record.Steering{SessionID: "s1", Source: "prompt", Text: "go", CreatedAt: ms(hour)})
	// The session's closing record carries only its end.
	rec.Session(record.Session{ID: "s1", EndedAt: ms(0)})
	if err := rec.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-rec.Changed():
	default:
		t.Fatal("no Changed signal after a commit")
	}
	c := countMap(t, s)
	if c["sessions"] != 1 || c["runs"] != 1 || c["run_tools"] != 1 || c["steering"] != 1 {
		t.Fatalf("counts %v", c)
	}
	var name string
	var started, ended int64
	if err := s.r.QueryRow(`SELECT name, started_at, ended_at FROM sessions`).Scan(&name, &started, &ended); err != nil {
		t.Fatal(err)
	}
	if name != "fleet" || started != ms(2*hour) || ended != ms(0) {
		t.Fatalf("session %q %d %d", name, started, ended)
	}
	if rec.Dropped() != 0 {
		t.Fatalf("dropped %d", rec.Dropped())
	}
}

// TestRecorderNeverBlocks: while another connection holds the database
// locked, 10,000 records are enqueued; every call returns while the lock is
// still held (nothing was written meanwhile), at most QueueLimit records
// wait besides the batch the writer holds, and Dropped counts the rest.
// Once the lock goes, Flush writes everything that was kept.
func TestRecorderNeverBlocks(t *testing.T) {
	s := openT(t)
	rec := s.NewRecorder(nil)
	defer rec.Close(context.Background())
	release := lockWrite(t, s.Path())
	released := false
	defer func() {
		if !released {
			release()
		}
	}()
	const total = 10_000
	for i := range total {
		r := okRun("s1", "claude", "x", hour)
		r.ID = fmt.Sprint("r", i)
		rec.Run(r)
	}
	// All 10,000 calls have returned, and the lock is still held: nothing
	// has been written (a WAL reader still reads).
	if n := queryInt(t, s.r, `SELECT count(*) FROM runs`); n != 0 {
		t.Fatalf("%d runs written while the database was locked", n)
	}
	rec.mu.Lock()
	done, queued := rec.done, len(rec.pending)
	rec.mu.Unlock()
	if done != 0 {
		t.Fatalf("%d records written while the database was locked", done)
	}
	dropped := rec.Dropped()
	kept := total - dropped
	if queued > QueueLimit || kept < QueueLimit || kept > 2*QueueLimit {
		t.Fatalf("queued %d, dropped %d of %d", queued, dropped, total)
	}
	release()
	released = true
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, s.r, `SELECT count(*) FROM runs`); n != kept {
		t.Fatalf("%d runs written, want %d (10,000 − %d dropped)", n, kept, dropped)
	}
	if rec.Dropped() != dropped {
		t.Fatalf("dropped grew to %d", rec.Dropped())
	}
}

// TestRecorderCloseWhileLocked: Close gives up when its context ends with
// the database still locked, drops what it could not write, and stops.
func TestRecorderCloseWhileLocked(t *testing.T) {
	s := openT(t)
	rec := s.NewRecorder(nil)
	release := lockWrite(t, s.Path())
	defer release()
	for i := range 10 {
		r := okRun("s1", "claude", "x", hour)
		r.ID = fmt.Sprint("r", i)
		rec.Run(r)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if err := rec.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close = %v", err)
	}
	if rec.Dropped() != 10 {
		t.Fatalf("dropped %d, want 10", rec.Dropped())
	}
	rec.Run(record.Run{ID: "late"})
	if rec.Dropped() != 11 {
		t.Fatalf("a record after Close was not counted: %d", rec.Dropped())
	}
	if err := rec.Close(t.Context()); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestRecorderRefusedRecord: a record the database refuses costs only
// itself; the rest of its batch is written.
func TestRecorderRefusedRecord(t *testing.T) {
	s := openT(t)
	if _, err := s.w.Exec(`CREATE TEMP TRIGGER poison BEFORE INSERT ON runs WHEN NEW.id = 'bad'
		BEGIN SELECT RAISE(ABORT, 'poisoned'); END`); err != nil {
		t.Fatal(err)
	}
	rec := s.NewRecorder(nil)
	// Hold the writer back so that the three records form one batch.
	rec.mu.Lock()
	for _, id := range []string{"good1", "bad", "good2"} {
		r := okRun("s1", "claude", "x", hour)
		r.ID = id
		it := rec.slotLocked()
		it.kind, it.run = itemRun, r
	}
	rec.mu.Unlock()
	rec.signal(&item{})
	if err := rec.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, s.r, `SELECT count(*) FROM runs`); n != 2 || rec.Dropped() != 1 {
		t.Fatalf("%d runs written, %d dropped; want 2 and 1", n, rec.Dropped())
	}
}

// TestRecorderFlushWaitsForOrder: Flush returns only once what was queued
// before it is in the database, and reading it back sees all of it.
func TestRecorderFlushWaitsForOrder(t *testing.T) {
	s := openT(t)
	rec := s.NewRecorder(nil)
	defer rec.Close(context.Background())
	for round := range 5 {
		for i := range 500 {
			r := okRun("s1", "claude", "x", hour)
			r.ID = fmt.Sprint(round, "-", i)
			rec.Run(r)
		}
		if err := rec.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
		if n := queryInt(t, s.r, `SELECT count(*) FROM runs`); n != int64(500*(round+1)) {
			t.Fatalf("round %d: %d runs", round, n)
		}
	}
}
