package intel

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agents-fleet/fleet/intel/record"
)

// QueueLimit is how many records a Recorder holds waiting to be written
// (besides the batch it is writing, at most as many again). A record that
// arrives when the queue is full is dropped and counted.
const QueueLimit = 4096

// Recorder writes records to the store off the caller's path. Session, Run
// and Steering only put the record in a bounded queue: they never block,
// never do I/O and do not allocate once the queue's buffers have grown. One
// goroutine per Recorder takes everything queued and writes it in one
// transaction. While another process holds the database locked it keeps the
// batch and retries (with backoff); records that arrive meanwhile queue up
// to QueueLimit and the rest are dropped. A batch the database refuses for
// another reason is retried record by record, and the records that still
// fail are dropped. Dropped counts both.
//
// The Recorder keeps Run.Tools as given: the caller must not modify the
// map afterwards.
type Recorder struct {
	s   *Store
	log *slog.Logger

	// mu guards the fields below it; the writer never holds it during I/O.
	mu      sync.Mutex
	pending []item // waiting; len ≤ QueueLimit; [len:cap] is zeroed
	spare   []item // the buffer of the last written batch, for reuse
	closed  bool   // Close was called: no more records
	// accepted counts records ever queued; done those written or given
	// up on. Both grow in queue order, so Flush waits for done ≥ accepted.
	accepted, done uint64
	progress       chan struct{} // closed (and replaced) when done grows

	wake    chan struct{} // cap 1: the queue became non-empty
	changed chan struct{} // cap 1: a batch was committed
	dropped atomic.Int64

	// ctx bounds the writer's database calls; Close cancels it when its
	// own deadline passes with records still unwritten.
	ctx      context.Context
	cancel   context.CancelFunc
	quit     chan struct{} // closed by Close: exit once the queue is empty
	quitOnce sync.Once
	exited   chan struct{}
}

// NewRecorder starts a Recorder writing to s. log may be nil.
func (s *Store) NewRecorder(log *slog.Logger) *Recorder {
	r := newRecorder(s, log)
	go r.loop()
	return r
}

// newRecorder returns a Recorder whose writer is not started (benchmarks
// of the enqueue path alone).
func newRecorder(s *Store, log *slog.Logger) *Recorder {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Recorder{
		s:        s,
		log:      log.With("component", "intel"),
		progress: make(chan struct{}),
		wake:     make(chan struct{}, 1),
		changed:  make(chan struct{}, 1),
		ctx:      ctx,
		cancel:   cancel,
		quit:     make(chan struct{}),
		exited:   make(chan struct{}),
	}
	return r
}

// queue fills a free slot with set and wakes the writer; when no slot is
// free, slotLocked has counted the drop.
func (r *Recorder) queue(set func(*item)) {
	r.mu.Lock()
	it := r.slotLocked()
	if it != nil {
		set(it)
	}
	r.mu.Unlock()
	r.signal(it)
}

// Session queues a session record: its start, and later its end (a later
// record's non-empty fields win).
func (r *Recorder) Session(x record.Session) {
	r.queue(func(it *item) { it.kind, it.sess = itemSession, x })
}

// Run queues a settled run. A run recorded again with the same ID replaces
// the earlier one.
func (r *Recorder) Run(x record.Run) {
	r.queue(func(it *item) { it.kind, it.run = itemRun, x })
}

// Steering queues an operator's steering action.
func (r *Recorder) Steering(x record.Steering) {
	r.queue(func(it *item) { it.kind, it.steer = itemSteering, x })
}

// slotLocked returns the queue's next (zeroed) slot, or nil, counting a
// drop, when the queue is full or the Recorder closed. r.mu must be held.
func (r *Recorder) slotLocked() *item {
	n := len(r.pending)
	if r.closed || n >= QueueLimit {
		r.dropped.Add(1)
		return nil
	}
	if n < cap(r.pending) {
		r.pending = r.pending[:n+1]
	} else {
		r.pending = append(r.pending, item{})
	}
	r.accepted++
	return &r.pending[n]
}

// signal wakes the writer when it was given a record. Always sending keeps
// the check out of the lock; a full wake channel means the writer will look.
func (r *Recorder) signal(it *item) {
	if it == nil {
		return
	}
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Dropped returns how many records were lost: those that arrived when the
// queue was full or after Close, and those the database refused.
func (r *Recorder) Dropped() int64 { return r.dropped.Load() }

// Changed receives a value after a batch was committed (a cap-1 channel,
// sent to without blocking: several commits may show as one), so that the
// fleet can rebuild its snapshots.
func (r *Recorder) Changed() <-chan struct{} { return r.changed }

// Flush waits until every record queued before it was written or given up
// on, or ctx is done.
func (r *Recorder) Flush(ctx context.Context) error {
	r.mu.Lock()
	target := r.accepted
	r.mu.Unlock()
	for {
		r.mu.Lock()
		done, ch := r.done, r.progress
		r.mu.Unlock()
		if done >= target {
			return nil
		}
		select {
		case <-ch:
		case <-r.exited:
			// The writer accounted for everything before it exited.
		case <-ctx.Done():
			return fmt.Errorf("flush intel records: %d not written yet: %w", target-done, ctx.Err())
		}
	}
}

// Close refuses further records, waits (bounded by ctx) for the queued ones
// to be written, and stops the writer. When ctx ends first, the records
// still queued are dropped and Close returns ctx's error; it then returns
// within the busy timeout (2 s), once the writer's current statement gives
// up. Close is idempotent.
func (r *Recorder) Close(ctx context.Context) error {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	err := r.Flush(ctx)
	if err != nil {
		r.cancel()
	}
	r.quitOnce.Do(func() { close(r.quit) })
	<-r.exited
	r.cancel()
	return err
}

// loop is the writer goroutine.
func (r *Recorder) loop() {
	defer close(r.exited)
	for {
		select {
		case <-r.wake:
		case <-r.quit:
			r.drain()
			return
		}
		r.drain()
	}
}

// drain writes batches until the queue is empty.
func (r *Recorder) drain() {
	for {
		r.mu.Lock()
		batch := r.pending
		if len(batch) == 0 {
			r.mu.Unlock()
			return
		}
		r.pending, r.spare = r.spare[:0], nil
		r.mu.Unlock()

		committed := r.write(batch)
		clear(batch)
		// Signalled before Flush's waiters wake, so that one who flushed
		// finds it.
		if committed {
			select {
			case r.changed <- struct{}{}:
			default:
			}
		}

		r.mu.Lock()
		r.done += uint64(len(batch))
		r.spare = batch[:0]
		close(r.progress)
		r.progress = make(chan struct{})
		r.mu.Unlock()
	}
}

// Backoff between two attempts at a batch while the database is locked.
const (
	retryMin = 50 * time.Millisecond
	retryMax = time.Second
)

// write writes batch, holding on to it while the database is locked, and
// reports whether anything was committed.
func (r *Recorder) write(batch []item) bool {
	stalledAt := time.Time{}
	for wait := retryMin; ; wait = min(2*wait, retryMax) {
		err := r.s.writeItems(r.ctx, batch)
		switch {
		case err == nil:
			if !stalledAt.IsZero() {
				r.log.Info("intel store writable again", "path", r.s.path, "records", len(batch),
					"after", time.Since(stalledAt).Round(time.Millisecond))
			}
			return true
		case r.ctx.Err() != nil:
			r.dropped.Add(int64(len(batch)))
			r.log.Warn("intel records dropped at close", "path", r.s.path, "records", len(batch), "err", err)
			return false
		case isBusy(err):
			if stalledAt.IsZero() {
				stalledAt = time.Now()
				r.log.Warn("intel store locked by another process; holding records", "path", r.s.path,
					"records", len(batch), "err", err)
			}
			select {
			case <-time.After(wait):
			case <-r.ctx.Done():
			}
		default:
			return r.writeEach(batch, err)
		}
	}
}

// writeEach writes the records of a refused batch one by one, so that one
// record the database refuses costs only itself.
func (r *Recorder) writeEach(batch []item, batchErr error) bool {
	var lost int
	var lastErr error
	for i := range batch {
		if err := r.s.writeItems(r.ctx, batch[i:i+1]); err != nil {
			lost++
			lastErr = err
		}
	}
	if lost > 0 {
		r.dropped.Add(int64(lost))
		r.log.Warn("intel records dropped: the store refused them", "path", r.s.path,
			"records", lost, "of", len(batch), "err", lastErr, "batchErr", batchErr)
	}
	return lost < len(batch)
}
