package store

import (
	"context"
	"database/sql"
	"sync"
	"sync/atomic"
	"time"
)

// Checkpoints run off the write path (docs/store.md, Persistence). The write
// connection has wal_autocheckpoint=0, so a commit only appends to the WAL
// and never copies the WAL back into the database file (nor fsyncs) on its
// own account. A goroutine owned by the Store runs PRAGMA
// wal_checkpoint(PASSIVE) on a connection of its own: ckInterval after the
// first commit since the last checkpoint, or as soon as the WAL has grown by
// about ckBytes, whichever comes first. PASSIVE never waits for readers or
// writers.
//
// The WAL restarts from its beginning only at a write transaction that
// begins when a checkpoint has copied all of it. A writer that is in a
// transaction or commits while the checkpoint runs (a busy fleet always is)
// misses that moment, so the WAL would grow without bound. When the WAL has
// reached ckHardFrames frames, the checkpointer therefore runs a second
// pass with the Store's write mutex held: it copies what was committed
// during the first one (a short pass, two fsyncs), and the next Append
// restarts the WAL. That pass is the only time a commit can wait for a
// checkpoint, and it happens once per ~ckHardFrames pages of WAL at most.
const (
	ckInterval   = time.Second
	ckBytes      = 4 << 20
	ckHardFrames = 4096 // 16 MiB of 4 KiB pages
	// walPage and walRow estimate what a commit adds to the WAL: a page per
	// table or index page it changes, a row share for small rows.
	walPage = 4096
	walRow  = 256
)

// checkpointer is the Store's background checkpointing.
type checkpointer struct {
	db    *sql.DB       // one connection, only for checkpoints
	wmu   sync.Locker   // the Store's write mutex, for the catch-up pass
	dirty chan struct{} // a commit happened (buffer 1)
	full  chan struct{} // the WAL grew by ckBytes (buffer 1)
	stop  chan struct{} // closed by Close
	done  chan struct{} // closed when the goroutine returned
	grown atomic.Int64  // estimated WAL bytes since the last checkpoint

	// runs, fails and locked count checkpoints (locked: catch-up passes
	// under wmu); maxLog is the largest WAL seen, in frames. For tests and
	// diagnostics.
	runs, fails, locked, maxLog atomic.Int64
	lockedMax                   atomic.Int64 // longest catch-up pass, ns
}

func newCheckpointer(db *sql.DB, wmu sync.Locker) *checkpointer {
	c := &checkpointer{db: db, wmu: wmu, dirty: make(chan struct{}, 1), full: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{})}
	go c.run()
	return c
}

// committed tells the checkpointer that a transaction committed, adding
// about n bytes to the WAL. It never blocks.
func (c *checkpointer) committed(n int64) {
	if c == nil {
		return
	}
	select {
	case c.dirty <- struct{}{}:
	default:
	}
	if c.grown.Add(n) >= ckBytes {
		select {
		case c.full <- struct{}{}:
		default:
		}
	}
}

func (c *checkpointer) run() {
	defer close(c.done)
	t := time.NewTimer(ckInterval)
	t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-c.dirty:
		}
		t.Reset(ckInterval)
		select {
		case <-c.stop:
			t.Stop()
			return
		case <-t.C:
		case <-c.full:
			t.Stop()
		}
		c.grown.Store(0)
		if log, _, ok := c.checkpoint(); ok && log >= ckHardFrames {
			t0 := time.Now()
			c.wmu.Lock()
			c.checkpoint()
			c.wmu.Unlock()
			c.locked.Add(1)
			if d := int64(time.Since(t0)); d > c.lockedMax.Load() {
				c.lockedMax.Store(d)
			}
		}
		// A full signal raised before the reset above is stale.
		select {
		case <-c.full:
		default:
		}
	}
}

// checkpoint runs one PASSIVE checkpoint. A failure (another process
// checkpointing, an I/O error) is counted and retried at the next round; a
// commit never depends on it.
// It returns the WAL's size and how much of it the database now holds, in
// frames.
func (c *checkpointer) checkpoint() (log, done int64, ok bool) {
	ctx, cancel := context.WithTimeout(context.Background(), busyTimeout)
	defer cancel()
	var busy int
	if err := c.db.QueryRowContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &log, &done); err != nil {
		c.fails.Add(1)
		return 0, 0, false
	}
	c.runs.Add(1)
	if log > c.maxLog.Load() {
		c.maxLog.Store(log)
	}
	return log, done, true
}

// close stops the goroutine and closes the connection. It must not be
// called with wmu held (the goroutine may be waiting for it), and only once.
func (c *checkpointer) close() error {
	if c == nil {
		return nil
	}
	close(c.stop)
	<-c.done
	return c.db.Close()
}
