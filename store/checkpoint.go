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
// wal_checkpoint(PASSIVE) on a connection of its own.
//
// Output comes in bursts, and a checkpoint copies every page a second time,
// so during a burst it waits for a pause (pacer): it runs once no commit
// has happened for idle, or maxAge after the first commit since the last
// checkpoint (which bounds what a power loss can take, since the WAL is
// fsynced at checkpoints), or as soon as the WAL has grown by about bytes,
// whichever comes first (ckDefaults). A steady stream of small commits (a
// task printing a line at a time, faster than idle) never pauses and
// rewrites a few pages per line, so its WAL grows fast; for it the round
// starts every streamBytes instead, so that each copy is short and none
// holds the CPU long. A commit only stores a timestamp and adds to the
// counters.
//
// The WAL restarts from its beginning only at a write transaction that
// begins when a checkpoint has copied all of it. A writer that is in a
// transaction or commits while the checkpoint runs (a busy fleet always is)
// misses that moment, so the WAL would grow without bound. When the WAL has
// reached hardFrames frames, the checkpointer therefore repeats PASSIVE
// passes (each copies what was committed during the one before) until less
// than lockFrames are left, and copies those with the Store's write mutex
// held; the next Append restarts the WAL. That short pass is the only time
// a commit can wait for a checkpoint; its two fsyncs took ~12 ms on this
// machine's disk, so hardFrames is large: it comes once per 256 MiB of WAL.
type ckLimits struct {
	idle, maxAge time.Duration
	bytes        int64 // WAL growth that starts a round at once
	streamBytes  int64 // the same, while commits are small (a stream)
	streamCommit int64 // commits below this many bytes on average are a stream
	hardFrames   int64 // a WAL this long gets the catch-up passes
	lockFrames   int64 // the locked pass waits until less than this is left
	passes       int   // PASSIVE passes before the locked one, at most
}

// ckDefaults are the checkpointer's limits (tests shrink them).
var ckDefaults = ckLimits{
	idle:         100 * time.Millisecond,
	maxAge:       5 * time.Second,
	bytes:        64 << 20,
	streamBytes:  8 << 20,
	streamCommit: 64 << 10,
	hardFrames:   (256 << 20) / walFrame, // ~65,000 frames of 4 KiB
	lockFrames:   1024,                   // at most ~4 MiB copied under the write mutex
	passes:       4,
}

// walFrame and walRow estimate what a commit adds to the WAL: a frame (a
// page and its 24-byte header) per table or index page it changes, a row
// share for small rows.
const (
	walPage  = 4096
	walFrame = walPage + 24
	walRow   = 256
)

// checkpointer is the Store's background checkpointing.
type checkpointer struct {
	lim     ckLimits
	db      *sql.DB     // one connection, only for checkpoints
	wmu     sync.Locker // the Store's write mutex, for the catch-up pass
	pace    pacer
	stop    chan struct{} // closed by Close
	done    chan struct{} // closed when the goroutine returned
	grown   atomic.Int64  // estimated WAL bytes since the last checkpoint
	commits atomic.Int64  // commits since the last checkpoint

	// runs, fails and locked count checkpoints (locked: catch-up passes
	// under wmu); maxLog is the largest WAL seen, in frames. For tests and
	// diagnostics.
	runs, fails, locked, maxLog atomic.Int64
	lockedMax                   atomic.Int64 // longest catch-up pass, ns
}

func newCheckpointer(db *sql.DB, wmu sync.Locker) *checkpointer {
	c := &checkpointer{lim: ckDefaults, db: db, wmu: wmu, pace: newPacer(ckDefaults.idle, ckDefaults.maxAge),
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
	c.pace.wrote()
	k := c.commits.Add(1)
	g := c.grown.Add(n)
	if g >= c.lim.bytes || g >= c.lim.streamBytes && g/k < c.lim.streamCommit {
		c.pace.full()
	}
}

func (c *checkpointer) run() {
	defer close(c.done)
	for c.pace.wait(c.stop) {
		// This round covers every commit so far.
		c.grown.Store(0)
		c.commits.Store(0)
		c.pace.started()
		c.round()
	}
}

// round checkpoints the WAL, and when it has grown long, catches up until
// the next Append can restart it.
func (c *checkpointer) round() {
	log, done, ok := c.checkpoint()
	if !ok || log < c.lim.hardFrames {
		return
	}
	// A pass copies the WAL as it was when the pass began (log), so the
	// next one copies what was committed meanwhile. While those shrink,
	// the copying is catching up with the writer; once a pass has little
	// to copy (or stops shrinking: the writer is as fast), the locked pass
	// follows, and copies about as much as the last pass did.
	copied := log
	for i := 0; i < c.lim.passes && copied >= c.lim.lockFrames; i++ {
		prev := done
		if log, done, ok = c.checkpoint(); !ok {
			return
		}
		if n := log - prev; n < copied {
			copied = n
		} else {
			break
		}
	}
	t0 := time.Now()
	c.wmu.Lock()
	c.checkpoint()
	c.wmu.Unlock()
	c.locked.Add(1)
	if d := int64(time.Since(t0)); d > c.lockedMax.Load() {
		c.lockedMax.Store(d)
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
